"""Hypothesis strategies for op specs: valid specs built from the spec language's own rules, and
mutations of them (dropped keys, wrong types, swapped rows, renamed references, bad names,
corrupted YAML text).  Used by tests/test_fuzz.py.

A valid spec here is valid by construction: the fuzz test asserts opgen accepts every one.
Text fields avoid the characters of the escaping bugs pinned in tests/test_hostile.py
(backslashes and triple quotes in tensor/attr docs, non-finite or out-of-int64 attr values,
non-numeric attrs in expressions), so that each fuzz failure is a new finding.
"""

from __future__ import annotations

import copy
import itertools
import math
import re
from typing import Any

import yaml
from hypothesis import strategies as st

TENSOR_NAMES = ["x", "y", "z", "a", "b", "lhs", "rhs", "w", "gate", "bias", "x2"]
ATTR_NAMES = ["alpha", "beta", "scale", "n", "flag", "mode", "eps", "k", "axes", "weights", "p"]
OP_NAMES = ["foo", "scale_add", "my_op", "op2", "gelu_like", "fz", "twice", "a_b_c"]
PREFIXES = ["F32", "F64", "I8", "I16", "I32", "I64", "U8", "BOOL"]
FLOAT_PREFIXES = ["F32", "F64"]
DTYPE_NAME = {"F32": "float32", "F64": "float64", "I8": "int8", "I16": "int16", "I32": "int32",
              "I64": "int64", "U8": "uint8", "BOOL": "bool"}
UNARY = ["exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "abs", "erf", "log1p", "expm1", "sign"]
BINARY = ["maximum", "minimum", "pow"]
BAD_NAMES = ["class", "int", "lambda", "ctx", "_x", "x_t", "default", "None", "std", "T", "return", "match",
             "x__y", "Tensor", "attrs", "out_shape", "new", "1x", "x-y", ""]

# Doc text: letters, digits, punctuation incl. quotes, '*/', '#', non-ASCII; no backslash (see above).
DOC_CHARS = "abcxyzABC012 .,;:!?()[]{}<>=+-*/#'\"`~@$%^&|_éü中文λ∑😀\n\t"
DOC_POOL = ["Doubles x.", 'it\'s "quoted"', "ends with */ and /* starts", "# not a comment", "'''", "é中文 λ∑ 😀",
            "line one\nline two", "tab\there", "{{ jinja }} {% raw %}", "%s %d {0}", "<b>html</b> & co", "a:b - c"]


def _doc(min_size: int) -> st.SearchStrategy[str]:
    return st.one_of(st.sampled_from(DOC_POOL), st.text(DOC_CHARS, min_size=min_size, max_size=12)).filter(
        lambda s: len(s.strip()) >= min_size and '"""' not in s)


_DOCS = {0: _doc(0), 1: _doc(1)}


def doc_text(min_size: int = 1) -> st.SearchStrategy[str]:
    """Doc or string-attr text (strategies built once: building them is what costs in hypothesis)."""
    return _DOCS[min_size]


def _expr(draw: Any, leaves: list[str], depth: int) -> str:
    if depth <= 0 or draw(st.integers(0, 3)) == 0:
        kind = draw(st.integers(0, 4))
        if kind == 0:
            return str(draw(st.integers(0, 5)))
        if kind == 1:
            return repr(draw(st.sampled_from([0.5, 1.5, 2.0, 0.25, 3.0])))
        return draw(st.sampled_from(leaves))
    kind = draw(st.integers(0, 5))
    a = _expr(draw, leaves, depth - 1)
    if kind <= 1:
        b = _expr(draw, leaves, depth - 1)
        return f"({a} {draw(st.sampled_from(['+', '-', '*', '/']))} {b})"
    if kind == 2:
        return f"{draw(st.sampled_from(UNARY))}({a})"
    if kind == 3:
        b = _expr(draw, leaves, depth - 1)
        return f"{draw(st.sampled_from(BINARY))}({a}, {b})"
    if kind == 4:
        return f"(-{a})"
    b = _expr(draw, leaves, depth - 1)
    c = _expr(draw, leaves, depth - 1)
    return f"({a} if {b} > {c} else {c})"


_TENSOR_COMBOS = [c for n in (1, 2, 3) for c in itertools.permutations(TENSOR_NAMES, n)]
_ATTR_COMBOS = [c for n in (0, 1, 2, 3) for c in itertools.permutations(ATTR_NAMES, n)]


@st.composite
def attr_specs(draw: Any, names: list[str]) -> list[dict[str, Any]]:
    attrs = []
    for name in names:
        typ = draw(st.sampled_from(["int", "float", "bool", "str", "list[int]", "list[float]", "list[bool]",
                                    "list[str]"]))
        attr: dict[str, Any] = {"name": name, "type": typ, "doc": draw(doc_text())}
        if typ == "int":
            value: Any = draw(st.integers(-1000, 1000))
        elif typ == "float":
            value = draw(st.floats(-1e6, 1e6, allow_nan=False, width=32))
        elif typ == "bool":
            value = draw(st.booleans())
        elif typ == "str":
            value = draw(doc_text(min_size=0))
        elif typ == "list[int]":
            value = draw(st.lists(st.integers(-100, 100), max_size=4))
        elif typ == "list[bool]":
            value = draw(st.lists(st.booleans(), max_size=4))
        elif typ == "list[str]":
            value = draw(st.lists(doc_text(min_size=0), max_size=3))
        else:
            value = draw(st.lists(st.floats(-100, 100, allow_nan=False, width=32), max_size=4))
        if draw(st.booleans()):
            attr["default"] = value
        if typ in ("int", "float") and draw(st.booleans()):
            below, above = math.floor(value), math.ceil(value)
            attr["range"] = [draw(st.integers(below - 2000, below)), draw(st.integers(above, above + 2000))]
        elif typ in ("int", "str") and draw(st.integers(0, 3)) == 0:
            others = draw(st.lists(st.integers(-5, 5) if typ == "int" else doc_text(min_size=0), max_size=3))
            attr["choices"] = list(dict.fromkeys([value, *others]))
        attrs.append(attr)
    # attrs without a default first: the other order is a pinned bug (tests/test_hostile.py)
    return sorted(attrs, key=lambda a: "default" in a)


@st.composite
def valid_specs(draw: Any) -> dict[str, Any]:
    """A spec that opgen must accept."""
    in_names = list(draw(st.sampled_from(_TENSOR_COMBOS)))
    n_in = len(in_names)
    body = draw(st.sampled_from(["elementwise", "kernel"]))
    n_out = 1 if body == "elementwise" else draw(st.integers(1, 2))
    out_names = ["out", "res"][:n_out] if draw(st.booleans()) else ["y_out", "mask"][:n_out]
    attr_names = list(draw(st.sampled_from(_ATTR_COMBOS)))
    attrs = draw(attr_specs(attr_names))
    int_attrs = [a["name"] for a in attrs if a["type"] == "int"]
    num_attrs = [a["name"] for a in attrs if a["type"] in ("int", "float", "bool")]

    # dtype rows: a prefix per input; each output follows an input or is fixed
    out_rules = []
    for _ in out_names:
        if draw(st.booleans()):
            out_rules.append(("input", draw(st.sampled_from(in_names))))
        else:
            out_rules.append(("fixed", draw(st.sampled_from(PREFIXES))))
    rows = []
    for _ in range(draw(st.integers(1, 3))):
        cols = [draw(st.sampled_from(PREFIXES if draw(st.integers(0, 2)) == 0 else FLOAT_PREFIXES))
                for _ in in_names]
        for kind, ref in out_rules:
            cols.append(cols[in_names.index(ref)] if kind == "input" else ref)
        row = [f"{c}_Default" for c in cols]
        if row not in rows:
            rows.append(row)
    float_somewhere = {n: any(r[i].startswith("F") for r in rows) for i, n in enumerate(in_names)}
    inputs = []
    for n in in_names:
        item: dict[str, Any] = {"name": n, "doc": draw(doc_text())}
        if not float_somewhere[n] or draw(st.integers(0, 4)) == 0:
            item["differentiable"] = False
        inputs.append(item)
    diff = [i["name"] for i in inputs if i.get("differentiable", True)]

    outputs = []
    for oname, (kind, ref) in zip(out_names, out_rules):
        shape_kind = draw(st.integers(0, 2))
        if shape_kind == 0 or (shape_kind == 1 and n_in < 2):
            shape: Any = draw(st.sampled_from(in_names))
        elif shape_kind == 1:
            shape = "broadcast(" + ", ".join(in_names) + ")"
        else:
            dims: list[Any] = []
            for _ in range(draw(st.integers(0, 3))):
                d = draw(st.integers(0, 2))
                if d == 0:
                    dims.append(draw(st.integers(1, 8)))
                elif d == 1 and int_attrs:
                    dims.append(draw(st.sampled_from(int_attrs)))
                else:
                    dims.append(f"{draw(st.sampled_from(in_names))}.shape[{draw(st.sampled_from([0, -1]))}]")
            shape = dims
        outputs.append({"name": oname, "doc": draw(doc_text()), "shape": shape,
                        "dtype": ref if kind == "input" else DTYPE_NAME[ref]})

    spec: dict[str, Any] = {"name": draw(st.sampled_from(OP_NAMES)), "doc": draw(doc_text())}
    if draw(st.booleans()):
        spec["targets"] = ["CPU"]
    spec["inputs"] = inputs
    spec["outputs"] = outputs
    if attrs:
        spec["attrs"] = attrs
    spec["dtype_format"] = {"CPU": rows}
    if body == "elementwise":
        leaves = in_names + num_attrs
        grad_leaves = leaves + [out_names[0], "d" + out_names[0]]
        spec["elementwise"] = {"forward": _expr(draw, leaves, 3)}
        if diff:
            spec["elementwise"]["grad"] = {n: _expr(draw, grad_leaves, 2) for n in diff}
    else:
        fwd = "\n".join(f"for (int64_t i = 0; i < {o}.numel; ++i) {o}[i] = {o}_t(0);" for o in out_names)
        spec["kernel"] = {"forward": fwd + "\n"}
        if diff:
            if draw(st.booleans()):
                spec["kernel"]["backward"] = "\n".join(
                    f"if (d{n}) for (int64_t i = 0; i < d{n}.numel; ++i) d{n}[i] = {n}_t(0);" for n in diff) + "\n"
            else:
                spec["kernel"]["backward"] = {
                    n: f"for (int64_t i = 0; i < d{n}.numel; ++i) d{n}[i] = {n}_t(1);\n" for n in diff}
        if draw(st.booleans()):
            spec["reference"] = "return " + ", ".join(f"np.zeros_like({in_names[0]})" for _ in out_names) + "\n"
    return spec


# ---------------------------------------------------------------------------------- mutations


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix] if prefix else []
    if isinstance(node, dict):
        for k, v in node.items():
            out += _paths(v, prefix + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += _paths(v, prefix + (i,))
    return out


def _parent(tree: Any, path: tuple[Any, ...]) -> Any:
    node = tree
    for part in path[:-1]:
        node = node[part]
    return node


_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
WRONG_VALUES = [42, -1, 3.5, True, None, "text", [], [1, 2], {}, {"k": "v"}, [[1]], "", ".inf"]
TEXT_CORRUPTIONS = [": ", "[", "]", "{", "- ", "&a ", "*a", "!!python/name:os.system ", "\t", "'", '"', "%",
                    "? ", "\n  bad: [", "!!binary ", "<<: *a\n", "---\n", "...\n", "#", "\ufeff", "\u2028"]


@st.composite
def mutated_specs(draw: Any) -> tuple[str, list[str]]:
    """(YAML text, names of the mutations applied) of a mutated valid spec."""
    tree = copy.deepcopy(draw(valid_specs()))
    applied = []
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["drop_key", "wrong_type", "swap", "rename_ref", "duplicate", "unknown_key",
                                     "bad_name", "text"]))
        paths = _paths(tree)
        if kind == "drop_key":
            keyed = [p for p in paths if isinstance(p[-1], str)]
            path = draw(st.sampled_from(keyed))
            del _parent(tree, path)[path[-1]]
        elif kind == "wrong_type":
            path = draw(st.sampled_from(paths))
            _parent(tree, path)[path[-1]] = copy.deepcopy(draw(st.sampled_from(WRONG_VALUES)))
        elif kind == "swap":
            lists = [p for p in paths if isinstance(_get(tree, p), list) and len(_get(tree, p)) >= 2]
            if not lists:
                continue
            lst = _get(tree, draw(st.sampled_from(lists)))
            i, j = draw(st.integers(0, len(lst) - 1)), draw(st.integers(0, len(lst) - 1))
            lst[i], lst[j] = lst[j], lst[i]
        elif kind == "rename_ref":
            strs = [p for p in paths if isinstance(_get(tree, p), str) and _IDENT.search(_get(tree, p))]
            keys = [p for p in paths if isinstance(p[-1], str) and len(p) >= 2 and p[-2] in ("grad", "backward")]
            path = draw(st.sampled_from(strs + keys))
            new = draw(st.sampled_from(TENSOR_NAMES + ATTR_NAMES + ["nosuch", "dout", "out", "X", "class", "exp"]))
            if path in keys:
                parent = _parent(tree, path)
                parent[new] = parent.pop(path[-1])
            else:
                text = _get(tree, path)
                names = sorted(set(_IDENT.findall(text)))
                old = draw(st.sampled_from(names))
                _parent(tree, path)[path[-1]] = re.sub(rf"\b{re.escape(old)}\b", new, text)
        elif kind == "duplicate":
            lists = [p for p in paths if isinstance(_get(tree, p), list) and _get(tree, p)]
            if not lists:
                continue
            lst = _get(tree, draw(st.sampled_from(lists)))
            lst.append(copy.deepcopy(lst[draw(st.integers(0, len(lst) - 1))]))
        elif kind == "unknown_key":
            dicts = [()] + [p for p in paths if isinstance(_get(tree, p), dict)]
            d = _get(tree, draw(st.sampled_from(dicts)))
            d[draw(st.sampled_from(["kidn", "nmae", "shpae", "extra", "Doc", "grads"]))] = "?"
        elif kind == "bad_name":
            named = [p for p in paths if p[-1] == "name"]
            path = draw(st.sampled_from(named))
            _parent(tree, path)[path[-1]] = draw(st.sampled_from(BAD_NAMES))
        applied.append(kind)
    text = yaml.safe_dump(tree, sort_keys=False, allow_unicode=True, default_flow_style=draw(st.booleans()))
    if draw(st.integers(0, 7)) == 0 or not applied:
        for _ in range(draw(st.integers(1, 3))):
            pos = draw(st.integers(0, len(text)))
            if draw(st.booleans()):
                text = text[:pos] + draw(st.sampled_from(TEXT_CORRUPTIONS)) + text[pos:]
            else:
                text = text[:pos] + text[pos + draw(st.integers(1, 20)):]
        applied.append("text")
    return text, applied


def _get(tree: Any, path: tuple[Any, ...]) -> Any:
    node = tree
    for part in path:
        node = node[part]
    return node


def dump(spec: dict[str, Any]) -> str:
    return yaml.safe_dump(spec, sort_keys=False, allow_unicode=True)
