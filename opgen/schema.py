"""Stage 2 — schema: check a loaded spec tree against ``schemas/op.schema.json`` (jsonschema).

Errors are mapped back to the ``file:line:col`` of the offending node, and phrased for a
person: unknown keys name the nearest valid key, enum errors list the allowed values.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Iterable
from typing import Any

from jsonschema import Draft202012Validator, validators
from jsonschema.exceptions import ValidationError

from .diagnostics import Diagnostic, Location, Note, did_you_mean
from .loader import MarkedDict, MarkedList
from .resources import schemas_dir

SCHEMA_FILE = "op.schema.json"


@functools.lru_cache(maxsize=1)
def op_schema() -> dict[str, Any]:
    """The op spec JSON Schema (draft 2020-12) as a dict."""
    with open(schemas_dir() / SCHEMA_FILE, encoding="utf-8") as fh:
        schema: dict[str, Any] = json.load(fh)
    Draft202012Validator.check_schema(schema)
    return schema


def _inline_refs(node: Any, defs: dict[str, Any], depth: int = 0) -> Any:
    """``node`` with every local ``{"$ref": "#/$defs/x"}`` replaced by (a copy of) the definition.

    Validation then never resolves a reference (the ``referencing`` lookups were a third of its
    time); the subschemas, hence the errors and their messages, are the same.  Only a schema
    without recursive definitions can be inlined; see :func:`_validator`.
    """
    if depth > 32:
        raise RecursionError("recursive $ref")
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            target = _inline_refs(defs[ref[len("#/$defs/"):]], defs, depth + 1)
            rest = {k: v for k, v in node.items() if k != "$ref"}
            # beside a $ref, only annotations (description...) are merged; anything else stays a $ref
            if isinstance(target, dict) and all(k in _ANNOTATIONS and k not in target for k in rest):
                return {**target, **rest}
        return {k: (v if k == "$defs" else _inline_refs(v, defs, depth)) for k, v in node.items()}
    if isinstance(node, list):
        return [_inline_refs(v, defs, depth) for v in node]
    return node


@functools.cache
def ecma_regex(pattern: str) -> re.Pattern[str]:
    """``pattern`` compiled with JSON Schema's (ECMA-262) meaning of ``$``: the end of the text.

    Python's ``$`` also matches before a final newline, so ``^[a-z]+$`` would accept ``"op\\n"``
    (a name that then breaks every generated file).  Each ``$`` outside a character class
    becomes ``\\Z``.
    """
    out: list[str] = []
    i, in_class = 0, False
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\":
            out.append(pattern[i:i + 2])
            i += 2
            continue
        if ch == "[":
            in_class = True
        elif ch == "]":
            in_class = False
        out.append("\\Z" if ch == "$" and not in_class else ch)
        i += 1
    return re.compile("".join(out))


def _ecma_pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterable[ValidationError]:
    if validator.is_type(instance, "string") and ecma_regex(pattern).search(instance) is None:
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


_Validator = validators.extend(Draft202012Validator, {"pattern": _ecma_pattern})  # type: ignore[no-untyped-call]


@functools.lru_cache(maxsize=1)
def _validator() -> Draft202012Validator:
    schema = op_schema()
    try:
        inlined = _inline_refs(schema, schema.get("$defs", {}))
    except (RecursionError, KeyError):
        inlined = schema
    return _Validator(inlined)  # type: ignore[no-any-return]


def _locate(tree: Any, path: Iterable[Any]) -> Location:
    node = tree
    loc: Location = tree.location
    for part in path:
        if isinstance(node, MarkedDict) and part in node:
            loc = node.loc(part)
            node = node[part]
        elif isinstance(node, MarkedList) and isinstance(part, int) and part < len(node):
            loc = node.loc(part)
            node = node[part]
        else:
            break
    return loc


def _op_name(tree: Any) -> str | None:
    if isinstance(tree, dict) and isinstance(tree.get("name"), str):
        return str(tree["name"])
    return None


def _dotted(path: Iterable[Any]) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "spec"


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "list"
    if isinstance(value, dict):
        return "mapping"
    return type(value).__name__


_YAML11_EXPONENT = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d+")


def number_note(value: Any, expected: str) -> tuple[Note, ...]:
    """The note for ``1.0e6`` or ``1e-3``, which YAML 1.1 (PyYAML) reads as strings (no sign, no dot)."""
    if not (isinstance(value, str) and "number" in expected and _YAML11_EXPONENT.fullmatch(value.strip())):
        return ()
    mantissa, exponent = re.split("[eE]", value.strip())
    if "." not in mantissa:
        mantissa += ".0"
    if exponent[0] not in "+-":
        exponent = "+" + exponent
    return (Note(f"'{value}' is a string to YAML 1.1, which reads a number with an exponent only with a '.' "
                 f"and the exponent's sign; write {mantissa}e{exponent}"),)


def _bool_word_note(tree: Any, path: list[Any], expected: str) -> tuple[Note, ...]:
    """The note for ``name: yes``: YAML 1.1 reads yes/no/on/off (and y/n) as booleans."""
    parent = tree
    for part in path[:-1]:
        try:
            parent = parent[part]
        except (KeyError, IndexError, TypeError):
            return ()
    word = getattr(parent, "bool_words", {}).get(path[-1]) if path else None
    if word is None or "string" not in expected:
        return ()
    return (Note(f"YAML 1.1 reads the unquoted word {word} as the boolean {str(parent[path[-1]]).lower()}; quote it to "
                 f"mean the text: {path[-1]}: \"{word}\""),)


def _comma_split_note(node: Any, key: str) -> tuple[Note, ...]:
    """The note for ``{doc: First factor, any shape.}``: YAML split the value at the comma."""
    before = getattr(node, "comma_split", {}).get(key)
    if before is None or not isinstance(node.get(before), str):
        return ()
    whole = f"{node[before]}, {key}"
    return (Note(f"in a flow mapping {{...}} a comma ends a plain value: '{before}: {whole}' was split at the "
                 f"comma into '{before}: {node[before]}' and a key '{key}'; quote the value: "
                 f"{before}: {json.dumps(whole)}", node.loc(before)),)


def _diagnose(tree: Any, err: ValidationError) -> list[Diagnostic]:
    op = _op_name(tree)
    path = list(err.absolute_path)
    where = _dotted(path)
    loc = _locate(tree, path)
    v = err.validator
    if v == "additionalProperties" and isinstance(err.instance, dict):
        sch: Any = err.schema
        allowed = list((sch.get("properties") or {}).keys())
        out = []
        for key in sorted(set(err.instance) - set(allowed)):
            node = err.instance
            key_loc = node.key_loc(key) if isinstance(node, MarkedDict) else loc
            out.append(
                Diagnostic(
                    key_loc,
                    f"unknown key '{key}' in {where}; expected one of: {', '.join(allowed)}",
                    op,
                    notes=_comma_split_note(node, key) or did_you_mean(key, allowed),
                )
            )
        return out
    if v == "required":
        missing = err.message.split("'")[1] if "'" in err.message else str(err.validator_value)
        return [Diagnostic(loc, f"{where} is missing required key '{missing}'", op)]
    if v == "type":
        expected = err.validator_value
        exp = " or ".join(expected) if isinstance(expected, list) else str(expected)
        exp = exp.replace("object", "mapping").replace("array", "list")
        return [Diagnostic(loc, f"{where} must be a {exp}, got {_type_name(err.instance)}", op,
                           notes=number_note(err.instance, exp) or _bool_word_note(tree, path, exp))]
    if v == "enum":
        enum_vals: Any = err.validator_value
        allowed_vals = [str(a) for a in enum_vals]
        notes = did_you_mean(str(err.instance), allowed_vals)
        what = f"{where} is {err.instance!r}"
        if "propertyNames" in err.schema_path:  # a key of a mapping, not a value
            what = f"unknown key {err.instance!r} in {where}"
        return [
            Diagnostic(
                loc,
                f"{what}; expected one of: {', '.join(allowed_vals)}",
                op,
                notes=notes,
            )
        ]
    if v == "pattern":
        hint = {
            "^[a-z][a-z0-9_]*$": "snake_case: lower-case letters, digits and '_', starting with a letter",
            "^[A-Za-z_][A-Za-z0-9_]*$": "an identifier: letters, digits and '_', not starting with a digit",
            "^[A-Za-z0-9]+_[A-Za-z0-9]+$": "a DataType name such as F32_Default",
            "^([A-Za-z0-9]+_[A-Za-z0-9]+|[A-Z][A-Z0-9]*)$":
                "a DataType name such as F32_Default or a type variable such as T",
            "^[A-Z][A-Z0-9]*$": "an upper-case type variable name such as T",
        }.get(str(err.validator_value), f"text matching {err.validator_value}")
        return [Diagnostic(loc, f"{where} is {err.instance!r}; expected {hint}", op)]
    if v in ("minItems", "minLength", "minProperties"):
        return [Diagnostic(loc, f"{where} must not be empty", op)]
    if v == "oneOf" and path == [] and isinstance(tree, MarkedDict):
        has = [k for k in ("elementwise", "kernel") if k in tree]
        if not has:
            return [
                Diagnostic(
                    loc,
                    "no body: the op needs 'elementwise' (scalar expressions) or 'kernel' (C++ bodies)",
                    op,
                )
            ]
        return [
            Diagnostic(
                tree.key_loc("kernel"),
                "'elementwise' and 'kernel' are mutually exclusive; keep one",
                op,
                notes=(Note("'elementwise' is here", tree.key_loc("elementwise")),),
            )
        ]
    if v == "uniqueItems":
        return [Diagnostic(loc, f"{where} has duplicate items", op)]
    if v == "oneOf" and err.context:
        # Report the branch that got furthest (deepest path), phrased by the rules above.
        best = max(err.context, key=lambda e: len(list(e.absolute_path)))
        best_path = list(best.absolute_path)
        if len(best_path) > len(path):
            return _diagnose(tree, best)
        return [Diagnostic(loc, f"{where} has the wrong form: {err.message}", op)]
    return [Diagnostic(loc, f"{where}: {err.message}", op)]


_Check = Callable[[Any], bool]
_ANNOTATIONS = frozenset({"title", "description", "default", "examples", "$id", "$schema", "$defs", "$comment"})


def compile_check(schema: Any) -> _Check | None:
    """A yes/no validity test for ``schema`` that agrees exactly with jsonschema's (draft 2020-12).

    It implements the keywords the op schema uses, with jsonschema's own type checker and
    equality, and answers ``None`` (no test) for a schema with any other keyword.  Validating
    with it skips jsonschema's per-node machinery; jsonschema still runs for invalid specs,
    to phrase the errors.
    """
    if schema is True or schema is False:
        return _const(bool(schema))
    if not isinstance(schema, dict):
        return None
    checks: list[_Check] = []
    for key, value in schema.items():
        if key in _ANNOTATIONS or key.startswith("x-"):  # x-...: opgen's own annotations (docs)
            continue
        check = _keyword(key, value, schema)
        if check is None:
            return None
        checks.append(check)
    return _all_of(checks)


def _const(ok: bool) -> _Check:
    return lambda instance: ok


def _all_of(checks: list[_Check]) -> _Check:
    return lambda instance: all(c(instance) for c in checks)


def _keyword(key: str, value: Any, schema: dict[str, Any]) -> _Check | None:
    """The test for one keyword of ``schema`` (None: not a keyword this implements)."""
    from jsonschema._utils import equal, uniq  # the exact equality and uniqueness jsonschema uses

    is_type = _validator().TYPE_CHECKER.is_type
    if key == "type":
        types = tuple(value) if isinstance(value, list) else (value,)
        return lambda i: any(is_type(i, t) for t in types)
    if key == "properties":
        props: dict[str, _Check] = {}
        for name, sub in value.items():
            sub_check = compile_check(sub)
            if sub_check is None:
                return None
            props[name] = sub_check
        return lambda i: not isinstance(i, dict) or all(c(i[k]) for k, c in props.items() if k in i)
    if key == "additionalProperties":
        known = frozenset(schema.get("properties", {}))
        if value is False:
            return lambda i: not isinstance(i, dict) or all(k in known for k in i)
        extra = compile_check(value)
        if extra is None:
            return None
        return lambda i: not isinstance(i, dict) or all(extra(v) for k, v in i.items() if k not in known)
    if key == "required":
        required = tuple(value)
        return lambda i: not isinstance(i, dict) or all(k in i for k in required)
    if key == "items" and "prefixItems" not in schema:
        item = compile_check(value)
        if item is None:
            return None
        return lambda i: not isinstance(i, list) or all(item(v) for v in i)
    if key in ("minItems", "maxItems", "minLength", "minProperties"):
        kind = str if key == "minLength" else dict if key == "minProperties" else list
        bound = int(value)
        if key == "maxItems":
            return lambda i: not isinstance(i, kind) or len(i) <= bound
        return lambda i: not isinstance(i, kind) or len(i) >= bound
    if key == "uniqueItems":
        if not value:
            return _const(True)
        return lambda i: not isinstance(i, list) or bool(uniq(i))
    if key == "enum":
        options = tuple(value)
        return lambda i: any(equal(e, i) for e in options)
    if key == "pattern":
        rx = ecma_regex(value)
        return lambda i: not isinstance(i, str) or rx.search(i) is not None
    if key == "propertyNames":
        names = compile_check(value)
        if names is None:
            return None
        return lambda i: not isinstance(i, dict) or all(names(k) for k in i)
    if key == "oneOf":
        branches: list[_Check] = []
        for sub in value:
            branch = compile_check(sub)
            if branch is None:
                return None
            branches.append(branch)
        return lambda i: sum(1 for b in branches if b(i)) == 1
    return None


@functools.lru_cache(maxsize=1)
def _fast_check() -> _Check | None:
    try:
        return compile_check(_validator().schema)
    except (ImportError, re.error, TypeError):
        return None


def validate_tree(tree: Any, file: str = "<spec>") -> list[Diagnostic]:
    """All schema violations of one loaded spec (read from ``file``), as diagnostics (empty when
    valid)."""
    if not isinstance(tree, MarkedDict):
        loc = getattr(tree, "location", None) or Location(file, 1, 1)
        if tree is None:
            return [Diagnostic(loc, "empty spec file: expected a mapping with 'name'")]
        return [Diagnostic(loc, f"a spec must be a mapping with 'name', got {_type_name(tree)}")]
    fast = _fast_check()
    if fast is not None and fast(tree):
        return []
    errors = sorted(_validator().iter_errors(tree), key=lambda e: (list(map(str, e.absolute_path)), e.message))
    diags: list[Diagnostic] = []
    seen: set[str] = set()
    for err in errors:
        for d in _diagnose(tree, err):
            text = d.format()
            if text not in seen:
                seen.add(text)
                diags.append(d)
    return diags

