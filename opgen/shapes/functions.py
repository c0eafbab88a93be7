"""Shape functions of the shape language: one class per function, holding everything about it.

Each :class:`ShapeFunction` says how a call is type-checked (its parameters), what it means in
Python (a function of :mod:`opgen.runtime.shapes`, bound for ints in :mod:`opgen.runtime` and
for each backend's sizes in its runtime), in C++ (a function of ``opgen/sym.h``, which
handles unknown dims and ranks and otherwise calls the same-named static rule of
``opgen/rules.h``), in words (the docs), and how ``opgen test`` draws input shapes for it
(:meth:`ShapeFunction.sample`), and for the functions that only move or sum elements, the
gradient of their input as a view of the output gradient (``kernel.grad_views``: its geometry,
:attr:`ShapeFunction.grad_view_kind`, and the arguments that fix it; each backend spells the
call).  Adding a function means adding one class here and its two runtime twins
(``runtime/shapes.py`` and ``rules.h``/``sym.h``), which tests compare.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Literal, Protocol

from ..runtime import shapes as shape_runtime
from .emit import to_source
from .nodes import AttrRef, Call, Const, ListOf, Node, ShapeError, ShapeOf, TensorRef, Type, tensors_used

if TYPE_CHECKING:
    from .syntax import _Parser

GradViewKind = Literal["split", "unreduce"]
"""The geometries of a gradient view (:attr:`ShapeFunction.grad_view_kind`)."""


class SampleContext(Protocol):
    """What a sampler sees (``opgen.sampling.ShapeContext``)."""

    rng: Any
    style: str
    shapes: dict[str, Any]

    def random_shape(self, min_ndim: int = 0, low: int = 1) -> tuple[int, ...]: ...

    def value(self, node: Node) -> Any: ...


class NotApplicable(Exception):
    """A shape style that an expression cannot realise (e.g. 0-d inputs for matmul)."""


@dataclass(frozen=True)
class Param:
    """One parameter: ``kind`` is ``tensor`` (an input or a list-valued expression), ``tensors``
    (a dynamic input), ``axis`` (int or list[int]), ``int`` or ``bool``; ``default`` is the literal
    used when the call leaves it out (``None``: required)."""

    name: str
    kind: str
    default: object = None


class ShapeFunction:
    """Base of every shape function."""

    name: str = ""
    params: tuple[Param, ...] = ()
    variadic: bool = False  # broadcast(x, y, ...): every argument a tensor, two or more
    runtime: str = ""  # the opgen.runtime.shapes function (``_rt.<name>``)
    cpp: str = ""  # the opgen::sym function
    styles: frozenset[str] = frozenset({"plain"})  # shape styles of opgen test it can realise

    def __repr__(self) -> str:
        return f"<shape function {self.name}>"

    @property
    def signature(self) -> str:
        """``reduce(x, axis, keep_dims)`` for messages."""
        if self.variadic:
            return f"{self.name}(x, y, ...)"
        return f"{self.name}({', '.join(p.name for p in self.params)})"

    def parse(self, node: ast.Call, col: int, parser: _Parser) -> Node:
        """Type-check a call and return its :class:`~opgen.shapes.nodes.Call` node."""
        if self.variadic:
            if len(node.args) < 2:
                raise ShapeError(f"{self.name}() needs at least two inputs: {self.signature}", col)
            args = []
            for a in node.args:
                arg = parser.go(a)
                if isinstance(arg, TensorRef) and arg.optional:
                    raise ShapeError(f"input '{arg.name}' is optional and may be None", arg.col)
                args.append(parser.want(arg, Type.LIST, what=f"an argument of {self.name}()"))
            return Call(self, tuple(args), col)
        required = sum(1 for p in self.params if p.default is None)
        if not required <= len(node.args) <= len(self.params):
            raise ShapeError(f"{self.name}() takes {required} to {len(self.params)} arguments: {self.signature}",
                             col)
        out: list[Node] = []
        for i, p in enumerate(self.params):
            if i >= len(node.args):
                assert p.default is not None
                value = p.default
                if isinstance(value, bool):
                    out.append(Const(value, Type.BOOL, col))
                elif isinstance(value, int):
                    out.append(Const(value, Type.INT, col))
                else:  # a list default: []
                    out.append(ListOf((), col))
                continue
            arg = parser.go(node.args[i])
            what = f"argument '{p.name}' of {self.name}()"
            if p.kind == "tensors":
                if arg.type is not Type.TENSORS:
                    raise ShapeError(f"{what} must be a dynamic (list) input, but '{ast.unparse(node.args[i])}' "
                                     f"is {'a single tensor' if arg.type is Type.TENSOR else 'not an input'}",
                                     arg.col)
            elif p.kind == "tensor":
                if arg.type is Type.TENSORS:
                    raise ShapeError(f"{what} is a dynamic input (a list of tensors); "
                                     f"use concat({ast.unparse(node.args[i])}, axis)", arg.col)
                if isinstance(arg, TensorRef) and arg.optional:
                    raise ShapeError(f"input '{arg.name}' is optional and may be None", arg.col)
                arg = parser.want(arg, Type.LIST, what=what)
            elif p.kind == "axis":
                arg = parser.want(arg, Type.INT, Type.LIST, what=what)
            elif p.kind == "int":
                arg = parser.want(arg, Type.INT, what=what)
            elif p.kind == "bool":
                arg = parser.want(arg, Type.BOOL, what=what)
            else:  # pragma: no cover - a Param kind this method does not know
                raise AssertionError(p.kind)
            out.append(arg)
        return Call(self, tuple(out), col)

    def words(self, args: tuple[Node, ...]) -> str:
        """The call in words (Markdown), e.g. "the shape of `x` reduced over axis -1"."""
        raise NotImplementedError

    grad_view: str = ""
    """For a function that only moves or sums elements, the gradient of its first argument as
    a view of the output gradient, in words ("" for none): what ``kernel.grad_views`` may ask."""

    grad_view_kind: GradViewKind | None = None
    """The view's geometry, which a backend spells as its own call (MindSpore's ``opgen::ms::
    split_view`` and ``_graph.split_view``): ``split`` (slices of the output gradient along an
    axis, one per tensor of a list input) or ``unreduce`` (the output gradient broadcast back over
    reduced axes); None for a function without a gradient view."""

    def grad_view_cpp(self, args: tuple[Node, ...], cpp: Callable[[Node], str]) -> tuple[str, ...]:
        """The C++ arguments that fix the view's geometry, over ``opgen/sym.h`` values (``cpp``
        turns an argument into C++): for ``split`` the axis (an ``int64_t``), for ``unreduce`` the
        kept shape (an ``opgen::Shape``). A backend's call takes the output gradient, these, and
        the input's shape (:data:`GradViewKind`)."""
        raise NotImplementedError(f"{self.name}() has no gradient view")

    def grad_view_py(self, args: tuple[Node, ...], py: Callable[[Node], str]) -> tuple[str, ...]:
        """The Python arguments of the same view (``py`` turns an argument into Python): for
        ``split`` the axis, for ``unreduce`` the axes and ``keep_dims``. A backend's call takes the
        output gradient, the input (a tensor; a tuple of tensors for a list input), and these."""
        raise NotImplementedError(f"{self.name}() has no gradient view")

    def sample(self, args: tuple[Node, ...], ctx: SampleContext) -> None:
        """Give a shape to the inputs among ``args`` that have none yet (``ctx.shapes``), so that
        the call is valid for this style; raise :class:`NotApplicable` when it cannot be."""
        for a in args:
            for name in tensors_used(a):
                if name not in ctx.shapes:
                    ctx.shapes[name] = ctx.random_shape()


def _tensor_name(node: Node) -> str | None:
    """The input a ``tensor`` argument names (``x`` or ``x.shape``), else None."""
    if isinstance(node, ShapeOf):
        return node.tensor.name
    if isinstance(node, TensorRef):
        return node.name
    return None


def _code(node: Node) -> str:
    return f"`{node.tensor.name}`" if isinstance(node, ShapeOf) else f"`{to_source(node)}`"


def _shape_words(node: Node) -> str:
    return f"the shape of `{node.tensor.name}`" if isinstance(node, ShapeOf) else _code(node)


def _literal(node: Node) -> bool:
    return isinstance(node, Const) or (isinstance(node, ListOf) and all(isinstance(i, Const) for i in node.items))


def _when(node: Node, what: str) -> str:
    """``what`` qualified by a bool argument: always, never (''), or when it holds."""
    if isinstance(node, Const):
        return what if node.value else ""
    return f"{what} when {_code(node)} is true"


def _axes_words(node: Node) -> str:
    if isinstance(node, Const):
        return f"axis {node.value}"
    if isinstance(node, ListOf) and all(isinstance(i, Const) for i in node.items):
        values = [to_source(i) for i in node.items]
        if not values:
            return "all axes"
        return f"axis {values[0]}" if len(values) == 1 else "axes " + ", ".join(values)
    if isinstance(node, AttrRef):
        return f"the axes in attr `{node.name}`" + (" (all axes when empty)" if node.type.value == "list[int]" else "")
    return f"the axes `{to_source(node)}`"


def _axes_ndim(axis: Any) -> int:
    """The fewest dimensions for which every axis in ``axis`` (int or list) is valid."""
    axes = [axis] if isinstance(axis, int) else list(axis)
    return max([a + 1 if a >= 0 else -a for a in axes], default=0)


class Broadcast(ShapeFunction):
    """``broadcast(x, y, ...)``: the NumPy broadcast of the shapes."""

    name = "broadcast"
    variadic = True
    runtime = "broadcast_shape"
    cpp = "opgen::sym::broadcast"
    styles = frozenset({"plain", "broadcast", "scalar", "scalar-broadcast", "empty"})

    def words(self, args: tuple[Node, ...]) -> str:
        return "the NumPy broadcast of " + ", ".join(_shape_words(a) for a in args)

    def sample(self, args: tuple[Node, ...], ctx: SampleContext) -> None:
        import numpy as np

        names = [n for n in (_tensor_name(a) for a in args) if n is not None]
        free = [n for n in dict.fromkeys(names) if n not in ctx.shapes]
        if not free:
            return
        taken = [ctx.shapes[n] for n in names if n in ctx.shapes]
        rng, style = ctx.rng, ctx.style
        if style == "scalar":
            for name in free:
                ctx.shapes[name] = ()
            return
        if taken:
            base = tuple(np.broadcast_shapes(*taken))
        elif style == "broadcast":
            base = ctx.random_shape(min_ndim=2, low=2)
        else:
            base = ctx.random_shape()
        if style == "plain":
            for name in free:
                ctx.shapes[name] = base
            return
        full = int(rng.integers(len(free)))  # this one keeps the whole base shape
        for i, name in enumerate(free):
            if i == full and not taken:
                ctx.shapes[name] = base
            elif style == "scalar-broadcast":
                ctx.shapes[name] = ()
            else:  # broadcast, empty: drop leading dims, turn some dims into 1
                drop = int(rng.integers(0, len(base))) if style == "broadcast" and len(base) > 1 else 0
                dims = [1 if rng.random() < 0.5 else d for d in base[drop:]]
                if tuple(dims) == base and dims:
                    dims[int(rng.integers(len(dims)))] = 1
                ctx.shapes[name] = tuple(dims)
        if style == "scalar-broadcast" and all(ctx.shapes[n] == () for n in names):
            raise NotApplicable("every input is already 0-d")


class Reduce(ShapeFunction):
    """``reduce(x, axis=[], keep_dims=False)``: ``x`` reduced over ``axis`` (all axes when empty)."""

    name = "reduce"
    params = (Param("x", "tensor"), Param("axis", "axis", ()), Param("keep_dims", "bool", False))
    runtime = "reduce_shape"
    cpp = "opgen::sym::reduce"
    styles = frozenset({"plain", "scalar", "empty"})

    def words(self, args: tuple[Node, ...]) -> str:
        keep = _when(args[2], "kept as size-1 dims")
        return f"{_shape_words(args[0])} reduced over {_axes_words(args[1])}, reduced axes " + (
            keep + ", else dropped" if keep and not _literal(args[2]) else (keep or "dropped"))

    def sample(self, args: tuple[Node, ...], ctx: SampleContext) -> None:
        name = _tensor_name(args[0])
        if name is not None and name not in ctx.shapes:
            ctx.shapes[name] = ctx.random_shape(min_ndim=_axes_ndim(ctx.value(args[1])))
        super().sample(args, ctx)

    grad_view = "the output gradient broadcast back over the reduced axes (a sum's gradient)"

    grad_view_kind: GradViewKind | None = "unreduce"

    def grad_view_cpp(self, args: tuple[Node, ...], cpp: Callable[[Node], str]) -> tuple[str, ...]:
        kept = f"{self.cpp}({cpp(args[0])}, {cpp(args[1])}, opgen::sym::Bool{{true}})"
        return (f'opgen::sym::to_shape({kept}, "kept")',)

    def grad_view_py(self, args: tuple[Node, ...], py: Callable[[Node], str]) -> tuple[str, ...]:
        return py(args[1]), py(args[2])


class Matmul(ShapeFunction):
    """``matmul(a, b, transpose_a=False, transpose_b=False)``: 2-D matrix product."""

    name = "matmul"
    params = (Param("a", "tensor"), Param("b", "tensor"), Param("transpose_a", "bool", False),
              Param("transpose_b", "bool", False))
    runtime = "matmul_shape"
    cpp = "opgen::sym::matmul"
    styles = frozenset({"plain", "empty"})

    def words(self, args: tuple[Node, ...]) -> str:
        a, b = _code(args[0]), _code(args[1])
        notes = [n for n in (_when(args[2], f"{a} transposed"), _when(args[3], f"{b} transposed")) if n]
        return f"the matrix product's (rows of {a}, columns of {b})" + (" with " + " and ".join(notes) if notes else "")

    def sample(self, args: tuple[Node, ...], ctx: SampleContext) -> None:
        a, b = _tensor_name(args[0]), _tensor_name(args[1])
        if ctx.style == "scalar":
            raise NotApplicable("matmul needs 2-D inputs")
        m, k, n = (int(d) for d in ctx.rng.integers(1, 4, 3))
        if ctx.style == "empty":
            which = int(ctx.rng.integers(3))
            m, k, n = [0 if i == which else d for i, d in enumerate((m, k, n))]
        ta, tb = bool(ctx.value(args[2])), bool(ctx.value(args[3]))
        if a is not None and a not in ctx.shapes:
            ctx.shapes[a] = (k, m) if ta else (m, k)
        if b is not None and b not in ctx.shapes and a is not None:
            k_a = ctx.shapes[a][0 if ta else 1] if len(ctx.shapes[a]) == 2 else k
            ctx.shapes[b] = (n, k_a) if tb else (k_a, n)
        super().sample(args, ctx)


class Concat(ShapeFunction):
    """``concat(xs, axis=0)``: the tensors of a dynamic input joined along ``axis``."""

    name = "concat"
    params = (Param("xs", "tensors"), Param("axis", "int", 0))
    runtime = "concat_shape"
    cpp = "opgen::sym::concat"
    styles = frozenset({"plain", "empty"})

    def words(self, args: tuple[Node, ...]) -> str:
        return f"the tensors of {_code(args[0])} joined along {_axes_words(args[1])}"

    def sample(self, args: tuple[Node, ...], ctx: SampleContext) -> None:
        xs = _tensor_name(args[0]) or ""
        if xs in ctx.shapes:
            return
        if ctx.style == "scalar":
            raise NotApplicable("concat cannot join 0-d tensors")
        axis = int(ctx.value(args[1]))
        base = list(ctx.random_shape(min_ndim=max(1, _axes_ndim(axis))))
        if ctx.style == "empty":
            base = [d if d else 1 for d in base]  # the zero goes on the joined axis below
        (ax,) = shape_runtime.normalize_axes(axis, len(base))
        shapes = []
        for i in range(int(ctx.rng.integers(1, 4))):
            dims = list(base)
            dims[ax] = 0 if ctx.style == "empty" and i == 0 else int(ctx.rng.integers(1, 4))
            shapes.append(tuple(dims))
        ctx.shapes[xs] = shapes  # a dynamic input: one shape per tensor

    grad_view = "slices of the output gradient along the joined axis"

    grad_view_kind: GradViewKind | None = "split"

    def grad_view_cpp(self, args: tuple[Node, ...], cpp: Callable[[Node], str]) -> tuple[str, ...]:
        return (f"({cpp(args[1])}).v",)

    def grad_view_py(self, args: tuple[Node, ...], py: Callable[[Node], str]) -> tuple[str, ...]:
        return (py(args[1]),)


class Gather(ShapeFunction):
    """``gather(x, indices, axis=0)``: ``x.shape[:axis] + indices.shape + x.shape[axis + 1:]``."""

    name = "gather"
    params = (Param("x", "tensor"), Param("indices", "tensor"), Param("axis", "int", 0))
    runtime = "gather_shape"
    cpp = "opgen::sym::gather"
    styles = frozenset({"plain", "scalar", "empty"})

    def words(self, args: tuple[Node, ...]) -> str:
        return (f"{_shape_words(args[0])} with the dim on {_axes_words(args[2])} replaced by "
                f"{_shape_words(args[1])} (numpy.take)")

    def sample(self, args: tuple[Node, ...], ctx: SampleContext) -> None:
        x, indices = _tensor_name(args[0]), _tensor_name(args[1])
        if x is not None and x not in ctx.shapes:
            axis = int(ctx.value(args[2]))
            # the gathered axis has at least 2 entries, so the default index domain [0, 1] is valid;
            # an empty case empties another axis of x, or the indices
            dims = list(ctx.random_shape(min_ndim=max(1, _axes_ndim(axis)), low=2)
                        if ctx.style != "scalar" else (int(ctx.rng.integers(2, 4)),))
            (ax,) = shape_runtime.normalize_axes(axis, len(dims))
            if dims[ax] == 0:
                dims[ax] = 2
                if indices is not None and indices not in ctx.shapes:
                    ctx.shapes[indices] = (0,)
            ctx.shapes[x] = tuple(dims)
        if indices is not None and indices not in ctx.shapes:
            ctx.shapes[indices] = () if ctx.style == "scalar" else tuple(
                int(d) for d in ctx.rng.integers(1, 4, int(ctx.rng.integers(0, 3))))
        super().sample(args, ctx)


FUNCTIONS: dict[str, ShapeFunction] = {f.name: f for f in (Broadcast(), Reduce(), Matmul(), Concat(), Gather())}
"""Every shape function by name."""
