"""Every rendering of a shape-language tree: source text, Python, C++ and words.

Each function dispatches over the node classes of :mod:`opgen.shapes.nodes` and ends in
``assert_never``, so that mypy proves every node handled by every consumer.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import assert_never

from ..literals import cpp_string
from .nodes import (
    Arith,
    AttrRef,
    Bound,
    Call,
    Compare,
    Cond,
    Const,
    Index,
    Len,
    ListOf,
    Logic,
    MinMax,
    Neg,
    Node,
    Not,
    Quant,
    RankOf,
    ShapeOf,
    Slice,
    TensorRef,
    Type,
    walk,
)

_PREC = {"or": 1, "and": 2, "not": 3, "cmp": 4, "+": 5, "-": 5, "*": 6, "//": 6, "%": 6, "neg": 7, "atom": 9}


# ----------------------------------------------------------------------------- source


def to_source(node: Node) -> str:
    """Canonical source text of ``node`` (what the user wrote, normalised)."""
    return _src(node)[0]


def _src(node: Node) -> tuple[str, int]:  # noqa: C901 - one case per node class
    def sub(n: Node, prec: int) -> str:
        text, p = _src(n)
        return f"({text})" if p < prec else text

    if isinstance(node, Const):
        return repr(node.value), _PREC["atom"]
    if isinstance(node, (AttrRef, TensorRef, Bound)):
        return node.name, _PREC["atom"]
    if isinstance(node, ShapeOf):
        return f"{node.tensor.name}.shape", _PREC["atom"]
    if isinstance(node, RankOf):
        return f"{node.tensor.name}.rank", _PREC["atom"]
    if isinstance(node, Index):
        return f"{sub(node.base, 9)}[{to_source(node.index)}]", _PREC["atom"]
    if isinstance(node, Slice):
        lo = to_source(node.lo) if node.lo is not None else ""
        hi = to_source(node.hi) if node.hi is not None else ""
        return f"{sub(node.base, 9)}[{lo}:{hi}]", _PREC["atom"]
    if isinstance(node, Len):
        return f"len({to_source(node.arg)})", _PREC["atom"]
    if isinstance(node, Arith):
        p = _PREC[node.op]
        return f"{sub(node.left, p)} {node.op} {sub(node.right, p + 1)}", p
    if isinstance(node, Neg):
        return f"-{sub(node.operand, _PREC['neg'])}", _PREC["neg"]
    if isinstance(node, MinMax):
        return f"{node.fn}({', '.join(to_source(a) for a in node.args)})", _PREC["atom"]
    if isinstance(node, ListOf):
        return "[" + ", ".join(to_source(i) for i in node.items) + "]", _PREC["atom"]
    if isinstance(node, Compare):
        p = _PREC["cmp"]
        return f"{sub(node.left, p + 1)} {node.op} {sub(node.right, p + 1)}", p
    if isinstance(node, Logic):
        p = _PREC[node.op]
        return f" {node.op} ".join(sub(a, p + 1) for a in node.args), p
    if isinstance(node, Not):
        return f"not {sub(node.operand, _PREC['not'])}", _PREC["not"]
    if isinstance(node, Cond):
        return f"{sub(node.then, 1)} if {sub(node.test, 1)} else {sub(node.orelse, 0)}", 0
    if isinstance(node, Call):
        return f"{node.fn.name}({', '.join(to_source(a) for a in node.args)})", _PREC["atom"]
    if isinstance(node, Quant):
        return f"{node.fn}({to_source(node.body)} for {node.var.name} in {sub(node.iterable, 9)})", _PREC["atom"]
    assert_never(node)



# ----------------------------------------------------------------------------- Python

_RT_ARITH = {"+": "add", "-": "sub", "*": "mul", "//": "floordiv", "%": "mod"}


def to_python(node: Node, name: Callable[[str], str] = lambda n: n,
              tensor: Callable[[str], str] | None = None) -> str:
    """Python expression of ``node``: inputs are bound to their shapes (lists of ints; a list of
    shapes for a dynamic input; None for an absent optional input), attrs to their values;
    ``name(n)`` spells input/attr ``n``.  It calls only ``_rt.<name>`` helpers (those of
    :mod:`opgen.runtime.shapes`, bound for ints by :mod:`opgen.runtime` and for a framework's
    symbolic sizes by its backend's runtime), which raise ``ShapeError`` (a ValueError) for an
    index out of range, a division by zero, an int64 overflow or a shape function's own rule.
    ``tensor(n)``, when given, spells input ``n``'s shape instead of ``name(n)``."""
    def tname(n: str, loop: bool = False) -> str:
        return _loop_var(n) if loop else (tensor or name)(n)

    def go(n: Node) -> str:
        if isinstance(n, Const):
            return repr(n.value)
        if isinstance(n, AttrRef):
            if n.type is Type.ROWS:
                return f"_rt.int_rows({name(n.name)})"
            return f"_rt.ints({name(n.name)})" if n.type is Type.LIST else name(n.name)
        if isinstance(n, TensorRef):
            return tname(n.name, n.loop)
        if isinstance(n, Bound):
            return _loop_var(n.name)
        if isinstance(n, ShapeOf):
            return f"_rt.ints({tname(n.tensor.name, n.tensor.loop)})"
        if isinstance(n, RankOf):
            return f"_rt.length({tname(n.tensor.name, n.tensor.loop)})"
        if isinstance(n, Index):
            return f"_rt.{'row' if n.base.type is Type.ROWS else 'at'}({go(n.base)}, {go(n.index)})"
        if isinstance(n, Slice):
            lo = go(n.lo) if n.lo is not None else ""
            hi = go(n.hi) if n.hi is not None else ""
            return f"{go(n.base)}[{lo}:{hi}]"
        if isinstance(n, Len):
            return f"_rt.length({go(n.arg)})"
        if isinstance(n, Arith):
            if n.type is Type.LIST:
                return f"({go(n.left)} + {go(n.right)})" if n.op == "+" else f"_rt.repeat({go(n.left)}, {go(n.right)})"
            return f"_rt.{_RT_ARITH[n.op]}({go(n.left)}, {go(n.right)})"
        if isinstance(n, Neg):
            return f"_rt.neg({go(n.operand)})"
        if isinstance(n, MinMax):
            return f"_rt.i{n.fn}({', '.join(go(a) for a in n.args)})"
        if isinstance(n, ListOf):
            return "[" + ", ".join(go(i) for i in n.items) + "]"
        if isinstance(n, Compare):
            return f"({go(n.left)} {n.op} {go(n.right)})"
        if isinstance(n, Logic):
            return "(" + f" {n.op} ".join(go(a) for a in n.args) + ")"
        if isinstance(n, Not):
            return f"(not {go(n.operand)})"
        if isinstance(n, Cond):
            return f"({go(n.then)} if {go(n.test)} else {go(n.orelse)})"
        if isinstance(n, Call):
            return f"_rt.{n.fn.runtime}({', '.join(go(a) for a in n.args)})"
        if isinstance(n, Quant):
            return f"_rt.{n.fn}_of({go(n.body)} for {_loop_var(n.var.name)} in {go(n.iterable)})"
        assert_never(n)

    return go(node)


def _loop_var(name: str) -> str:
    """How generated code spells loop variable ``name`` of ``all()``/``any()`` (never an input's
    or attr's spelling, nor a generated local's)."""
    return f"opgen_q_{name}"


def optional_inputs(node: Node) -> tuple[str, ...]:
    """Optional inputs a contract mentions: it holds trivially when one of them is None."""
    seen: list[str] = []
    for n in walk(node):
        if isinstance(n, TensorRef) and n.optional and n.name not in seen:
            seen.append(n.name)
    return tuple(seen)


# ----------------------------------------------------------------------------- C++

_CPP_ARITH = {"+": "add", "-": "sub", "*": "mul", "//": "floordiv", "%": "mod"}
_CPP_CMP = {"==": "eq", "!=": "ne", "<": "lt", "<=": "le", ">": "gt", ">=": "ge"}


def to_cpp(node: Node, inputs: Mapping[str, str], attr: Callable[[str], str]) -> str:
    """C++ expression of ``node`` over ``opgen/sym.h`` values (``opgen::sym::Int``, ``Bool``,
    ``List``, ``std::string``, ``double``), which carry unknown dims and ranks (GRAPH_MODE dynamic
    shapes) and otherwise mean exactly what :func:`to_python` means.  ``inputs[name]`` is the C++
    expression of an input's ``opgen::sym::List`` (a ``std::vector<opgen::sym::List>`` for a dynamic
    input); ``attr(name)`` that of an attr's plain C++ value."""

    def go(n: Node) -> str:
        if isinstance(n, Const):
            if n.type is Type.BOOL:
                return f"opgen::sym::Bool{{{'true' if n.value else 'false'}}}"
            if n.type is Type.INT:
                v = int(n.value)
                return f"opgen::sym::Int{{{v}}}" if v > -(2**63) else "opgen::sym::Int{INT64_MIN}"
            if n.type is Type.FLOAT:
                return repr(float(n.value))
            return "std::string(" + cpp_string(str(n.value)) + ")"
        if isinstance(n, AttrRef):
            if n.type is Type.ROWS:
                return f"opgen::sym::rows_of({attr(n.name)})"
            if n.type is Type.INT:
                return f"opgen::sym::Int{{static_cast<int64_t>({attr(n.name)})}}"
            if n.type is Type.BOOL:
                return f"opgen::sym::Bool{{static_cast<bool>({attr(n.name)})}}"
            if n.type is Type.LIST:
                return f"opgen::sym::List::of({attr(n.name)})"
            if n.type is Type.FLOAT:
                return f"static_cast<double>({attr(n.name)})"
            return attr(n.name)
        if isinstance(n, TensorRef):
            return _loop_var(n.name) if n.loop else inputs[n.name]
        if isinstance(n, Bound):
            return _loop_var(n.name)
        if isinstance(n, ShapeOf):
            return _loop_var(n.tensor.name) if n.tensor.loop else inputs[n.tensor.name]
        if isinstance(n, RankOf):
            return f"opgen::sym::length({_loop_var(n.tensor.name) if n.tensor.loop else inputs[n.tensor.name]})"
        if isinstance(n, Index):
            return f"opgen::sym::at({go(n.base)}, {go(n.index)})"
        if isinstance(n, Slice):
            lo = f"{go(n.lo)}, true" if n.lo is not None else "opgen::sym::Int{0}, false"
            hi = f"{go(n.hi)}, true" if n.hi is not None else "opgen::sym::Int{0}, false"
            return f"opgen::sym::slice({go(n.base)}, {lo}, {hi})"
        if isinstance(n, Len):
            return f"opgen::sym::length({go(n.arg)})"
        if isinstance(n, Arith):
            if n.type is Type.LIST:
                fn = "join" if n.op == "+" else "repeat"
                return f"opgen::sym::{fn}({go(n.left)}, {go(n.right)})"
            return f"opgen::sym::{_CPP_ARITH[n.op]}({go(n.left)}, {go(n.right)})"
        if isinstance(n, Neg):
            return f"opgen::sym::neg({go(n.operand)})"
        if isinstance(n, MinMax):
            return f"opgen::sym::i{n.fn}({{{', '.join(go(a) for a in n.args)}}})"
        if isinstance(n, ListOf):
            if not n.items:
                return "opgen::sym::List()"
            return "opgen::sym::List({" + ", ".join(go(i) for i in n.items) + "})"
        if isinstance(n, Compare):
            return f"opgen::sym::{_CPP_CMP[n.op]}({go(n.left)}, {go(n.right)})"
        if isinstance(n, Logic):
            # short-circuit like Python: later operands are not evaluated once the result is known
            out = go(n.args[-1])
            for a in reversed(n.args[:-1]):
                out = f"opgen::sym::{'land' if n.op == 'and' else 'lor'}({go(a)}, [&] {{ return {out}; }})"
            return out
        if isinstance(n, Not):
            return f"opgen::sym::lnot({go(n.operand)})"
        if isinstance(n, Cond):
            return f"opgen::sym::choose({go(n.test)}, [&] {{ return {go(n.then)}; }}, [&] {{ return {go(n.orelse)}; }})"
        if isinstance(n, Call):
            if n.fn.variadic:
                return f"{n.fn.cpp}({{{', '.join(go(a) for a in n.args)}}})"
            return f"{n.fn.cpp}({', '.join(go(a) for a in n.args)})"
        if isinstance(n, Quant):
            return (f"opgen::sym::{n.fn}_of({go(n.iterable)}, [&](const auto &{_loop_var(n.var.name)}) "
                    f"{{ return opgen::sym::Bool({go(n.body)}); }})")
        assert_never(n)

    return go(node)


# ----------------------------------------------------------------------------- words


def to_words(node: Node) -> str:
    """``node`` in words for the op reference (Markdown)."""

    def code(n: Node) -> str:
        return f"`{to_source(n)}`"

    if isinstance(node, ShapeOf):
        return f"the shape of `{node.tensor.name}`"
    if isinstance(node, Call):
        return node.fn.words(node.args)
    if isinstance(node, ListOf):
        if not node.items:
            return "a scalar (0-d)"
        return "[" + ", ".join(code(i) for i in node.items) + "]"
    if isinstance(node, Cond):
        return f"{to_words(node.then)} if {code(node.test)}, else {to_words(node.orelse)}"
    return code(node)
