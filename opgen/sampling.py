"""The test sampler: the input shapes and values ``opgen test`` draws for an op, from its spec alone.

Shapes come from the op's shape expressions and contracts (:func:`shape_cases`; each shape
function of :mod:`opgen.shapes.functions` knows how to draw its own inputs), cases that break a
contract from valid ones (:func:`violating_cases`), values from ``test.domain``
(:func:`draw_values`). ``opgen validate`` asks it whether ``test.shapes`` can be used
(:func:`unusable_test_shapes`), ``opgen test`` (:mod:`opgen.testing`) draws its cases here: this
module sits below both and imports neither. It needs numpy; nothing here imports a framework.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import shapes as lang
from .literals import number_text
from .model import DEFAULT_DOMAIN, Op, TestSettings
from .runtime.shapes import check_output

Array = Any
"""A numpy array (``numpy.ndarray``); kept loose for the type checker."""


class CheckError(Exception):
    """A check that cannot run at all (unsupported spec feature, missing package part)."""


def seed_sequence(seed: int, *parts: str | int) -> list[int]:
    """The seed of ``numpy.random.default_rng`` for one draw: ``seed`` and a CRC of each part
    (op name, check, attr set...), so that one draw's values do not depend on which others ran."""
    return [seed] + [zlib.crc32(str(p).encode()) for p in parts]


def attrs_text(attrs: Mapping[str, Any]) -> str:
    """`` k=v, ...`` (with a leading space) for messages about one attr set; ``""`` for none."""
    return (" " + ", ".join(f"{k}={v!r}" for k, v in attrs.items())) if attrs else ""


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
               explicit: Mapping[str, lang.Node], settings: TestSettings | None = None) -> Case:
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
                    out_shapes.append(tuple(check_output(ctx.value(o.shape.node), o.name)))
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

    def domain(self, name: str, settings: TestSettings) -> tuple[tuple[float, float], ...]:
        """Where input ``name``'s values are drawn for this case (``test.domain``, evaluated)."""
        return self.domains.get(name) or settings.domain(name)


def _make_case(op: Op, style: str, shapes: Mapping[str, Any], out_shapes: tuple[tuple[int, ...], ...],
               attrs: Mapping[str, Any] | None = None, settings: TestSettings | None = None) -> Case:
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


def _empty_domain(op: Op, case: Case, settings: TestSettings | None) -> str:
    """Why ``case`` cannot have values (an input with elements whose ``test.domain``, evaluated
    for its shapes, holds no value: ``[0, C - 1]`` with ``C = 0``), or ''."""
    for name, intervals in case.domains.items():
        assert settings is not None
        sizes = [int(np.prod(s)) for s, i in zip(case.slot_shapes, case.slots) if op.inputs[i].name == name]
        if any(sizes) and not any(lo <= hi for lo, hi in intervals):
            shown = ", ".join(f"[{number_text(lo)}, {number_text(hi)}]" for lo, hi in intervals)
            return f"test.domain.{name} is empty ({shown}) for {_shapes_text(case.shapes)}"
    return ""


def shape_cases(op: Op, attrs: Mapping[str, Any], rng: np.random.Generator,
                settings: TestSettings | None = None) -> list[Case]:
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
                raise CheckError(f"opgen test cannot draw shapes for '{op.name}'{attrs_text(attrs)}: {exc}; "
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
        rng = np.random.default_rng(seed_sequence(seed, op.name, "validate", index))
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
            out.append((name, f"test.shapes cannot be used{attrs_text(attrs)}: {exc} (test.shapes: {given})"))
    return out


def violating_cases(op: Op, attrs: Mapping[str, Any], rng: np.random.Generator,
                    settings: TestSettings | None = None) -> list[tuple[str, Case]]:
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
    proportion to its length, so a one-point interval ``[a, a]`` beside longer ones is never
    picked, and a domain of points only gives each point equally often; integers inside them for
    integer dtypes; both values for bool).

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
    if not lengths.sum() > 0:  # only one-point intervals [a, a]: each point equally often
        lengths = np.ones_like(lengths)
    pick = rng.choice(len(domain), size=shape, p=lengths / lengths.sum())
    lo = np.array([d[0] for d in domain])[pick]
    hi = np.array([d[1] for d in domain])[pick]
    return as_dtype(lo + (hi - lo) * rng.random(shape), dtype)
