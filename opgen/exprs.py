"""The two small languages inside a spec: elementwise expressions and shape rules.

Both are parsed with Python's :mod:`ast` (``mode="eval"``) into a restricted subset, never
evaluated.  An elementwise expression such as ``2 * x * dout`` is translated to a C++
expression over scalars (compute type ``C``) and to a numpy expression over arrays.  A shape
rule such as ``broadcast(x, y)`` or ``[x.shape[0], n]`` becomes a :class:`ShapeRule`.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Collection
from dataclasses import dataclass
from typing import Callable

# name -> (arity, C++ template, numpy template); {0}, {1}, ... are the translated arguments.
FUNCTIONS: dict[str, tuple[int, str, str]] = {
    "exp": (1, "opgen::math::exp({0})", "np.exp({0})"),
    "log": (1, "opgen::math::log({0})", "np.log({0})"),
    "sqrt": (1, "opgen::math::sqrt({0})", "np.sqrt({0})"),
    "rsqrt": (1, "opgen::math::rsqrt({0})", "(1 / np.sqrt({0}))"),
    "tanh": (1, "opgen::math::tanh({0})", "np.tanh({0})"),
    "sigmoid": (1, "opgen::math::sigmoid({0})", "(1 / (1 + np.exp(-({0}))))"),
    "abs": (1, "opgen::math::abs({0})", "np.abs({0})"),
    "erf": (1, "opgen::math::erf({0})", "_erf({0})"),
    "log1p": (1, "opgen::math::log1p({0})", "np.log1p({0})"),
    "expm1": (1, "opgen::math::expm1({0})", "np.expm1({0})"),
    "sign": (1, "opgen::math::sign({0})", "np.sign({0})"),
    "maximum": (2, "opgen::math::maximum({0}, {1})", "np.maximum({0}, {1})"),
    "minimum": (2, "opgen::math::minimum({0}, {1})", "np.minimum({0}, {1})"),
    "pow": (2, "opgen::math::pow({0}, {1})", "np.power({0}, {1})"),
}

_BINOPS: dict[type, str] = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/"}
_CMPOPS: dict[type, str] = {
    ast.Lt: "<",
    ast.LtE: "<=",
    ast.Gt: ">",
    ast.GtE: ">=",
    ast.Eq: "==",
    ast.NotEq: "!=",
}


class ExprError(ValueError):
    """A malformed expression; ``col`` is the 1-based column inside the expression text."""

    def __init__(self, message: str, col: int = 1):
        super().__init__(message)
        self.col = col


@dataclass(frozen=True)
class Expr:
    """A parsed elementwise expression.

    Attributes:
        text: the source text.
        names: every name it uses, in first-use order.
        cpp: C++ expression over scalars; literals are cast to the compute type ``C``.
        numpy: numpy expression over arrays (``np`` in scope).
    """

    text: str
    names: tuple[str, ...]
    cpp: str
    numpy: str


MAX_EXPR_DEPTH = 100
"""Deepest nesting of an expression or shape rule (operators, calls, parentheses); a real one
needs about 10.  Deeper ones are diagnostics, never a RecursionError."""


def _shown(text: str, keep: int = 30) -> str:
    """``text`` as quoted in a diagnostic: whole when short, its two ends otherwise."""
    return repr(text) if len(text) <= 2 * keep + 5 else repr(f"{text[:keep]} ... {text[-keep:]}")


def _parse(text: str) -> ast.expr:
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        raise ExprError(f"cannot parse expression {_shown(text.strip())}: {exc.msg}", exc.offset or 1) from None
    except (RecursionError, MemoryError):
        raise ExprError(f"expression {_shown(text.strip())} is nested more than {MAX_EXPR_DEPTH} levels "
                        "deep") from None
    stack: list[tuple[ast.AST, int]] = [(tree.body, 1)]
    while stack:  # no recursion: the depth check itself must not overflow the stack
        node, depth = stack.pop()
        if depth > MAX_EXPR_DEPTH:
            raise ExprError(f"expression {_shown(text.strip())} is nested more than {MAX_EXPR_DEPTH} levels "
                            "deep", getattr(node, "col_offset", 0) + 1)
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return tree.body


def parse_expr(text: str, known: Callable[[str], bool], attrs: Collection[str] = ()) -> Expr:
    """Parse an elementwise expression; ``known(name)`` says whether a name may be used, ``attrs``
    which names are (scalar) attrs.

    Semantics (the same in the C++ and the numpy translation): arithmetic is done in the compute
    type ``C`` (the output's element type): literals and attrs are cast to it, so ``exp(-n)`` with
    an int attr ``n`` is computed in floating point for a float output; a comparison used as a
    value is ``1`` or ``0`` of that type (``dout * (x > 0)``); ``a if c else b`` picks per
    element, ``c`` being a comparison or any value (true when non-zero).

    Raises:
        ExprError: on syntax outside the subset, unknown names or functions, wrong arity.
    """
    body = _parse(text)
    names: list[str] = []

    def go(node: ast.expr) -> tuple[str, str]:
        col = getattr(node, "col_offset", 0) + 1
        if isinstance(node, ast.Name):
            if node.id in FUNCTIONS:
                raise ExprError(f"'{node.id}' is a function; call it as {node.id}(...)", col)
            if not known(node.id):
                raise ExprError(f"unknown name '{node.id}'", col)
            if node.id not in names:
                names.append(node.id)
            return (f"C({node.id})" if node.id in attrs else node.id), node.id
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(
            node.value, bool
        ):
            try:
                value = float(node.value)
            except OverflowError:
                value = math.inf
            if not math.isfinite(value):
                raise ExprError(f"number {_shown(ast.get_source_segment(text.strip(), node) or str(node.value), 12)}"
                                " is too large (beyond float64)", col)
            return f"C({value!r})", repr(node.value)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            c, n = go(node.operand)
            op = "-" if isinstance(node.op, ast.USub) else "+"
            return f"({op}{c})", f"({op}{n})"
        if isinstance(node, ast.BinOp):
            lc, ln = go(node.left)
            rc, rn = go(node.right)
            if isinstance(node.op, ast.Pow):
                return f"opgen::math::pow({lc}, {rc})", f"np.power({ln}, {rn})"
            sym = _BINOPS.get(type(node.op))
            if sym is None:
                raise ExprError(f"operator '{type(node.op).__name__}' is not supported; use + - * / **", col)
            if sym == "/":  # integer division by zero raises an error instead of SIGFPE
                return f"opgen::math::div({lc}, {rc})", f"({ln} {sym} {rn})"
            return f"({lc} {sym} {rc})", f"({ln} {sym} {rn})"
        if isinstance(node, ast.Compare):
            # A comparison used as a value is 1 or 0 in the compute type, in both languages, so
            # that `(x > 0) - (x < 0)` or `-(x > 0)` mean the same in C++ and numpy.
            tc, tn = compare(node)
            return f"C{tc}", f"np.where({tn}, 1.0, 0.0)"
        if isinstance(node, ast.IfExp):
            # The condition is a comparison (kept boolean) or any value (true when non-zero).
            tc, tn = compare(node.test) if isinstance(node.test, ast.Compare) else go(node.test)
            ac, an = go(node.body)
            bc, bn = go(node.orelse)
            if "opgen::math::div(" in ac + bc:
                # An integer division by zero throws: evaluate only the chosen arm.
                return f"({tc} ? C({ac}) : C({bc}))", f"np.where({tn}, {an}, {bn})"
            # Both arms evaluated, then one picked: branchless (the loop vectorises to a blend,
            # where a branch on random signs mispredicts half the time).
            return f"opgen::select({tc}, C({ac}), C({bc}))", f"np.where({tn}, {an}, {bn})"
        if isinstance(node, ast.Call):
            if not isinstance(node.func, ast.Name) or node.keywords:
                raise ExprError("only calls like f(a, b) of the built-in functions are supported", col)
            fn = FUNCTIONS.get(node.func.id)
            if fn is None:
                raise ExprError(
                    f"unknown function '{node.func.id}'; supported: {', '.join(sorted(FUNCTIONS))}", col
                )
            arity, ctpl, ntpl = fn
            if len(node.args) != arity:
                raise ExprError(f"{node.func.id}() takes {arity} argument(s), got {len(node.args)}", col)
            parts = [go(a) for a in node.args]
            return ctpl.format(*[p[0] for p in parts]), ntpl.format(*[p[1] for p in parts])
        raise ExprError(f"unsupported syntax '{ast.unparse(node)}' in expression", col)

    def compare(node: ast.Compare) -> tuple[str, str]:
        col = node.col_offset + 1
        if len(node.ops) != 1:
            raise ExprError("chained comparisons are not supported; use one comparison", col)
        sym = _CMPOPS.get(type(node.ops[0]))
        if sym is None:
            raise ExprError("only < <= > >= == != comparisons are supported", col)
        lc, ln = go(node.left)
        rc, rn = go(node.comparators[0])
        return f"({lc} {sym} {rc})", f"({ln} {sym} {rn})"

    cpp, npy = go(body)
    return Expr(text.strip(), tuple(names), cpp, npy)


# ----------------------------------------------------------------------------- shape rules


@dataclass(frozen=True)
class Dim:
    """One dimension in an explicit shape list: a literal, an int attr, or ``<input>.shape[i]``."""

    literal: int | None = None
    attr: str | None = None
    input: str | None = None
    axis: int = 0

    def render(self, attr: str, input: str) -> str:
        """This dim as text: the literal, or ``attr`` / ``input`` formatted with the fields
        (``{attr}``; ``{input}``, ``{axis}``), e.g. ``render("int({attr})", "{input}[{axis}]")``."""
        if self.literal is not None:
            return str(self.literal)
        if self.attr is not None:
            return attr.format(attr=self.attr)
        return input.format(input=self.input, axis=self.axis)


@dataclass(frozen=True)
class RuleArg:
    """A non-tensor argument of a shape rule: an attr name, or a literal (int, bool, list of ints)."""

    attr: str | None = None
    literal: object = None

    @property
    def text(self) -> str:
        """The argument as written."""
        return self.attr if self.attr is not None else repr(self.literal)


# rule name -> (tensor argument count, names of its non-tensor arguments, their defaults)
RULES: dict[str, tuple[int, tuple[str, ...], tuple[object, ...]]] = {
    "reduce": (1, ("axis", "keep_dims"), ((), False)),
    "matmul": (2, ("transpose_a", "transpose_b"), (False, False)),
    "concat": (1, ("axis",), (0,)),
    "gather": (2, ("axis",), (0,)),
}
"""Shape rules written as calls besides ``broadcast``: what each takes."""

RULE_ARG_TYPES: dict[tuple[str, str], tuple[str, ...]] = {
    ("reduce", "axis"): ("int", "list[int]"),
    ("reduce", "keep_dims"): ("bool",),
    ("matmul", "transpose_a"): ("bool",),
    ("matmul", "transpose_b"): ("bool",),
    ("concat", "axis"): ("int",),
    ("gather", "axis"): ("int",),
}
"""Attr types each rule argument accepts (checked against the op's attrs)."""


@dataclass(frozen=True)
class ShapeRule:
    """An output shape rule.

    ``kind`` is ``"same"`` (``inputs[0]``'s shape), ``"broadcast"`` (NumPy broadcast of
    ``inputs``), ``"dims"`` (the explicit ``dims``), or one of :data:`RULES` (``reduce``,
    ``matmul``, ``concat``, ``gather``) with its tensor ``inputs`` and non-tensor ``args`` (by name).
    """

    kind: str
    inputs: tuple[str, ...] = ()
    dims: tuple[Dim, ...] = ()
    text: str = ""
    args: tuple[tuple[str, RuleArg], ...] = ()

    def arg(self, name: str) -> RuleArg:
        """The rule argument ``name`` (reduce: axis, keep_dims; matmul: transpose_a/b; concat, gather: axis)."""
        return dict(self.args)[name]

    @property
    def names(self) -> tuple[str, ...]:
        """Input and attr names the rule refers to."""
        out = list(self.inputs)
        for d in self.dims:
            for n in (d.attr, d.input):
                if n and n not in out:
                    out.append(n)
        for _, a in self.args:
            if a.attr and a.attr not in out:
                out.append(a.attr)
        return tuple(out)


_RULE_HELP = (
    "a shape rule is an input name, 'broadcast(a, b, ...)', 'reduce(x, axis, keep_dims)', "
    "'matmul(a, b, transpose_a, transpose_b)', 'concat(xs, axis)', 'gather(x, indices, axis)' or a list of dims "
    "(ints, int attr names, '<input>.shape[i]')"
)


def parse_shape_rule(rule: str | list[object]) -> ShapeRule:
    """Parse a shape rule (string or list form).

    Raises:
        ExprError: when the rule is outside the rule language.
    """
    if isinstance(rule, list):
        return ShapeRule("dims", dims=tuple(_parse_dim(d) for d in rule), text=repr(rule))
    body = _parse(rule)
    text = rule.strip()
    if isinstance(body, ast.Name):
        return ShapeRule("same", (body.id,), text=text)
    if isinstance(body, ast.Call) and isinstance(body.func, ast.Name) and body.func.id == "broadcast":
        args = []
        for a in body.args:
            if not isinstance(a, ast.Name):
                raise ExprError("broadcast() takes input names, e.g. broadcast(x, y)", a.col_offset + 1)
            args.append(a.id)
        if len(args) < 2:
            raise ExprError("broadcast() needs at least two inputs", body.col_offset + 1)
        return ShapeRule("broadcast", tuple(args), text=text)
    if isinstance(body, ast.Call) and isinstance(body.func, ast.Name) and body.func.id in RULES:
        return _parse_rule_call(body, text)
    if isinstance(body, ast.List):
        return ShapeRule("dims", dims=tuple(_parse_dim_node(e) for e in body.elts), text=text)
    raise ExprError(_RULE_HELP, 1)


_RULE_TENSORS: dict[str, list[str]] = {"concat": ["xs"], "gather": ["x", "indices"]}
"""How error messages name a rule's tensor arguments (default: x, y)."""


def _parse_rule_call(call: ast.Call, text: str) -> ShapeRule:
    kind = call.func.id  # type: ignore[attr-defined]
    n_tensors, arg_names, defaults = RULES[kind]
    signature = f"{kind}({', '.join(_RULE_TENSORS.get(kind, ['x', 'y'][:n_tensors]))}, {', '.join(arg_names)})"
    if call.keywords:
        raise ExprError(f"{kind}() takes positional arguments: {signature}", call.keywords[0].value.col_offset + 1)
    if not n_tensors <= len(call.args) <= n_tensors + len(arg_names):
        raise ExprError(f"{kind}() takes {n_tensors} input(s) and up to {len(arg_names)} attr(s): {signature}",
                        call.col_offset + 1)
    inputs = []
    for a in call.args[:n_tensors]:
        if not isinstance(a, ast.Name):
            raise ExprError(f"{kind}() takes input names first: {signature}", a.col_offset + 1)
        inputs.append(a.id)
    args: list[tuple[str, RuleArg]] = []
    for i, name in enumerate(arg_names):
        node = call.args[n_tensors + i] if n_tensors + i < len(call.args) else None
        if node is None:
            args.append((name, RuleArg(literal=defaults[i])))
        elif isinstance(node, ast.Name) and node.id not in ("True", "False"):
            args.append((name, RuleArg(attr=node.id)))
        else:
            try:
                value = ast.literal_eval(node)
            except ValueError:
                raise ExprError(f"{kind}(): argument '{name}' must be an attr name or a literal",
                                node.col_offset + 1) from None
            want = RULE_ARG_TYPES[(kind, name)]
            ok = (
                ("bool" in want and isinstance(value, bool))
                or ("int" in want and isinstance(value, int) and not isinstance(value, bool))
                or ("list[int]" in want and isinstance(value, (list, tuple))
                    and all(isinstance(v, int) and not isinstance(v, bool) for v in value))
            )
            if not ok:
                raise ExprError(f"{kind}(): argument '{name}' must be an attr name or a literal of type "
                                f"{' or '.join(want)}, got {ast.unparse(node)}", node.col_offset + 1)
            args.append((name, RuleArg(literal=tuple(value) if isinstance(value, (list, tuple)) else value)))
    return ShapeRule(kind, tuple(inputs), text=text, args=tuple(args))


def _parse_dim(item: object) -> Dim:
    if isinstance(item, bool):
        raise ExprError(f"dimension {item!r} must be an int, an attr name or '<input>.shape[i]'")
    if isinstance(item, int):
        return Dim(literal=item)
    if isinstance(item, str):
        return _parse_dim_node(_parse(item))
    raise ExprError(f"dimension {item!r} must be an int, an attr name or '<input>.shape[i]'")


def _parse_dim_node(node: ast.expr) -> Dim:
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return Dim(literal=node.value)
    if isinstance(node, ast.Name):
        return Dim(attr=node.id)
    if (
        isinstance(node, ast.Subscript)
        and isinstance(node.value, ast.Attribute)
        and node.value.attr == "shape"
        and isinstance(node.value.value, ast.Name)
    ):
        idx = node.slice
        sign = 1
        if isinstance(idx, ast.UnaryOp) and isinstance(idx.op, ast.USub):
            sign, idx = -1, idx.operand
        if isinstance(idx, ast.Constant) and isinstance(idx.value, int):
            return Dim(input=node.value.value.id, axis=sign * idx.value)
    raise ExprError(
        f"dimension '{ast.unparse(node)}' must be an int, an attr name or '<input>.shape[i]'",
        getattr(node, "col_offset", 0) + 1,
    )
