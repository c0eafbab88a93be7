"""Stage 3 — model: a schema-valid spec tree becomes an immutable :class:`Op`.

Everything here is a frozen dataclass; nothing downstream ever sees the YAML tree.
Parsing pops nothing silently: the schema already rejected unknown keys, and the embedded
languages (elementwise expressions, shape rules) are parsed here, with their errors reported
at the ``file:line:col`` of the string that holds them.
"""

from __future__ import annotations

import dataclasses
import itertools
import linecache
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Callable, Union

from . import dtypes
from . import shapes as lang
from .diagnostics import Diagnostic, Location, Note, SpecError, did_you_mean
from .exprs import Expr, ExprError, parse_expr
from .loader import MarkedDict, MarkedList


@dataclass(frozen=True)
class ShapeExpr:
    """An output shape in the shape language (:mod:`opgen.shapes`): ``node`` is its typed tree,
    ``text`` its source as written, ``location`` where it is written."""

    text: str
    node: lang.Node
    location: Location

    @property
    def same_as(self) -> str | None:
        """The input whose shape this is, when the rule is just ``x`` / ``x.shape``."""
        return self.node.tensor.name if isinstance(self.node, lang.ShapeOf) else None

    @property
    def call(self) -> str | None:
        """The shape function the rule is a call of (``broadcast``, ``reduce``...), if any."""
        return self.node.fn.name if isinstance(self.node, lang.Call) else None


@dataclass(frozen=True)
class Contract:
    """An input contract (``requires:``): a condition over shapes and attrs, checked before any
    kernel runs. ``text`` is the condition as written (it goes into the error message)."""

    text: str
    node: lang.Node
    location: Location


@dataclass(frozen=True)
class Input:
    """A tensor input. ``kind`` is ``required``, ``optional`` or ``dynamic``."""

    name: str
    doc: str
    kind: str
    differentiable: bool
    location: Location
    writes: bool = False
    """``writes: true``: the op writes this input in place and does not return it."""


@dataclass(frozen=True)
class Output:
    """A tensor output with its shape rule and dtype rule (an input name or a dtype name).

    An output that ``aliases`` an input is that input, written in place: its shape rule is the
    input's shape (``x``) and its dtype rule the input (``x``)."""

    name: str
    doc: str
    shape: ShapeExpr
    dtype: str
    differentiable: bool
    location: Location
    aliases: str | None = None
    """The input this output is (updated in place), or None for an output of its own."""

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
    "list[list[int]]": "std::vector<std::vector<int64_t>>",
    "list[list[float]]": "std::vector<std::vector<float>>",
}
"""C++ type of each attr type (float attrs are float32: that is what AotExtra carries; a backend
may hold them wider, :func:`attr_cpp_type`)."""


def attr_cpp_type(attr_type: str, float_cpp: str = "float") -> str:
    """C++ type of an attr of spec type ``attr_type`` whose floats are ``float_cpp`` (``float`` or
    ``double``): ``std::vector<double>`` for ``list[float]`` with ``double``."""
    cpp = ATTR_CPP[attr_type]
    leaf = attr_type.replace("list[", "").rstrip("]")
    return cpp.replace("float", float_cpp) if leaf == "float" else cpp


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
    def is_list(self) -> bool:
        """Whether the attr is a list (``list[int]``..., ``list[list[int]]`` included)."""
        return self.type.startswith("list[")

    @property
    def is_nested(self) -> bool:
        """Whether the attr is a list of lists (``list[list[int]]``, ``list[list[float]]``)."""
        return self.type.startswith("list[list[")

    @property
    def leaf_type(self) -> str:
        """The scalar type of the attr's values: ``int`` for ``int``, ``list[int]`` and
        ``list[list[int]]``."""
        return self.type.replace("list[", "").replace("]", "")

    @property
    def item_type(self) -> str:
        """The element type of a list attr (``int`` for ``list[int]``), else the type itself."""
        return self.type[5:-1] if self.is_list else self.type


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
class TargetBodies:
    """``kernel.<target>``: the bodies of one target (``CPU``, ``GPU``) where it needs its own."""

    target: str
    location: Location
    forward: Body
    backward: Body | None
    backward_per_input: tuple[tuple[str, Body], ...]


@dataclass(frozen=True)
class Kernel:
    """General C++ bodies. ``backward`` is one body; ``backward_per_input`` one per input.
    ``targets``: a target's own bodies (``kernel.GPU``), which replace these for its rows."""

    forward: Body
    backward: Body | None
    backward_per_input: tuple[tuple[str, Body], ...]
    save: tuple[str, ...] | None = None
    save_location: Location | None = None
    grad_views: tuple[tuple[str, Location], ...] = ()
    """Inputs whose gradient PyNative returns as a view of the output gradient (the Function<T>
    path always, the Custom path with static shapes; ``kernel.grad_views``: the inverse of the
    output's shape rule, e.g. slices of ``dout`` for ``concat(xs, axis)``), each with where it is
    written."""
    targets: tuple[TargetBodies, ...] = ()

    def for_target(self, target: str) -> Kernel:
        """The bodies that build for ``target``: its own (``kernel.<target>``; its backward only when
        given), else these."""
        own = next((t for t in self.targets if t.target == target), None)
        if own is None:
            return self
        if own.backward is None and not own.backward_per_input:
            return dataclasses.replace(self, forward=own.forward, targets=())
        return dataclasses.replace(self, forward=own.forward, backward=own.backward,
                                   backward_per_input=own.backward_per_input, targets=())

    @property
    def all_bodies(self) -> tuple[Body, ...]:
        """Every body, of every target (what the backward may read is read from all of them)."""
        out = [self.forward, *([self.backward] if self.backward else []), *(b for _, b in self.backward_per_input)]
        for t in self.targets:
            out += [t.forward, *([t.backward] if t.backward else []), *(b for _, b in t.backward_per_input)]
        return tuple(out)


DEFAULT_DOMAIN: tuple[tuple[float, float], ...] = ((-2.0, 2.0),)
"""Where ``opgen test`` draws input values when the spec's ``test.domain`` does not say."""


Bound = Union[float, lang.Node]
"""A bound of a ``test.domain`` interval: a number, or an int expression of the shape language
(``logits.shape[-1] - 1``) evaluated on each drawn case."""


@dataclass(frozen=True)
class TestSettings:
    """The spec's optional ``test`` section (for ``opgen test``), with defaults filled in.

    Attributes:
        domains: per input name, the intervals its random values are drawn from; a bound is a
            number or a shape-language int expression (:data:`Bound`).
        attr_sets: complete attr values (defaults merged) to run every check with.
        shapes: per input name, its shape as a shape-language expression (``test.shapes``).
        attr_set_locations: where each entry of ``test.attrs`` is written (for diagnostics).
        shape_locations: where each entry of ``test.shapes`` is written.
        domain_locations: where each entry of ``test.domain`` is written.
    """

    __test__ = False  # not a pytest test class

    domains: Mapping[str, tuple[tuple[Bound, Bound], ...]] = field(default_factory=dict)
    attr_sets: tuple[Mapping[str, Any], ...] = ({},)
    shapes: Mapping[str, lang.Node] = field(default_factory=dict)
    attr_set_locations: tuple[Location, ...] = ()
    shape_locations: Mapping[str, Location] = field(default_factory=dict)
    domain_locations: Mapping[str, Location] = field(default_factory=dict)

    def domain(self, name: str, env: Mapping[str, Any] | None = None) -> tuple[tuple[float, float], ...]:
        """Intervals for input ``name`` (:data:`DEFAULT_DOMAIN` unless the spec says), with the
        bounds that are expressions evaluated in ``env`` (attr values and input shapes by name).

        Raises:
            ValueError: a bound is an expression and ``env`` is None, or the expression cannot
                be evaluated in ``env`` (an index out of range, an input that is None).
        """
        out = []
        for interval in self.domains.get(name, DEFAULT_DOMAIN):
            lo, hi = (_bound_value(b, name, env) for b in interval)
            out.append((lo, hi))
        return tuple(out)

    def domain_depends_on_shapes(self, name: str) -> bool:
        """Whether ``test.domain`` of input ``name`` has a bound that is an expression."""
        return any(not isinstance(b, (int, float)) for iv in self.domains.get(name, ()) for b in iv)


def _bound_value(bound: Bound, name: str, env: Mapping[str, Any] | None) -> float:
    if isinstance(bound, (int, float)):
        return float(bound)
    if env is None:
        raise ValueError(f"test.domain.{name}: '{lang.to_source(bound)}' needs the case's shapes and attrs")
    try:
        return float(lang.evaluate(bound, env))
    except (KeyError, TypeError) as exc:
        raise ValueError(f"test.domain.{name}: cannot evaluate '{lang.to_source(bound)}': {exc}") from None


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
    requires: tuple[Contract, ...] = ()
    test: TestSettings = field(default_factory=TestSettings)
    late_diagnostics: tuple[Diagnostic, ...] = ()
    """Errors in shape expressions and contracts, found while building the model and reported by
    the semantic checks (so that one run shows them with everything else)."""
    build: BuildFlags = BuildFlags()

    @property
    def class_name(self) -> str:
        """CamelCase C++/Python class name: ``scale_add`` -> ``ScaleAdd``."""
        return "".join(part.capitalize() for part in self.name.split("_") if part)

    def rows_for(self, target: str) -> tuple[DTypeRow, ...]:
        """dtype_format rows declared for ``target``."""
        return tuple(r for r in self.rows if r.target == target)

    @property
    def written_inputs(self) -> tuple[Input, ...]:
        """Inputs the op writes in place: ``writes: true``, or aliased by an output, in input order."""
        aliased = {o.aliases for o in self.outputs if o.aliases}
        return tuple(x for x in self.inputs if x.writes or x.name in aliased)

    @property
    def has_effects(self) -> bool:
        """Whether the op writes an input in place (an in-place, out-argument or output-less op):
        graphs must keep and order it, and it has no gradient."""
        return bool(self.written_inputs)

    def aliased_by(self, input_name: str) -> Output | None:
        """The output that aliases input ``input_name``, if any."""
        return next((o for o in self.outputs if o.aliases == input_name), None)

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

    # inputs are differentiable by default only when a gradient can reach them (through an output
    # that is differentiable) or the spec gives one: an op whose outputs are all marked
    # non-differentiable and that has no gradient bodies needs no marks on its inputs
    gives_grads = bool((tree.get("elementwise") or {}).get("grad")) or "backward" in (tree.get("kernel") or {})
    # an op that writes an input in place (an output aliases it, or it 'writes: true') has no
    # gradient: nothing of it is differentiable unless marked (which the semantic checks reject)
    effects = (any("aliases" in o for o in tree["outputs"])
               or any(bool(x.get("writes", False)) for x in tree["inputs"]))
    diff_out = any(bool(o.get("differentiable", not effects)) for o in tree["outputs"]) or (gives_grads
                                                                                          and not effects)
    inputs = []
    for i, item in enumerate(tree["inputs"]):
        if not diff_out and not effects and item.get("differentiable") is True:
            err(item.loc("differentiable"), f"input '{item['name']}' is marked differentiable, but no output "
                "is: no gradient can reach it", (Note("remove 'differentiable: true', or make an output "
                                                      "differentiable"),))
        inputs.append(
            Input(
                item["name"],
                item["doc"],
                item.get("kind", "required"),
                bool(item.get("differentiable", diff_out and not effects)),
                tree["inputs"].loc(i),
                bool(item.get("writes", False)),
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
    scope = lang.Scope({x.name: x.kind for x in inputs}, {a.name: a.type for a in attrs})

    # shape-language errors do not stop the model (placeholders stand in): the semantic checks
    # still run and report everything else in the same run (check.check_op reports these first)
    late: list[Diagnostic] = []

    def lang_error(loc: Location, what: str, exc: lang.ShapeError) -> None:
        for e in exc.all():
            late.append(Diagnostic(inside(loc, e.col), f"{what}: {e}", name, notes=tuple(Note(n) for n in e.notes)))

    outputs = []
    kinds = {x.name: x.kind for x in inputs}
    for i, item in enumerate(tree["outputs"]):
        alias = item.get("aliases")
        if alias is not None:
            output = _aliasing_output(item, tree["outputs"].loc(i), kinds, scope, err)
            if output is not None:
                outputs.append(output)
            continue
        missing = [k for k in ("shape", "dtype") if k not in item]
        if missing:
            err(tree["outputs"].loc(i), f"output '{item['name']}' has no {' and no '.join(repr(k) for k in missing)}; "
                "an output states its shape and dtype rules, unless it is an input updated in place",
                (Note("give 'shape:' and 'dtype:', or 'aliases: <input>' for an in-place output"),))
            continue
        shape_raw = item["shape"]
        shape_loc = item.loc("shape")
        try:
            if isinstance(shape_raw, list):
                node = _parse_dims(shape_raw, scope)
            else:
                node = lang.parse_shape(shape_raw, scope)
        except _DimError as exc:
            dim_loc = shape_raw.loc(exc.index) if isinstance(shape_raw, MarkedList) else shape_loc
            if not isinstance(shape_raw[exc.index], str):
                exc.error.col = 1
                exc.error.others = ()
            lang_error(dim_loc, f"output '{item['name']}': shape dim {exc.index}", exc.error)
            node = lang.ListOf((), 1)
        except lang.ShapeError as exc:
            lang_error(shape_loc, f"output '{item['name']}': bad shape", exc)
            node = lang.ListOf((), 1)
        shape = ShapeExpr(_show_raw(shape_raw), node, shape_loc)
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

        def bodies(node: Any) -> tuple[Body, Body | None, tuple[tuple[str, Body], ...]]:
            forward = Body(node["forward"], node.loc("forward"))
            backward = None
            per_input: list[tuple[str, Body]] = []
            if isinstance(node.get("backward"), str):
                backward = Body(node["backward"], node.loc("backward"))
            elif isinstance(node.get("backward"), dict):
                bw = node["backward"]
                per_input = [(n, Body(t, bw.loc(n))) for n, t in bw.items()]
            return forward, backward, tuple(per_input)

        forward, backward, per_input = bodies(k)
        own = tuple(TargetBodies(t, k.key_loc(t), *bodies(k[t])) for t in ("CPU", "GPU") if isinstance(k.get(t), dict))
        save = tuple(k["save"]) if "save" in k else None
        raw_views: Any = k.get("grad_views") or MarkedList()
        views = tuple((str(n), raw_views.loc(j)) for j, n in enumerate(raw_views))
        kernel = Kernel(forward, backward, per_input, save, k.loc("save") if "save" in k else None, views, own)
    reference = Body(tree["reference"], tree.loc("reference")) if "reference" in tree else None
    requires = []
    raw_requires: Any = tree.get("requires") or MarkedList()
    for j, text in enumerate(raw_requires):
        loc = raw_requires.loc(j)
        try:
            requires.append(Contract(text.strip(), lang.parse_condition(text, scope), loc))
        except lang.ShapeError as exc:
            lang_error(loc, f"requires[{j}]", exc)
    test = _test_settings(tree.get("test"), name, inputs, attrs, scope, tree.location, err)
    b = tree.get("build", {})
    build = BuildFlags(*(tuple(str(x) for x in b.get(k, ()))
                         for k in ("cflags", "include_dirs", "ldflags", "libraries", "includes")))
    if diags:
        raise SpecError(sorted(diags + late, key=lambda d: (d.location.line, d.location.col)))
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
        requires=tuple(requires),
        test=test,
        late_diagnostics=tuple(late),
        build=build,
    )


def _aliasing_output(item: Any, loc: Location, kinds: Mapping[str, str], scope: lang.Scope,
                     err: Callable[..., None]) -> Output | None:
    """An output that ``aliases`` an input: its shape rule is the input's shape and its dtype rule
    the input (``x``, ``x``), placed where ``aliases:`` is written. None (after reporting) when the
    input is unknown, not a required one, or the output also gives a shape or a dtype."""
    name, alias = item["name"], item["aliases"]
    bad = False
    for key in ("shape", "dtype"):
        if key in item:
            err(item.key_loc(key), f"output '{name}' aliases input '{alias}': its {key} is the input's, so it "
                f"takes no '{key}:'", (Note(f"remove '{key}:'"),))
            bad = True
    if alias not in kinds:
        err(item.loc("aliases"), f"output '{name}' aliases unknown input '{alias}'", did_you_mean(alias, list(kinds)))
        return None
    if kinds[alias] != "required":
        err(item.loc("aliases"), f"output '{name}' aliases input '{alias}', which is {kinds[alias]}; only a required "
            "input (one tensor) can be updated in place")
        return None
    if bad:
        return None
    node = lang.parse_shape(alias, scope)
    return Output(name, item["doc"], ShapeExpr(alias, node, item.loc("aliases")), alias,
                  bool(item.get("differentiable", False)), loc, alias)


def _test_settings(section: Any, op_name: str, inputs: list[Input], attrs: list[Attr], scope: lang.Scope,
                   op_loc: Location, err: Callable[..., None]) -> TestSettings:
    """The ``test`` section: names checked against the op, ``test.shapes`` parsed as expressions."""
    input_names = [x.name for x in inputs]
    attr_names = [a.name for a in attrs]
    defaults = {a.name: _plain(a.default) for a in attrs if a.has_default}
    kinds = {x.name: x.kind for x in inputs}
    domains: dict[str, tuple[tuple[Bound, Bound], ...]] = {}
    domain_locs: dict[str, Location] = {}
    shapes: dict[str, lang.Node] = {}
    shape_locs: dict[str, Location] = {}
    raw_sets: list[tuple[Any, Location]] = [({}, op_loc)]  # no test.attrs: the defaults
    if isinstance(section, MarkedDict):
        domain: Any = section.get("domain") or MarkedDict()
        for dname, value in domain.items():
            if dname not in input_names:
                err(domain.key_loc(dname), f"test.domain names unknown input '{dname}'",
                    did_you_mean(dname, input_names))
                continue
            dloc = domain.loc(dname)
            intervals = [value] if value and not isinstance(value[0], list) else list(value)
            parsed = []
            for interval in intervals:
                lo, hi = interval
                bounds = [_domain_bound(b, dname, scope, interval.loc(j) if isinstance(interval, MarkedList) else dloc,
                                        err) for j, b in enumerate((lo, hi))]
                if any(b is None for b in bounds):
                    continue
                blo, bhi = bounds[0], bounds[1]
                assert blo is not None and bhi is not None
                if isinstance(blo, float) and isinstance(bhi, float) and not blo <= bhi:  # [a, a] is the value a
                    err(dloc, f"test.domain.{dname}: empty interval [{_num(lo)}, {_num(hi)}]; write [lo, hi] with "
                        "lo <= hi")
                parsed.append((blo, bhi))
            domains[dname] = tuple(parsed)
            domain_locs[dname] = dloc
        raw_shapes: Any = section.get("shapes") or MarkedDict()
        for sname, value in raw_shapes.items():
            loc = raw_shapes.loc(sname)
            if sname not in input_names:
                err(raw_shapes.key_loc(sname), f"test.shapes names unknown input '{sname}'",
                    did_you_mean(sname, input_names))
                continue
            if kinds[sname] == "dynamic":
                err(raw_shapes.key_loc(sname), f"test.shapes.{sname}: '{sname}' is a dynamic input (a list of "
                    "tensors); test.shapes gives one shape per single-tensor input",
                    (Note("opgen test draws the list from the output shape rule or the contracts"),))
                continue
            try:
                node = _parse_dims(list(value), scope) if isinstance(value, list) else lang.parse_shape(value, scope)
            except _DimError as exc:
                dim_loc = value.loc(exc.index) if isinstance(value, MarkedList) else loc
                for e in exc.error.all():
                    err(inside(dim_loc, e.col) if isinstance(value[exc.index], str) else dim_loc,
                        f"test.shapes.{sname} dim {exc.index}: {e}", tuple(Note(n) for n in e.notes))
                continue
            except lang.ShapeError as exc:
                for e in exc.all():
                    err(inside(loc, e.col), f"test.shapes.{sname}: {e}", tuple(Note(n) for n in e.notes))
                continue
            if sname in lang.tensors_used(node):
                err(loc, f"test.shapes.{sname} refers to '{sname}' itself")
                continue
            optional = [n for n in lang.optional_inputs(node)]
            if optional:
                err(loc, f"test.shapes.{sname} reads optional input '{optional[0]}', which may be None")
                continue
            shapes[sname] = node
            shape_locs[sname] = loc
        for cycle in _cycles(shapes):
            first = cycle[0]
            err(shape_locs[first], f"test.shapes.{first}: the shapes of {', '.join(repr(n) for n in cycle)} are "
                "given in terms of each other, so none of them can be drawn first",
                tuple(Note(f"test.shapes.{n} reads '{cycle[(i + 1) % len(cycle)]}'", shape_locs[n])
                      for i, n in enumerate(cycle)))
            for n in cycle:
                shapes.pop(n, None)
        if "attrs" in section:
            sets = section["attrs"]
            raw_sets = [(v, sets.loc(i)) for i, v in enumerate(sets)]
    attr_sets = []
    for values, loc in raw_sets:
        for aname in values:
            if aname not in attr_names:
                err(loc, f"test.attrs names unknown attr '{aname}'", did_you_mean(aname, attr_names))
        missing = [n for n in attr_names if n not in values and n not in defaults]
        if missing and loc is not op_loc:  # without test.attrs, only opgen test needs them (testing.read_settings)
            err(loc, f"attr(s) {', '.join(repr(n) for n in missing)} have no default; give their values in every "
                "entry of test.attrs")
        attr_sets.append({n: _plain(values[n]) if n in values else defaults.get(n)
                          for n in attr_names if n in values or n in defaults})
    return TestSettings(domains, tuple(attr_sets), shapes, tuple(loc for _, loc in raw_sets), shape_locs, domain_locs)


def _domain_bound(raw: Any, name: str, scope: lang.Scope, loc: Location, err: Callable[..., None]) -> Bound | None:
    """One bound of a ``test.domain`` interval: a number, or a shape-language int expression
    (parsed and type-checked; None after reporting an error)."""
    if isinstance(raw, (int, float)) and not isinstance(raw, bool):
        return _bound(raw)
    if not isinstance(raw, str):
        err(loc, f"test.domain.{name}: bound {raw!r} must be a number or an int expression")
        return None
    try:
        node = lang.parse(raw, scope)
    except lang.ShapeError as exc:
        for e in exc.all():
            err(inside(loc, e.col), f"test.domain.{name}: {e}", tuple(Note(n) for n in e.notes))
        return None
    if node.type is not lang.Type.INT:
        err(loc, f"test.domain.{name}: bound '{raw.strip()}' must be an int expression (e.g. 'x.shape[-1] - 1'), "
            f"but it is a {node.type.value}")
        return None
    optional = lang.optional_inputs(node)
    if optional:
        err(loc, f"test.domain.{name}: bound '{raw.strip()}' reads optional input '{optional[0]}', which may be None")
        return None
    return node


def _cycles(shapes: Mapping[str, lang.Node]) -> list[list[str]]:
    """The cycles among ``test.shapes`` entries that read each other (each once, in key order)."""
    deps = {n: [d for d in lang.tensors_used(node) if d in shapes] for n, node in shapes.items()}
    found: list[list[str]] = []
    done: set[str] = set()

    def visit(n: str, path: list[str]) -> None:
        if n in path:
            cycle = path[path.index(n):]
            if not any(set(cycle) == set(c) for c in found):
                found.append(cycle)
            return
        if n in done:
            return
        for d in deps[n]:
            visit(d, path + [n])
        done.add(n)

    for start in shapes:
        visit(start, [])
    return found


def _num(v: Any) -> str:
    """A number as written: ints as ints (``1000000000``, not ``1e+09``)."""
    return str(v)


def inside(loc: Location, col: int) -> Location:
    """The location of column ``col`` (1-based) of the YAML string at ``loc``; a quoted string's
    text starts one column after its quote."""
    if not loc.line:
        return loc
    linecache.checkcache(loc.file)
    line = linecache.getline(loc.file, loc.line)
    quote = 1 if line[loc.col - 1:loc.col] in ("'", '"') else 0
    return Location(loc.file, loc.line, loc.col + quote + col - 1)


class _DimError(Exception):
    def __init__(self, index: int, error: lang.ShapeError):
        super().__init__(str(error))
        self.index = index
        self.error = error


def _parse_dims(items: list[Any], scope: lang.Scope) -> lang.Node:
    """The YAML list form of a shape, ``[x.shape[0], n, 3]``: each item an int or an expression."""
    dims: list[lang.Node] = []
    for k, item in enumerate(items):
        try:
            node = lang.parse([item], scope)
        except lang.ShapeError as exc:
            raise _DimError(k, exc) from None
        assert isinstance(node, lang.ListOf)
        dims.extend(node.items)
    return lang.ListOf(tuple(dims), 1)


def _show_raw(raw: Any) -> str:
    if isinstance(raw, list):
        return "[" + ", ".join(str(x) for x in raw) + "]"
    return str(raw).strip()


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
