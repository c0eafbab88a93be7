"""Docs — the spec reference: ``docs/spec-reference.md`` rendered from ``schemas/op.schema.json``.

The schema is the one place where each key of an op spec is described; this module walks it
(resolving local ``$ref``s) and writes every key with its type, whether it is required, its
default, its constraints, its description and its examples.  ``tests/test_docs.py`` fails when
the committed page drifts from the schema; ``opgen docs --spec-reference`` rewrites it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from .schema import SCHEMA_FILE, op_schema

SPEC_REFERENCE = "docs/spec-reference.md"
"""Where the rendered page lives in the repository."""


@dataclass(frozen=True)
class Key:
    """One documented key: its dotted path (``inputs[].kind``), its schema node, whether required."""

    path: str
    node: dict[str, Any]
    required: bool
    depth: int


def _resolve(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    """``node`` with a local ``$ref`` replaced by its definition (``node``'s own keys win)."""
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        target = _resolve(defs[ref[len("#/$defs/"):]], defs)
        return {**target, **{k: v for k, v in node.items() if k != "$ref"}}
    return node


def _children(node: dict[str, Any], path: str, depth: int, defs: dict[str, Any]) -> Iterator[Key]:
    """The keys below ``node`` (object properties, list items, mapping values), depth first."""
    node = _resolve(node, defs)
    required = set(node.get("required", ()))
    for name, sub in node.get("properties", {}).items():
        sub_path = f"{path}.{name}" if path else name
        yield Key(sub_path, _resolve(sub, defs), name in required, depth)
        yield from _children(sub, sub_path, depth + 1, defs)
    items = node.get("items")
    if isinstance(items, dict):
        yield from _children(items, f"{path}[]", depth, defs)
    extra = node.get("additionalProperties")
    if isinstance(extra, dict):
        sub = _resolve(extra, defs)
        placeholder = "<" + _placeholder(path) + ">"
        sub_path = f"{path}.{placeholder}"
        yield Key(sub_path, sub, False, depth)
        yield from _children(sub, sub_path, depth + 1, defs)
    for alt in node.get("oneOf", ()):
        if isinstance(alt, dict) and alt.get("type") == "object":
            yield from _children(alt, path, depth, defs)


def _placeholder(path: str) -> str:
    """The word that stands for a free key below ``path`` (``dtype_format.<target>``)."""
    last = path.rsplit(".", 1)[-1]
    return {
        "dtype_format": "target",
        "type_vars": "T",
        "grad": "input",
        "backward": "input",
        "domain": "input",
    }.get(last, "key")


def keys() -> list[Key]:
    """Every documented key of an op spec, in schema order."""
    schema = op_schema()
    return list(_children(schema, "", 0, schema.get("$defs", {})))


def type_text(node: dict[str, Any], defs: dict[str, Any] | None = None) -> str:
    """A short type for a schema node: ``string``, ``list of string``, ``int or string``..."""
    defs = defs if defs is not None else op_schema().get("$defs", {})
    node = _resolve(node, defs)
    if "enum" in node:
        return "one of " + ", ".join(f"`{json.dumps(v)}`" for v in node["enum"])
    if "oneOf" in node:
        return " or ".join(type_text(alt, defs) for alt in node["oneOf"])
    t = node.get("type")
    if t == "array":
        items = node.get("items")
        return "list of " + (_group(type_text(items, defs)) if isinstance(items, dict) else "any")
    if t == "object":
        extra = node.get("additionalProperties")
        if isinstance(extra, dict) and "properties" not in node:
            return "mapping to " + _group(type_text(extra, defs))
        return "mapping"
    if t == "integer":
        return "int"
    if t == "number":
        return "number"
    if t == "boolean":
        return "bool"
    if isinstance(t, str):
        return t
    return "any"


def _group(text: str) -> str:
    """``text`` in parentheses when it is an alternative (``list of (string or int)``)."""
    return f"({text})" if " or " in text and not text.startswith("one of ") else text


def _constraints(node: dict[str, Any]) -> list[str]:
    out = []
    if "pattern" in node:
        out.append(f"matches `{node['pattern']}`")
    if "minLength" in node:
        out.append(f"at least {node['minLength']} character(s)")
    if "minItems" in node and "maxItems" in node and node["minItems"] == node["maxItems"]:
        out.append(f"exactly {node['minItems']} items")
    else:
        if "minItems" in node:
            out.append(f"at least {node['minItems']} item(s)")
        if "maxItems" in node:
            out.append(f"at most {node['maxItems']} items")
    if "minProperties" in node:
        out.append(f"at least {node['minProperties']} key(s)")
    if node.get("uniqueItems"):
        out.append("no duplicates")
    names = node.get("propertyNames")
    if isinstance(names, dict):
        if "enum" in names:
            out.append("keys: " + ", ".join(f"`{v}`" for v in names["enum"]))
        elif "pattern" in names:
            out.append(f"keys match `{names['pattern']}`")
    return out


def _yaml_value(value: Any) -> str:
    """An example value as a one-line flow-style YAML (JSON is valid YAML)."""
    return json.dumps(value, ensure_ascii=False)


def render() -> str:
    """The whole ``docs/spec-reference.md`` page."""
    schema = op_schema()
    lines = [
        "<!-- @generated by opgen from schemas/" + SCHEMA_FILE + " -- do not edit;"
        " run 'opgen docs --spec-reference' -->",
        "",
        "# Op spec reference",
        "",
        schema.get("description", ""),
        "",
        "One YAML file per op (`ops/<name>.yaml`), for either framework. Start from `opgen new NAME`, which "
        "writes a commented skeleton that validates as written, or from a copy of one of opgen's example ops: "
        "`opgen new NAME --from rms_norm` (`opgen new --list-examples` lists them). Editors that understand "
        "JSON Schema (VS Code's YAML "
        "extension and others) complete and check every key below when the file starts with "
        "`# yaml-language-server: $schema=../schemas/op.schema.json`.",
        "",
        "Paths: `a.b` is key `b` inside mapping `a`; `a[]` is each item of list `a`; `<target>`, `<input>`"
        ", `<T>` stand for a key you choose. Exactly one of `elementwise` and `kernel` is required.",
        "",
        "## Summary",
        "",
        "| key | type | required | default |",
        "|---|---|---|---|",
    ]
    all_keys = keys()
    for k in all_keys:
        default = f"`{_yaml_value(k.node['default'])}`" if "default" in k.node else ""
        lines.append(f"| [`{k.path}`](#{_anchor(k.path)}) | {type_text(k.node)} | {'yes' if k.required else ''} "
                     f"| {default} |")
    guide = schema.get("x-opgen-shape-language")
    if guide:
        lines += ["", "## Shape language", "", *guide]
    in_place = schema.get("x-opgen-in-place")
    if in_place:
        lines += ["", "## In-place, out-argument and output-less ops", "", *in_place]
    frameworks = schema.get("x-opgen-frameworks")
    if frameworks:
        lines += ["", "## Which keys matter to which framework", "", *frameworks]
    lines += ["", "## Dtypes in both vocabularies", "", *dtype_table()]
    lines += ["", "## Keys", ""]
    for k in all_keys:
        lines.append(f"### `{k.path}`")
        lines.append("")
        facts = [f"Type: {type_text(k.node)}", "required" if k.required else "optional"]
        if "default" in k.node:
            facts.append(f"default `{_yaml_value(k.node['default'])}`")
        facts += _constraints(k.node)
        lines.append("; ".join(facts) + ".")
        lines.append("")
        desc = k.node.get("description")
        if desc:
            lines.append(desc)
            lines.append("")
        examples = k.node.get("examples")
        if examples:
            lines.append("Examples: " + ", ".join(f"`{_yaml_value(e)}`" for e in examples))
            lines.append("")
    return "\n".join(lines).rstrip("\n") + "\n"


def dtype_table() -> list[str]:
    """The dtypes opgen knows, each in every vocabulary (from :data:`opgen.dtypes.DTYPES`, the one
    table every translation reads): dtype name, MindSpore DataType, PyTorch dtype, C++ type."""
    from .dtypes import DTYPES, FORMATS

    lines = ["| dtype name (spec, numpy, MindSpore) | MindSpore DataType (spec rows) | PyTorch "
             "| C++ in a kernel body |", "|---|---|---|---|"]
    for d in DTYPES:
        lines.append(f"| `{d.name}` | `{d.prefix}_{FORMATS[0]}` | `torch.{d.name}` | `{d.cpp}` |")
    return lines


def _anchor(path: str) -> str:
    """The GitHub-style anchor of a ``### `path``` heading."""
    out = []
    for ch in path.lower():
        if ch.isalnum() or ch in "-_":
            out.append(ch)
        elif ch == " ":
            out.append("-")
    return "".join(out)
