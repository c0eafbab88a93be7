"""Stage 3 — model: a schema-valid spec tree becomes an immutable :class:`Op`.

Everything here is a frozen dataclass; nothing downstream ever sees the YAML tree.
Parsing pops nothing silently: the schema already rejected unknown keys, and the embedded
languages (elementwise expressions, shape rules) are parsed here, with their errors reported
at the ``file:line:col`` of the string that holds them.
"""

from __future__ import annotations

import itertools
import math
import re
from dataclasses import dataclass
from typing import Any, Callable

from . import dtypes
from .diagnostics import Diagnostic, Location, Note, SpecError, did_you_mean
from .exprs import Expr, ExprError, ShapeRule, parse_expr, parse_shape_rule
from .loader import MarkedDict, MarkedList


@dataclass(frozen=True)
class Input:
    """A tensor input. ``kind`` is ``required``, ``optional`` or ``dynamic``."""

    name: str
    doc: str
    kind: str
    differentiable: bool
    location: Location


@dataclass(frozen=True)
class Output:
    """A tensor output with its shape rule and dtype rule (an input name or a dtype name)."""

    name: str
    doc: str
    shape: ShapeRule
    dtype: str
    differentiable: bool
    location: Location

    @property
    def grad_name(self) -> str:
        """Name of this output's incoming gradient in backward bodies: ``d<name>``."""
        return "d" + self.name


ATTR_CPP = {
    "int": "int64_t",
    "float": "float",
    "bool": "bool",
    "str": "std::string",
    "list[int]": "std::vector<int64_t>",
    "list[float]": "std::vector<float>",
    "list[bool]": "std::vector<bool>",
    "list[str]": "std::vector<std::string>",
}
"""C++ type of each attr type (float attrs are float32: that is what AotExtra carries)."""

ATTR_REG = {
    "int": "int",
    "float": "float",
    "bool": "bool",
    "str": "str",
    "list[int]": "listInt",
    "list[float]": "listFloat",
    "list[bool]": "listBool",
    "list[str]": "listStr",
}
"""CustomRegOp.attr value_type of each attr type."""


@dataclass(frozen=True)
class Attr:
    """A non-tensor argument. ``default`` is only meaningful when ``has_default``."""

    name: str
    type: str
    doc: str
    has_default: bool
    default: Any
    range: tuple[float, float] | None
    choices: tuple[Any, ...] | None
    location: Location
    default_location: Location | None = None
    """Where the default value is written (for diagnostics about it)."""

    @property
    def cpp_type(self) -> str:
        """C++ type of the attr in kernels, Forward and bindings."""
        return ATTR_CPP[self.type]

    @property
    def reg_type(self) -> str:
        """CustomRegOp value_type string."""
        return ATTR_REG[self.type]


@dataclass(frozen=True)
class TypeVar:
    """A type variable of the dtype_format short form and the DataType names it ranges over."""

    name: str
    datatypes: tuple[str, ...]
    location: Location


TYPE_VAR = re.compile(r"[A-Z][A-Z0-9]*")
"""A type variable name (DataType names always hold an underscore, so the two never clash)."""


@dataclass(frozen=True)
class DTypeRow:
    """One dtype_format row: a DataType name per input then per output.

    ``template`` is the row as written when it used type variables (``None`` otherwise).
    """

    target: str
    columns: tuple[str, ...]
    location: Location
    template: tuple[str, ...] | None = None

    def dtype(self, index: int) -> dtypes.DType:
        """The element type of column ``index``."""
        return dtypes.BY_PREFIX[dtypes.split_datatype(self.columns[index])[0]]


@dataclass(frozen=True)
class Body:
    """C++ statements from the spec and the location of their first line (for ``#line``)."""

    text: str
    location: Location


@dataclass(frozen=True)
class Elementwise:
    """Elementwise shorthand: one forward expression, one gradient expression per input."""

    forward: Expr
    forward_location: Location
    grads: tuple[tuple[str, Expr, Location], ...]


@dataclass(frozen=True)
class Kernel:
    """General C++ bodies. ``backward`` is one body; ``backward_per_input`` one per input."""

    forward: Body
    backward: Body | None
    backward_per_input: tuple[tuple[str, Body], ...]
    save: tuple[str, ...] | None = None
    save_location: Location | None = None


@dataclass(frozen=True)
class BuildFlags:
    """The spec's ``build:`` section: extra compile/link settings for its kernel."""

    cflags: tuple[str, ...] = ()
    include_dirs: tuple[str, ...] = ()
    """As written: relative to the spec file's directory unless absolute."""
    ldflags: tuple[str, ...] = ()
    libraries: tuple[str, ...] = ()
    includes: tuple[str, ...] = ()
    """Headers the kernel layer includes, as after ``#include`` (or a bare name)."""


@dataclass(frozen=True)
class Op:
    """One op, as stated once in its YAML file (``file``)."""

    name: str
    doc: str
    file: str
    location: Location
    inputs: tuple[Input, ...]
    outputs: tuple[Output, ...]
    attrs: tuple[Attr, ...]
    targets: tuple[str, ...]
    rows: tuple[DTypeRow, ...]
    elementwise: Elementwise | None
    kernel: Kernel | None
    reference: Body | None
    targets_location: Location
    type_vars: tuple[TypeVar, ...] = ()
    build: BuildFlags = BuildFlags()

    @property
    def class_name(self) -> str:
        """CamelCase C++/Python class name: ``scale_add`` -> ``ScaleAdd``."""
        return "".join(part.capitalize() for part in self.name.split("_") if part)

    def rows_for(self, target: str) -> tuple[DTypeRow, ...]:
        """dtype_format rows declared for ``target``."""
        return tuple(r for r in self.rows if r.target == target)

    @property
    def differentiable_inputs(self) -> tuple[Input, ...]:
        """Inputs that receive a gradient."""
        return tuple(i for i in self.inputs if i.differentiable)

    @property
    def has_backward(self) -> bool:
        """Whether the spec defines any gradient."""
        if self.elementwise is not None:
            return bool(self.elementwise.grads)
        assert self.kernel is not None
        return self.kernel.backward is not None or bool(self.kernel.backward_per_input)


def _str(tree: MarkedDict, key: str, default: str = "") -> str:
    value = tree.get(key, default)
    return value if isinstance(value, str) else default


def build_op(tree: MarkedDict, file: str) -> Op:
    """Build the model of one schema-valid spec.

    Raises:
        SpecError: when an embedded expression or shape rule is malformed.
    """
    diags: list[Diagnostic] = []
    name = _str(tree, "name")

    def err(loc: Location, msg: str, notes: tuple[Note, ...] = ()) -> None:
        diags.append(Diagnostic(loc, msg, name, notes=notes))

    def expr_loc(base: Location, exc: ExprError) -> Location:
        return Location(base.file, base.line, base.col + exc.col - 1) if base.line else base

    inputs = []
    for i, item in enumerate(tree["inputs"]):
        inputs.append(
            Input(
                item["name"],
                item["doc"],
                item.get("kind", "required"),
                bool(item.get("differentiable", True)),
                tree["inputs"].loc(i),
            )
        )
    attrs = []
    for i, item in enumerate(tree.get("attrs") or []):
        rng = item.get("range")
        choices = item.get("choices")
        attrs.append(
            Attr(
                item["name"],
                item["type"],
                item["doc"],
                "default" in item,
                _plain(item.get("default")),
                (_bound(rng[0]), _bound(rng[1])) if rng else None,
                tuple(_plain(c) for c in choices) if choices else None,
                tree["attrs"].loc(i),
                item.loc("default") if "default" in item and hasattr(item, "loc") else None,
            )
        )
    outputs = []
    for i, item in enumerate(tree["outputs"]):
        shape_raw = item["shape"]
        try:
            shape = parse_shape_rule(list(shape_raw) if isinstance(shape_raw, list) else shape_raw)
        except ExprError as exc:
            err(expr_loc(item.loc("shape"), exc), f"output '{item['name']}': bad shape rule: {exc}")
            shape = ShapeRule("same", (), text=str(shape_raw))
        outputs.append(
            Output(
                item["name"],
                item["doc"],
                shape,
                item["dtype"],
                bool(item.get("differentiable", True)),
                tree["outputs"].loc(i),
            )
        )
    type_vars = []
    tv_values: dict[str, tuple[str, ...]] = {}
    tv_tree: Any = tree.get("type_vars") or MarkedDict()
    for tv_name, values in tv_tree.items():
        resolved = []
        for j, value in enumerate(values):
            dt = dtypes.datatype_of(value)
            if dt is None:
                err(values.loc(j), f"type variable '{tv_name}': unknown dtype '{value}'",
                    did_you_mean(value, dtypes.all_dtype_names()))
            else:
                resolved.append(dt)
        tv_values[tv_name] = tuple(resolved)
        tv_loc = tv_tree.loc(tv_name) if isinstance(tv_tree, MarkedDict) else Location(file)
        type_vars.append(TypeVar(tv_name, tuple(resolved), tv_loc))
    rows = []
    fmt = tree["dtype_format"]
    for target in fmt:
        for j, row in enumerate(fmt[target]):
            loc = fmt[target].loc(j)
            used = [c for c in dict.fromkeys(row) if TYPE_VAR.fullmatch(c)]
            unknown = [u for u in used if u not in tv_values]
            for u in unknown:
                err(loc, f"dtype_format row uses type variable '{u}', which is not declared in type_vars",
                    did_you_mean(u, list(tv_values)) or (Note("declare it, e.g. 'type_vars: {" + u + ": [float32]}'"),))
            if unknown:
                continue
            if not used:
                rows.append(DTypeRow(target, tuple(row), loc))
                continue
            order = [v for v in tv_values if v in used]  # declaration order: deterministic expansion
            for combo in itertools.product(*(tv_values[v] for v in order)):
                sub = dict(zip(order, combo))
                rows.append(DTypeRow(target, tuple(sub.get(c, c) for c in row), loc, tuple(row)))
    targets = tuple(tree["targets"]) if "targets" in tree else tuple(fmt.keys())

    tensor_names = [x.name for x in inputs]
    out_names = [o.name for o in outputs]
    attr_names = [a.name for a in attrs]
    elementwise = None
    kernel = None
    if "elementwise" in tree:
        ew = tree["elementwise"]
        fwd_known: Callable[[str], bool] = lambda n: n in tensor_names or n in attr_names  # noqa: E731
        grad_names = tensor_names + out_names + ["d" + o for o in out_names] + attr_names
        try:
            fwd = parse_expr(ew["forward"], fwd_known, attr_names)
        except ExprError as exc:
            err(expr_loc(ew.loc("forward"), exc), f"elementwise.forward: {exc}")
            fwd = Expr(ew["forward"], (), "C(0)", "0")
        grads = []
        for gname, gtext in (ew.get("grad") or {}).items():
            gloc = ew["grad"].loc(gname)
            try:
                expr = parse_expr(gtext, lambda n: n in grad_names, attr_names)
            except ExprError as exc:
                err(expr_loc(gloc, exc), f"elementwise.grad.{gname}: {exc}")
                continue
            grads.append((gname, expr, gloc))
        elementwise = Elementwise(fwd, ew.loc("forward"), tuple(grads))
    elif "kernel" in tree:
        k = tree["kernel"]
        forward = Body(k["forward"], k.loc("forward"))
        backward = None
        per_input: list[tuple[str, Body]] = []
        if isinstance(k.get("backward"), str):
            backward = Body(k["backward"], k.loc("backward"))
        elif isinstance(k.get("backward"), dict):
            bw = k["backward"]
            per_input = [(n, Body(t, bw.loc(n))) for n, t in bw.items()]
        save = tuple(k["save"]) if "save" in k else None
        kernel = Kernel(forward, backward, tuple(per_input), save, k.loc("save") if "save" in k else None)
    reference = Body(tree["reference"], tree.loc("reference")) if "reference" in tree else None
    b = tree.get("build", {})
    build = BuildFlags(*(tuple(str(x) for x in b.get(k, ()))
                         for k in ("cflags", "include_dirs", "ldflags", "libraries", "includes")))
    if diags:
        raise SpecError(diags)
    return Op(
        name=name,
        doc=tree["doc"],
        file=file,
        location=tree.location,
        inputs=tuple(inputs),
        outputs=tuple(outputs),
        attrs=tuple(attrs),
        targets=targets,
        rows=tuple(rows),
        elementwise=elementwise,
        kernel=kernel,
        reference=reference,
        targets_location=tree.loc("targets") if "targets" in tree else tree.key_loc("dtype_format"),
        type_vars=tuple(type_vars),
        build=build,
    )


def _plain(value: Any) -> Any:
    """Marked containers -> plain lists/dicts (for defaults kept in the frozen model)."""
    if isinstance(value, MarkedList):
        return tuple(_plain(v) for v in value)
    if isinstance(value, MarkedDict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _bound(value: int | float) -> float:
    """A range bound as a float; an integer beyond float64 (``10**400``) bounds nothing an int64
    or a float can hold, so it is an infinite bound of its sign."""
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf
