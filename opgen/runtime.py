"""Framework-neutral runtime helpers used by generated packages (not by the generator itself).

The shape and attr helpers the generated wrappers and references call (``_rt``), so that the
rules they implement live in one place, and the library loading every backend's runtime uses
(:func:`package_library`: a wheel's prebuilt library, or a build when missing or stale, see
:mod:`opgen.build`). A backend's own runtime sits in its package
(:mod:`opgen.backends.mindspore.runtime`: ``aot_library``, ``load_extension``, ``reg_info``...).
Nothing here imports a framework.
"""

from __future__ import annotations

import importlib.util
import math
import numbers
import os
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence, Sized
from pathlib import Path
from types import ModuleType
from typing import Any

from . import build as _build
from . import env as _env
from .literals import number_text

_loaded: dict[str, ModuleType] = {}
_build_dirs: dict[Path, str] = {}
"""Build root per package directory, for packages that :func:`opgen.load` built elsewhere."""


def set_build_dir(pkg_dir: Path, build_dir: str | os.PathLike[str] | None) -> None:
    """Make import-time builds of the package in ``pkg_dir`` use the build root ``build_dir``."""
    if build_dir is not None:
        _build_dirs[Path(pkg_dir).resolve()] = os.fspath(build_dir)


def build_dir_of(pkg_dir: Path) -> str | None:
    """The build root :func:`set_build_dir` gave the package in ``pkg_dir`` (resolved), or None
    for the default one."""
    return _build_dirs.get(pkg_dir)


def prebuilt_library(pkg_dir: Path, kind: str, framework: str, version: str, label: str) -> str | None:
    """The library ``kind`` of a wheel-installed package (``opgen wheel``), or None for a generated one.

    ``framework`` is the key under which ``_prebuilt.json`` records the framework's version
    (``mindspore``), ``version`` the one this process runs, ``label`` its name in messages.

    The library is checked against the sha256 the wheel recorded (``_prebuilt.json``, else the
    wheel's ``RECORD``) before it is handed to the framework, once per process: a truncated, emptied or
    altered library gave SIGBUS, an empty ``RuntimeError`` or silently different results.
    Hashing costs about 1 ms per MB.

    Raises:
        ImportError: when the wheel was built for another framework version, Python or platform
            (the message names both); when ``_prebuilt.json`` is not valid or names no library of
            ``kind``; when the library is missing, unreadable or does not match its recorded sha256
            (the message names the file).
    """
    import json
    import sysconfig

    record = pkg_dir / "_prebuilt.json"
    if not record.is_file():
        return None
    reinstall = f"reinstall the package (pip install --force-reinstall {pkg_dir.name})"
    try:
        facts = json.loads(record.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ImportError(f"{record} is damaged ({exc}); {reinstall}") from None
    libraries = facts.get("libraries") if isinstance(facts, dict) else None
    if not isinstance(libraries, dict) or not isinstance(libraries.get(kind), str):
        raise ImportError(f"{record} names no {kind} library (its 'libraries' entry is missing or "
                          f"incomplete); {reinstall}")
    here = {
        framework: version,
        "python": f"{sys.version_info.major}.{sys.version_info.minor}",
        "platform": sysconfig.get_platform(),
    }
    for what, have in here.items():
        if facts.get(what) != have:
            raise ImportError(
                f"package '{facts.get('package', pkg_dir.name)}' was built by opgen wheel for {what} "
                f"{facts.get(what)} ({label} {facts.get(framework)}, Python {facts.get('python')}, "
                f"{facts.get('platform')}), but this is {what} {have}: install a wheel built for it, or "
                "run 'opgen wheel' again under this one"
            )
    path = pkg_dir / libraries[kind]
    if str(path) not in _verified:
        digests = facts.get("sha256")
        expected = digests.get(kind) if isinstance(digests, dict) else None
        if not isinstance(expected, str):
            expected = _recorded_digest(pkg_dir, libraries[kind])
        if expected is None:
            raise ImportError(f"{path}: no sha256 recorded for it (in {record} or the wheel's RECORD), so it "
                              f"cannot be checked; {reinstall}")
        try:
            size, actual = path.stat().st_size, _build._digest(path)
        except OSError as exc:
            raise ImportError(f"cannot read the prebuilt library {path}: {exc.strerror}; {reinstall}") from None
        if actual != expected:
            raise ImportError(f"the prebuilt library {path} is damaged or was altered after it was installed "
                              f"({size} bytes, sha256 {actual[:16]}..., the wheel recorded {expected[:16]}...); "
                              f"{reinstall}")
        _verified.add(str(path))
    return str(path)


_verified: set[str] = set()
"""Prebuilt libraries this process checked against their recorded sha256."""


def _recorded_digest(pkg_dir: Path, rel: str) -> str | None:
    """The sha256 (hex) of ``pkg_dir/rel`` in the RECORD of the wheel that installed it, if any."""
    import base64

    name = f"{pkg_dir.name}/{rel}"
    for record in sorted(pkg_dir.parent.glob(f"{pkg_dir.name}-*.dist-info/RECORD")):
        try:
            lines = record.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError):
            continue
        for line in lines:
            parts = line.rsplit(",", 2)
            if len(parts) == 3 and parts[0] == name and parts[1].startswith("sha256="):
                b64 = parts[1][len("sha256="):]
                try:
                    return base64.urlsafe_b64decode(b64 + "=" * (-len(b64) % 4)).hex()
                except ValueError:
                    return None
    return None


def _quiet() -> bool:
    return _env.flag("OPGEN_QUIET")


def _require_sanitizer_runtime() -> None:
    """With ``OPGEN_SANITIZE=1`` the libraries are ASan/UBSan builds, which abort the process when
    loaded unless the ASan runtime was loaded first; say what to do instead."""
    if not _build.sanitize_flags():
        return
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as fh:
            if "libasan" in fh.read():
                return
    except OSError:  # not Linux: let the loader speak
        return
    raise ImportError(
        "OPGEN_SANITIZE=1 loads address/undefined-sanitizer builds, which need the ASan runtime loaded first: "
        "run python with LD_PRELOAD=\"$(g++ -print-file-name=libasan.so) $(g++ -print-file-name=libstdc++.so)\" "
        "ASAN_OPTIONS=detect_leaks=0 "
        "(scripts/sanitize.sh does), or unset OPGEN_SANITIZE"
    )


def _built(pkg_dir: Path, kind: str) -> Path:
    """Build (or find) library ``kind`` of ``pkg_dir`` and hold it for the life of this process
    (:func:`opgen.build.hold_library`), so that ``opgen clean`` and later builds leave it in place.

    Raises:
        opgen.build.BuildError: when it does not compile.
        ImportError: when it is removed each time it is built.
    """
    for _ in range(3):
        path = _build.build(pkg_dir, kind, quiet=_quiet(), build_dir=_build_dirs.get(pkg_dir))
        if _build.hold_library(path):
            return path
    raise ImportError(f"the {kind} library of {pkg_dir} was removed each time it was built ({path}); "
                      "is something deleting the build folder?")


def package_library(pkg_dir: Path, kind: str, framework: str, version: str, label: str) -> str:
    """The library ``kind`` of the package in ``pkg_dir``: a wheel's prebuilt one
    (:func:`prebuilt_library`, its sha256 checked), else built first when missing or stale
    (:func:`opgen.build.build`; says so on stderr) under the build root :func:`set_build_dir` gave
    the package, and held for the life of the process (:func:`_built`).

    Raises:
        opgen.build.BuildError: when it does not compile.
        ImportError: for an ``OPGEN_SANITIZE=1`` build without the ASan runtime preloaded, a
            wheel built for another framework version, Python or platform, or a damaged one.
        opgen.env.EnvError: a bad ``OPGEN_NUM_THREADS`` / ``OPGEN_ISA`` (checked before it loads).
    """
    _require_sanitizer_runtime()
    _env.check_kernel_variables()
    pkg_dir = pkg_dir.resolve()
    return prebuilt_library(pkg_dir, kind, framework, version, label) or str(_built(pkg_dir, kind))


def load_library_module(name: str, path: str) -> ModuleType:
    """Import the Python extension module ``name`` from the shared library ``path``, once per path
    (a process loads each built library once; after an edit the new one is loaded beside the old).

    Raises:
        ImportError: when it does not load.
    """
    if path in _loaded:
        return _loaded[path]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:  # pragma: no cover - importlib contract
        raise ImportError(f"cannot load extension {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules[name] = module
    _loaded[path] = module
    return module


def checked() -> bool:
    """Whether this process builds and loads the checked mode (``OPGEN_CHECK=1``: bounds-checked
    kernel views, see :func:`opgen.build.checked_flags`)."""
    return bool(_build.checked_flags())


def broadcast_shape(*shapes: Sequence[int], op: str = "") -> list[int]:
    """NumPy broadcast of several shapes (the ``broadcast(...)`` shape rule of op ``op``).

    Raises:
        ValueError: when the shapes cannot be broadcast together (the message names the op).
    """
    nd = max((len(s) for s in shapes), default=0)
    out = [1] * nd
    for s in shapes:
        for i, d in enumerate(s):
            j = nd - len(s) + i
            if d == out[j] or d == 1:
                continue
            if out[j] == 1:
                out[j] = int(d)
                continue
            prefix = f"{op}(): " if op else ""
            raise ValueError(
                f"{prefix}shapes cannot be broadcast together: {' '.join(str(tuple(x)) for x in shapes)}"
            )
    return out


def _fail(op: str, message: str) -> ValueError:
    return ValueError(f"{op}(): {message}" if op else message)


def _shape_text(shape: Sequence[int]) -> str:
    return "(" + ", ".join(str(int(d)) for d in shape) + ("," if len(shape) == 1 else "") + ")"


def normalize_axes(axis: int | Sequence[int], rank: int, op: str = "") -> list[int]:
    """Axes of a tensor of ``rank`` as sorted non-negative ints; ``[]`` means every axis.

    Same rules and messages as ``opgen::normalize_axes`` in C++ (``rules.h``), and numpy's: a
    single int axis of a 0-d tensor may be 0 or -1 (``np.sum(np.float32(2), axis=0)``), an axis
    in a list may not (``np.sum(np.float32(2), axis=(0,))`` raises AxisError).

    Raises:
        ValueError: an axis outside ``[-rank, rank)`` (``[-1, 0]`` for the int axis of rank 0), or
            repeated.
    """
    single = isinstance(axis, int)
    axes = [int(axis)] if isinstance(axis, int) else [int(a) for a in axis]
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


def dim_of(shape: Sequence[int], axis: int, name: str, op: str = "") -> int:
    """Dimension ``axis`` (negative counts from the end) of input ``name``'s shape (explicit dim lists).

    Raises:
        ValueError: when the input has too few dimensions (same message as ``opgen::dim_of``).
    """
    rank = len(shape)
    if not -rank <= axis < rank:
        raise _fail(op, f"input '{name}' has shape {_shape_text(shape)}, which has no dimension {axis}")
    return int(shape[axis])


def reduce_shape(x: Sequence[int], axis: int | Sequence[int], keep_dims: bool, op: str = "") -> list[int]:
    """Shape of ``x`` reduced over ``axis`` (the ``reduce(x, axis, keep_dims)`` shape rule).

    Raises:
        ValueError: a bad axis (see :func:`normalize_axes`).
    """
    axes = normalize_axes(axis, len(x), op)
    if keep_dims:
        return [1 if i in axes else int(d) for i, d in enumerate(x)]
    return [int(d) for i, d in enumerate(x) if i not in axes]


def matmul_shape(
    a: Sequence[int], b: Sequence[int], transpose_a: bool = False, transpose_b: bool = False, op: str = ""
) -> list[int]:
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
    return [int(m), int(n)]


def concat_shape(xs: Sequence[Sequence[int]], axis: int, op: str = "") -> list[int]:
    """Shape of the tensors ``xs`` joined along ``axis`` (the ``concat(xs, axis)`` shape rule).

    Raises:
        ValueError: no tensors, 0-d tensors, ranks that differ, a bad axis, or other dims that differ.
    """
    if not xs:
        raise _fail(op, "concat needs at least one tensor")
    rank = len(xs[0])
    if rank == 0:
        raise _fail(op, "concat cannot join 0-d tensors")
    (ax,) = normalize_axes(axis, rank, op)
    out = [int(d) for d in xs[0]]
    for i, s in enumerate(xs[1:], start=1):
        if len(s) != rank:
            raise _fail(op, f"concat: tensor {i} has rank {len(s)}, tensor 0 has rank {rank}")
        for d in range(rank):
            if d != ax and int(s[d]) != out[d]:
                raise _fail(op, f"concat: tensor {i} has shape {_shape_text(s)}, which differs from "
                                f"{_shape_text(xs[0])} outside axis {ax}")
        if int(s[ax]) > INT64_MAX - out[ax]:
            raise _fail(op, f"concat: the joined axis {ax} would have more than 2**63 - 1 entries")
        out[ax] += int(s[ax])
    return out


def gather_shape(x: Sequence[int], indices: Sequence[int], axis: int, op: str = "") -> list[int]:
    """Shape of ``x`` gathered along ``axis`` at ``indices`` (the ``gather(x, indices, axis)`` shape
    rule): ``x.shape[:axis] + indices.shape + x.shape[axis + 1:]``, as ``numpy.take``.

    Same rules and messages as ``opgen::gather_shape`` in C++ (``rules.h``).

    Raises:
        ValueError: a 0-d ``x`` or a bad axis.
    """
    rank = len(x)
    if rank == 0:
        raise _fail(op, "gather cannot index a 0-d tensor")
    (ax,) = normalize_axes(axis, rank, op)
    return [int(d) for d in x[:ax]] + [int(d) for d in indices] + [int(d) for d in x[ax + 1:]]


# ----------------------------------------------------------------------------- shape language
# The Python meaning of the shape language (opgen/shapes/): generated expressions call these;
# opgen/include/opgen/sym.h is the C++ twin (same results, same messages; tests compare them).

INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)


class ShapeError(ValueError):
    """A shape expression that cannot be evaluated on these shapes and attrs, or a contract that
    does not hold; the message does not name the op (the caller adds ``<op>(): ``)."""


def _i64(v: int) -> int:
    if not INT64_MIN <= v <= INT64_MAX:
        raise ShapeError("shape arithmetic overflows int64")
    return v


def ints(values: Sequence[Any]) -> list[int]:
    """A shape or list[int] attr as a list of Python ints."""
    return [int(v) for v in values]


def int_rows(values: Sequence[Sequence[Any]]) -> list[list[int]]:
    """A list[list[int]] attr as a list of lists of Python ints."""
    return [[int(v) for v in r] for r in values]


def row(rows: Sequence[Sequence[int]], i: int) -> list[int]:
    """``rows[i]`` of a list[list[int]] attr, negative ``i`` counting from the end.

    Raises:
        ShapeError: an index out of range.
    """
    n = len(rows)
    if not -n <= i < n:
        raise ShapeError(f"index {i} is out of range for {_fact_value(rows)}, which has {n} entries")
    return [int(v) for v in rows[i]]


def all_of(conditions: Iterable[Any]) -> bool:
    """``all(cond for v in s)``: every condition true (true for none)."""
    return all(bool(c) for c in conditions)


def any_of(conditions: Iterable[Any]) -> bool:
    """``any(cond for v in s)``: some condition true (false for none)."""
    return any(bool(c) for c in conditions)


def length(values: Sized) -> int:
    """``len``: a rank, a list's length, or the number of tensors of a dynamic input."""
    return len(values)


def at(values: Sequence[int], i: int) -> int:
    """``values[i]``, negative ``i`` counting from the end.

    Raises:
        ShapeError: an index out of range.
    """
    n = len(values)
    if not -n <= i < n:
        raise ShapeError(f"index {i} is out of range for {_shape_text(values)}, which has {n} entries")
    return int(values[i])


def add(a: int, b: int) -> int:
    """``a + b`` (int64, checked)."""
    return _i64(int(a) + int(b))


def sub(a: int, b: int) -> int:
    """``a - b`` (int64, checked)."""
    return _i64(int(a) - int(b))


def mul(a: int, b: int) -> int:
    """``a * b`` (int64, checked)."""
    return _i64(int(a) * int(b))


def floordiv(a: int, b: int) -> int:
    """``a // b``, rounding toward -infinity.

    Raises:
        ShapeError: ``b == 0``, or an int64 overflow.
    """
    if b == 0:
        raise ShapeError("division by zero in a shape expression")
    return _i64(int(a) // int(b))


def mod(a: int, b: int) -> int:
    """``a % b`` with the sign of ``b``.

    Raises:
        ShapeError: ``b == 0``.
    """
    if b == 0:
        raise ShapeError("division by zero in a shape expression")
    return int(a) % int(b)


def neg(a: int) -> int:
    """``-a`` (int64, checked)."""
    return _i64(-int(a))


def imin(*xs: int) -> int:
    """``min(a, b, ...)``."""
    return int(min(xs))


def imax(*xs: int) -> int:
    """``max(a, b, ...)``."""
    return int(max(xs))


def repeat(values: Sequence[int], n: int) -> list[int]:
    """``values * n``.

    Raises:
        ShapeError: a result longer than any shape.
    """
    if n > 0 and values and n > 1 << 20:
        raise ShapeError(f"a list repeated {n} times is longer than any shape")
    return list(values) * max(int(n), 0)


def check_output(shape: Sequence[int], output: str) -> list[int]:
    """An output shape as a list of ints, checked: every dim >= 0, the element count within int64.

    Raises:
        ShapeError: a negative dim, or too many elements.
    """
    dims = [int(d) for d in shape]
    if any(d < 0 for d in dims):
        raise ShapeError(f"output '{output}' would have shape {_shape_text(dims)}, with a negative dim")
    numel = 1
    for d in dims:
        numel *= d
        if numel > INT64_MAX:
            raise ShapeError(f"output '{output}' would have shape {_shape_text(dims)}, more elements than "
                             "int64 can count")
    return dims


def holds(condition: Callable[[], Any]) -> bool:
    """Whether a contract holds: ``condition()`` is true; an error while evaluating it (a
    shape function's rule, an index out of range) means it does not (as ``opgen::sym::require``)."""
    try:
        return bool(condition())
    except ValueError:
        return False


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


def violation(text: str, inputs: Sequence[tuple[str, Any]], attrs: Sequence[tuple[str, Any]]) -> ShapeError:
    """The error of contract ``text`` not holding, showing the shapes and attr values it reads
    (the same message as ``opgen::sym::require``)."""
    facts = []
    for name, shape in inputs:
        if shape and not isinstance(shape[0], numbers.Integral):  # a dynamic input: a list of shapes
            facts.append(f"{name} has shapes [" + ", ".join(_shape_text(s) for s in shape) + "]")
        else:
            facts.append(f"{name} has shape {_shape_text(shape)}")
    facts += [f"{name} = {_fact_value(value)}" for name, value in attrs]
    return ShapeError(f"contract '{text}' does not hold: " + ", ".join(facts))


_SCALAR: dict[str, tuple[type, ...]] = {
    "int": (numbers.Integral,),  # numpy integers too (shapes computed with numpy are np.int64)
    "float": (numbers.Real,),  # numpy floats too (np.float32 is no Python float)
    "bool": (bool,),
    "str": (str,),
}
_PY = {"int": int, "float": float, "bool": bool, "str": str}


def check_attrs(op: str, values: Mapping[str, Any], spec: Mapping[str, Mapping[str, Any]]) -> tuple[Any, ...]:
    """Check attr values against their declared types and constraints; return them normalised.

    Floats become ``float``, lists become tuples (hashable, usable as a cache key).

    Raises:
        TypeError: an attr of the wrong type (the message names the op, the attr and the type).
        ValueError: an attr outside its range or choices.
    """
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
                rows.append(tuple(_scalar(op, name, inner, v, typ) for v in r))
            norm: Any = tuple(rows)
            checked = [v for r in rows for v in r]
        elif typ.startswith("list["):
            inner = typ[5:-1]
            if not isinstance(value, (list, tuple)):
                raise TypeError(f"{op}(): attr '{name}' must be a {typ}, got {type(value).__name__}")
            items = [_scalar(op, name, inner, v, typ) for v in value]
            norm = tuple(items)
            checked = items
        else:
            norm = _scalar(op, name, typ, value, typ)
            checked = [norm]
        rng = info.get("range")
        if rng is not None:
            for v in checked:
                if not rng[0] <= v <= rng[1]:
                    raise ValueError(f"{op}(): attr '{name}' = {value!r} is outside "
                                     f"[{number_text(rng[0])}, {number_text(rng[1])}]")
        choices = info.get("choices")
        if choices is not None and norm not in choices:
            raise ValueError(f"{op}(): attr '{name}' = {value!r} is not one of {list(choices)}")
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


def _scalar(op: str, name: str, typ: str, value: Any, full: str) -> Any:
    """``value`` as the plain Python scalar of attr type ``typ`` (what CustomRegOp and caches take)."""
    ok = _is_bool(value) if typ == "bool" else isinstance(value, _SCALAR[typ]) and not _is_bool(value)
    if not ok:
        article = "an" if full[0] in "aeiou" else "a"
        raise TypeError(f"{op}(): attr '{name}' must be {article} {full}, got {type(value).__name__} {value!r}")
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


def check_dtype_names(
    op: str,
    got: Sequence[str],
    inputs: Sequence[str],
    kinds: Sequence[str],
    layout: Sequence[int],
    rows: Sequence[Sequence[str]],
    outputs: Sequence[str] = (),
) -> bool:
    """Raise TypeError unless the flattened input dtypes, by name (``float32``), match one row.

    ``rows`` give per-input dtype names, then per-output ones (named by ``outputs``), which the
    message shows like the kernels' own ("supported dtype_format rows: (x=float32,
    out=float32), ..."). A backend turns its framework's dtypes into these names.

    Raises:
        TypeError: naming the op, the dtypes given and the supported rows.
    """
    for row in rows:
        expanded = [row[i] for i, n in enumerate(layout) for _ in range(n)]
        if list(got) == expanded:
            return True
    names = []
    for name, kind, n in zip(inputs, kinds, layout):
        names += [f"{name}[{j}]" for j in range(n)] if kind == "dynamic" else [name] * n
    given = ", ".join(f"{n}={g}" for n, g in zip(names, got))
    columns = list(inputs) + list(outputs)
    supported = ", ".join("(" + ", ".join(f"{n}={r}" for n, r in zip(columns, row)) + ")" for row in rows)
    raise TypeError(f"{op}(): unsupported dtypes ({given}); supported dtype_format rows: {supported}")


_MOVED_TO_MINDSPORE = frozenset({"aot_library", "load_extension", "reg_info", "encode_attr", "check_dtypes",
                                 "layout_suffix"})
"""Names that moved to :mod:`opgen.backends.mindspore.runtime`; packages generated (and wheels
built) before the move call them here, so they still resolve, lazily (this module imports no
framework)."""


def __getattr__(name: str) -> Any:
    """Compatibility: ``opgen.runtime.aot_library`` and the other MindSpore names of
    :data:`_MOVED_TO_MINDSPORE`, for packages generated before they moved."""
    if name in _MOVED_TO_MINDSPORE:
        from .backends.mindspore import runtime as ms_runtime

        return getattr(ms_runtime, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
