"""Runtime helpers used by generated packages (not by the generator itself).

Generated modules call :func:`aot_library` and :func:`load_extension` at import, which build
the package's libraries when missing or stale (see :mod:`opgen.build`), and use the small
shape and attr helpers below so the rules they implement live in one place.
"""

from __future__ import annotations

import importlib.util
import numbers
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from . import build as _build

_loaded: dict[str, ModuleType] = {}


def _quiet() -> bool:
    import os

    return os.environ.get("OPGEN_QUIET") in ("1", "true", "yes")


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


def aot_library(module_file: str) -> str:
    """Absolute path of the aot library of the package containing ``module_file``.

    Builds it first when missing or stale (a few seconds; says so on stderr).

    Raises:
        opgen.build.BuildError: when the kernels do not compile.
        ImportError: for an ``OPGEN_SANITIZE=1`` build without the ASan runtime preloaded.
    """
    _require_sanitizer_runtime()
    return str(_build.build(Path(module_file).parent, "aot", quiet=_quiet()))


def load_extension(module_file: str) -> ModuleType:
    """Import the pybind11 extension of the package containing ``module_file``.

    Builds it first when missing or stale (about 25-50 s per op unit on 2 cores; says so on
    stderr). A process keeps the first extension it loaded (a shared library cannot be
    reloaded), like ``CustomOpBuilder.load()``.

    Raises:
        opgen.build.BuildError: when the Function<T> sources do not compile.
        ImportError: for an ``OPGEN_SANITIZE=1`` build without the ASan runtime preloaded.
    """
    _require_sanitizer_runtime()
    pkg_dir = Path(module_file).parent.resolve()
    name = f"{pkg_dir.name}_ext"
    if name in _loaded:
        return _loaded[name]
    path = _build.build(pkg_dir, "ext", quiet=_quiet())
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:  # pragma: no cover - importlib contract
        raise ImportError(f"cannot load extension {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules.setdefault(name, module)
    _loaded[name] = module
    return module


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
        if typ.startswith("list["):
            inner = typ[5:-1]
            if not isinstance(value, (list, tuple)):
                raise TypeError(f"{op}(): attr '{name}' must be a {typ}, got {type(value).__name__}")
            items = [_scalar(op, name, inner, v, typ) for v in value]
            norm: Any = tuple(items)
            checked = items
        else:
            norm = _scalar(op, name, typ, value, typ)
            checked = [norm]
        rng = info.get("range")
        if rng is not None:
            for v in checked:
                if not rng[0] <= v <= rng[1]:
                    raise ValueError(f"{op}(): attr '{name}' = {value!r} is outside [{rng[0]:g}, {rng[1]:g}]")
        choices = info.get("choices")
        if choices is not None and norm not in choices:
            raise ValueError(f"{op}(): attr '{name}' = {value!r} is not one of {list(choices)}")
        out.append(norm)
    return tuple(out)


def _is_bool(value: Any) -> bool:
    return isinstance(value, bool) or type(value).__name__ == "bool_"  # numpy.bool_


def _scalar(op: str, name: str, typ: str, value: Any, full: str) -> Any:
    """``value`` as the plain Python scalar of attr type ``typ`` (what CustomRegOp and caches take)."""
    ok = _is_bool(value) if typ == "bool" else isinstance(value, _SCALAR[typ]) and not _is_bool(value)
    if not ok:
        article = "an" if full[0] in "aeiou" else "a"
        raise TypeError(f"{op}(): attr '{name}' must be {article} {full}, got {type(value).__name__} {value!r}")
    return _PY[typ](value)
