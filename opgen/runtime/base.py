"""The neutral base of every backend's runtime: a package's libraries and the dtype-row check.

A wheel's prebuilt library, its sha256 checked (:func:`prebuilt_library`), or, for a package
``opgen generate`` wrote, a build when it is missing or stale (:func:`package_library`, through
:func:`generator`: opgen's own :mod:`opgen.runtime_base`), loading an extension module
(:func:`load_library_module`), and the dtype check against ``dtype_format`` rows by name
(:func:`check_dtype_names`). Backends' runtimes (:mod:`opgen.runtime.mindspore`...) build on this
module. Nothing here imports a framework, or opgen outside :mod:`opgen.runtime`: every generated
package carries a copy of this package (``<pkg>/_runtime/``, see :mod:`opgen.runtime`), which
runs where opgen is not installed.
"""

from __future__ import annotations

import hashlib
import importlib.util
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from . import env as _env


def shared(name: str, make: Callable[[], Any]) -> Any:
    """The one object of this process named ``name``, made by ``make`` the first time.

    Every generated package carries its own copy of this runtime, and ``opgen.load`` imports a
    package again after an edit; what must be one per process (MindSpore's call lock, the torch
    operator namespaces a process has loaded) lives here, in a module of ``sys.modules`` that all
    copies find under the same name.
    """
    holder = sys.modules.get(_SHARED)
    if holder is None:
        holder = sys.modules.setdefault(_SHARED, ModuleType(_SHARED, "State shared by opgen packages' runtimes."))
    value = getattr(holder, name, None)
    if value is None:
        value = make()
        setattr(holder, name, value)
    return value


_SHARED = "_opgen_runtime_shared"
"""The ``sys.modules`` entry :func:`shared` keeps its objects in."""


def generator(pkg_dir: Path) -> ModuleType:
    """opgen's :mod:`opgen.runtime_base` (the generator's half: building libraries), for a package
    that has no prebuilt ones (``opgen generate`` wrote it; a wheel's package never needs it).

    Raises:
        ImportError: opgen is not installed (the message says what to do).
    """
    try:
        return importlib.import_module("opgen.runtime_base")
    except ModuleNotFoundError as exc:
        if exc.name not in ("opgen", "opgen.runtime_base"):
            raise
        raise ImportError(
            f"package '{pkg_dir.name}' ({pkg_dir}) has no prebuilt libraries (it was not installed from a wheel "
            "that 'opgen wheel' made), and building them needs opgen, which is not installed here: "
            "pip install opgen, or install the package's wheel") from None


def digest(path: Path) -> str:
    """The sha256 of the file ``path`` (hex), read in 1 MiB blocks: what a published library's record holds."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


_loaded: dict[str, ModuleType] = {}


def prebuilt_library(pkg_dir: Path, kind: str, framework: str, version: str, label: str,
                     devices: Mapping[str, str | None] | None = None,
                     release: Callable[[str], str] | None = None) -> str | None:
    """The library ``kind`` of a wheel-installed package (``opgen wheel``), or None for a generated one.

    ``framework`` is the key under which ``_prebuilt.json`` records the framework's version
    (``mindspore``), ``version`` the one this process runs, ``label`` its name in messages.
    ``devices``: what this process runs per device the wheel may have kernels for (PyTorch's
    ``{"cuda": torch.version.cuda}``, None for a CPU build): a library with CUDA kernels needs a
    CUDA build of the framework of the same CUDA major version.
    ``release``: the part of a framework version that a library's binary compatibility follows
    (PyTorch's ``2.13`` of ``2.13.0+cpu``: one C++ ABI per minor release, the same for its CPU and
    CUDA builds); None: the whole version must match.

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
        built = facts.get(what)
        if what == framework and release is not None and isinstance(built, str):
            same = release(built) == release(have)
            runs_under = f" (it runs under any {label} {release(built)}.x build)"
        else:
            same, runs_under = built == have, ""
        if not same:
            raise ImportError(
                f"package '{facts.get('package', pkg_dir.name)}' was built by opgen wheel for {what} "
                f"{built} ({label} {facts.get(framework)}, Python {facts.get('python')}, "
                f"{facts.get('platform')}){runs_under}, but this is {what} {have}: install a wheel built for it, "
                "or run 'opgen wheel' again under this one"
            )
    recorded = facts.get("devices") if isinstance(facts.get("devices"), dict) else {}
    for device, running in (devices or {}).items():
        built = recorded.get(device)
        if not isinstance(built, dict):
            continue
        want = str(built.get("version"))
        if running is None or running.split(".")[0] != want.split(".")[0]:
            name = device.upper()
            runs = f"{label} with {name} {running}" if running else f"a {label} build without {name}"
            archs = ", ".join(map(str, built.get("archs", [])))
            raise ImportError(
                f"package '{facts.get('package', pkg_dir.name)}' was built by opgen wheel with {device.upper()} "
                f"kernels for {device.upper()} {want} (GPU architectures {archs}), but this process runs {runs}: "
                "install a wheel built for it, or run 'opgen wheel' again under this one")
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
            size, actual = path.stat().st_size, digest(path)
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


def require_sanitizer_runtime() -> None:
    """With ``OPGEN_SANITIZE=1`` the libraries are ASan/UBSan builds, which abort the process when
    loaded unless the ASan runtime was loaded first; say what to do instead."""
    if not _env.flag("OPGEN_SANITIZE"):
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


def package_library(pkg_dir: Path, kind: str, framework: str, version: str, label: str) -> str:
    """The library ``kind`` of the package in ``pkg_dir``: a wheel's prebuilt one
    (:func:`prebuilt_library`, its sha256 checked), else built by opgen first when missing or
    stale (:func:`generator`'s ``build_library``; says so on stderr) and held for the life of the
    process.

    Raises:
        opgen.build.BuildError: when it does not compile.
        ImportError: for an ``OPGEN_SANITIZE=1`` build without the ASan runtime preloaded, a
            wheel built for another framework version, Python or platform, or a damaged one; a
            package with no prebuilt library where opgen is not installed.
        EnvError: a bad ``OPGEN_NUM_THREADS`` / ``OPGEN_ISA`` (checked before it loads).
    """
    require_sanitizer_runtime()
    _env.check_kernel_variables()
    pkg_dir = pkg_dir.resolve()
    found = prebuilt_library(pkg_dir, kind, framework, version, label)
    return found if found is not None else str(generator(pkg_dir).build_library(pkg_dir, kind))


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
