"""The Python meaning of the shape language and the shape rules, defined once.

The shape language's Python emission (:func:`opgen.shapes.to_python`) and the generated wrappers
call ``_rt.<name>``: ``broadcast_shape``, ``reduce_shape``, ``ints``, ``at``, ``add``, ``holds``,
``violation``... Each backend's runtime binds these names for the values its shapes hold. Every
rule and every message is written here once, over a :class:`Dims` strategy that says only what
differs:

- :data:`INT_DIMS`: plain ints (MindSpore's shapes, numpy's, ``opgen test``'s sampler); every dim
  becomes an ``int`` and shape arithmetic is checked to fit int64, as ``opgen/sym.h`` does in C++
  (same results, same messages; ``tests/test_shape_lang.py`` compares them).
- a framework's symbolic sizes (:mod:`opgen.backends.torch.runtime`: ``torch.SymInt`` in fake
  kernels under ``torch.compile(dynamic=True)``): a dim is kept as it is, never turned into a
  constant (no ``int()`` of a dim except in an error message), min/max are the framework's
  symbolic ones, and no int64 checks (a comparison on a symbol would become a guard).

:func:`helpers` builds the functions as closures over the strategy's members, so a call costs
what a plain module function costs (no attribute lookups, no extra call for ints). Nothing here
imports a framework or the rest of opgen: this module is a leaf, imported by :mod:`opgen.runtime`
(which re-exports the int helpers for generated packages), by the backends' runtimes and by the
shape language.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Iterable, Sequence, Sized
from dataclasses import dataclass
from typing import Any, NamedTuple

INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)


class ShapeError(ValueError):
    """A shape expression that cannot be evaluated on these shapes and attrs, or a contract that
    does not hold; the message does not name the op (the caller adds ``<op>(): ``)."""


def _fail(op: str, message: str) -> ValueError:
    return ValueError(f"{op}(): {message}" if op else message)


def _shape_text(shape: Sequence[Any]) -> str:
    return "(" + ", ".join(str(int(d)) for d in shape) + ("," if len(shape) == 1 else "") + ")"


def _fact_value(value: Any) -> str:
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, str):
        return f"'{value}'"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_fact_value(v) for v in value) + "]"
    if isinstance(value, float):
        return f"{value:f}"
    return str(int(value))


def fit_int64(v: int) -> int:
    """``v``, an int, checked to fit int64 (what shape arithmetic on ints returns).

    Raises:
        ShapeError: it does not.
    """
    if not INT64_MIN <= v <= INT64_MAX:
        raise ShapeError("shape arithmetic overflows int64")
    return v


def _int_min(*xs: Any) -> int:
    """``min(a, b, ...)`` of ints."""
    return int(min(xs))


def _int_max(*xs: Any) -> int:
    """``max(a, b, ...)`` of ints."""
    return int(max(xs))


def _plain(*values: Any) -> bool:
    """Whether every value is a plain int (no framework's symbol)."""
    return all(type(v) is int for v in values)


@dataclass(frozen=True)
class Dims:
    """What a backend's shapes hold, for :func:`helpers`.

    Attributes:
        keep: a dim or int as the helpers return it (``int``; a framework keeps its symbols).
        scalars: the types of a single int axis (an int, not a list of axes).
        imin, imax: ``min(a, b, ...)`` and ``max(a, b, ...)`` of dims.
        fit: the result of shape arithmetic (``+ - * // neg``): checked to fit int64 for ints
            (:class:`ShapeError` otherwise), returned as it is for symbols.
        int64_checks: whether ``concat`` and ``check_output`` check that a joined axis and an
            output's element count fit int64 always (True: ints), or only where the values are
            plain ints (False: on a symbol the check would become a guard; a framework's
            concrete sizes, a meta or fake tensor's, are still checked).
        concrete: the shapes and attr values a contract's error shows, as ints (None: they are).
    """

    keep: Callable[[Any], Any]
    scalars: tuple[type, ...]
    imin: Callable[..., Any]
    imax: Callable[..., Any]
    fit: Callable[[Any], Any]
    int64_checks: bool
    concrete: Callable[[Any], Any] | None = None


INT_DIMS = Dims(keep=int, scalars=(int,), imin=_int_min, imax=_int_max, fit=fit_int64, int64_checks=True)
"""Plain ints: the strategy of :mod:`opgen.runtime` (MindSpore packages, references, ``opgen test``)."""


class Helpers(NamedTuple):
    """The shape helpers for one :class:`Dims` (the names generated code calls as ``_rt.<name>``)."""

    broadcast_shape: Callable[..., list[Any]]
    normalize_axes: Callable[..., list[int]]
    dim_of: Callable[..., Any]
    reduce_shape: Callable[..., list[Any]]
    matmul_shape: Callable[..., list[Any]]
    concat_shape: Callable[..., list[Any]]
    gather_shape: Callable[..., list[Any]]
    ints: Callable[[Sequence[Any]], list[Any]]
    int_rows: Callable[[Sequence[Sequence[Any]]], list[list[Any]]]
    row: Callable[[Sequence[Sequence[Any]], Any], list[Any]]
    all_of: Callable[[Iterable[Any]], bool]
    any_of: Callable[[Iterable[Any]], bool]
    length: Callable[[Sized], int]
    at: Callable[[Sequence[Any], Any], Any]
    add: Callable[[Any, Any], Any]
    sub: Callable[[Any, Any], Any]
    mul: Callable[[Any, Any], Any]
    floordiv: Callable[[Any, Any], Any]
    mod: Callable[[Any, Any], Any]
    neg: Callable[[Any], Any]
    imin: Callable[..., Any]
    imax: Callable[..., Any]
    repeat: Callable[[Sequence[Any], Any], list[Any]]
    check_output: Callable[[Sequence[Any], str], list[Any]]
    holds: Callable[[Callable[[], Any]], bool]
    violation: Callable[[str, Sequence[tuple[str, Any]], Sequence[tuple[str, Any]]], ShapeError]


def helpers(dims: Dims) -> Helpers:
    """The shape rules and the shape language's Python meaning over ``dims`` (see the module)."""
    keep, scalars, fit, int64_checks, concrete = dims.keep, dims.scalars, dims.fit, dims.int64_checks, dims.concrete

    def broadcast_shape(*shapes: Sequence[Any], op: str = "") -> list[Any]:
        """NumPy broadcast of several shapes (the ``broadcast(...)`` shape rule of op ``op``).

        Raises:
            ValueError: when the shapes cannot be broadcast together (the message names the op).
        """
        nd = max((len(s) for s in shapes), default=0)
        out: list[Any] = [1] * nd
        for s in shapes:
            for i, d in enumerate(s):
                j = nd - len(s) + i
                if d == out[j] or d == 1:
                    continue
                if out[j] == 1:
                    out[j] = keep(d)
                    continue
                prefix = f"{op}(): " if op else ""
                raise ValueError(f"{prefix}shapes cannot be broadcast together: "
                                 f"{' '.join(str(tuple(int(v) for v in x)) for x in shapes)}")
        return out

    def normalize_axes(axis: Any, rank: int, op: str = "") -> list[int]:
        """Axes of a tensor of ``rank`` as sorted non-negative ints; ``[]`` means every axis (axes
        are attrs: made concrete).

        Same rules and messages as ``opgen::normalize_axes`` in C++ (``rules.h``), and numpy's: a
        single int axis of a 0-d tensor may be 0 or -1 (``np.sum(np.float32(2), axis=0)``), an axis
        in a list may not (``np.sum(np.float32(2), axis=(0,))`` raises AxisError).

        Raises:
            ValueError: an axis outside ``[-rank, rank)`` (``[-1, 0]`` for the int axis of rank 0),
                or repeated.
        """
        single = isinstance(axis, scalars)
        axes = [int(axis)] if single else [int(a) for a in axis]
        if not axes:
            return list(range(rank))
        out: list[int] = []
        bound = max(rank, 1) if single else rank
        for a in axes:
            if not -bound <= a < bound:
                raise _fail(op, f"axis {a} is out of range for a tensor of rank {rank}")
            a = a + bound if a < 0 else a  # bound is rank, or 1 for the int axis of a 0-d tensor
            if a in out:
                raise _fail(op, f"axis {a} is repeated")
            out.append(a)
        return sorted(a for a in out if a < rank)

    def dim_of(shape: Sequence[Any], axis: int, name: str, op: str = "") -> Any:
        """Dimension ``axis`` (negative counts from the end) of input ``name``'s shape.

        Raises:
            ValueError: when the input has too few dimensions (same message as ``opgen::dim_of``).
        """
        rank = len(shape)
        if not -rank <= axis < rank:
            raise _fail(op, f"input '{name}' has shape {_shape_text(shape)}, which has no dimension {int(axis)}")
        return keep(shape[axis])

    def reduce_shape(x: Sequence[Any], axis: Any, keep_dims: bool, op: str = "") -> list[Any]:
        """Shape of ``x`` reduced over ``axis`` (the ``reduce(x, axis, keep_dims)`` shape rule).

        Raises:
            ValueError: a bad axis (see ``normalize_axes``).
        """
        axes = normalize_axes(axis, len(x), op)
        if keep_dims:
            return [1 if i in axes else keep(d) for i, d in enumerate(x)]
        return [keep(d) for i, d in enumerate(x) if i not in axes]

    def matmul_shape(a: Sequence[Any], b: Sequence[Any], transpose_a: bool = False, transpose_b: bool = False,
                     op: str = "") -> list[Any]:
        """Shape of ``op(a) @ op(b)`` for 2-D ``a`` and ``b`` (the ``matmul(...)`` shape rule).

        Raises:
            ValueError: an input that is not 2-D, or inner dimensions that differ.
        """
        if len(a) != 2 or len(b) != 2:
            raise _fail(op, f"matmul needs 2-D inputs, got shapes {_shape_text(a)} and {_shape_text(b)}")
        m, k = (a[1], a[0]) if transpose_a else (a[0], a[1])
        k2, n = (b[1], b[0]) if transpose_b else (b[0], b[1])
        if k != k2:
            raise _fail(op, f"matmul inner dimensions differ: {_shape_text(a)}{'^T' if transpose_a else ''} x "
                            f"{_shape_text(b)}{'^T' if transpose_b else ''} ({int(k)} != {int(k2)})")
        return [keep(m), keep(n)]

    def concat_shape(xs: Sequence[Sequence[Any]], axis: Any, op: str = "") -> list[Any]:
        """Shape of the tensors ``xs`` joined along ``axis`` (the ``concat(xs, axis)`` shape rule).

        Raises:
            ValueError: no tensors, 0-d tensors, ranks that differ, a bad axis, other dims that
                differ, or (ints) a joined axis longer than int64 counts.
        """
        if not xs:
            raise _fail(op, "concat needs at least one tensor")
        rank = len(xs[0])
        if rank == 0:
            raise _fail(op, "concat cannot join 0-d tensors")
        (ax,) = normalize_axes(axis, rank, op)
        out = list(map(keep, xs[0]))
        for i, s in enumerate(xs[1:], start=1):
            if len(s) != rank:
                raise _fail(op, f"concat: tensor {i} has rank {len(s)}, tensor 0 has rank {rank}")
            for d in range(rank):
                if d != ax and keep(s[d]) != out[d]:
                    raise _fail(op, f"concat: tensor {i} has shape {_shape_text(s)}, which differs from "
                                    f"{_shape_text(xs[0])} outside axis {ax}")
            if (int64_checks or _plain(s[ax], out[ax])) and keep(s[ax]) > INT64_MAX - out[ax]:
                raise _fail(op, f"concat: the joined axis {ax} would have more than 2**63 - 1 entries")
            out[ax] = out[ax] + keep(s[ax])
        return out

    def gather_shape(x: Sequence[Any], indices: Sequence[Any], axis: Any, op: str = "") -> list[Any]:
        """Shape of ``x`` gathered along ``axis`` at ``indices`` (the ``gather(x, indices, axis)``
        shape rule): ``x.shape[:axis] + indices.shape + x.shape[axis + 1:]``, as ``numpy.take``.

        Same rules and messages as ``opgen::gather_shape`` in C++ (``rules.h``).

        Raises:
            ValueError: a 0-d ``x`` or a bad axis.
        """
        rank = len(x)
        if rank == 0:
            raise _fail(op, "gather cannot index a 0-d tensor")
        (ax,) = normalize_axes(axis, rank, op)
        return [keep(d) for d in x[:ax]] + [keep(d) for d in indices] + [keep(d) for d in x[ax + 1:]]

    def ints(values: Sequence[Any]) -> list[Any]:
        """A shape or list[int] attr as a list of dims."""
        return list(map(keep, values))  # map: no closure per call (a comprehension over keep makes one)

    def int_rows(values: Sequence[Sequence[Any]]) -> list[list[Any]]:
        """A list[list[int]] attr as a list of lists of dims."""
        return [list(map(keep, r)) for r in values]

    def row(rows: Sequence[Sequence[Any]], i: Any) -> list[Any]:
        """``rows[i]`` of a list[list[int]] attr, negative ``i`` counting from the end.

        Raises:
            ShapeError: an index out of range.
        """
        n = len(rows)
        if not -n <= i < n:
            raise ShapeError(f"index {int(i)} is out of range for {_fact_value(rows)}, which has {n} entries")
        return list(map(keep, rows[i]))

    def all_of(conditions: Iterable[Any]) -> bool:
        """``all(cond for v in s)``: every condition true (true for none)."""
        return all(bool(c) for c in conditions)

    def any_of(conditions: Iterable[Any]) -> bool:
        """``any(cond for v in s)``: some condition true (false for none)."""
        return any(bool(c) for c in conditions)

    def length(values: Sized) -> int:
        """``len``: a rank, a list's length, or the number of tensors of a dynamic input."""
        return len(values)

    def at(values: Sequence[Any], i: Any) -> Any:
        """``values[i]``, negative ``i`` counting from the end.

        Raises:
            ShapeError: an index out of range.
        """
        n = len(values)
        if not -n <= i < n:
            raise ShapeError(f"index {int(i)} is out of range for {_shape_text(values)}, which has {n} entries")
        return keep(values[i])

    def add(a: Any, b: Any) -> Any:
        """``a + b`` (int64, checked for ints)."""
        return fit(keep(a) + keep(b))

    def sub(a: Any, b: Any) -> Any:
        """``a - b`` (int64, checked for ints)."""
        return fit(keep(a) - keep(b))

    def mul(a: Any, b: Any) -> Any:
        """``a * b`` (int64, checked for ints)."""
        return fit(keep(a) * keep(b))

    def floordiv(a: Any, b: Any) -> Any:
        """``a // b``, rounding toward -infinity.

        Raises:
            ShapeError: ``b == 0``, or an int64 overflow (ints).
        """
        if b == 0:
            raise ShapeError("division by zero in a shape expression")
        return fit(keep(a) // keep(b))

    def mod(a: Any, b: Any) -> Any:
        """``a % b`` with the sign of ``b``.

        Raises:
            ShapeError: ``b == 0``.
        """
        if b == 0:
            raise ShapeError("division by zero in a shape expression")
        return keep(a) % keep(b)

    def neg(a: Any) -> Any:
        """``-a`` (int64, checked for ints)."""
        return fit(-keep(a))

    def repeat(values: Sequence[Any], n: Any) -> list[Any]:
        """``values * n`` (a repeat count is made concrete).

        Raises:
            ShapeError: a result longer than any shape.
        """
        if n > 0 and values and n > 1 << 20:
            raise ShapeError(f"a list repeated {int(n)} times is longer than any shape")
        return list(values) * max(int(n), 0)

    def check_output(shape: Sequence[Any], output: str) -> list[Any]:
        """An output shape as a list of dims, checked: every dim >= 0, and (ints) the element count
        within int64.

        Raises:
            ShapeError: a negative dim, or too many elements.
        """
        dims = list(map(keep, shape))
        for d in dims:
            if d < 0:
                raise ShapeError(f"output '{output}' would have shape {_shape_text(dims)}, with a negative dim")
        if int64_checks or _plain(*dims):
            numel = 1
            for d in dims:
                numel *= d
                if numel > INT64_MAX:
                    raise ShapeError(f"output '{output}' would have shape {_shape_text(dims)}, more elements "
                                     "than int64 can count")
        return dims

    def holds(condition: Callable[[], Any]) -> bool:
        """Whether a contract holds: ``condition()`` is true; an error while evaluating it (a
        shape function's rule, an index out of range) means it does not (as ``opgen::sym::require``)."""
        try:
            return bool(condition())
        except ValueError:
            return False

    def violation(text: str, inputs: Sequence[tuple[str, Any]], attrs: Sequence[tuple[str, Any]]) -> ShapeError:
        """The error of contract ``text`` not holding, showing the shapes and attr values it reads
        (the same message as ``opgen::sym::require``)."""
        if concrete is not None:
            inputs = [(n, concrete(s)) for n, s in inputs]
            attrs = [(n, concrete(v)) for n, v in attrs]
        facts = []
        for name, shape in inputs:
            if shape and not isinstance(shape[0], numbers.Integral):  # a dynamic input: a list of shapes
                facts.append(f"{name} has shapes [" + ", ".join(_shape_text(s) for s in shape) + "]")
            else:
                facts.append(f"{name} has shape {_shape_text(shape)}")
        facts += [f"{name} = {_fact_value(value)}" for name, value in attrs]
        return ShapeError(f"contract '{text}' does not hold: " + ", ".join(facts))

    return Helpers(
        broadcast_shape=broadcast_shape, normalize_axes=normalize_axes, dim_of=dim_of, reduce_shape=reduce_shape,
        matmul_shape=matmul_shape, concat_shape=concat_shape, gather_shape=gather_shape, ints=ints,
        int_rows=int_rows, row=row, all_of=all_of, any_of=any_of, length=length, at=at, add=add, sub=sub, mul=mul,
        floordiv=floordiv, mod=mod, neg=neg, imin=dims.imin, imax=dims.imax, repeat=repeat,
        check_output=check_output, holds=holds, violation=violation,
    )


__all__ = [
    "INT64_MAX", "INT64_MIN", "ShapeError", "add", "all_of", "any_of", "at", "broadcast_shape", "check_output",
    "concat_shape", "dim_of", "floordiv", "gather_shape", "holds", "imax", "imin", "int_rows", "ints", "length",
    "matmul_shape", "mod", "mul", "neg", "normalize_axes", "reduce_shape", "repeat", "row", "sub", "violation",
]
"""The names :mod:`opgen.runtime` re-exports: the helpers over plain ints, and their error."""

_INT = helpers(INT_DIMS)
broadcast_shape = _INT.broadcast_shape
normalize_axes = _INT.normalize_axes
dim_of = _INT.dim_of
reduce_shape = _INT.reduce_shape
matmul_shape = _INT.matmul_shape
concat_shape = _INT.concat_shape
gather_shape = _INT.gather_shape
ints = _INT.ints
int_rows = _INT.int_rows
row = _INT.row
all_of = _INT.all_of
any_of = _INT.any_of
length = _INT.length
at = _INT.at
add = _INT.add
sub = _INT.sub
mul = _INT.mul
floordiv = _INT.floordiv
mod = _INT.mod
neg = _INT.neg
imin = _INT.imin
imax = _INT.imax
repeat = _INT.repeat
check_output = _INT.check_output
holds = _INT.holds
violation = _INT.violation
