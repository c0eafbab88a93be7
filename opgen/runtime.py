"""Framework-neutral runtime helpers used by generated packages (not by the generator itself).

The shape and attr helpers the generated wrappers and references call (``_rt``), so that the
rules they implement live in one place (the shape rules are :mod:`opgen.shape_runtime`'s, over
plain ints, re-exported here), and the library loading every backend's runtime uses
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
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from . import backends
from . import build as _build
from . import env as _env
from .literals import number_text

# The shape rules and the shape language's Python meaning over plain ints, defined once in
# opgen.shape_runtime (a framework's symbolic sizes use the same definitions, see there);
# generated packages call them here as ``_rt.<name>``: these are the same function objects.
from .shape_runtime import *  # noqa: F403 - re-exported: shape_runtime.__all__

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
            size, actual = path.stat().st_size, _build.digest(path)
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
        path = backends.build(pkg_dir, kind, quiet=_quiet(), build_dir=_build_dirs.get(pkg_dir))
        if _build.hold_library(path):
            return path
    raise ImportError(f"the {kind} library of {pkg_dir} was removed each time it was built ({path}); "
                      "is something deleting the build folder?")


def package_library(pkg_dir: Path, kind: str, framework: str, version: str, label: str) -> str:
    """The library ``kind`` of the package in ``pkg_dir``: a wheel's prebuilt one
    (:func:`prebuilt_library`, its sha256 checked), else built first when missing or stale
    (:func:`opgen.backends.build`; says so on stderr) under the build root :func:`set_build_dir` gave
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
    for dtypes in rows:
        expanded = [dtypes[i] for i, n in enumerate(layout) for _ in range(n)]
        if list(got) == expanded:
            return True
    names = []
    for name, kind, n in zip(inputs, kinds, layout):
        names += [f"{name}[{j}]" for j in range(n)] if kind == "dynamic" else [name] * n
    given = ", ".join(f"{n}={g}" for n, g in zip(names, got))
    columns = list(inputs) + list(outputs)
    supported = ", ".join("(" + ", ".join(f"{n}={r}" for n, r in zip(columns, dtypes)) + ")" for dtypes in rows)
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
