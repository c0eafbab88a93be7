"""The runtime of generated packages: what their modules import, and nothing of the generator.

Every package ``opgen generate`` writes carries a copy of this package as ``<pkg>/_runtime/``
(:func:`opgen.render.runtime_files`: the neutral modules, ``__init__``, :mod:`~opgen.runtime.base`,
:mod:`~opgen.runtime.env` and :mod:`~opgen.runtime.shapes`, and its backend's,
:attr:`opgen.backends.Backend.shipped_runtime`), so a package and its wheel import and run
where opgen is not installed; the copy names the opgen version that wrote it
(``_runtime.OPGEN_VERSION``). So nothing in this package imports jinja2, jsonschema, yaml or any
opgen module outside it; the one way back into opgen is :func:`base.generator`, for a package
with no prebuilt libraries (built at import, as ``opgen generate`` wrote it).

This module holds the shape and attr helpers the generated wrappers and references call
(``_rt``), so that the rules they implement live in one place (the shape rules are
:mod:`opgen.runtime.shapes`'s, over plain ints, re-exported here), and re-exports the library
loading every backend's runtime uses (:func:`package_library`: a wheel's prebuilt library, or a
build when missing or stale) from :mod:`opgen.runtime.base`. A backend's own runtime is a module
beside it (:mod:`opgen.runtime.mindspore`: ``aot_library``, ``load_extension``, ``reg_info``...;
:mod:`opgen.runtime.pytorch`). Nothing here imports a framework.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from . import env as _env
from .base import check_dtype_names as check_dtype_names
from .base import load_library_module as load_library_module
from .base import package_library as package_library
from .base import prebuilt_library as prebuilt_library

# The shape rules and the shape language's Python meaning over plain ints, defined once in
# opgen.runtime.shapes (a framework's symbolic sizes use the same definitions, see there);
# generated packages call them here as ``_rt.<name>``: these are the same function objects.
from .shapes import *  # noqa: F403 - re-exported: shapes.__all__


def number_text(value: float) -> str:
    """A number as messages and docs print it: an integral value as an int (``1000000000``, not
    ``1e+09``: int attr ranges are stored as floats), any other float as its shortest round-trip
    text (``0.1``, ``inf``)."""
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return str(value)
    v = float(value)
    if v.is_integer() and abs(v) < 2**63:
        return str(int(v))
    return repr(v)


def checked() -> bool:
    """Whether this process builds and loads the checked mode (``OPGEN_CHECK=1``: bounds-checked
    kernel views, see :func:`opgen.build.checked_flags`)."""
    return _env.flag("OPGEN_CHECK")


def shapes_known(shapes: Sequence[Any]) -> bool:
    """Whether every shape (``Tensor.shape``) is fully known: GRAPH_MODE passes None for an
    unknown rank and None (or -1) for an unknown dim while it compiles a dynamic-shape graph."""
    for shape in shapes:
        if shape is None:
            return False
        for d in shape:
            if d is None or d < 0:
                return False
    return True


def remember(memo: dict[Any, Any], key: Any, value: Any, limit: int = 4096) -> None:
    """``memo[key] = value`` for hashable keys, emptying ``memo`` when it reaches ``limit`` entries."""
    try:
        hash(key)
    except TypeError:
        return
    if len(memo) >= limit:
        memo.clear()
    memo[key] = value


_SCALAR: dict[str, tuple[type, ...]] = {
    "int": (numbers.Integral,),  # numpy integers too (shapes computed with numpy are np.int64)
    "float": (numbers.Real,),  # numpy floats too (np.float32 is no Python float)
    "bool": (bool,),
    "str": (str,),
}
_PY = {"int": int, "float": float, "bool": bool, "str": str}


def _as_is(value: Any) -> Any:
    return value


def check_attrs(op: str, values: Mapping[str, Any], spec: Mapping[str, Mapping[str, Any]],
                symbolic: Mapping[str, tuple[type, ...]] | None = None,
                concrete: Callable[[Any], Any] = _as_is) -> tuple[Any, ...]:
    """Check attr values against their declared types and constraints; return them normalised.

    Floats become ``float``, lists become tuples (hashable, usable as a cache key).

    ``symbolic``: per scalar attr type (``int``, ``float``), a framework's symbolic classes a value
    of it may also be (``torch.SymInt`` while ``torch.compile(dynamic=True)`` traces): such a value
    is kept as it is (never made a constant), its range compared symbolically (a guard), and
    ``concrete`` gives the value an error message shows.

    Raises:
        TypeError: an attr of the wrong type (the message names the op, the attr and the type).
        ValueError: an attr outside its range or choices.
    """
    sym = symbolic or {}
    out = []
    for name, value in values.items():
        info = spec[name]
        typ: str = info["type"]
        if typ.startswith("list[list["):
            inner = typ[10:-2]
            if not isinstance(value, (list, tuple)):
                raise TypeError(f"{op}(): attr '{name}' must be a {typ}, got {type(value).__name__}")
            rows = []
            for r in value:
                if not isinstance(r, (list, tuple)):
                    raise TypeError(f"{op}(): attr '{name}' must be a {typ}, got a row {type(r).__name__} {r!r}")
                rows.append(tuple(_scalar(op, name, inner, v, typ, sym, concrete) for v in r))
            norm: Any = tuple(rows)
            checked = [v for r in rows for v in r]
        elif typ.startswith("list["):
            inner = typ[5:-1]
            if not isinstance(value, (list, tuple)):
                raise TypeError(f"{op}(): attr '{name}' must be a {typ}, got {type(value).__name__}")
            items = [_scalar(op, name, inner, v, typ, sym, concrete) for v in value]
            norm = tuple(items)
            checked = items
        else:
            norm = _scalar(op, name, typ, value, typ, sym, concrete)
            checked = [norm]
        rng = info.get("range")
        if rng is not None:
            for v in checked:
                if not rng[0] <= v <= rng[1]:
                    raise ValueError(f"{op}(): attr '{name}' = {_shown(value, concrete)!r} is outside "
                                     f"[{number_text(rng[0])}, {number_text(rng[1])}]")
        choices = info.get("choices")
        if choices is not None and norm not in choices:
            raise ValueError(f"{op}(): attr '{name}' = {_shown(value, concrete)!r} is not one of {list(choices)}")
        out.append(norm)
    return tuple(out)


class _Unset:
    """The value of no call: what a wrapper's "last checked attrs" hold before the first call."""

    def __repr__(self) -> str:
        return "UNSET"


UNSET: Any = _Unset()

ATTR_CACHE_SIZE = 256
"""Attr value tuples a wrapper remembers as checked (per op); the set is emptied when full."""


def check_attrs_once(op: str, values: Mapping[str, Any], spec: Mapping[str, Mapping[str, Any]], checked: set[Any],
                     key: Any) -> None:
    """:func:`check_attrs`, then remember ``key`` (the values with their classes, built by the
    generated wrapper) in ``checked``: the wrapper skips the check when a call's key is there,
    so repeated calls with the same attrs pay one set lookup (the per-call cost of a Function
    path op with attrs, see docs/performance.md). Nothing is remembered when the check fails.
    """
    check_attrs(op, values, spec)
    if len(checked) >= ATTR_CACHE_SIZE:
        checked.clear()
    try:
        checked.add(key)
    except TypeError:  # an unhashable value (it passed the check): check it on every call
        pass


def list_key(value: Any) -> Any:
    """Hashable key of a list attr value for :func:`check_attrs_once`: the classes of the list and
    of each element with the elements (``[True]`` and ``[1]`` differ). Raises TypeError for
    unhashable elements (the wrapper then checks the value in full)."""
    if isinstance(value, (list, tuple)):
        return (value.__class__, *[list_key(v) if isinstance(v, (list, tuple)) else (v.__class__, v) for v in value])
    return (value.__class__, value)


def _is_bool(value: Any) -> bool:
    return isinstance(value, bool) or type(value).__name__ == "bool_"  # numpy.bool_


def _shown(value: Any, concrete: Callable[[Any], Any]) -> Any:
    """An attr value as an error message shows it: symbolic scalars made concrete, in lists too."""
    if isinstance(value, (list, tuple)):
        return type(value)(_shown(v, concrete) for v in value)
    return concrete(value)


def _scalar(op: str, name: str, typ: str, value: Any, full: str,
            symbolic: Mapping[str, tuple[type, ...]] | None = None, concrete: Callable[[Any], Any] = _as_is) -> Any:
    """``value`` as the plain Python scalar of attr type ``typ`` (what CustomRegOp and caches take);
    a value of one of ``symbolic[typ]``'s classes as it is (see :func:`check_attrs`)."""
    if symbolic and isinstance(value, symbolic.get(typ, ())):
        return value
    ok = _is_bool(value) if typ == "bool" else isinstance(value, _SCALAR[typ]) and not _is_bool(value)
    if not ok:
        article = "an" if full[0] in "aeiou" else "a"
        raise TypeError(f"{op}(): attr '{name}' must be {article} {full}, got {type(value).__name__} "
                        f"{_shown(value, concrete)!r}")
    plain = _PY[typ](value)
    if typ == "int" and not -(2**63) <= plain < 2**63:
        raise ValueError(f"{op}(): attr '{name}' = {value!r} does not fit an int attr (int64: -2**63 to 2**63-1)")
    if typ == "float" and _FLOAT32_MAX < abs(plain) < math.inf:
        raise ValueError(f"{op}(): attr '{name}' = {value!r} does not fit a float attr (float32: at most "
                         "3.4028235e+38 in magnitude, or inf)")
    return plain


_FLOAT32_MAX = 3.4028234663852886e38


# ----------------------------------------------------------------------------- Custom (aot) path
#
# A *layout* says how many tensors each input brings (1 for required, 0/1 for optional, N for
# dynamic) when a backend passes the inputs flattened (MindSpore's aot kernels).

def regroup(flat: Sequence[Any], kinds: Sequence[str], layout: Sequence[int]) -> list[Any]:
    """Flattened per-tensor values back to one value per input (None / a list for optional / dynamic)."""
    out: list[Any] = []
    p = 0
    for kind, n in zip(kinds, layout):
        if kind == "dynamic":
            out.append(list(flat[p:p + n]))
        elif kind == "optional":
            out.append(flat[p] if n else None)
        else:
            out.append(flat[p])
        p += n
    return out


def flat_positions(layout: Sequence[int], inputs: Sequence[int]) -> tuple[int, ...]:
    """Positions, in the flattened tensor list, of the tensors of the inputs with indices ``inputs``."""
    starts = [sum(layout[:i]) for i in range(len(layout))]
    return tuple(p for i in inputs for p in range(starts[i], starts[i] + layout[i]))


_MOVED_TO_MINDSPORE = frozenset({"aot_library", "load_extension", "reg_info", "encode_attr", "check_dtypes",
                                 "layout_suffix"})
"""Names that moved to :mod:`opgen.runtime.mindspore`; packages generated (and wheels
built) before the move call them here, so they still resolve, lazily (this module imports no
framework)."""


def __getattr__(name: str) -> Any:
    """Compatibility: ``opgen.runtime.aot_library`` and the other MindSpore names of
    :data:`_MOVED_TO_MINDSPORE`, for packages generated before they moved."""
    if name in _MOVED_TO_MINDSPORE:
        from . import mindspore as ms_runtime

        return getattr(ms_runtime, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
