"""Stage 7 — build: compile a generated package's C++ into its shared libraries.

What a package's libraries are is its backend's (:meth:`opgen.backends.Backend.build_library`;
MindSpore's aot library and ``Function<T>`` extension are in
:mod:`opgen.backends.mindspore.build`), and so is the dispatch to the package's backend
(:func:`opgen.backends.build`, :func:`opgen.backends.build_library`): this module imports no
backend. It is the neutral machinery they use: every
library links each op's kernel unit (``csrc/<op>_kernel.cc``: the bodies, no framework header,
:func:`kernel_target`), compiled once for all of the package's libraries, and one ninja file,
lock and publish step per package (:func:`build_target`).

Each library is published under a name holding the hash of everything that went into it
(sources, headers, unit layout, flags, compiler, the framework's version): when that file exists,
nothing runs, not even ninja.  Otherwise one ninja file per package compiles the translation
units the library needs in parallel and links them; ninja's own dependency tracking (depfiles,
command lines and a toolchain stamp) recompiles only the units whose inputs changed: an edited
kernel body recompiles its kernel unit (about a second) and relinks.

Units.  A kernel or aot unit is one op.  A Function<T> unit pays about 9 s of MindSpore's
``function.h`` whatever it holds, against well under a second per op, so those sources are
grouped into "unity" units (``#include`` of several ``*_function.cc``) of at most
:data:`MAX_OPS_PER_UNIT` ops; the bindings unit stays apart; ``ops_per_unit=1`` gives one
unit per op.  The layout depends only on the sources, never on ``-j``: a library built with
any job count is the one an import finds.
Optionally (``pch=True``) the ext units share a precompiled ``opgen/ms.h``.
A compiler launcher (``OPGEN_CXX_LAUNCHER``, or ``CXX="ccache g++"``) prefixes every command and
is not part of the key.  User flags come from ``csrc/build.json`` (:func:`user_flags`).

Safety.  Objects, the precompiled header and the linked library are written to a temporary
name and renamed, so a killed build never leaves a truncated file under a real name; only a
successful link is published (copied, then renamed into place) and only published files are
ever loaded; each has a record of its size and sha256 beside it, and one that no longer matches
its record (truncated or altered after publishing) is rebuilt.  The build folder is guarded by
an ``flock`` (released by the kernel when its holder dies, never inherited by ninja or the
compilers) with a timeout whose error names the PID holding it; on Linux ninja is told to stop
(and stops its compilers) when the process that started it dies.
"""

from __future__ import annotations

import ctypes.util
import fcntl
import functools
import hashlib
import json
import math
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from . import env as _env
from .devices import DIAGNOSTICS, DeviceUnavailable, Toolchain, cuda
from .devices import cpu as _cpu
from .names import NAME_MAX, PID_TEMP_SUFFIX
from .resources import include_dir
from .runtime.base import digest  # one sha256 of a published library, for the builder and the loader

LOCK_TIMEOUT_S = 900.0
"""Default wait for another build of the same package (``$OPGEN_LOCK_TIMEOUT`` overrides)."""
MAX_OPS_PER_UNIT = 16
"""Upper bound on the ops one ext unit holds when grouping automatically."""
MIN_UNITS = 1
"""Function<T> units when grouping automatically (the bindings unit, always apart, compiles beside it)."""
BUILD_FORMAT = "opgen-build-v3"
"""Changes whenever the build layout changes, so old objects and libraries are not reused."""


class BuildError(RuntimeError):
    """A failed compile or link, or a build lock that could not be had; the message says which."""


# --------------------------------------------------------------------------- configuration


def build_root(override: str | os.PathLike[str] | None = None) -> Path:
    """Root of all opgen builds: ``override``, else ``$OPGEN_BUILD_DIR``, else ``~/.cache/opgen``."""
    if override:
        return Path(os.fspath(override)).expanduser().resolve()
    chosen = _env.path("OPGEN_BUILD_DIR")
    if chosen:
        return chosen
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return (base / "opgen").resolve()


def package_build_dir(pkg_dir: Path, root: str | os.PathLike[str] | None = None) -> Path:
    """Build folder of one generated package (keyed by its absolute path) under :func:`build_root`."""
    pkg_dir = pkg_dir.resolve()
    tag = hashlib.sha256(str(pkg_dir).encode()).hexdigest()[:10]
    return build_root(root) / f"{pkg_dir.name}-{tag}"


def default_jobs() -> int:
    """Parallel compile jobs: ``$OPGEN_JOBS``, else the CPUs this process may run on."""
    env = _env.count("OPGEN_JOBS")
    if env:
        return env
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def env_flag(name: str) -> bool:
    """The ``OPGEN_*`` switch ``name`` (:func:`opgen.env.flag`).

    Raises:
        opgen.env.EnvError: a value that is not a switch.
    """
    return _env.flag(name)


def env_ops_per_unit() -> int | None:
    """``$OPGEN_OPS_PER_UNIT``: ops per unity unit, or None (unset: automatic, see :func:`group_units`).

    Raises:
        opgen.env.EnvError: a value that is not a positive whole number.
    """
    return _env.count("OPGEN_OPS_PER_UNIT")


def _lock_timeout() -> float:
    env = _env.seconds("OPGEN_LOCK_TIMEOUT")
    return LOCK_TIMEOUT_S if env is None else env


def compiler_argv() -> list[str]:
    """The command that compiles host units: the launcher's words (if any), then ``$CXX`` as words
    (the CPU device's toolchain, :mod:`opgen.devices.cpu`)."""
    return _cpu.compiler_argv()


def compiler_identity() -> str:
    """The host compiler's path, size and mtime (:func:`opgen.devices.cpu.compiler_identity`).

    Raises:
        BuildError: the compiler or its launcher is not found.
    """
    try:
        return _cpu.compiler_identity()
    except DeviceUnavailable as exc:
        raise BuildError(str(exc)) from None


def _ninja() -> str:
    try:
        import ninja

        exe = os.path.join(ninja.BIN_DIR, "ninja")
        if os.path.exists(exe):
            return exe
    except ImportError:
        pass
    found = shutil.which("ninja")
    if found is None:
        raise BuildError("ninja not found: pip install ninja (it is in opgen's 'run' extra)")
    return found


def sanitize_flags() -> tuple[str, ...]:
    """Extra flags for ``OPGEN_SANITIZE=1`` builds (address + undefined behaviour)."""
    if env_flag("OPGEN_SANITIZE"):
        return ("-fsanitize=address,undefined", "-fno-omit-frame-pointer", "-g")
    return ()


def checked_flags() -> tuple[str, ...]:
    """Extra compile flags for ``OPGEN_CHECK=1`` builds (checked mode: bounds-checked views, see
    opgen/kernel.h; ``opgen build --checked``, ``opgen test``).  Part of the content hash, so a
    checked library and a plain one are cached side by side and never replace each other."""
    return ("-DOPGEN_CHECKED=1",) if env_flag("OPGEN_CHECK") else ()


# --------------------------------------------------------------------------- targets and units


def kernel_flags() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Compile and link flags of the kernel layer (both libraries): vector loops and math, BLAS.

    - ``-fopenmp-simd`` (the SIMD directives only, no OpenMP runtime), ``-fno-math-errno`` and
      ``-fno-trapping-math`` (neither changes a result: no errno is read, no FP trap is enabled)
      let ``OPGEN_SIMD`` loops (``-DOPGEN_OMP_SIMD``) vectorise, selects included; on x86-64 glibc with libmvec,
      ``-DOPGEN_VECTOR_MATH`` + ``-lmvec`` vectorise exp/log/tanh/erf... (``opgen/kernel.h``).
    - OpenBLAS from the ``scipy-openblas32`` wheel (the ``run`` extra), when importable:
      ``-DOPGEN_BLAS`` + its library, found through its rpath (``opgen/blas.h`` declares the two
      routines it calls: the wheel's ``cblas.h`` clashes with MindSpore's headers).
    """
    return _kernel_flags()


@functools.lru_cache(maxsize=1)
def _kernel_flags() -> tuple[tuple[str, ...], tuple[str, ...]]:
    cflags: tuple[str, ...] = ("-fopenmp-simd", "-DOPGEN_OMP_SIMD=1", "-fno-math-errno", "-fno-trapping-math")
    ldflags: tuple[str, ...] = ()
    if sys.platform.startswith("linux") and platform.machine() == "x86_64" and ctypes.util.find_library("mvec"):
        cflags += ("-DOPGEN_VECTOR_MATH=1",)
        ldflags += ("-lmvec",)
    try:
        import scipy_openblas32 as blas  # type: ignore[import-not-found, import-untyped, unused-ignore]

        lib = blas.get_lib_dir()
        cflags += ("-DOPGEN_BLAS=1",)
        ldflags += (f"-L{lib}", f"-l{blas.get_library()}", f"-Wl,-rpath,{lib}")
    except (ImportError, AttributeError):
        pass
    return cflags, ldflags


@dataclass(frozen=True)
class Unit:
    """One translation unit: the object it makes (relative to the build folder) and its sources.

    A unit of several sources is compiled from a generated ``<obj>.cc`` that includes them.
    """

    obj: str
    sources: tuple[Path, ...]
    label: str
    cflags: tuple[str, ...] = ()
    """Flags for this unit alone, after the target's (the op's own ``build:`` flags)."""

    @property
    def wrapper(self) -> str | None:
        """The generated unity source (relative to the build folder), or None for one source
        (``.cu`` when its sources are CUDA units)."""
        if len(self.sources) <= 1:
            return None
        return self.obj[: -len(".o")] + (".cu" if self.sources[0].suffix == ".cu" else ".cc")


@dataclass(frozen=True)
class Target:
    """One set of units to compile with the same flags, and (unless ``name`` is empty) link.

    ``kind`` names it in the build folder: ``kernels`` (each op's kernel layer, compiled once and
    linked into each of the backend's libraries: ``objects`` of the others), else one of its
    backend's ``library_kinds``.
    """

    kind: str
    name: str
    sources: tuple[Path, ...]
    cflags: tuple[str, ...]
    ldflags: tuple[str, ...]
    units: tuple[Unit, ...] = ()
    pch: str | None = None
    """Header (as included, e.g. ``opgen/ms.h``) to precompile once and use in every unit."""
    objects: tuple[str, ...] = ()
    """Objects linked besides the units': kernel units (relative), the support object (absolute)."""
    inputs: tuple[Path, ...] = ()
    """Sources compiled elsewhere whose objects are linked here (the kernel units' ``*_kernel.cc``)."""
    toolchain: str = ""
    """What else decides the objects, from the backend (a framework's version, ``mindspore 2.10.0``):
    part of the key and of the toolchain stamp."""
    shares_stamp: str = ""
    """The kind of a target built with the same flags and toolchain whose toolchain stamp this
    one's objects depend on when both are in one build ("": its own stamp)."""
    device: str = "cpu"
    """The device whose toolchain compiles the units (:mod:`opgen.devices`: ``cpu`` is the host
    compiler, ``cuda`` nvcc); every library is linked by the host compiler."""
    linked_devices: tuple[str, ...] = ()
    """Devices whose toolchains compiled some of ``objects`` (``cuda``: a library linking nvcc's
    kernel objects): their compilers' identities are part of the key, as ``device``'s is."""


@dataclass(frozen=True)
class UserFlags:
    """Compile flags, include dirs, link flags and libraries a user adds (docs/build.md)."""

    cflags: tuple[str, ...] = ()
    include_dirs: tuple[str, ...] = ()
    ldflags: tuple[str, ...] = ()
    libraries: tuple[str, ...] = ()

    def compile_flags(self, base: Path) -> tuple[str, ...]:
        """The compile flags, include dirs as ``-I`` (relative ones taken from ``base``)."""
        return self.cflags + tuple(f"-I{(base / d).resolve()}" for d in self.include_dirs)

    def link_flags(self, base: Path) -> tuple[str, ...]:
        """The link flags (``-L`` dirs taken from ``base``), then each library as ``-l`` (or its path)."""
        libs = tuple(str((base / lib).resolve()) if "/" in lib else f"-l{lib}" for lib in self.libraries)
        dirs = tuple(f"-L{(base / f[2:]).resolve()}" if f.startswith("-L") and len(f) > 2 else f for f in self.ldflags)
        return dirs + libs

    def __or__(self, other: UserFlags) -> UserFlags:
        def merged(a: tuple[str, ...], b: tuple[str, ...]) -> tuple[str, ...]:
            return a + tuple(x for x in b if x not in a)

        return UserFlags(self.cflags + other.cflags, merged(self.include_dirs, other.include_dirs),
                         self.ldflags + other.ldflags, merged(self.libraries, other.libraries))


USER_FLAGS_FILE = "csrc/build.json"
"""Written by ``opgen generate`` when a spec or the package has user flags (see :func:`user_flags`)."""


def user_flags(pkg_dir: Path) -> tuple[UserFlags, dict[str, UserFlags]]:
    """The package's user flags and each op's, from ``csrc/build.json`` (none if absent).

    The file holds ``{"package": {...}, "ops": {"<op>": {...}}}``, each ``{...}`` with the lists
    ``cflags``, ``include_dirs``, ``ldflags``, ``libraries``; relative paths are relative to the
    package directory.

    Raises:
        BuildError: when the file is not such JSON.
    """
    path = pkg_dir / USER_FLAGS_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return UserFlags(), {}
    try:
        data = json.loads(text)

        def flags(d: dict[str, list[str]]) -> UserFlags:
            return UserFlags(*(tuple(str(x) for x in d.get(k, ())) for k in
                               ("cflags", "include_dirs", "ldflags", "libraries")))

        return flags(data.get("package", {})), {op: flags(d) for op, d in sorted(data.get("ops", {}).items())}
    except (ValueError, AttributeError, TypeError) as exc:
        raise BuildError(f"{path}: not valid build flags ({exc}); run 'opgen generate' again") from None


def _op_of(src: Path) -> str:
    """The op a generated source is of: its stem without the role after the last ``_``
    (``add_n_kernel.cc``, a backend's ``add_n_<role>.cc``: ``add_n``); a stem with no ``_``
    (``bindings.cc``) is its own name."""
    return src.stem.rpartition("_")[0] or src.stem


def _label(names: Sequence[str]) -> str:
    if len(names) <= 3:
        return ", ".join(names)
    return f"{names[0]} ... {names[-1]} ({len(names)} units)"


def group_units(kind: str, sources: Sequence[Path], ops_per_unit: int | None, label: str = "") -> tuple[Unit, ...]:
    """Split ``sources`` of a target of ``kind`` into translation units, each labelled
    ``<ops> (<label>)`` in the build's progress (``label`` defaults to ``kind``).

    ``ops_per_unit=1`` gives one unit per source (what a backend passes for a library whose
    units are one op each).  ``None``
    (automatic) makes :data:`MIN_UNITS` units, or more so that none holds over
    :data:`MAX_OPS_PER_UNIT` sources; any other number makes units of at most that many.  Units
    hold consecutive sources (sorted by name) and differ in size by at most one, so the layout
    depends only on the list of sources.
    """
    suffix = f" ({label or kind})"
    srcs = sorted(sources, key=lambda p: p.name)
    n = len(srcs)
    if ops_per_unit == 1 or n <= 1:
        return tuple(Unit(f"{kind}/{s.stem}.o", (s,), _op_of(s) + suffix) for s in srcs)
    if ops_per_unit is None:
        count = min(n, max(MIN_UNITS, math.ceil(n / MAX_OPS_PER_UNIT)))
    else:
        count = math.ceil(n / ops_per_unit)
    units = []
    for i in range(count):
        chunk = srcs[i * n // count : (i + 1) * n // count]
        names = [_op_of(s) for s in chunk]
        obj = f"{kind}/{chunk[0].stem}.o" if len(chunk) == 1 else f"{kind}/{names[0]}--{names[-1]}.o"
        if len(obj.encode()) - len(f"{kind}/") + len(PID_TEMP_SUFFIX) > NAME_MAX:  # <obj>.<pid>.tmp too long:
            # the first op names the unit alone (units hold consecutive sources)
            obj = f"{kind}/{names[0]}--{len(chunk)}.o"
        units.append(Unit(obj, tuple(chunk), _label(names) + suffix))
    return tuple(units)


def plain_cflags(csrc: Path, abi: Sequence[str] = ()) -> tuple[str, ...]:
    """Flags of the framework-free units (kernels; MindSpore's aot entry points), with the
    backend's C++ ABI flags ``abi`` (MindSpore's ``-D_GLIBCXX_USE_CXX11_ABI=0``)."""
    return (
        "-O3", "-std=c++17", "-fPIC", *abi, "-Wall", "-Wno-unused-variable",
        "-Wno-unused-function", f"-I{include_dir()}", f"-I{csrc}",
    ) + kernel_flags()[0] + sanitize_flags() + checked_flags()


def kernel_target(pkg_dir: Path, abi: Sequence[str] = (), toolchain: str = "", shares_stamp: str = "") -> Target:
    """The kernel layer of every op (``csrc/<op>_kernel.cc``): one unit per op, no link, with the
    backend's ABI flags and toolchain facts (:func:`plain_cflags`, :attr:`Target.toolchain`,
    :attr:`Target.shares_stamp`).

    Each unit gets the package's user compile flags and its op's (``csrc/build.json``).
    """
    csrc = pkg_dir / "csrc"
    sources = tuple(sorted(csrc.glob("*_kernel.cc")))
    return Target("kernels", "", sources, plain_cflags(csrc, abi), (), _op_units(pkg_dir, "kernels", sources, "kernel"),
                  toolchain=toolchain, shares_stamp=shares_stamp)


def _op_units(pkg_dir: Path, kind: str, sources: Sequence[Path], label: str) -> tuple[Unit, ...]:
    """One unit per op's source, each with the package's user compile flags and its op's
    (``csrc/build.json``)."""
    package, ops = user_flags(pkg_dir)
    return tuple(
        Unit(u.obj, u.sources, u.label,
             package.compile_flags(pkg_dir) + ops.get(_op_of(u.sources[0]), UserFlags()).compile_flags(pkg_dir))
        for u in group_units(kind, sources, 1, label)
    )


def cuda_cflags(csrc: Path, abi: Sequence[str] = ()) -> tuple[str, ...]:
    """nvcc's flags for the CUDA units of a package (kernels, MindSpore's GPU aot entry points):
    ``-O3`` for host and device code (``OPGEN_CUDA_OPT`` sets another level),
    :data:`opgen.devices.cuda.NVCC_FLAGS`, code for :func:`opgen.devices.cuda.archs`, the backend's
    C++ ABI flags ``abi`` (passed to the host compiler too), checked mode's flags.

    Raises:
        opgen.env.EnvError: ``OPGEN_CUDA_ARCH`` does not parse, or ``OPGEN_CUDA_OPT`` is not 0-3.
    """
    opt = _env.choice("OPGEN_CUDA_OPT") or "3"
    return (f"-O{opt}", "-Xptxas", f"-O{opt}", *cuda.NVCC_FLAGS, *cuda.cublas_flags()[0],
            *cuda.gencode_flags(cuda.archs()), *abi, f"-I{include_dir()}", f"-I{csrc}", *checked_flags())


def cuda_link_flags() -> tuple[str, ...]:
    """Link flags of a library with CUDA units: the toolkit's runtime (``libcudart``) and, where the
    toolkit has it, cuBLAS (``libcublas``: opgen::gemm), by rpath."""
    dirs = cuda.library_dirs()
    return (*(f"-L{d}" for d in dirs), *cuda.cublas_flags()[1], "-lcudart", *(f"-Wl,-rpath,{d}" for d in dirs))


def cuda_kernel_target(pkg_dir: Path, abi: Sequence[str] = (), toolchain: str = "") -> Target:
    """The CUDA kernel layer of every op with ``GPU`` rows (``csrc/<op>_kernel.cu``): one nvcc unit
    per op, no link (:func:`cuda_cflags`), kind ``kernels_cuda``; each backend's CUDA library links
    the objects."""
    csrc = pkg_dir / "csrc"
    sources = tuple(sorted(csrc.glob("*_kernel.cu")))
    return Target("kernels_cuda", "", sources, cuda_cflags(csrc, abi), (),
                  _op_units(pkg_dir, "kernels_cuda", sources, "CUDA kernel"), toolchain=toolchain, device="cuda")


def user_link_flags(pkg_dir: Path) -> tuple[str, ...]:
    """The link flags of ``csrc/build.json``: the package's, then every op's (:func:`user_flags`)."""
    package, ops = user_flags(pkg_dir)
    merged = package
    for flags in ops.values():
        merged = merged | flags
    return merged.link_flags(pkg_dir)


def support_dir(root: str | os.PathLike[str] | None = None) -> Path:
    """Where per-toolchain objects live: ``$OPGEN_SUPPORT_DIR``, else ``<build root>/support``.

    Several build roots (a CI's test runs, say) share one support object through the variable.
    """
    return _env.path("OPGEN_SUPPORT_DIR") or build_root(root) / "support"


def device_toolchain(device: str) -> Toolchain:
    """The toolchain of ``device`` (:meth:`opgen.devices.Device.toolchain`).

    Raises:
        BuildError: its compiler is missing (the message says how to get it).
    """
    from . import devices

    try:
        return devices.get(device).toolchain()
    except DeviceUnavailable as exc:
        raise BuildError(str(exc)) from None


def _toolchain(target: Target) -> str:
    """What, besides sources and flags, decides the objects: compiler (and the compilers of the
    devices whose objects it links), Python, the backend's facts."""
    devices = sorted({target.device, *target.linked_devices} - {"cpu"})
    device = "".join(f"\n{device_toolchain(d).identity}" for d in devices)
    return f"{BUILD_FORMAT}\n{compiler_identity()}{device}\npython {sys.version_info[:2]}\n{target.toolchain}\n"


def cuda_host_cflags() -> tuple[str, ...]:
    """What host code that includes ``opgen/cuda.h`` (the frameworks' CUDA glue: MindSpore's GPU
    aot entry points, PyTorch's ``CUDA`` dispatch key) adds to its flags: the toolkit's headers
    (``cuda_runtime_api.h``), as system headers."""
    return tuple(f"-isystem{d}" for d in cuda.include_dirs())


def target_key(target: Target) -> str:
    """Content hash (sha256, hex) of everything that determines the library's bytes."""
    h = hashlib.sha256()
    h.update(f"{target.kind}\n{target.name}\n{_toolchain(target)}".encode())
    h.update("\0".join(target.cflags + ("--",) + target.ldflags + ("--",) + target.objects).encode())
    h.update(f"\npch={target.pch}\n".encode())
    for unit in target.units:
        h.update(f"{unit.obj}:{','.join(s.name for s in unit.sources)}:{' '.join(unit.cflags)}\n".encode())
    csrc = target.sources[0].parent if target.sources else None
    files = list(target.sources) + list(target.inputs)
    if csrc is not None:
        files += sorted(csrc.glob("*.h"))
        if (csrc.parent / USER_FLAGS_FILE).is_file():
            files.append(csrc.parent / USER_FLAGS_FILE)
        files += sorted(csrc.glob("*.cuh"))
    files += sorted(p for p in (include_dir() / "opgen").rglob("*") if p.suffix in (".h", ".cuh"))
    for f in files:
        h.update(str(f.name).encode() + b"\0")
        h.update(f.read_bytes())
        h.update(b"\0")
    return h.hexdigest()


def artifact_path(pkg_dir: Path, target: Target, key: str, root: str | os.PathLike[str] | None = None) -> Path:
    """Where the published library for ``key`` lives."""
    return package_build_dir(pkg_dir, root) / f"{target.name}-{key[:16]}.so"


# --------------------------------------------------------------------------- publish


def _record_path(artifact: Path) -> Path:
    return artifact.with_name(artifact.name + ".sha256")


def _publish(built: Path, artifact: Path) -> None:
    """Copy ``built`` to ``artifact`` with its record (size and sha256, ``<artifact>.sha256``).

    The record is in place before the library: a library under its real name always has one,
    so :func:`is_published` can tell a library that was damaged later (truncated by a full disk,
    a copy or a user) from the one this build made.
    """
    tmp = artifact.with_name(f".{artifact.name}.{os.getpid()}.tmp")
    shutil.copy2(built, tmp)
    record = _record_path(artifact)
    rtmp = record.with_name(f".{record.name}.{os.getpid()}.tmp")
    rtmp.write_text(f"{tmp.stat().st_size} {digest(tmp)}\n", encoding="ascii")
    os.replace(rtmp, record)
    os.replace(tmp, artifact)


def is_published(artifact: Path, *, verify: bool = True) -> bool:
    """Whether ``artifact`` is the library a build published, unchanged: it exists, its record
    does, and its size and sha256 are the recorded ones (``verify=False``: its size only).
    Anything else is rebuilt.  Hashing a 2 MB library takes about 3 ms."""
    try:
        size, recorded = _record_path(artifact).read_text(encoding="ascii").split()
        if artifact.stat().st_size != int(size):
            return False
        return not verify or digest(artifact) == recorded
    except (OSError, ValueError):
        return False


# --------------------------------------------------------------------------- libraries in use

_held: dict[str, int] = {}
"""Published libraries this process holds (:func:`hold_library`): path -> the open descriptor
that carries the shared lock, kept open for the life of the process."""
_held_guard = threading.Lock()


def hold_library(path: Path) -> bool:
    """Take a shared lock (``flock(LOCK_SH)``) on the published library ``path`` for the rest of
    this process, so that :func:`remove_unused_library` (``opgen clean``, the removal of old
    libraries when another is published) leaves it in place: MindSpore reopens an aot library by
    its path for each new shape or dtype, long after it was first loaded.

    Returns:
        True when held; False when ``path`` was removed (or replaced) before the lock was had:
        build it again and hold that.
    """
    key = os.fspath(path)
    with _held_guard:
        if key in _held:
            return True
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return False
        fcntl.flock(fd, fcntl.LOCK_SH)  # waits only while a removal holds it exclusively
        if not _same_file(fd, path):
            os.close(fd)
            return False
        _held[key] = fd
        return True


def _same_file(fd: int, path: Path) -> bool:
    """Whether ``path`` still names the file open as ``fd``."""
    try:
        here, there = os.fstat(fd), os.stat(path)
    except FileNotFoundError:
        return False
    return (here.st_dev, here.st_ino) == (there.st_dev, there.st_ino)


def remove_unused_library(path: Path) -> bool:
    """Remove the published library ``path`` and its record unless a process holds it
    (:func:`hold_library`): the exclusive lock is tried without waiting, and the file is removed
    while it is held, so a process that opens it meanwhile finds it gone and builds again.

    Returns:
        True when removed (or already gone), False when in use.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        _record_path(path).unlink(missing_ok=True)
        return True
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return False
        if not _same_file(fd, path):  # republished meanwhile: not the file that was free
            return False
        path.unlink(missing_ok=True)
        _record_path(path).unlink(missing_ok=True)
        return True
    finally:
        os.close(fd)


def library_in_use(path: Path) -> bool:
    """Whether a process holds the published library ``path`` (:func:`hold_library`)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)  # closing drops the lock
    return False


# --------------------------------------------------------------------------- lock


def _lock_holder(path: Path) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace").split()
    except OSError:
        text = []
    if not text or not text[0].isdigit():
        return "an unknown process"
    pid = int(text[0])
    try:
        os.kill(pid, 0)
        state = "running"
    except ProcessLookupError:
        state = "no longer running; a process it started may still hold the lock"
    except PermissionError:
        state = "running as another user"
    return f"PID {pid} ({state})"


@contextmanager
def build_lock(bdir: Path, timeout: float | None = None, quiet: bool = False) -> Iterator[None]:
    """Hold the exclusive build lock of ``bdir`` (``bdir/build.lock``, an ``flock``).

    The kernel releases an ``flock`` when the process holding it dies, so a killed build never
    blocks the next one, whatever the lock file still says.  The descriptor is close-on-exec:
    ninja and the compilers never hold the lock.  The file records the holder's PID.

    Raises:
        BuildError: when another process holds the lock for longer than ``timeout`` seconds
            (default ``$OPGEN_LOCK_TIMEOUT`` or :data:`LOCK_TIMEOUT_S`); the message names its PID.
    """
    path = bdir / "build.lock"
    limit = _lock_timeout() if timeout is None else timeout
    try:
        bdir.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        raise BuildError(
            f"opgen: cannot use the build folder {bdir}: {exc.strerror or exc}"
            f"{f' ({exc.filename})' if exc.filename and os.fspath(exc.filename) != os.fspath(bdir) else ''}; "
            "give a writable one with --build-dir or OPGEN_BUILD_DIR"
        ) from None
    try:
        deadline = time.monotonic() + limit
        announced = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if not announced and not quiet:
                    print(f"opgen: waiting for another build in {bdir} ({_lock_holder(path)})", file=sys.stderr)
                    announced = True
                if time.monotonic() >= deadline:
                    raise BuildError(
                        f"opgen: timed out after {limit:g}s waiting for the build lock {path}, "
                        f"held by {_lock_holder(path)}; stop that build or raise OPGEN_LOCK_TIMEOUT"
                    ) from None
                time.sleep(0.05)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)


# --------------------------------------------------------------------------- ninja


def _stamp_kind(target: Target, kinds: set[str]) -> str:
    """The kind whose toolchain stamp ``target``'s objects depend on in a build of ``kinds``."""
    return target.shares_stamp if target.shares_stamp in kinds else target.kind


def _ninja_file(targets: Sequence[Target]) -> str:
    """One ninja file for a package: the kernel units and each of the backend's libraries.

    One file (and one ``.ninja_log``) for all of them, so a kernel unit is compiled once for both
    libraries; each library is built by naming it as ninja's target.
    """
    q = shlex.quote
    # $$$$ is the shell's $$: a per-command temporary name, renamed once complete.
    tmp = "$out.$$$$.tmp"
    lines = [
        "# @generated by opgen build -- do not edit",
        "ninja_required_version = 1.7",
        "builddir = state",
        f"cxx = {' '.join(q(w) for w in compiler_argv())}",
    ]
    devices_used = sorted({t.device for t in targets if t.device != "cpu" and t.units})
    chains = {d: device_toolchain(d) for d in devices_used}
    for d, chain in chains.items():
        lines.append(f"{d}_cc = {' '.join(q(w) for w in chain.argv)}")
    for t in targets:
        lines.append(f"{t.kind}_cflags = {' '.join(q(f) for f in t.cflags)}")
        if t.name:
            lines.append(f"{t.kind}_ldflags = {' '.join(q(f) for f in t.ldflags)}")
    lines += [
        "",
        "rule compile",
        f"  command = $cxx -MMD -MT $out -MF $out.d $cflags $pchflags -c $in -o {tmp} && mv -f {tmp} $out",
        "  depfile = $out.d",
        "  deps = gcc",
        "  description = compiling $label",
        "",
        *(line for d, chain in chains.items() for line in (
            f"rule {chain.rule}",
            f"  command = ${d}_cc {' '.join(chain.depfile)} $cflags {' '.join(chain.language)} -c $in -o {tmp}"
            " && mv -f {tmp} $out".replace("{tmp}", tmp),
            "  depfile = $out.d",
            "  deps = gcc",
            "  description = compiling $label",
            "",
        )),
        "rule pch",
        f"  command = $cxx -MMD -MT $out -MF $out.d $cflags -x c++-header $in -o {tmp} && mv -f {tmp} $out",
        "  depfile = $out.d",
        "  deps = gcc",
        "  description = precompiling $label",
        "",
        "rule link",
        f"  command = $cxx $in $ldflags -o {tmp} && mv -f {tmp} $out",
        "  description = linking $label",
        "",
    ]
    kinds = {t.kind for t in targets}
    stamp_of = {t.kind: f"{_stamp_kind(t, kinds)}/toolchain.stamp" for t in targets}
    for t in targets:
        k = t.kind
        implicit = [stamp_of[k]]
        pchflags = ""
        if t.pch:
            header = f"{k}/pch/opgen_pch.h"
            lines += [f"build {header}.gch: pch {header} | {stamp_of[k]}", f"  label = {t.pch}",
                      f"  cflags = ${k}_cflags", ""]
            implicit.append(f"{header}.gch")
            pchflags = f"-include {header} -Winvalid-pch"
        for unit in t.units:
            src = unit.wrapper or str(unit.sources[0])
            rule = chains[t.device].rule if t.device in chains else "compile"
            lines.append(f"build {unit.obj}: {rule} {esc(src)} | {' '.join(implicit)}")
            lines.append(f"  label = {unit.label}")
            extra = "".join(" " + q(f) for f in unit.cflags)
            lines.append(f"  cflags = ${k}_cflags{extra}")
            if pchflags:
                lines.append(f"  pchflags = {pchflags}")
        if t.name:
            objs = [u.obj for u in t.units] + [esc(o) for o in t.objects]
            lines.append(f"build {k}/{t.name}.so: link {' '.join(objs)} | {stamp_of[k]}")
            lines.append(f"  label = {t.name}.so")
            lines.append(f"  ldflags = ${k}_ldflags")
        lines.append("")
    return "\n".join(lines)


def esc(path: str) -> str:
    """``path`` escaped for a ninja file (``$``, spaces and ``:``)."""
    return path.replace("$", "$$").replace(" ", "$ ").replace(":", "$:")


def write_if_changed(path: Path, text: str) -> None:
    """Write ``text`` unless the file already holds it (keeps its mtime for ninja)."""
    try:
        if path.read_text(encoding="utf-8") == text:
            return
    except OSError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def _c_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _write_inputs(bdir: Path, targets: Sequence[Target]) -> Path:
    """Write the ninja file, unity sources, PCH headers and toolchain stamps; return the ninja file.

    Objects and unity sources of an earlier unit layout are deleted.
    """
    for target in targets:
        k = target.kind
        keep = {unit.obj for unit in target.units} | {unit.wrapper for unit in target.units if unit.wrapper}
        for old in list((bdir / k).glob("*.o")) + list((bdir / k).glob("*.cc")):
            if f"{k}/{old.name}" not in keep:
                old.unlink(missing_ok=True)
        for unit in target.units:
            if unit.wrapper:
                body = "".join(f"#include {_c_string(str(s))}\n" for s in unit.sources)
                write_if_changed(bdir / unit.wrapper, f"// @generated by opgen build: unit {unit.label}\n{body}")
        if target.pch:
            write_if_changed(bdir / k / "pch" / "opgen_pch.h", f'#include "{target.pch}"\n')
        if _stamp_kind(target, {t.kind for t in targets}) == k:
            write_if_changed(bdir / k / "toolchain.stamp", _toolchain(target))
    ninja_path = bdir / "build.ninja"
    write_if_changed(ninja_path, _ninja_file(targets))
    return ninja_path


def _remove_stale_temporaries(bdir: Path, kind: str) -> None:
    """Delete temporaries a killed build left behind (never under a real name)."""
    for pattern in (f"{kind}/**/*.tmp", ".*.tmp"):
        for p in bdir.glob(pattern):
            p.unlink(missing_ok=True)


# The process that runs ninja: asks the kernel to send it SIGTERM when its parent (the opgen
# process) dies, then becomes ninja.  On SIGTERM ninja stops every running compiler and
# deletes their outputs, so no orphaned compile keeps writing into the build folder.
_DEATHSIG_SHIM = (
    "import ctypes,os,signal,sys\n"
    "ctypes.CDLL(None,use_errno=True).prctl(1,signal.SIGTERM,0,0,0)\n"
    "os.getppid()==int(sys.argv[1]) or sys.exit(1)\n"
    "os.execv(sys.argv[2],sys.argv[2:])\n"
)

_STATUS = re.compile(r"^\[(\d+)/(\d+)\] (.*)$")


class _Progress:
    """Compile progress on stderr: one updating line on a terminal, plain lines otherwise.

    On a terminal the line also counts the seconds since the build started, refreshed every
    second, so a long single step (a big unit, the support object) shows that it is alive.
    """

    TICK_S = 1.0

    def __init__(self, stream: TextIO, quiet: bool):
        self.stream = stream
        self.quiet = quiet
        self.tty = stream.isatty() and os.environ.get("TERM", "") != "dumb"
        self.open_line = False
        self.started = time.monotonic()
        self.text = "opgen: building"
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None
        if self.tty and not quiet:
            self._ticker = threading.Thread(target=self._tick, name="opgen-progress", daemon=True)
            self._ticker.start()

    def _tick(self) -> None:
        while not self._stop.wait(self.TICK_S):
            with self._lock:
                if self.text:
                    self._draw()

    def _draw(self) -> None:
        self.stream.write(f"\r\x1b[K{self.text} ({time.monotonic() - self.started:.0f} s)")
        self.stream.flush()
        self.open_line = True

    def step(self, done: int, total: int, what: str) -> None:
        if self.quiet:
            return
        with self._lock:
            self.text = f"opgen: [{done}/{total}] {what}"
            if self.tty:
                self._draw()
            else:
                self.stream.write(self.text + "\n")
                self.stream.flush()

    def close(self) -> None:
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join()
        with self._lock:
            if self.open_line:
                self.stream.write("\n")
                self.stream.flush()
                self.open_line = False


@dataclass
class NinjaRun:
    """What one ninja run did: its exit status, output (status lines excluded) and steps."""

    returncode: int
    output: str
    compiled: list[str]


def _compiler_env() -> dict[str, str]:
    """The environment compilers run in: this process's, without a preloaded sanitizer runtime
    (``opgen test --sanitize`` preloads libasan into the test process, which builds the libraries
    it imports; g++ under a preloaded ASan fails or reports the compiler's own leaks)."""
    env = dict(os.environ, NINJA_STATUS="[%f/%t] ")
    preload = env.get("LD_PRELOAD", "")
    if "san" in preload:
        kept = [p for p in preload.replace(":", " ").split() if "san" not in os.path.basename(p)]
        if kept:
            env["LD_PRELOAD"] = " ".join(kept)
        else:
            del env["LD_PRELOAD"]
    return env


def run_ninja(bdir: Path, ninja_path: Path, jobs: int, quiet: bool, goals: Sequence[str] = ()) -> NinjaRun:
    """Run ninja on ``ninja_path`` in ``bdir`` (``-k 0``: every failing unit reported) for ``goals``
    (default: all), with a progress line on stderr unless ``quiet``; on Linux ninja stops when this
    process dies; interrupted (``KeyboardInterrupt``), it stops ninja first. The compilers see
    :func:`_compiler_env`.
    """
    env = _compiler_env()
    cmd = [_ninja(), "-f", ninja_path.name, "-j", str(jobs), "-k", "0", *goals]
    if sys.platform.startswith("linux"):
        cmd = [sys.executable, "-S", "-c", _DEATHSIG_SHIM, str(os.getpid()), *cmd]
    progress = _Progress(sys.stderr, quiet)
    output: list[str] = []
    compiled: list[str] = []
    proc = subprocess.Popen(cmd, cwd=bdir, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                            text=True, errors="replace", close_fds=True)
    assert proc.stdout is not None
    try:
        for line in proc.stdout:
            m = _STATUS.match(line.rstrip("\n"))
            if m:
                what = m.group(3)
                if what.startswith("compiling "):
                    compiled.append(what[len("compiling "):])
                progress.step(int(m.group(1)), int(m.group(2)), what)
            else:
                output.append(line)
        rc = proc.wait()
    except BaseException:
        proc.terminate()  # ninja stops its compilers and removes their partial outputs
        proc.wait()
        raise
    finally:
        progress.close()
    return NinjaRun(rc, "".join(output), compiled)


# --------------------------------------------------------------------------- diagnostics

def _diagnostic(line: str) -> re.Match[str] | None:
    """The line as a compiler diagnostic at a YAML location, in any device compiler's form (gcc's
    ``file.yaml:7:12: error:``, nvcc's ``file.yaml(7): error:``: :data:`opgen.devices.DIAGNOSTICS`)."""
    for pattern in DIAGNOSTICS:
        m = pattern.match(line)
        if m:
            return m
    return None


_SNIPPET = re.compile(r"^ *(\d+ )?\|")
_LINE_DIRECTIVE = re.compile(r'^#line (\d+) "((?:[^"\\]|\\.)*)"\s*$')


@dataclass(frozen=True)
class _BodyLine:
    op: str
    text: str  # the line as spliced into the generated header


def _yaml_body_lines(csrc: Path) -> tuple[dict[tuple[str, int], _BodyLine], dict[str, str], Path | None]:
    """Map (yaml file, line) -> op and spliced text, from the ``#line`` directives of the kernels.

    Also returns yaml file -> op, and the directory the ``#line`` paths are relative to.
    """
    lines: dict[tuple[str, int], _BodyLine] = {}
    ops: dict[str, str] = {}
    root: Path | None = None
    for header in sorted([*csrc.glob("*_kernel.h"), *csrc.glob("*_kernel.cuh")]):
        op = header.name[: header.name.rindex("_kernel.")]
        current: tuple[str, int] | None = None
        try:
            text = header.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        for raw in text.split("\n"):
            m = _LINE_DIRECTIVE.match(raw)
            if m:
                file = re.sub(r"\\(.)", r"\1", m.group(2))
                if file.endswith((".yaml", ".yml")):
                    current = (file, int(m.group(1)))
                    ops.setdefault(file, op)
                else:
                    current = None
                    if root is None:
                        root = _root_of(header, file)
                continue
            if current is not None:
                lines[current] = _BodyLine(op, raw)
                current = (current[0], current[1] + 1)
    return lines, ops, root


def _root_of(header: Path, shown: str) -> Path | None:
    """The directory ``shown`` (a relative path naming ``header``) is relative to, if any."""
    parts = Path(shown).parts
    if not parts or Path(shown).is_absolute() or ".." in parts:
        return None
    real = header.resolve()
    if len(parts) > len(real.parents):
        return None
    root = real.parents[len(parts) - 1]
    return root if (root / shown).resolve() == real else None


def _lead(text: str) -> int:
    return len(text) - len(text.lstrip(" \t"))


def format_compiler_output(output: str, csrc: Path) -> tuple[str, bool]:
    """Rewrite compiler output so mistakes in kernel bodies read as spec diagnostics.

    Diagnostics at a ``#line``-mapped YAML location become ``file.yaml:LINE:COL: error: op
    'x': ...`` (column measured in the YAML file, duplicates across dtype rows dropped) with the
    YAML source line under them.  Returns (text, True) when there were such diagnostics, else
    the output without ninja's own lines and (text, False).
    """
    body_lines, ops, root = _yaml_body_lines(csrc)
    out: list[str] = []
    seen: set[str] = set()
    repeats: dict[str, list[int]] = {}  # YAML location of an error in a body -> [where it ends in out, repeats]
    keep_snippet = False
    for raw in output.splitlines():
        m = _diagnostic(raw)
        if m is None:
            if keep_snippet and _SNIPPET.match(raw):
                out.append(raw)
            else:
                keep_snippet = False
            continue
        file, line = m.group("file"), int(m.group("line"))
        source = _read_line(root, file, line)
        spliced = body_lines.get((file, line))
        # nvcc gives no column: the line's first character (in the generated text, mapped below)
        col = int(m.group("col")) if m.groupdict().get("col") else _lead(spliced.text if spliced else source or "") + 1
        if source is not None and spliced is not None and source.strip() == spliced.text.strip() and source.strip():
            col = max(1, col - _lead(spliced.text) + _lead(source))
        op = spliced.op if spliced else ops.get(file)
        level = m.group("level").replace("remark", "note")
        msg = m.group("msg").replace("\u2018", "'").replace("\u2019", "'")
        prefix = f"op '{op}': " if op and level != "note" else ""
        where = f"{_display(root, file)}:{line}:{col}"
        shown = f"{where}: {level}: {prefix}{msg}"
        if shown in seen or (spliced is not None and level == "error" and where in repeats):
            if shown not in seen and where in repeats:  # the same mistake, another dtype row's types
                repeats[where][1] += 1
            keep_snippet = False
            continue
        seen.add(shown)
        out.append(shown)
        if source is not None:
            out.append(f"{line:5d} | {source}")
            out.append("      | " + _caret_pad(source, col) + "^")
            keep_snippet = False  # ours replaces the compiler's (it could not read the file)
        else:
            keep_snippet = True
        if spliced is not None and level == "error":
            repeats[where] = [len(out), 0]
    for where, (after, more) in sorted(repeats.items(), key=lambda kv: -kv[1][0]):
        if more:
            out.insert(after, f"{where}: note: the same error for {more} more dtype_format row{'s' if more > 1 else ''}"
                       " (the body is compiled once per row)")
    if out:
        return "\n".join(out), True
    noise = ("FAILED: ", "ninja: ")
    command = " ".join(shlex.quote(w) for w in compiler_argv()) + " "
    rest = [ln for ln in output.splitlines() if not ln.startswith(noise) and not ln.startswith(command)]
    return "\n".join(rest).strip(), False


def _caret_pad(source: str, col: int) -> str:
    prefix = source[: max(0, col - 1)]
    return "".join(c if c == "\t" else " " for c in prefix)


def _read_line(root: Path | None, file: str, line: int) -> str | None:
    path = Path(file) if Path(file).is_absolute() or root is None else root / file
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            for i, text in enumerate(fh, 1):
                if i == line:
                    return text.rstrip("\r\n")
    except OSError:
        return None
    return None


def _display(root: Path | None, file: str) -> str:
    if root is None or Path(file).is_absolute():
        return file
    from .diagnostics import display_path

    return display_path(root / file)


# --------------------------------------------------------------------------- build


@dataclass(frozen=True)
class BuildResult:
    """A built (or found) library: its path, the units compiled for it and the time it took."""

    path: Path
    compiled: tuple[str, ...]
    seconds: float
    cached: bool


def build_target(pkg_dir: Path, target: Target, companions: Callable[[], Sequence[Target]], quiet: bool = False, *,
                 build_dir: str | os.PathLike[str] | None = None, jobs: int | None = None,
                 prepare: Callable[[], tuple[str, ...]] | None = None, started: float | None = None) -> BuildResult:
    """Build (or find cached) the library of ``target`` with the package's one ninja file, its
    lock and the publish step; a backend's :meth:`~opgen.backends.Backend.build_library` calls it.

    Args:
        companions: every target of the package's ninja file, ``target`` among them, the kernel
            units first (another library's edges too, so that kernel units compiled for one are
            not compiled again for the other); called under the build lock.
        prepare: run before the lock when the library must be built (objects shared between
            packages, e.g. MindSpore's support object); returns the labels of what it compiled.
        started: when the build was asked for (``time.monotonic()``), for the time reported.

    Raises:
        BuildError: a compile or link error (the previous library stays in place and keeps
            working), or the lock not had in time.
    """
    started = time.monotonic() if started is None else started
    njobs = jobs or default_jobs()
    kind = target.kind
    if not target.sources:
        raise BuildError(f"{pkg_dir}/csrc has no sources for the {kind} library; run 'opgen generate' first")
    key = target_key(target)
    artifact = artifact_path(pkg_dir, target, key, build_dir)
    if is_published(artifact):
        return BuildResult(artifact, (), time.monotonic() - started, True)
    support = prepare() if prepare is not None else ()
    bdir = package_build_dir(pkg_dir, build_dir)
    with build_lock(bdir, quiet=quiet):
        if is_published(artifact):  # another process built it while we waited
            return BuildResult(artifact, support, time.monotonic() - started, True)
        targets = list(companions())
        if not quiet:
            print(f"opgen: building {target.name} ({len(target.units)} unit{'s' if len(target.units) != 1 else ''}"
                  f" + {len(targets[0].units)} kernel, {njobs} job{'s' if njobs != 1 else ''}) in {bdir}",
                  file=sys.stderr)
        for k in dict.fromkeys(["kernels", *(t.kind for t in targets)]):
            _remove_stale_temporaries(bdir, k)
        ninja_path = _write_inputs(bdir, targets)
        run = run_ninja(bdir, ninja_path, njobs, quiet, [f"{kind}/{target.name}.so"])
        csrc = pkg_dir / "csrc"
        if run.returncode != 0:
            text, _ = format_compiler_output(run.output, csrc)
            log = bdir / kind / "last-failure.log"
            write_if_changed(log, run.output)
            raise BuildError((text or f"ninja exited with status {run.returncode}") + f"\n(full log: {log})")
        warnings, from_yaml = format_compiler_output(run.output, csrc)
        if from_yaml and not quiet:
            print(warnings, file=sys.stderr)
        if "not used because" in run.output and not quiet:
            print("opgen: warning: the precompiled header was not used (see the compiler's note above)",
                  file=sys.stderr)
        _publish(bdir / kind / f"{target.name}.so", artifact)
        for old in bdir.glob(f"{target.name}-*.so"):
            if old != artifact and time.time() - old.stat().st_mtime > 3600:
                remove_unused_library(old)  # kept while a process holds it
        took = time.monotonic() - started
        compiled = support + tuple(run.compiled)
        if not quiet:
            print(f"opgen: built {artifact.name} in {took:.1f}s "
                  f"({len(compiled)} unit{'s' if len(compiled) != 1 else ''} compiled)", file=sys.stderr)
    return BuildResult(artifact, compiled, took, False)
