"""``opgen test``: check every op of a generated package against its numpy reference, by
central finite differences and by its dtype claims, on every path it is generated for.

Checks, per op and per attr set (the spec's optional ``test.attrs``; default: the defaults):

- ``reference``: the package has a numpy reference for the op, giving the output shapes the
  shape rules say; where it also has reference gradients (elementwise ops), they match central
  differences of the reference forward.
- ``forward/<path>``: every dtype_format row of the backend's target, on random shapes of every *style* the
  op's shape rules allow (plain, broadcasting, 0-d, empty): output count, dtype, shape, and
  values against the numpy reference (computed in float64 from the same values).
- ``grad/<path>``: for ``loss = sum_k sum(out_k * w_k)`` (random ``w``, every differentiable
  output), the gradient of every differentiable input against central differences of the
  same path's forward (float64 row, step 1e-6; the widest float row when there is no
  float64 one), then every other float row against those float64 gradients.
- ``dtypes/<path>``: inputs of a dtype combination outside the rows (one dtype for all
  inputs; for ops with several inputs also a mix of two declared rows) raise ``TypeError``
  naming the op.
- ``contracts/<path>``: for each contract (``requires``) that reads a shape, a call with
  shapes that break it raises ``ValueError`` naming the op and the contract.

Paths are the backend's (:attr:`opgen.backends.Backend.test_paths`; its
:meth:`~opgen.backends.Backend.test_package` runs them through an :class:`OpRunner`). MindSpore's
(:data:`PATHS`, :mod:`opgen.backends.mindspore.testing`): ``custom-graph`` (the ``ops.Custom``
aot path in GRAPH_MODE, through ``<op>_primitive``), ``custom-pynative`` (the same in PyNative,
through ``<op>(...)``) and ``function`` (the ``Function<T>`` path, PyNative only; importing it
builds the extension). This module imports no framework.

Errors are measured as ``max |got - want| / max(1, |want|)`` over the elements (absolute for
small values, relative for large ones; NaN where both are NaN and equal infinities count as
equal); :data:`TOLERANCES` gives the bound per dtype. Everything random comes from
``numpy.random.default_rng`` seeded from ``seed``, the op name, the check and the attr set,
so a run is reproducible and one check's cases do not depend on which others ran.

Shapes are drawn from the op's shape expressions and contracts (:func:`shape_cases`): each
shape function of :mod:`opgen.shapes.functions` knows how to draw its own inputs.
"""

from __future__ import annotations

import abc
import fnmatch
import functools
import hashlib
import importlib
import importlib.util
import math
import re
import shlex
import sys
import time
import traceback
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, ClassVar

import numpy as np

from . import backends, runtime
from . import shapes as lang
from .diagnostics import Diagnostic, SpecError
from .literals import number_text
from .model import DEFAULT_DOMAIN, Op, TestSettings

Array = Any
"""A numpy array (``numpy.ndarray``); kept loose for the type checker."""

KINDS: tuple[str, ...] = ("forward", "grad", "dtypes", "contracts")
"""The checks that run on each path of a backend (``reference`` runs once)."""


def checks_for(paths: Sequence[str]) -> tuple[str, ...]:
    """Every check over ``paths``, in table order: ``reference``, then ``<kind>/<path>``."""
    return ("reference",) + tuple(f"{kind}/{path}" for kind in KINDS for path in paths)


PATHS: tuple[str, ...] = tuple(backends.get(backends.DEFAULT).test_paths)
"""The default backend's paths (MindSpore: ``custom-graph``, ``custom-pynative``, ``function``)."""

CHECKS: tuple[str, ...] = checks_for(PATHS)
"""The default backend's checks, in table order: ``reference``, then ``<kind>/<path>``."""

_SHORT = {
    "reference": "ref",
    "forward": "fwd",
    "grad": "grad",
    "dtypes": "dtype",
    "contracts": "req",
}


# ----------------------------------------------------------------------------- tolerances


@dataclass(frozen=True)
class Tolerance:
    """Error bounds for one dtype (errors as in the module docstring).

    Attributes:
        forward: output against the float64 numpy reference.
        grad: gradient in this dtype against the float64 gradient of the same path.
        fd_step: central-difference step when this is the widest float row of an op.
        fd: gradient against central differences taken in this dtype.
    """

    forward: float
    grad: float = 0.0
    fd_step: float = 0.0
    fd: float = 0.0


TOLERANCES: dict[str, Tolerance] = {
    "float64": Tolerance(forward=1e-10, grad=1e-10, fd_step=1e-6, fd=1e-6),
    "float32": Tolerance(forward=1e-5, grad=1e-4, fd_step=1e-3, fd=1e-2),
    "float16": Tolerance(forward=2e-3, grad=1e-2, fd_step=1e-2, fd=1e-1),
    # bfloat16's eps is 2^-8 = 3.9e-3, four times float16's (2^-10): the same multiples of it
    "bfloat16": Tolerance(forward=8e-3, grad=4e-2, fd_step=4e-2, fd=4e-1),
}
"""Per float dtype; integer and bool outputs must match exactly."""

_EXACT = Tolerance(forward=0.0)


def tolerance(dtype: str) -> Tolerance:
    """The :class:`Tolerance` of a dtype name (exact for integer and bool dtypes)."""
    return TOLERANCES.get(dtype, _EXACT)


def _loosest(row: Sequence[str], columns: Sequence[int]) -> Tolerance:
    """The :class:`Tolerance` of the least precise float dtype among ``row``'s ``columns`` (inputs
    then outputs): a gradient through f32 inputs and an f16 output is as exact as f16."""
    floats = [row[c] for c in columns if row[c] in TOLERANCES]
    if not floats:
        return _EXACT
    return tolerance(min(floats, key=precision))


# ----------------------------------------------------------------------------- dtypes
#
# numpy has no bfloat16. A bfloat16 array of the checks is a float32 array whose values are all
# bfloat16 values (float32 rounded to nearest even at bit 16) and whose dtype carries the tag
# BFLOAT16 (numpy dtype metadata): a runner hands it to its framework as a bfloat16 tensor, which
# holds exactly those values, and reads a bfloat16 output back as such an array (a bfloat16 value
# is exact in float32). Nothing here needs a bfloat16 type from numpy or any other package.

BFLOAT16: np.dtype[Any] = np.dtype(np.float32, metadata={"opgen_dtype": "bfloat16"})
"""How the checks' numpy arrays hold bfloat16: float32 storage, tagged (see :func:`dtype_name`)."""

_SIGNIFICAND_BITS = {"bfloat16": 8, "float16": 11, "float32": 24, "float64": 53}


def precision(dtype: str) -> int:
    """Significand bits of a float dtype name (0 for any other): orders dtypes by precision,
    which their item sizes do not (float16 and bfloat16 are both 2 bytes)."""
    return _SIGNIFICAND_BITS.get(dtype, 0)


def is_float(dtype: str) -> bool:
    """Whether a dtype name is a float one (float16, bfloat16, float32, float64)."""
    return dtype in _SIGNIFICAND_BITS


def dtype_name(a: Array) -> str:
    """The dtype name of an array of the checks: ``bfloat16`` for a :data:`BFLOAT16` array."""
    meta = a.dtype.metadata
    return str(meta["opgen_dtype"]) if meta and "opgen_dtype" in meta else str(a.dtype.name)


def round_bfloat16(a: Array) -> Array:
    """Float values rounded to bfloat16 (to nearest, ties to even; NaN and infinities kept), as a
    :data:`BFLOAT16` array. float64 values are rounded once (not through float32 first)."""
    shape = np.shape(a)
    x = np.asarray(a, dtype=np.float64).reshape(-1)  # 1-d: numpy scalars would not shift or view
    f = x.astype(np.float32)
    top = f.view(np.uint32) >> np.uint32(16)
    lower = (top << np.uint32(16)).view(np.float32)  # truncated towards zero
    upper = ((top + np.uint32(1)) << np.uint32(16)).view(np.float32)  # the next one away from zero
    with np.errstate(all="ignore"):
        dl, du = np.abs(x - lower), np.abs(upper - x)
        even = (top & np.uint32(1)) == 0
        out = np.where((dl < du) | ((dl == du) & even), lower, upper)
    out = np.where(np.isfinite(f), out, f)  # inf stays inf, NaN stays NaN
    return out.astype(BFLOAT16).reshape(shape)


def as_dtype(a: Array, dtype: str) -> Array:
    """``a`` cast to the dtype name ``dtype`` (``bfloat16``: rounded, see :func:`round_bfloat16`)."""
    if dtype == "bfloat16":
        return round_bfloat16(a) if dtype_name(np.asarray(a)) != "bfloat16" else np.array(a, copy=True)
    return np.asarray(a).astype(dtype)


# ----------------------------------------------------------------------------- test settings

OpTestSettings = TestSettings
"""The spec's ``test`` section, parsed and checked with the rest of the spec (:class:`opgen.model.TestSettings`)."""


def read_settings(op: Op) -> OpTestSettings:
    """The ``test`` section of ``op``'s spec, as the model holds it (``opgen validate`` checked it).

    Raises:
        SpecError: an attr without a default and no ``test.attrs`` to give its value.
    """
    missing = [a.name for a in op.attrs if any(a.name not in s for s in op.test.attr_sets)]
    if missing:
        raise SpecError([Diagnostic(op.location, f"attr(s) {', '.join(repr(n) for n in missing)} have no default; "
                                    "give their values in every entry of test.attrs", op.name)])
    return op.test


# ----------------------------------------------------------------------------- shapes

STYLES: tuple[str, ...] = ("plain", "broadcast", "scalar", "scalar-broadcast", "empty")
"""Shape styles: ``plain`` (1-3 dims of size 1-3), ``broadcast`` (inputs of different ranks
and size-1 dims), ``scalar`` (every input 0-d), ``scalar-broadcast`` (one input 0-d, the
others not), ``empty`` (a dimension of size 0)."""

REPEATS: dict[str, int] = {"plain": 2, "broadcast": 2, "scalar": 1, "scalar-broadcast": 1, "empty": 1}
"""Cases drawn per style (each with fresh random shapes)."""

ATTEMPTS = 40
"""Draws per case before a style is given up as one the op's contracts cannot meet."""

NotApplicable = lang.NotApplicable
"""A shape style that an op cannot realise (e.g. 0-d inputs for matmul), or a check that does not
apply to an op."""


@dataclass
class ShapeContext:
    """What a shape function's sampler sees: the style, attr values, the random generator and
    the input shapes fixed so far, which it extends (:meth:`opgen.shapes.ShapeFunction.sample`)."""

    rng: np.random.Generator
    style: str
    attrs: Mapping[str, Any]
    shapes: dict[str, Any] = field(default_factory=dict)

    def random_shape(self, min_ndim: int = 0, low: int = 1) -> tuple[int, ...]:
        """A random shape for this style: ``()`` for ``scalar`` (:class:`NotApplicable` if
        ``min_ndim > 0``), one zero dimension for ``empty``, else 1-3 dims (at least
        ``min_ndim``) of sizes ``low``..3."""
        if self.style == "scalar":
            if min_ndim > 0:
                raise NotApplicable(f"needs at least {min_ndim} dimension(s)")
            return ()
        ndim = int(self.rng.integers(max(1, min_ndim), max(3, min_ndim) + 1))
        dims = [int(d) for d in self.rng.integers(low, 4, ndim)]
        if self.style == "empty":
            dims[int(self.rng.integers(ndim))] = 0
        return tuple(dims)

    def value(self, node: lang.Node) -> Any:
        """The value of a shape-language expression for these attrs and the shapes drawn so far.

        Raises:
            NotApplicable: it reads an input that has no shape yet.
        """
        missing = [n for n in lang.tensors_used(node) if n not in self.shapes]
        if missing:
            raise NotApplicable(f"'{lang.to_source(node)}' needs the shape of {missing[0]}")
        return lang.evaluate(node, {**self.attrs, **self.shapes})


def _styles(node: lang.Node) -> frozenset[str]:
    """The styles an output shape expression makes meaningful."""
    if isinstance(node, lang.ShapeOf):
        return frozenset({"plain", "scalar", "empty"})
    if isinstance(node, lang.Call):
        return node.fn.styles
    return frozenset({"plain", "empty"})


def _min_rank(node: lang.Node, name: str) -> int:
    """The fewest dims input ``name`` needs for the literal indices ``name.shape[i]`` in ``node``."""
    need = 0
    for sub in lang.walk(node):
        if (isinstance(sub, lang.Index) and isinstance(sub.base, lang.ShapeOf) and sub.base.tensor.name == name
                and isinstance(sub.index, lang.Const)):
            i = int(sub.index.value)
            need = max(need, i + 1 if i >= 0 else -i)
    return need


def _sample(node: lang.Node, ctx: ShapeContext, min_rank: Callable[[str], int]) -> None:
    """Give shapes to the free inputs an output shape expression reads."""
    if isinstance(node, lang.Call):
        node.fn.sample(node.args, ctx)
    for name in lang.tensors_used(node):
        if name not in ctx.shapes:
            ctx.shapes[name] = ctx.random_shape(min_ndim=min_rank(name))


def _conjuncts(node: lang.Node) -> list[lang.Node]:
    if isinstance(node, lang.Logic) and node.op == "and":
        return [c for a in node.args for c in _conjuncts(a)]
    return [node]


_FLIP = {"==": "==", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}


@dataclass(frozen=True)
class _Fix:
    """What one conjunct of a contract says about one input's shape, applied whenever the input is
    given a shape while a case is drawn (so that shape functions' samplers, ties and random draws
    all produce shapes that meet it): ``kind`` ``rank`` (``x.rank >= E``), ``shape``
    (``x.shape == E``), ``slice`` (``x.shape[lo:hi] == E``: ``index`` lo, ``hi``), ``dim``
    (``x.shape[i] >= E``, ``k <= x.shape[-1]``, an item of ``[x.shape[-1]] == w.shape``) or
    ``mod`` (``x.shape[i] % M == R``); ``op`` is the comparison with the input's side on the
    left; ``value`` E (M for ``mod``), ``rest`` R."""

    kind: str
    op: str
    value: lang.Node
    index: lang.Node | None = None
    rest: lang.Node | None = None
    hi: lang.Node | None = None


def _dim_of(node: lang.Node) -> tuple[str, lang.Node] | None:
    """``(x, i)`` for ``x.shape[i]`` with an index that reads no input, else None."""
    if (isinstance(node, lang.Index) and isinstance(node.base, lang.ShapeOf)
            and not lang.tensors_used(node.index)):
        return node.base.tensor.name, node.index
    return None


def _rank_of(node: lang.Node) -> str | None:
    """``x`` for ``x.rank`` or ``len(x.shape)``, else None."""
    if isinstance(node, lang.RankOf):
        return node.tensor.name
    if isinstance(node, lang.Len) and isinstance(node.arg, lang.ShapeOf):
        return node.arg.tensor.name
    return None


def _fixes(op: Op) -> dict[str, list[_Fix]]:
    """Per input, the :class:`_Fix` es its contracts' conjuncts give (ranks first, then dims)."""
    out: dict[str, list[_Fix]] = {}
    for c in op.requires:
        for part in _conjuncts(c.node):
            if not isinstance(part, lang.Compare):
                continue
            for left, right, cmp in ((part.left, part.right, part.op), (part.right, part.left, _FLIP[part.op])):
                rank = _rank_of(left)
                dim = _dim_of(left)
                if rank is not None and rank not in lang.tensors_used(right):
                    out.setdefault(rank, []).append(_Fix("rank", cmp, right))
                elif (cmp == "==" and isinstance(left, lang.ShapeOf)
                      and left.tensor.name not in lang.tensors_used(right)):
                    out.setdefault(left.tensor.name, []).append(_Fix("shape", cmp, right))
                elif (cmp == "==" and isinstance(left, lang.Slice) and isinstance(left.base, lang.ShapeOf)
                      and left.base.tensor.name not in lang.tensors_used(right)
                      and not any(lang.tensors_used(b) for b in (left.lo, left.hi) if b is not None)):
                    out.setdefault(left.base.tensor.name, []).append(_Fix("slice", cmp, right, left.lo, hi=left.hi))
                elif cmp == "==" and isinstance(left, lang.ListOf) and right.type is lang.Type.LIST:
                    for j, item in enumerate(left.items):
                        d = _dim_of(item)
                        if d is not None and d[0] not in lang.tensors_used(right):
                            jth = lang.Index(right, lang.Const(j, lang.Type.INT, item.col), item.col)
                            out.setdefault(d[0], []).append(_Fix("dim", cmp, jth, d[1]))
                elif dim is not None and dim[0] not in lang.tensors_used(right):
                    out.setdefault(dim[0], []).append(_Fix("dim", cmp, right, dim[1]))
                elif (cmp == "==" and isinstance(left, lang.Arith) and left.op == "%"
                      and (mod := _dim_of(left.left)) is not None
                      and mod[0] not in lang.tensors_used(left.right) + lang.tensors_used(right)):
                    out.setdefault(mod[0], []).append(_Fix("mod", cmp, left.right, mod[1], right))
    order = {"rank": 0, "shape": 1, "slice": 1, "dim": 2, "mod": 3}
    return {n: sorted(fs, key=lambda f: order[f.kind]) for n, fs in out.items()}


def _tie_rank(op: Op) -> dict[str, int]:
    """How much each input's shape follows from others through an equality of a contract: 2 for
    ``a.shape == E`` / ``a.rank == E`` (E reads other inputs), 1 for an input inside an
    expression equal to another (``[x.shape[-1]] == w.shape``), 0 otherwise. A draw gives random
    shapes to the lower ones first, so that the ties can give the others theirs."""
    out: dict[str, int] = {}
    for c in op.requires:
        for part in _conjuncts(c.node):
            if isinstance(part, lang.Quant) and part.fn == "all" and isinstance(part.iterable, lang.TensorRef):
                out[part.iterable.name] = 2  # all(z.shape == E for z in zs): zs follows E (_tie_each)
                continue
            if not isinstance(part, lang.Compare) or part.op != "==":
                continue
            for left, right in ((part.left, part.right), (part.right, part.left)):
                others = lang.tensors_used(right)
                if isinstance(left, (lang.ShapeOf, lang.RankOf)):
                    if others and left.tensor.name not in others:
                        out[left.tensor.name] = 2
                    continue
                used = lang.tensors_used(left)
                if len(used) == 1 and used[0] not in others:
                    out[used[0]] = max(out.get(used[0], 0), 1)
    return out


class _Shapes(dict):  # type: ignore[type-arg]
    """The shapes of a case being drawn: a shape given to an input goes through the input's
    :class:`_Fix` es first (except with :meth:`exact`, for ``test.shapes``)."""

    def __init__(self, fixes: Mapping[str, Sequence[_Fix]], min_rank: Callable[[str], int]):
        super().__init__()
        self.fixes = fixes
        self.min_rank = min_rank
        self.ctx: ShapeContext | None = None

    def exact(self, name: str, shape: Any) -> None:
        """Give ``name`` this shape as it is (``test.shapes``)."""
        super().__setitem__(name, shape)

    def __setitem__(self, name: str, shape: Any) -> None:
        if self.ctx is not None and isinstance(shape, tuple):
            shape = _fix_shape(name, shape, self.fixes.get(name, ()), self.min_rank(name), self.ctx)
        super().__setitem__(name, shape)


def _fix_shape(name: str, shape: tuple[int, ...], fixes: Sequence[_Fix], min_rank: int,
               ctx: ShapeContext) -> tuple[int, ...]:
    """``shape`` changed as little as the fixes need: leading dims added or dropped for a rank,
    dims raised, lowered or set for a dim, raised to the next value with the remainder for a
    ``mod``. A fix whose other side cannot be evaluated yet (an input without a shape) is left to
    the contract check."""
    dims = list(shape)
    fixed: set[int] = set()  # dims a dim or mod fix reads

    def val(node: lang.Node | None) -> int | None:
        if node is None:
            return None
        try:
            v = ctx.value(node)
        except (NotApplicable, ValueError, TypeError, KeyError):
            return None
        return int(v) if isinstance(v, (int, np.integer)) and not isinstance(v, bool) else None

    lo, hi = min_rank, 64
    for f in fixes:
        if f.kind != "rank" or (v := val(f.value)) is None:
            continue
        if f.op == "==":
            lo, hi = max(lo, v), min(hi, v)
        elif f.op in (">=", ">"):
            lo = max(lo, v + (f.op == ">"))
        elif f.op in ("<=", "<"):
            hi = min(hi, v - (f.op == "<"))
    if len(dims) < lo <= hi:
        dims = [int(d) for d in ctx.rng.integers(1, 4, lo - len(dims))] + dims
    elif len(dims) > hi >= max(lo, 0):
        dims = dims[len(dims) - hi:]
    for f in fixes:
        if f.kind in ("shape", "slice"):
            dims = _fix_slice(dims, f, ctx)
    for f in fixes:
        if f.kind in ("rank", "shape", "slice"):
            continue
        i = val(f.index)
        v = val(f.value)
        if i is None or v is None or not -len(dims) <= i < len(dims):
            continue
        fixed.add(i % len(dims))
        d = dims[i]
        if f.kind == "mod":
            r = val(f.rest)
            if r is None or v <= 0:
                continue
            if d % v != r % v:
                d += (r - d) % v
        elif f.op == "==":
            d = v
        elif f.op in (">=", ">"):
            d = max(d, v + (f.op == ">"))
        elif f.op in ("<=", "<"):
            d = min(d, v - (f.op == "<"))
        elif f.op == "!=" and d == v:
            d = v + 1
        if d >= 0:
            dims[i] = d
    free = [i for i in range(len(dims)) if i not in fixed]
    if ctx.style == "empty" and 0 in shape and 0 not in dims and free:  # a fix filled the empty dim: empty another
        dims[free[int(ctx.rng.integers(len(free)))]] = 0
    return tuple(dims)


def _fix_slice(dims: list[int], f: _Fix, ctx: ShapeContext) -> list[int]:
    """``dims`` whose slice ``[f.index:f.hi]`` (all of it for a ``shape`` fix) is the value of
    ``f.value``: the rank nearest the current one for which the slice has that length (leading
    dims added or dropped), then those dims set. Unchanged when the value is not known yet."""
    try:
        want = [int(d) for d in ctx.value(f.value)]
        lo = None if f.index is None else int(ctx.value(f.index))
        hi = None if f.hi is None else int(ctx.value(f.hi))
    except (NotApplicable, ValueError, TypeError, KeyError):
        return dims
    if f.kind == "shape":
        return want
    ranks = [r for r in range(0, 7) if len(range(r)[lo:hi]) == len(want)]
    if not ranks:
        return dims
    rank = min(ranks, key=lambda r: (abs(r - len(dims)), r))
    if rank > len(dims):
        dims = [int(d) for d in ctx.rng.integers(1, 4, rank - len(dims))] + dims
    else:
        dims = dims[len(dims) - rank:]
    for i, d in zip(range(rank)[lo:hi], want):
        dims[i] = d
    return dims


def _apply_ties(op: Op, ctx: ShapeContext, exact: Mapping[str, Any] = {}) -> bool:  # noqa: B006 - read only
    """Shapes that contracts determine: ``a.shape == E`` (or ``E == a.shape``) gives a free ``a``
    the value of ``E``; ``a.shape[i] == E`` sets a dim of ``a``; ``a.rank == E`` a free ``a``'s
    rank; an expression with one free input equal to a known list is solved for it;
    ``all(z.shape == E for z in zs)`` gives a free dynamic ``zs`` 1 to 3 tensors of shape ``E``.
    Inputs in ``exact`` (``test.shapes``) are never changed. Whether any shape was given or changed."""
    changed = False
    for c in op.requires:
        for part in _conjuncts(c.node):
            if isinstance(part, lang.Quant):
                if not isinstance(part.iterable, lang.TensorRef) or part.iterable.name not in exact:
                    changed |= _tie_each(part, ctx)
                continue
            if not isinstance(part, lang.Compare) or part.op != "==":
                continue
            for left, right in ((part.left, part.right), (part.right, part.left)):
                try:
                    dim = _dim_of(left) if not isinstance(left, lang.ShapeOf) else None
                    if isinstance(left, lang.ShapeOf):
                        name = left.tensor.name
                        if name not in ctx.shapes and name not in exact:
                            ctx.shapes[name] = tuple(int(d) for d in ctx.value(right))
                            changed = True
                    elif dim is not None and dim[0] in ctx.shapes and dim[0] not in exact:
                        name = dim[0]
                        dims = list(ctx.shapes[name])
                        i = int(ctx.value(dim[1]))
                        want = int(ctx.value(right))
                        if -len(dims) <= i < len(dims) and dims[i] != want and want >= 0:
                            dims[i] = want
                            ctx.shapes[name] = tuple(dims)
                            changed = True
                    elif isinstance(left, lang.RankOf) and left.tensor.name not in ctx.shapes:
                        name = left.tensor.name
                        rank = int(ctx.value(right))
                        if 0 <= rank <= 6 and name not in exact:
                            ctx.shapes[name] = tuple(int(d) for d in ctx.rng.integers(1, 4, rank))
                            changed = True
                    else:
                        free = [n for n in lang.tensors_used(left) if n not in ctx.shapes]
                        if len(free) == 1 and free[0] not in exact and right.type is lang.Type.LIST:
                            changed |= _solve(part, free[0], [int(d) for d in ctx.value(right)], ctx)
                except (NotApplicable, ValueError, TypeError):
                    continue
    return changed


def _tie_each(part: lang.Quant, ctx: ShapeContext) -> bool:
    """``all(z.shape == E for z in zs)`` (``E`` not reading ``z``): a free ``zs`` gets 1 to 3
    tensors of shape ``E``; whether it did."""
    it, var = part.iterable, part.var
    if part.fn != "all" or not isinstance(it, lang.TensorRef) or it.name in ctx.shapes:
        return False
    for body in _conjuncts(part.body):
        if not isinstance(body, lang.Compare) or body.op != "==":
            continue
        for left, right in ((body.left, body.right), (body.right, body.left)):
            if (isinstance(left, lang.ShapeOf) and left.tensor.name == var.name
                    and not any(isinstance(n, lang.TensorRef) and n.loop for n in lang.walk(right))):
                try:
                    shape = tuple(int(d) for d in ctx.value(right))
                except (NotApplicable, ValueError, TypeError):
                    return False
                ctx.shapes[it.name] = [shape] * int(ctx.rng.integers(1, 4))
                return True
    return False


def _solve(part: lang.Node, name: str, target: list[int], ctx: ShapeContext) -> bool:
    """Give input ``name`` a shape for which ``part`` holds, trying shapes like ``target`` (the
    value the other side of ``part`` has): with leading dims dropped and dims set to 1, then
    ``target`` itself (e.g. for ``broadcast(x, shape) == shape``); whether one was found."""
    rng = ctx.rng
    candidates = []
    for _ in range(4):
        drop = int(rng.integers(0, len(target) + 1)) if target else 0
        candidates.append(tuple(1 if rng.random() < 0.4 else d for d in target[drop:]))
    candidates.append(tuple(target))
    for cand in candidates:
        ctx.shapes[name] = cand
        try:
            if ctx.value(part):
                return True
        except (ValueError, NotApplicable):
            pass
    del ctx.shapes[name]
    return False


def _holds(c: Any, ctx: ShapeContext) -> bool:
    if any(ctx.shapes.get(n, 0) is None for n in lang.optional_inputs(c.node)):
        return True
    try:
        return bool(ctx.value(c.node))
    except (ValueError, NotApplicable):
        return False


def _shapes_text(shapes: Mapping[str, Any]) -> str:
    """``x=(2, 3), y=(3,)`` for messages (a dynamic input: its list of shapes)."""
    return ", ".join(f"{n}={s}" for n, s in shapes.items())


def _settle(ctx: ShapeContext, pending: dict[str, lang.Node]) -> None:
    """Give the ``test.shapes`` entries whose inputs have shapes their value (exactly), in turn."""
    progress = True
    while progress:
        progress = False
        for name, node in list(pending.items()):
            if all(n in ctx.shapes for n in lang.tensors_used(node)):
                try:
                    value = ctx.value(node)
                    if any(int(d) < 0 for d in value):
                        raise ValueError(f"it gives {tuple(int(d) for d in value)}, with a negative dim")
                except ValueError as exc:
                    failure = NotApplicable(f"test.shapes.{name} = '{lang.to_source(node)}' cannot be evaluated for "
                                            f"{_shapes_text(ctx.shapes)}: {exc}")
                    failure.inputs = (name,)  # type: ignore[attr-defined]
                    raise failure from None
                assert isinstance(ctx.shapes, _Shapes)
                ctx.shapes.exact(name, tuple(int(d) for d in value))
                del pending[name]
                progress = True


def _draw_case(op: Op, style: str, attrs: Mapping[str, Any], rng: np.random.Generator,
               explicit: Mapping[str, lang.Node], settings: OpTestSettings | None = None) -> Case:
    """One case of ``style`` meeting every contract, or :class:`NotApplicable` saying why not.

    The case is built, not searched for: ``test.shapes`` entries are given exactly as soon as
    the inputs they read have shapes; the output shape rules draw the inputs they read (each shape
    function its own way); the contracts' equalities give tied inputs their shapes; the inputs
    still free get random shapes, those that ties determine last. Every shape given goes through
    the contracts' rank and dim conditions (:class:`_Fix`). Only a contract of a form none of this
    knows can fail, and then the case is drawn again (up to :data:`ATTEMPTS` times)."""
    exprs = [o.shape.node for o in op.outputs] + [c.node for c in op.requires] + list(explicit.values())
    styles = [_styles(o.shape.node) for o in op.outputs]
    fixes = _fixes(op)
    tie_rank = _tie_rank(op)

    def min_rank(name: str) -> int:
        return max((_min_rank(e, name) for e in exprs), default=0)

    reason = ""
    involved: tuple[str, ...] = ()
    for _ in range(ATTEMPTS):
        ctx = ShapeContext(rng, style, attrs)
        shapes = _Shapes(fixes, min_rank)
        ctx.shapes = shapes
        shapes.ctx = ctx
        pending = dict(explicit)
        try:
            _settle(ctx, pending)
            for o, st in zip(op.outputs, styles):
                _sample(o.shape.node, ctx if style in st else ShapeContext(rng, "plain", attrs, ctx.shapes),
                        min_rank)
                for name in pending:  # test.shapes wins over what a shape function drew
                    shapes.pop(name, None)
                _settle(ctx, pending)
            while True:
                while _apply_ties(op, ctx, explicit):
                    _settle(ctx, pending)
                _settle(ctx, pending)
                free = [x for x in op.inputs if x.name not in ctx.shapes and x.name not in pending]
                if not free:
                    break
                x = min(free, key=lambda i: tie_rank.get(i.name, 0))
                sub = ctx if style in ("scalar", "empty") else ShapeContext(rng, "plain", attrs, ctx.shapes)
                shape = sub.random_shape(min_ndim=min_rank(x.name))
                if x.kind == "dynamic":
                    shapes.exact(x.name, [shape])
                else:
                    ctx.shapes[x.name] = shape
            if pending:  # pragma: no cover - the model rejects cycles among test.shapes
                raise NotApplicable(f"test.shapes of {', '.join(pending)} read inputs without a shape")
            broken = [c for c in op.requires if not _holds(c, ctx)]
            if broken:
                reason = f"contract '{broken[0].text}' does not hold for {_shapes_text(ctx.shapes)}"
                involved = lang.tensors_used(broken[0].node)
                continue
            out_shapes = []
            for o in op.outputs:
                try:
                    out_shapes.append(tuple(runtime.check_output(ctx.value(o.shape.node), o.name)))
                except ValueError as exc:  # shapes an output expression rejects
                    reason = f"output '{o.name}' shape rule '{o.shape.text}' rejects {_shapes_text(ctx.shapes)}: {exc}"
                    involved = lang.tensors_used(o.shape.node)
                    raise
        except NotApplicable as exc:
            if not op.requires and not explicit:
                raise
            reason = str(exc)
            involved = getattr(exc, "inputs", involved)
            continue
        except ValueError:
            continue
        case = _make_case(op, style, {x.name: ctx.shapes[x.name] for x in op.inputs}, tuple(out_shapes),
                          attrs, settings)
        if style == "empty" and not any(0 in s for s in case.slot_shapes):
            reason = f"no input can have a dimension of size 0 ({_shapes_text(ctx.shapes)})"
            involved = tuple(explicit)
            if not op.requires and not explicit:
                raise NotApplicable(reason)
            continue
        empty = _empty_domain(op, case, settings)
        if empty:
            reason = empty
            continue
        return case
    failure = NotApplicable(f"no {style} shapes meet the op's contracts in {ATTEMPTS} draws; the last: {reason}"
                            if reason else f"no {style} shapes meet the op's contracts in {ATTEMPTS} draws")
    failure.inputs = involved  # type: ignore[attr-defined]
    raise failure


@dataclass(frozen=True)
class Case:
    """One set of input shapes and the output shapes they give.

    ``shapes`` has, per input name, a shape (required), ``None`` (an optional input left out)
    or a list of shapes (a dynamic input). The tensors of a case are handled flat, one *slot*
    per tensor: ``layout`` is how many slots each input takes (1; 0 or 1; N), ``slots`` the
    index of the input each slot belongs to, ``slot_shapes`` their shapes.
    """

    style: str
    shapes: Mapping[str, Any]
    out_shapes: tuple[tuple[int, ...], ...]
    layout: tuple[int, ...] = ()
    slots: tuple[int, ...] = ()
    slot_shapes: tuple[tuple[int, ...], ...] = ()
    domains: Mapping[str, tuple[tuple[float, float], ...]] = field(default_factory=dict)
    """Per input whose ``test.domain`` reads shapes or attrs, its intervals for this case."""

    def describe(self) -> str:
        """``style x=(2, 3) y=(3,)`` for messages."""
        return f"{self.style} " + " ".join(f"{n}={s}" for n, s in self.shapes.items())

    def domain(self, name: str, settings: OpTestSettings) -> tuple[tuple[float, float], ...]:
        """Where input ``name``'s values are drawn for this case (``test.domain``, evaluated)."""
        return self.domains.get(name) or settings.domain(name)


def _make_case(op: Op, style: str, shapes: Mapping[str, Any], out_shapes: tuple[tuple[int, ...], ...],
               attrs: Mapping[str, Any] | None = None, settings: OpTestSettings | None = None) -> Case:
    layout, slots, slot_shapes = [], [], []
    for i, x in enumerate(op.inputs):
        value = shapes[x.name]
        group = [] if value is None else list(value) if x.kind == "dynamic" else [value]
        layout.append(len(group))
        slots += [i] * len(group)
        slot_shapes += [tuple(g) for g in group]
    domains: dict[str, tuple[tuple[float, float], ...]] = {}
    if settings is not None:
        env = {**(attrs or {}), **shapes}
        for x in op.inputs:
            if settings.domain_depends_on_shapes(x.name):
                try:
                    domains[x.name] = settings.domain(x.name, env)
                except ValueError:  # e.g. shapes that break a contract: any values will do
                    domains[x.name] = DEFAULT_DOMAIN
    return Case(style, dict(shapes), out_shapes, tuple(layout), tuple(slots), tuple(slot_shapes), domains)


def _empty_domain(op: Op, case: Case, settings: OpTestSettings | None) -> str:
    """Why ``case`` cannot have values (an input with elements whose ``test.domain``, evaluated
    for its shapes, holds no value: ``[0, C - 1]`` with ``C = 0``), or ''."""
    for name, intervals in case.domains.items():
        assert settings is not None
        sizes = [int(np.prod(s)) for s, i in zip(case.slot_shapes, case.slots) if op.inputs[i].name == name]
        if any(sizes) and not any(lo <= hi for lo, hi in intervals):
            shown = ", ".join(f"[{number_text(lo)}, {number_text(hi)}]" for lo, hi in intervals)
            return f"test.domain.{name} is empty ({shown}) for {_shapes_text(case.shapes)}"
    return ""


def group(op: Op, flat: Sequence[Any], layout: Sequence[int]) -> list[Any]:
    """Flat per-tensor values back to one argument per input: the value, ``None`` for an
    optional input left out, a list for a dynamic input."""
    return runtime.regroup(flat, [x.kind for x in op.inputs], layout)


class CheckError(Exception):
    """A check that cannot run at all (unsupported spec feature, missing package part)."""


def shape_cases(op: Op, attrs: Mapping[str, Any], rng: np.random.Generator,
                settings: OpTestSettings | None = None) -> list[Case]:
    """Random input shapes for ``op`` that meet its contracts: :data:`REPEATS` cases per style
    its output shapes allow.

    Inputs get their shapes from the spec's ``test.shapes`` (always, exactly as written), from
    the output shape expressions (each shape function draws its own, e.g. matmul's inner dims
    agree), from the contracts that tie them (``a.shape == ...``), else at random, each shape
    meeting the contracts' rank and dim conditions (see :func:`_draw_case`). Optional inputs are
    passed in the first case of each style and left out (None) at random in the others, and
    always in one extra plain case. The same ``rng`` state gives the same cases.

    Raises:
        CheckError: not even plain shapes meet the contracts (the message says which and why).
    """
    explicit = dict(settings.shapes) if settings is not None else {}
    optional = [x.name for x in op.inputs if x.kind == "optional"]
    allowed = set().union(*[_styles(o.shape.node) for o in op.outputs])
    cases = []
    plans = [(style, r) for style in STYLES if style == "plain" or style in allowed for r in range(REPEATS[style])]
    if optional:
        plans.append(("plain", -1))  # every optional input left out
    for style, r in plans:
        try:
            case = _draw_case(op, style, attrs, rng, explicit, settings)
        except NotApplicable as exc:
            if style == "plain":
                hint = (f"test.shapes gives {', '.join(explicit)}, which are used as written" if explicit else
                        "give the inputs' shapes in the spec's test.shapes")
                raise CheckError(f"opgen test cannot draw shapes for '{op.name}'{_attrs_text(attrs)}: {exc}; "
                                 f"{hint}") from None
            continue
        if optional and (r == -1 or (r > 0 and rng.random() < 0.5)):
            shapes = dict(case.shapes)
            for name in optional:
                shapes[name] = None
            case = _make_case(op, style, shapes, case.out_shapes, attrs, settings)
        cases.append(case)
    return cases


def unusable_test_shapes(op: Op, seed: int = 0) -> list[tuple[str, str]]:
    """Why ``opgen test`` could not use the spec's ``test.shapes`` (``opgen validate`` reports
    these at the entry): for each attr set of ``test.attrs``, plain cases are drawn as ``opgen
    test`` draws them; when none meets the contracts and shape rules with the shapes given, the
    entry the failing contract or rule reads (else the first) is named with the reason, provided
    that cases can be drawn without ``test.shapes`` (else the problem is not theirs, and ``opgen
    test`` reports it). Empty when every attr set gives cases (or an attr set lacks a value).
    """
    if not op.test.shapes:
        return []
    out: list[tuple[str, str]] = []
    for index, attrs in enumerate(op.test.attr_sets):
        if any(a.name not in attrs for a in op.attrs):
            continue
        rng = np.random.default_rng(_seed(seed, op.name, "validate", index))
        try:
            _draw_case(op, "plain", attrs, rng, dict(op.test.shapes), op.test)
        except NotApplicable as exc:
            try:
                _draw_case(op, "plain", attrs, rng, {}, op.test)
            except NotApplicable:
                continue  # not test.shapes' fault: opgen test reports it
            involved = [n for n in getattr(exc, "inputs", ()) if n in op.test.shapes]
            name = involved[0] if involved else next(iter(op.test.shapes))
            given = _shapes_text({n: lang.to_source(v) for n, v in op.test.shapes.items()})
            out.append((name, f"test.shapes cannot be used{_attrs_text(attrs)}: {exc} (test.shapes: {given})"))
    return out


def violating_cases(op: Op, attrs: Mapping[str, Any], rng: np.random.Generator,
                    settings: OpTestSettings | None = None) -> list[tuple[str, Case]]:
    """For each contract that reads an input's shape, one case that breaks it (found by changing
    the shapes of a valid plain case: one dim, or the rank), as ``(contract text, case)``;
    contracts no change of shapes breaks are left out."""
    valid = [c for c in shape_cases(op, attrs, rng, settings) if c.style == "plain"]
    if not valid:
        return []
    base = valid[0]
    out = []
    for c in op.requires:
        used = [n for n in lang.tensors_used(c.node) if base.shapes.get(n) is not None]
        if not used:
            continue
        for _ in range(200):
            shapes = dict(base.shapes)
            name = used[int(rng.integers(len(used)))]
            shape = shapes[name]
            x = next(i for i in op.inputs if i.name == name)
            if x.kind == "dynamic":
                k = int(rng.integers(len(shape)))
                shape = list(shape)
                shape[k] = _mutate(tuple(shape[k]), rng)
            else:
                shape = _mutate(tuple(shape), rng)
            shapes[name] = shape
            ctx = ShapeContext(rng, "plain", attrs, shapes)
            if not _holds(c, ctx):
                out.append((c.text, _make_case(op, "violating", shapes, (), attrs, settings)))
                break
    return out


def _mutate(shape: tuple[int, ...], rng: np.random.Generator) -> tuple[int, ...] | list[Any]:
    what = int(rng.integers(3))
    if what == 0 and shape:
        dims = list(shape)
        k = int(rng.integers(len(dims)))
        dims[k] = int(rng.integers(0, 6))
        return tuple(dims)
    if what == 1 and shape:
        return shape[:-1]
    return shape + (int(rng.integers(1, 4)),)


# ----------------------------------------------------------------------------- values


def draw_values(rng: np.random.Generator, shape: tuple[int, ...], dtype: str,
                domain: Sequence[tuple[float, float]]) -> Array:
    """Random values of ``dtype`` in the union of the ``domain`` intervals (each picked in
    proportion to its length; integers inside them for integer dtypes; both values for bool).

    Raises:
        CheckError: an integer dtype and intervals that hold no integer.
    """
    if dtype == "bool":
        return rng.integers(0, 2, shape).astype(np.bool_)
    if not is_float(dtype):
        ints = sorted({v for lo, hi in domain for v in range(math.ceil(lo), math.floor(hi) + 1)})
        info = np.iinfo(dtype)
        ints = [v for v in ints if info.min <= v <= info.max]
        if not ints:
            raise CheckError(f"test.domain {list(domain)} holds no {dtype} value")
        return np.asarray(rng.choice(ints, size=shape)).astype(dtype)
    lengths = np.array([hi - lo for lo, hi in domain], dtype=np.float64)
    pick = rng.choice(len(domain), size=shape, p=lengths / lengths.sum())
    lo = np.array([d[0] for d in domain])[pick]
    hi = np.array([d[1] for d in domain])[pick]
    return as_dtype(lo + (hi - lo) * rng.random(shape), dtype)


# ----------------------------------------------------------------------------- packages


class OpRunner(abc.ABC):
    """Runs one op on one path of a backend with fixed attr values, through its functional API
    (as a user calls it: dtype and attr checks included): forward and gradients, numpy in and
    out. Tensors are passed flat, one per slot of ``layout`` (see :class:`Case`). A backend's
    :meth:`Package.runner` makes them; the checks here only call these methods."""

    grad_api: ClassVar[str] = "grad"
    """How failure messages name the framework's gradient call (``ms.grad``)."""

    def __init__(self, op: Op, path: str, attrs: Mapping[str, Any]):
        self.op = op
        self.path = path
        self.attrs = dict(attrs)
        self.kinds = tuple(x.kind for x in op.inputs)
        self.diff_in = tuple(i for i, x in enumerate(op.inputs) if x.differentiable)
        self.diff_out = tuple(k for k, o in enumerate(op.outputs) if o.differentiable)

    def diff_slots(self, case: Case) -> tuple[int, ...]:
        """The slots of ``case`` that belong to differentiable inputs."""
        return tuple(j for j, i in enumerate(case.slots) if i in self.diff_in)

    @abc.abstractmethod
    def forward(self, arrays: Sequence[Array], layout: Sequence[int]) -> list[Array]:
        """The op's outputs (numpy) for the flat ``arrays``.

        Raises:
            Exception: whatever the op raises (the checks report it; ``TypeError`` and
                ``ValueError`` naming the op are what ``dtypes`` and ``contracts`` expect).
        """

    @abc.abstractmethod
    def grads(self, arrays: Sequence[Array], weights: Sequence[Array], layout: Sequence[int],
              positions: Sequence[int]) -> list[Array]:
        """Gradients (numpy) of ``sum_k sum(out_k * weights[k])`` over :attr:`diff_out` for the
        flat slots ``positions``, one per position, through the framework's autograd."""

    def finite_differences_runner(self) -> OpRunner:
        """The runner whose forward the gradient check differentiates numerically (itself; a
        graph path may answer its eager twin, which computes the same numbers faster)."""
        return self


class Package(abc.ABC):
    """A generated package under test, as its backend runs it: its numpy references and one
    :class:`OpRunner` per op and path. :func:`load_package` asks the package's backend
    (:meth:`opgen.backends.Backend.test_package`) for it."""

    paths: tuple[str, ...]
    """The backend's paths, in table order (each check but ``reference`` runs on each)."""
    target: str
    """The dtype_format target whose rows the package's kernels have."""

    def __init__(self, module: str, directory: Path):
        self.module = module
        self.directory = directory
        self.reference: ModuleType = importlib.import_module(f"{module}.reference")

    @property
    def checks(self) -> tuple[str, ...]:
        """Every check of this package, in table order (:func:`checks_for` its paths)."""
        return checks_for(self.paths)

    @abc.abstractmethod
    def runner(self, op: Op, path: str, attrs: Mapping[str, Any]) -> OpRunner:
        """The runner of ``op`` on ``path`` (one of :attr:`paths`) with these attr values.

        Raises:
            CheckError: an unknown path, or a path that cannot run here (its library does not
                build or import: the message says why).
        """


def import_package(pkg_dir: Path) -> str:
    """Import the generated package in ``pkg_dir`` (reusing it when already imported under any
    name, e.g. ``generated.opgen_ops``) and return its module name; its modules' imports may build
    its libraries.

    Raises:
        opgen.build.BuildError: a library does not compile.
        FileNotFoundError: ``pkg_dir`` has no ``__init__.py``.
    """
    pkg_dir = pkg_dir.resolve()
    init = pkg_dir / "__init__.py"
    if not init.is_file():
        raise FileNotFoundError(f"{pkg_dir} is not a generated package (no __init__.py)")
    for name, mod in list(sys.modules.items()):
        f = getattr(mod, "__file__", None)
        if f and Path(f).resolve() == init:
            return name
    name = pkg_dir.name
    if name in sys.modules:
        name = f"_opgen_test_{hashlib.sha256(str(pkg_dir).encode()).hexdigest()[:10]}"
    spec = importlib.util.spec_from_file_location(name, init, submodule_search_locations=[str(pkg_dir)])
    if spec is None or spec.loader is None:  # pragma: no cover - importlib contract
        raise ImportError(f"cannot import {init}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return name


def load_package(pkg_dir: Path) -> Package:
    """The generated package in ``pkg_dir``, imported, as its backend tests it (importing builds
    its libraries when stale).

    Raises:
        opgen.build.BuildError: the kernels do not compile.
        FileNotFoundError: ``pkg_dir`` holds no generated package.
    """
    backend = backends.of_package(pkg_dir.resolve())
    if backend is None:
        raise FileNotFoundError(f"{pkg_dir.resolve()} is not a generated package (not one of "
                                f"{', '.join(backends.names())})")
    return backend.test_package(pkg_dir)


class StalePackage(Exception):
    """An explicitly named package that is not what its specs generate today."""


DEFAULT_PACKAGE_DIR = Path("generated") / "opgen_ops"


_GENERATED_FROM = re.compile(r"// @generated by opgen from (.*) -- do not edit")


def package_ops(pkg_dir: Path) -> dict[str, str | None]:
    """The ops of the generated package ``pkg_dir`` and the spec each was generated from, as
    its kernel header records it (relative to where ``opgen generate`` ran; None if unreadable)."""
    found: dict[str, str | None] = {}
    for header in sorted((pkg_dir / "csrc").glob("*_kernel.h")):
        try:
            with header.open(encoding="utf-8") as f:
                first = f.readline().rstrip("\n")
        except (OSError, UnicodeDecodeError):
            first = ""
        match = _GENERATED_FROM.fullmatch(first)
        found[header.name[: -len("_kernel.h")]] = match.group(1) if match else None
    return found


def package_for(paths: Sequence[str | Path], package_dir: Path | None = None, *,
                quiet: bool = False, default_dir: Path = DEFAULT_PACKAGE_DIR,
                backend: str | None = None) -> tuple[Path, str]:
    """The generated package to test the specs under ``paths`` with, and a note saying which.

    - ``package_dir`` given: it, when it holds exactly what the specs generate today.
    - else ``default_dir`` (``generated/opgen_ops`` relative to the cwd, or the package
      ``[tool.opgen]`` names) when it does;
    - else a package generated now into ``<build root>/test/opgen_test_<hash><suffix>`` (the hash is
      of the spec paths, so a later run reuses it and its build incrementally).

    ``backend``: the framework the package is for (default MindSpore); a package directory's
    name is the package name plus the backend's suffix (``opgen_ops_torch``).

    Raises:
        StalePackage: ``package_dir`` differs from what the specs generate.
        SpecError: a spec has errors (callers validate first; this is a safety net).
    """
    from . import build, pipeline

    chosen = backends.get(backend or backends.DEFAULT)
    suffix = chosen.package_suffix

    def package_name(d: Path) -> str:
        return d.name[: len(d.name) - len(suffix)] if suffix and d.name.endswith(suffix) else d.name

    def target_args(d: Path) -> list[str]:  # opgen generate's options that write d
        chosen_arg = [] if chosen.name == backends.DEFAULT else ["--backend", chosen.name]
        return ["-o", str(d.parent), "-p", package_name(d), *chosen_arg]

    def up_to_date(d: Path, specs: Sequence[str | Path] = paths) -> bool:
        name = package_name(d)
        if chosen.package_dir(d.parent, name) != d:
            return False  # not a directory this backend writes (opgen_ops for torch)
        res = pipeline.generate(list(specs), d.parent, name, check_only=True, backend=chosen.name)
        if res.diagnostics:
            raise SpecError(res.diagnostics)
        return res.write is not None and not res.write.changed

    if package_dir is not None:
        if up_to_date(package_dir):
            return package_dir, f"testing {package_dir}"
        given = {op.name for op in pipeline.load_ops(paths)[0]}
        others = {op: spec for op, spec in package_ops(package_dir).items() if op not in given}
        lost = sorted(op for op, spec in others.items() if spec is None or not Path(spec).is_file())
        every = list(paths) + sorted({spec for spec in others.values() if spec is not None} - set(map(str, paths)))
        if others and not lost and up_to_date(package_dir, every):
            return package_dir, f"testing {package_dir} (up to date with the specs of all its ops)"
        command = shlex.join(["opgen", "generate", *map(str, every), *target_args(package_dir)])
        if not lost:  # the command regenerates every op the package holds: nothing is lost
            whose = f"the specs of all its ops ({', '.join(map(str, every))})" if others else ", ".join(map(str, every))
            raise StalePackage(f"{package_dir} is not what {whose} generate today; run '{command}' first")
        raise StalePackage(
            f"{package_dir} is not what {', '.join(map(str, paths))} generate today, and it also holds "
            f"op(s) {', '.join(lost)} whose spec is not found from here ("
            + ", ".join(f"{op}: {others[op] or 'not recorded'}" for op in lost)
            + "); regenerating it from these specs alone would delete them. Regenerate it from the specs of "
            f"all its ops ('opgen generate SPECS... {shlex.join(target_args(package_dir))}', run where "
            "they were generated), or test without --package-dir (a package is generated for the test)")
    if default_dir.is_dir() and up_to_date(default_dir):
        return default_dir, f"testing {default_dir} (up to date with the specs)"
    specs = sorted(str(Path(p).resolve()) for p in paths)
    tag = hashlib.sha256("\0".join(specs).encode()).hexdigest()[:10]
    name = f"opgen_test_{tag}"
    out = build.build_root() / "test"
    res = pipeline.generate(list(paths), out, name, backend=chosen.name)
    if res.diagnostics:
        raise SpecError(res.diagnostics)
    return res.package_dir, f"testing a package generated into {res.package_dir}"


# ----------------------------------------------------------------------------- running ops


def _central_differences(forward: Callable[[Sequence[Array]], list[Array]], arrays: Sequence[Array],
                         weights: Sequence[Array], positions: Sequence[int], diff_out: Sequence[int],
                         step: float) -> list[Array]:
    """Central differences of ``sum_k sum(forward(arrays)[diff_out[k]] * weights[k])`` with
    respect to each array in ``positions``, in the arrays' own dtype (float64 results)."""

    def loss(arrs: Sequence[Array]) -> float:
        outs = forward(arrs)
        return math.fsum(float(np.sum(outs[k].astype(np.float64) * w.astype(np.float64)))
                         for k, w in zip(diff_out, weights))

    grads = []
    for p in positions:
        base = arrays[p]
        g = np.zeros(base.shape, np.float64)
        for j in range(base.size):
            plus, minus = base.copy(), base.copy()
            plus.flat[j] = base.flat[j] + step
            minus.flat[j] = base.flat[j] - step
            if dtype_name(base) == "bfloat16":  # float32 storage: round the step as the dtype does
                plus, minus = round_bfloat16(plus), round_bfloat16(minus)
            h = float(plus.flat[j]) - float(minus.flat[j])  # the step the dtype really took
            arrs = list(arrays)
            arrs[p] = plus
            up = loss(arrs)
            arrs[p] = minus
            g.flat[j] = (up - loss(arrs)) / h
        grads.append(g)
    return grads


# ----------------------------------------------------------------------------- results


@dataclass
class Result:
    """Outcome of one check of one op.

    Attributes:
        status: ``pass``, ``fail``, ``spec`` (no check failed, but the kernel rejected drawn
            cases with its own error: a problem of the spec, see :func:`kernel_rejection`) or
            ``n/a`` (nothing to check, e.g. no gradient).
        worst: the worst error seen over every comparison (``None`` when none was numeric).
        comparisons: how many arrays were compared (or calls checked).
        messages: why it failed (the first few problems, then the spec problems) or why it is ``n/a``.
        seconds: wall time of the check.
        spec_problems: how many drawn cases the kernel rejected with its own error.
    """

    op: str
    check: str
    status: str
    worst: float | None = None
    comparisons: int = 0
    messages: list[str] = field(default_factory=list)
    seconds: float = 0.0
    spec_problems: int = 0

    @property
    def cell(self) -> str:
        """The table cell: ``ok 3e-07``, ``FAIL 2e-02``, ``FAIL``, ``SPEC`` or ``-``."""
        if self.status == "n/a":
            return "-"
        if self.status == "spec":
            return "SPEC"
        word = "ok" if self.status == "pass" else "FAIL"
        return f"{word} {self.worst:.0e}" if self.worst is not None else word


MAX_MESSAGES = 5
"""Problems kept per check (the count of the rest is reported)."""


class _Tally:
    def __init__(self) -> None:
        self.worst: float | None = None
        self.problems: list[str] = []
        self.n_problems = 0
        self.spec: list[str] = []
        self.n_spec = 0
        self.comparisons = 0
        self.context = ""

    def fail(self, message: str) -> None:
        self.n_problems += 1
        if len(self.problems) < MAX_MESSAGES:
            self.problems.append(f"{self.context}: {message}" if self.context else message)

    def raised(self, op: Op, exc: BaseException, what: str = "") -> None:
        """A call of the op raised ``exc`` on a drawn case: a spec problem when the kernel rejected
        the case with its own error (:func:`kernel_rejection`), else a failure."""
        rejected = kernel_rejection(exc, op.name)
        if rejected is None:
            self.fail(f"{what}raised {_first_line(exc)}")
            return
        self.n_spec += 1
        if len(self.spec) < MAX_MESSAGES:
            self.spec.append(f"spec problem: {self.context}: the kernel rejected this case: {rejected!r}")

    def compare(self, what: str, got: Array, want: Array, tol: float) -> None:
        """Compare arrays; records the error, and a problem when shapes differ or it is > tol."""
        self.comparisons += 1
        got, want = np.asarray(got), np.asarray(want)
        if got.shape != want.shape:
            self.fail(f"{what}: shape {got.shape}, expected {want.shape}")
            return
        if got.size == 0:
            self.worst = max(self.worst or 0.0, 0.0)
            return
        g, w = got.astype(np.float64), want.astype(np.float64)
        with np.errstate(all="ignore"):
            same = (g == w) | (np.isnan(g) & np.isnan(w))
            err = np.where(same, 0.0, np.abs(g - w) / np.maximum(1.0, np.abs(w)))
        err = np.nan_to_num(err, nan=np.inf)
        idx = int(np.argmax(err))
        worst = float(err.flat[idx])
        self.worst = max(self.worst or 0.0, worst)
        if worst > tol:
            where = np.unravel_index(idx, err.shape) if err.ndim else ()
            self.fail(f"{what}: error {worst:.2e} > {tol:.0e} at {tuple(int(i) for i in where)}: "
                      f"got {g.flat[idx]!r}, expected {w.flat[idx]!r}")

    def result(self, op: str, check: str, seconds: float) -> Result:
        msgs = list(self.problems)
        if self.n_problems > len(msgs):
            msgs.append(f"... and {self.n_problems - len(msgs)} more")
        msgs += self.spec
        if self.n_spec > len(self.spec):
            msgs.append(f"... and {self.n_spec - len(self.spec)} more case(s) the kernel rejected")
        if self.n_spec:
            msgs.append(SPEC_ADVICE)
        status = "fail" if self.n_problems else "spec" if self.n_spec else "pass"
        return Result(op, check, status, self.worst, self.comparisons, msgs, seconds, self.n_spec)


SPEC_ADVICE = ("the spec says the op takes these cases, its kernel does not: a check of shapes or attrs belongs in "
               "the spec's requires: (then opgen test draws only cases that meet it, and every path raises before "
               "any kernel runs); a check of values, in a narrower test.domain")
"""What the messages of a check with spec problems end with."""


def kernel_rejection(exc: BaseException, op: str) -> str | None:
    """The message of a kernel that rejected its inputs with its own error (a body's
    ``throw opgen::Error(...)``: ``ValueError: <op>(): <message>``, in GRAPH_MODE MindSpore's
    ``RuntimeError`` ending with that text), or None for any other error: a contract's
    ``ValueError`` (``contract '...' does not hold``), checked mode's out-of-bounds error (a bug of
    the kernel, not of the spec), a ``TypeError``, or an error that does not come from the op."""
    if not isinstance(exc, (ValueError, RuntimeError)):
        return None
    text = str(exc)
    m = re.search(rf"(?<![A-Za-z0-9_]){re.escape(op)}\(\): (.*)", text)
    if m is None:
        return None
    message = m.group(1).strip()
    if (message.startswith(("contract '", "checked mode:", "attr '", "out of memory"))
            or message == "" or "is out of bounds for view" in message):
        return None
    return message


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"


# ----------------------------------------------------------------------------- checks


def _row_dtypes(op: Op, target: str) -> list[list[str]]:
    """The element type names of each dtype_format row of ``target``, inputs then outputs."""
    return [[r.dtype(i).name for i in range(len(r.columns))] for r in op.rows_for(target)]


def _ref_attrs(op: Op, attrs: Mapping[str, Any]) -> dict[str, Any]:
    """Attr values as the kernels see them: float attrs are float32 in C++ (AotExtra)."""
    out = dict(attrs)
    for a in op.attrs:
        if a.type == "float":
            out[a.name] = float(np.float32(attrs[a.name]))
        elif a.type == "list[float]":
            out[a.name] = [float(np.float32(v)) for v in attrs[a.name]]
        elif a.type == "list[list[float]]":
            out[a.name] = [[float(np.float32(v)) for v in r] for r in attrs[a.name]]
    return out


def _as_outputs(result: Any, n: int) -> list[Array]:
    if n == 0:
        return []
    if n == 1:
        return [np.asarray(result)]
    return [np.asarray(r) for r in result]


def written_slots(op: Op, layout: Sequence[int]) -> list[tuple[int, int]]:
    """The inputs the op writes in place and returns not (``writes: true``), as (input index,
    flat slot): what a forward check compares after a call, beside the outputs, in input order
    (such an input is a required one: one slot)."""
    return [(i, sum(layout[:i])) for i, x in enumerate(op.inputs) if x.writes]


def compared(op: Op) -> list[tuple[str, int]]:
    """What a forward check compares: each output, then each ``writes: true`` input after the
    call, as (name, dtype_format column)."""
    n_in = len(op.inputs)
    return ([(o.name, n_in + k) for k, o in enumerate(op.outputs)]
            + [(f"{x.name} (written in place)", i) for i, x in enumerate(op.inputs) if x.writes])


def _reference_forward(pkg: Package, op: Op, attrs: Mapping[str, Any],
                       layout: Sequence[int]) -> Callable[[Sequence[Array]], list[Array]]:
    """The numpy reference on flat arrays of ``layout`` (float arrays computed in float64)."""
    ref = getattr(pkg.reference, op.name, None)
    if ref is None:
        raise CheckError(f"no numpy reference for '{op.name}' in {pkg.module}.reference; "
                         "give the spec a 'reference' body")
    kw = _ref_attrs(op, attrs)

    def run(arrays: Sequence[Array]) -> list[Array]:
        # copies: a reference writes an input the op writes in place ('writes: true') in place
        args = [a.astype(np.float64) if a.dtype.kind == "f" else a.copy() for a in arrays]
        with np.errstate(all="ignore"):
            outs = _as_outputs(ref(*group(op, args, layout), **kw), len(op.outputs))
        return outs + [args[slot] for _, slot in written_slots(op, layout)]

    return run


def _draw(rng: np.random.Generator, op: Op, case: Case, dtypes: Sequence[str],
          settings: OpTestSettings) -> list[Array]:
    """Random values for every slot of ``case``; ``dtypes`` is per input."""
    return [draw_values(rng, shape, dtypes[i], case.domain(op.inputs[i].name, settings))
            for i, shape in zip(case.slots, case.slot_shapes)]


def _grad_rows(op: Op, target: str) -> tuple[list[str] | None, list[list[str]]]:
    """The row gradients are checked by finite differences in (float64, else the widest float
    row) and the other rows whose differentiable inputs are all float."""
    diff = [i for i, x in enumerate(op.inputs) if x.differentiable]
    rows = [r for r in _row_dtypes(op, target) if diff and all(is_float(r[i]) for i in diff)]
    if not rows:
        return None, []
    main = max(rows, key=lambda r: max(precision(r[i]) for i in diff))
    return main, [r for r in rows if r != main]


def _check_reference(pkg: Package, op: Op, attrs: Mapping[str, Any], settings: OpTestSettings,
                     rng: np.random.Generator, tally: _Tally) -> None:
    f64 = ["float64" if is_float(d) else d for d in _row_dtypes(op, pkg.target)[0]]
    for case in shape_cases(op, attrs, rng, settings):  # the reference follows the shape rules
        tally.context = f"reference forward, {case.describe()}"
        tally.comparisons += 1
        arrays = _draw(rng, op, case, f64, settings)
        try:
            outs = _reference_forward(pkg, op, attrs, case.layout)(arrays)
        except CheckError:
            raise
        except Exception as exc:
            tally.fail(f"raised {_first_line(exc)}")
            continue
        for o, got, want in zip(op.outputs, outs, case.out_shapes):
            if got.shape != want:
                tally.fail(f"{o.name}: shape {got.shape}, expected {want} (shape rule {o.shape.text})")
    ref_grad = getattr(pkg.reference, f"{op.name}_grad", None)
    if ref_grad is None:
        return
    diff_in = [i for i, x in enumerate(op.inputs) if x.differentiable]
    diff_out = [k for k, o in enumerate(op.outputs) if o.differentiable]
    kw = _ref_attrs(op, attrs)
    for case in shape_cases(op, attrs, rng, settings):
        tally.context = f"reference grads, {case.describe()}"
        arrays = _draw(rng, op, case, f64, settings)
        weights = [rng.uniform(-1, 1, case.out_shapes[k]) for k in diff_out]
        forward = _reference_forward(pkg, op, attrs, case.layout)
        outs = forward(arrays)
        args: dict[str, Any] = {x.name: a for x, a in zip(op.inputs, group(op, arrays, case.layout))}
        args.update({o.name: v for o, v in zip(op.outputs, outs)})
        args.update({o.grad_name: (weights[diff_out.index(k)] if k in diff_out else np.zeros_like(outs[k]))
                     for k, o in enumerate(op.outputs)})
        args.update(kw)
        with np.errstate(all="ignore"):
            got = list(ref_grad(**args))
        slots = [j for j, i in enumerate(case.slots) if i in diff_in]
        fd = _central_differences(forward, arrays, weights, slots, diff_out, TOLERANCES["float64"].fd_step)
        for j, g in zip(slots, fd):
            tally.compare(f"d{op.inputs[case.slots[j]].name}", got[case.slots[j]], g, TOLERANCES["float64"].fd)


REDRAWS = 8
"""How many times :func:`_telling_values` draws a forward case's values at most."""


def _telling_values(rng: np.random.Generator, op: Op, case: Case, row: Sequence[str], settings: OpTestSettings,
                    reference: Callable[[Sequence[Array]], list[Array]]) -> tuple[list[Array], list[Array] | None]:
    """Values for a forward case, and the reference's outputs for them (None when the reference
    raised: the check calls it again after the op, as for any case). Values are drawn again (up to
    :data:`REDRAWS` times) while an output the check compares, not empty, would be all zeros: an
    integer row draws few distinct values (-2..2 by default), and a kernel that writes zeros then
    passed every case of a check whose draws happened to want zeros (issue 32: an int32 row the body
    did not handle passed ``forward/compiled`` and failed ``forward/eager``, whose cases differ)."""
    for _ in range(REDRAWS):
        arrays = _draw(rng, op, case, row, settings)
        try:
            want = reference(arrays)
        except Exception:
            return arrays, None
        if not any(w.size and not np.any(w) for w in want):
            break
    return arrays, want


def _check_forward(pkg: Package, op: Op, path: str, attrs: Mapping[str, Any], settings: OpTestSettings,
                   rng: np.random.Generator, tally: _Tally) -> None:
    runner = pkg.runner(op, path, attrs)
    names = [x.name for x in op.inputs] + [o.name for o in op.outputs]
    checked = compared(op)
    for row in _row_dtypes(op, pkg.target):
        row_text = ", ".join(f"{n}={d}" for n, d in zip(names, row))
        for case in shape_cases(op, attrs, rng, settings):
            tally.context = f"({row_text}) {case.describe()}{_attrs_text(attrs)}"
            reference = _reference_forward(pkg, op, attrs, case.layout)
            arrays, want = _telling_values(rng, op, case, row, settings, reference)
            try:
                outs = runner.forward(arrays, case.layout)
            except Exception as exc:
                tally.comparisons += 1
                tally.raised(op, exc)
                continue
            if want is None:
                want = reference(arrays)
            if len(outs) != len(checked):
                tally.fail(f"returned {len(outs)} outputs, expected {len(op.outputs)}")
                continue
            for k, (name, column) in enumerate(checked):
                dtype = row[column]
                if dtype_name(outs[k]) != dtype:
                    tally.fail(f"{name}: dtype {dtype_name(outs[k])}, expected {dtype}")
                if k < len(op.outputs) and outs[k].shape != case.out_shapes[k]:
                    tally.fail(f"{name}: shape {outs[k].shape}, expected {case.out_shapes[k]} "
                               f"(shape rule {op.outputs[k].shape.text})")
                    continue
                tally.compare(name, outs[k], want[k], tolerance(dtype).forward)


def _check_grad(pkg: Package, op: Op, path: str, attrs: Mapping[str, Any], settings: OpTestSettings,
                rng: np.random.Generator, tally: _Tally) -> None:
    if op.has_effects:
        raise NotApplicable(f"writes {', '.join(x.name for x in op.written_inputs)} in place: no gradient (a "
                            "gradient through it is refused)")
    main, others = _grad_rows(op, pkg.target)
    runner = pkg.runner(op, path, attrs)
    if not runner.diff_in or not runner.diff_out:
        _check_no_grad(op, runner, _row_dtypes(op, pkg.target), attrs, settings, rng, tally)
        return
    if main is None:
        raise NotApplicable("no differentiable input and output with a float row")
    fd_runner = runner.finite_differences_runner()
    n_in = len(op.inputs)
    # values representable in the narrowest float row, so every row sees the same numbers
    narrow = min((r[i] for r in [main, *others] for i in runner.diff_in), key=precision)
    # central differences see the rounding of every differentiable input and output: an f16 output of
    # f32 inputs is exact to f16's precision only, so the step and bound are f16's (issue 24)
    main_tol = _loosest(main, [*runner.diff_in, *(n_in + k for k in runner.diff_out)])
    for case in shape_cases(op, attrs, rng, settings):
        positions = runner.diff_slots(case)
        if not positions:
            continue  # e.g. every differentiable input is an optional one left out
        tally.context = f"{case.describe()}{_attrs_text(attrs)}"
        draw_dtypes = [narrow if i in runner.diff_in else main[i] for i in range(n_in)]
        arrays = [as_dtype(a, main[i]) for a, i in zip(_draw(rng, op, case, draw_dtypes, settings), case.slots)]
        weights = [as_dtype(as_dtype(rng.uniform(-1, 1, case.out_shapes[k]), narrow), main[n_in + k])
                   for k in runner.diff_out]
        try:
            got = runner.grads(arrays, weights, case.layout, positions)
        except Exception as exc:
            tally.comparisons += 1
            tally.raised(op, exc, f"{runner.grad_api} ")
            continue
        fd = _central_differences(functools.partial(fd_runner.forward, layout=case.layout), arrays, weights,
                                  positions,
                                  runner.diff_out, main_tol.fd_step)
        for j, slot in enumerate(positions):
            i = case.slots[slot]
            name = op.inputs[i].name + (f"[{slot - case.slots.index(i)}]" if op.inputs[i].kind == "dynamic" else "")
            g = got[j] if j < len(got) else None
            if g is None:
                tally.fail(f"d{name}: missing")
                continue
            if dtype_name(g) != main[i]:
                tally.fail(f"d{name}: dtype {dtype_name(g)}, expected {main[i]}")
            tally.compare(f"d{name} ({main[i]}) vs central differences", g, fd[j], main_tol.fd)
        for row in others:
            arrs = [as_dtype(a, row[i]) for a, i in zip(arrays, case.slots)]
            ws = [as_dtype(w, row[n_in + k]) for w, k in zip(weights, runner.diff_out)]
            try:
                got_r = runner.grads(arrs, ws, case.layout, positions)
            except Exception as exc:
                tally.comparisons += 1
                tally.raised(op, exc, f"{runner.grad_api} ({', '.join(row[:n_in])}) ")
                continue
            for j, slot in enumerate(positions):
                i = case.slots[slot]
                if dtype_name(got_r[j]) != row[i]:
                    tally.fail(f"d{op.inputs[i].name}: dtype {dtype_name(got_r[j])}, expected {row[i]}")
                tally.compare(f"d{op.inputs[i].name} ({row[i]}) vs {main[i]}", got_r[j], got[j],
                              _loosest(row, [i, *(n_in + k for k in runner.diff_out)]).grad)


def _check_no_grad(op: Op, runner: OpRunner, rows: Sequence[Sequence[str]], attrs: Mapping[str, Any],
                   settings: OpTestSettings, rng: np.random.Generator, tally: _Tally) -> None:
    """An op no gradient flows through (no differentiable output or input): the framework's
    gradient (``ms.grad``) through it must work and give zeros for its float inputs, on every
    path (MindSpore's Custom path once had no bprop for it, then passed its output gradient on)."""
    n_in = len(op.inputs)
    row = next((r for r in rows if any(is_float(d) for d in r)), None)
    if row is None:
        raise NotApplicable("no float input or output")
    float_in = [i for i in range(n_in) if is_float(row[i])]
    runner.diff_out = tuple(k for k in range(len(op.outputs)) if is_float(row[n_in + k]))
    if not float_in or not runner.diff_out:
        raise NotApplicable("no float input and output")
    for case in shape_cases(op, attrs, rng, settings):
        positions = tuple(j for j, i in enumerate(case.slots) if i in float_in)
        if not positions:
            continue
        tally.context = f"{case.describe()}{_attrs_text(attrs)} (no gradient flows through the op)"
        arrays = [as_dtype(a, row[i]) for a, i in zip(_draw(rng, op, case, list(row[:n_in]), settings), case.slots)]
        weights = [as_dtype(rng.uniform(-1, 1, case.out_shapes[k]), row[n_in + k]) for k in runner.diff_out]
        try:
            got = runner.grads(arrays, weights, case.layout, positions)
        except Exception as exc:
            tally.comparisons += 1
            tally.raised(op, exc, f"{runner.grad_api} ")
            continue
        for j, slot in enumerate(positions):
            i = case.slots[slot]
            tally.compare(f"d{op.inputs[i].name}, expected zeros", got[j], np.zeros(arrays[slot].shape),
                          tolerance(row[i]).grad)


_REJECT_CANDIDATES = ("float16", "int8", "uint8", "int16", "int32", "int64", "float32", "float64", "bool")


def bad_dtype_combinations(op: Op, target: str | None = None) -> list[tuple[str, ...]]:
    """Input dtype combinations outside the op's rows for ``target`` (default: the default
    backend's) that ``dtypes/*`` checks: every
    input of the first dtype of :data:`_REJECT_CANDIDATES` no row has, and, for ops with two
    or more inputs and rows, the first row with its first input's dtype taken from another
    row, when no row has that mix."""
    n = len(op.inputs)
    rows = [tuple(r[:n]) for r in _row_dtypes(op, target or backends.get(backends.DEFAULT).target)]
    out: list[tuple[str, ...]] = []
    for d in _REJECT_CANDIDATES:
        if (d,) * n not in rows:
            out.append((d,) * n)
            break
    if n >= 2:
        for other in rows[1:]:
            mix = (other[0],) + rows[0][1:]
            if mix not in rows:
                out.append(mix)
                break
    return out


def _check_dtypes(pkg: Package, op: Op, path: str, attrs: Mapping[str, Any], settings: OpTestSettings,
                  rng: np.random.Generator, tally: _Tally) -> None:
    runner = pkg.runner(op, path, attrs)
    cases = [c for c in shape_cases(op, attrs, rng, settings) if c.style == "plain"]
    if not cases:
        raise NotApplicable("no plain shape case")
    for combo in bad_dtype_combinations(op, pkg.target):
        text = ", ".join(f"{x.name}={d}" for x, d in zip(op.inputs, combo))
        tally.context = f"({text}){_attrs_text(attrs)}"
        tally.comparisons += 1
        arrays = []
        for i, shape in zip(cases[0].slots, cases[0].slot_shapes):
            x, d = op.inputs[i], combo[i]
            try:
                arrays.append(draw_values(rng, shape, d, cases[0].domain(x.name, settings)))
            except CheckError:  # e.g. no integer in a float domain: any value will do here
                arrays.append(draw_values(rng, shape, d, DEFAULT_DOMAIN))
        try:
            outs = runner.forward(arrays, cases[0].layout)
        except TypeError as exc:
            msg = str(exc)
            if not _names_op(msg, op.name):
                tally.fail(f"TypeError does not name the op '{op.name}': {_first_line(exc)}")
            continue
        except Exception as exc:
            tally.fail(f"raised {_first_line(exc)}; expected a TypeError naming '{op.name}'")
            continue
        got = ", ".join(str(o.dtype) for o in outs)
        tally.fail(f"accepted (returned {got}); expected a TypeError naming '{op.name}'")


def _check_contracts(pkg: Package, op: Op, path: str, attrs: Mapping[str, Any], settings: OpTestSettings,
                     rng: np.random.Generator, tally: _Tally) -> None:
    if not op.requires:
        raise NotApplicable("no contracts (requires)")
    bad = violating_cases(op, attrs, rng, settings)
    if not bad:
        return  # with these attrs; run_check says n/a when no attr set gives a case
    runner = pkg.runner(op, path, attrs)
    row = _row_dtypes(op, pkg.target)[0]
    for text, case in bad:
        tally.context = f"requires '{text}': {case.describe()}{_attrs_text(attrs)}"
        tally.comparisons += 1
        arrays = _draw(rng, op, case, row, settings)
        try:
            outs = runner.forward(arrays, case.layout)
        except ValueError as exc:
            if not _names_op(str(exc), op.name) or "does not hold" not in str(exc):
                tally.fail(f"ValueError does not name the op and a contract: {_first_line(exc)}")
            continue
        except Exception as exc:
            tally.fail(f"raised {type(exc).__name__}: {_first_line(exc)}; expected a ValueError naming '{op.name}'")
            continue
        tally.fail(f"accepted shapes that break the contract (returned shapes {[o.shape for o in outs]})")


def _names_op(message: str, name: str) -> bool:
    import re

    return re.search(rf"(?<![A-Za-z0-9_]){re.escape(name)}(?![A-Za-z0-9_])", message) is not None


def _attrs_text(attrs: Mapping[str, Any]) -> str:
    return (" " + ", ".join(f"{k}={v!r}" for k, v in attrs.items())) if attrs else ""


_CHECKERS = {"forward": _check_forward, "grad": _check_grad, "dtypes": _check_dtypes,
             "contracts": _check_contracts}


def _seed(seed: int, *parts: str | int) -> list[int]:
    return [seed] + [zlib.crc32(str(p).encode()) for p in parts]


def run_check(pkg: Package, op: Op, check: str, *, seed: int = 0) -> Result:
    """Run one check (a name from ``pkg.checks``) of ``op`` against package ``pkg``.

    Every attr set of the spec's ``test.attrs`` runs. Never raises for a problem of the op,
    the spec or the package: those make a ``fail`` result whose messages say what and where.

    Raises:
        ValueError: ``check`` is not one of ``pkg.checks``.
    """
    if check not in pkg.checks:
        raise ValueError(f"unknown check '{check}'; expected one of: {', '.join(pkg.checks)}")
    started = time.perf_counter()
    tally = _Tally()
    kind, _, path = check.partition("/")
    try:
        settings = read_settings(op)
        for index, attrs in enumerate(settings.attr_sets):
            rng = np.random.default_rng(_seed(seed, op.name, check, index))
            if kind == "reference":
                _check_reference(pkg, op, attrs, settings, rng, tally)
            else:
                _CHECKERS[kind](pkg, op, path, attrs, settings, rng, tally)
        if kind == "contracts" and not tally.comparisons and not tally.n_problems:
            raise NotApplicable("no contract that a change of shapes breaks")
    except NotApplicable as exc:
        return Result(op.name, check, "n/a", messages=[str(exc)], seconds=time.perf_counter() - started)
    except SpecError as exc:
        tally.context = ""
        for d in exc.diagnostics:
            tally.fail(d.format())
    except CheckError as exc:
        tally.context = ""
        tally.fail(str(exc))
    except Exception as exc:  # a bug in the harness or an unexpected failure: show where
        tally.context = ""
        tally.fail(f"{_first_line(exc)}\n{traceback.format_exc()}")
    return tally.result(op.name, check, time.perf_counter() - started)


def select_checks(only: Sequence[str] = (), skip: Sequence[str] = (), checks: Sequence[str] = CHECKS) -> list[str]:
    """The ``checks`` (default: the default backend's, :data:`CHECKS`; a package's are
    ``pkg.checks``) matching any ``only`` pattern (all when empty) and no ``skip`` pattern;
    patterns are shell globs (``forward/*``, ``*function``)."""
    chosen = [c for c in checks if not only or any(fnmatch.fnmatchcase(c, p) for p in only)]
    return [c for c in chosen if not any(fnmatch.fnmatchcase(c, p) for p in skip)]


def run_all(pkg: Package, ops: Sequence[Op], checks: Sequence[str], *, seed: int = 0,
            progress: Callable[[Op, list[Result]], None] | None = None) -> list[Result]:
    """Run ``checks`` for every op; ``progress(op, results)`` is called after each op."""
    results: list[Result] = []
    for op in ops:
        mine = [run_check(pkg, op, c, seed=seed) for c in checks]
        results.extend(mine)
        if progress is not None:
            progress(op, mine)
    return results


def format_table(results: Sequence[Result], checks: Sequence[str]) -> str:
    """The op x check table: ``ok <worst error>``, ``FAIL <worst error>`` or ``-`` (n/a)."""
    ops = list(dict.fromkeys(r.op for r in results))
    by = {(r.op, r.check): r for r in results}
    short = {**_SHORT, **{p: s for name in backends.names() for p, s in backends.get(name).test_paths.items()}}
    heads = [" ".join(short.get(p, p) for p in c.split("/")) for c in checks]
    width0 = max([2] + [len(o) for o in ops])
    widths = [max(len(h), 10) for h in heads]
    lines = ["  ".join([f"{'op':<{width0}}"] + [f"{h:<{w}}" for h, w in zip(heads, widths)]).rstrip()]
    lines.append("  ".join(["-" * width0] + ["-" * w for w in widths]))
    for o in ops:
        cells = [by[(o, c)].cell if (o, c) in by else "" for c in checks]
        lines.append("  ".join([f"{o:<{width0}}"] + [f"{s:<{w}}" for s, w in zip(cells, widths)]).rstrip())
    return "\n".join(lines)


def format_failures(results: Sequence[Result]) -> str:
    """Every failed check with its messages, then every check with spec problems only (cases the
    kernel rejected: ``SPEC``), with theirs (empty when all passed)."""
    out = []
    for status, word in (("fail", "FAIL"), ("spec", "SPEC")):
        for r in results:
            if r.status == status:
                out.append(f"{word} {r.op} {r.check}:")
                out.extend("  " + m.replace("\n", "\n    ") for m in r.messages)
    return "\n".join(out)
