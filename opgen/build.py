"""Stage 7 — build: compile a generated package's C++ into its two shared libraries.

- the aot library ``lib<package>_aot.so`` from ``csrc/*_aot.cc`` (no MindSpore headers), and
- the pybind11 extension ``<package>_ext.so`` from ``csrc/*_function.cc`` + ``csrc/bindings.cc``,
  with MindSpore's own ``CustomOpBuilder(backend="CPU")`` include paths and flags.

Each library is published under a name holding the hash of everything that went into it
(sources, headers, unit layout, flags, compiler, MindSpore version): when that file exists,
nothing runs, not even ninja.  Otherwise one ninja file per library compiles its translation
units in parallel and links them; ninja's own dependency tracking (depfiles, command lines and
a toolchain stamp) recompiles only the units whose inputs changed.

Units.  An aot unit is one op (about 2 s).  An ext unit pays about 40 s of MindSpore header
cost (parsing, and code for the headers' own static objects and inline functions) whatever it
holds, against about 1 s per op inside it, so the ext sources are grouped into a few
"unity" units (``#include`` of several ``*_function.cc``): :data:`MIN_UNITS` of them, more
when that would put over :data:`MAX_OPS_PER_UNIT` ops in one; ``ops_per_unit=1`` gives one
unit per op.  The layout depends only on the sources, never on ``-j``: a library built with
any job count is the one an import finds.
Optionally (``pch=True``) the ext units share a precompiled ``opgen/ms.h``.

Safety.  Objects, the precompiled header and the linked library are written to a temporary
name and renamed, so a killed build never leaves a truncated file under a real name; only a
successful link is published (copied, then renamed into place) and only published files are
ever loaded.  The build folder is guarded by an ``flock`` (released by the kernel when its
holder dies, never inherited by ninja or the compilers) with a timeout whose error names the
PID holding it; on Linux ninja is told to stop (and stops its compilers) when the process that
started it dies.
"""

from __future__ import annotations

import ctypes.util
import fcntl
import functools
import hashlib
import math
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from .resources import include_dir

LOCK_TIMEOUT_S = 900.0
"""Default wait for another build of the same package (``$OPGEN_LOCK_TIMEOUT`` overrides)."""
MAX_OPS_PER_UNIT = 16
"""Upper bound on the ops one ext unit holds when grouping automatically."""
MIN_UNITS = 2
"""Ext units when grouping automatically, for up to 2 x :data:`MAX_OPS_PER_UNIT` sources (two cores' worth)."""
BUILD_FORMAT = "opgen-build-v2"
"""Changes whenever the build layout changes, so old objects and libraries are not reused."""
KINDS = ("aot", "ext")


class BuildError(RuntimeError):
    """A failed compile or link, or a build lock that could not be had; the message says which."""


# --------------------------------------------------------------------------- configuration


def build_root(override: str | os.PathLike[str] | None = None) -> Path:
    """Root of all opgen builds: ``override``, else ``$OPGEN_BUILD_DIR``, else ``~/.cache/opgen``."""
    chosen = os.fspath(override) if override else os.environ.get("OPGEN_BUILD_DIR")
    if chosen:
        return Path(chosen).expanduser().resolve()
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
    env = os.environ.get("OPGEN_JOBS", "").strip()
    if env.isdigit() and int(env) > 0:
        return int(env)
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


def _env_ops_per_unit() -> int | None:
    env = os.environ.get("OPGEN_OPS_PER_UNIT", "").strip()
    return int(env) if env.isdigit() and int(env) > 0 else None


def _lock_timeout() -> float:
    env = os.environ.get("OPGEN_LOCK_TIMEOUT", "").strip()
    try:
        return float(env) if env else LOCK_TIMEOUT_S
    except ValueError:
        return LOCK_TIMEOUT_S


def _compiler() -> str:
    return os.environ.get("CXX", "g++").strip() or "g++"


def _compiler_argv() -> list[str]:
    """``$CXX`` as words (``CXX="ccache g++"`` is two)."""
    try:
        return shlex.split(_compiler())
    except ValueError:
        return [_compiler()]


def _compiler_identity() -> str:
    """The compiler's path, size and mtime (of each word of ``$CXX`` that is a program)."""
    argv = _compiler_argv()
    parts = []
    for i, word in enumerate(argv):
        path = shutil.which(word)
        if path is None:
            if i == 0:
                raise BuildError(f"C++ compiler '{word}' not found (set CXX or install g++)")
            parts.append(word)
            continue
        real = os.path.realpath(path)
        st = os.stat(real)
        parts.append(f"{real}:{st.st_size}:{int(st.st_mtime)}")
    return f"{_compiler()} = {' '.join(parts)}"


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
    if _env_flag("OPGEN_SANITIZE"):
        return ("-fsanitize=address,undefined", "-fno-omit-frame-pointer", "-g")
    return ()


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

    @property
    def wrapper(self) -> str | None:
        """The generated unity source (relative to the build folder), or None for one source."""
        return self.obj[: -len(".o")] + ".cc" if len(self.sources) > 1 else None


@dataclass(frozen=True)
class Target:
    """One library to build: its kind (``aot`` or ``ext``), sources, flags and units."""

    kind: str
    name: str
    sources: tuple[Path, ...]
    cflags: tuple[str, ...]
    ldflags: tuple[str, ...]
    units: tuple[Unit, ...] = ()
    pch: str | None = None
    """Header (as included, e.g. ``opgen/ms.h``) to precompile once and use in every unit."""


def _op_of(src: Path) -> str:
    stem = src.stem
    for suffix in ("_function", "_aot"):
        if stem.endswith(suffix):
            return stem[: -len(suffix)]
    return stem


def _label(names: Sequence[str]) -> str:
    if len(names) <= 3:
        return ", ".join(names)
    return f"{names[0]} ... {names[-1]} ({len(names)} units)"


def group_units(kind: str, sources: Sequence[Path], ops_per_unit: int | None) -> tuple[Unit, ...]:
    """Split ``sources`` into translation units.

    ``ops_per_unit=1`` (and every aot build) gives one unit per source.  ``None`` (automatic)
    makes :data:`MIN_UNITS` units, or more so that none holds over :data:`MAX_OPS_PER_UNIT`
    sources; any other number makes units of at most that many.  Units hold consecutive sources
    (sorted by name) and differ in size by at most one, so the layout depends only on the list
    of sources.
    """
    suffix = " (aot)" if kind == "aot" else " (Function<T>)"
    srcs = sorted(sources, key=lambda p: p.name)
    n = len(srcs)
    if kind == "aot" or ops_per_unit == 1 or n <= 1:
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
        units.append(Unit(obj, tuple(chunk), _label(names) + suffix))
    return tuple(units)


def aot_target(pkg_dir: Path, *, pch: bool = False) -> Target:
    """The aot library of a generated package (one unit per op).

    Args:
        pch: precompile ``opgen/aot.h`` once for every unit (measured: no gain for aot units,
            whose time is their kernels; kept for symmetry with :func:`ext_target`).
    """
    csrc = pkg_dir / "csrc"
    sources = tuple(sorted(csrc.glob("*_aot.cc")))
    cflags = (
        "-O3", "-std=c++17", "-fPIC", "-D_GLIBCXX_USE_CXX11_ABI=0", "-Wall", "-Wno-unused-variable",
        f"-I{include_dir()}", f"-I{csrc}",
    ) + kernel_flags()[0] + sanitize_flags()
    ldflags = ("-shared", "-pthread") + kernel_flags()[1] + sanitize_flags()
    return Target("aot", f"lib{pkg_dir.name}_aot", sources, cflags, ldflags,
                  group_units("aot", sources, 1), "opgen/aot.h" if pch else None)


def ext_target(pkg_dir: Path, *, ops_per_unit: int | None = None, pch: bool = False) -> Target:
    """The pybind11 extension of a generated package, with CustomOpBuilder's CPU flags.

    Args:
        ops_per_unit: sources per translation unit (``None``: automatic, see :func:`group_units`).
        pch: precompile ``opgen/ms.h`` (MindSpore's headers) once and use it in every unit.
    """
    from mindspore.ops import CustomOpBuilder  # the real MindSpore; imported only to build

    name = f"{pkg_dir.name}_ext"
    csrc = pkg_dir / "csrc"
    sources = tuple(sorted(csrc.glob("*_function.cc")))
    if (csrc / "bindings.cc").is_file():
        sources += (csrc / "bindings.cc",)
    builder = CustomOpBuilder(name, [str(s) for s in sources], backend="CPU")
    includes = [f"-I{p}" for p in builder.get_include_paths()]
    py_inc = sysconfig.get_path("include", scheme="posix_prefix")
    cflags = tuple(includes) + (f"-isystem{py_inc}", f"-I{include_dir()}", f"-I{csrc}")
    cflags += tuple(builder.get_cflags()) + kernel_flags()[0] + sanitize_flags()
    ldflags = tuple(builder.get_ldflags()) + ("-pthread",) + kernel_flags()[1] + sanitize_flags()
    units = group_units("ext", sources, ops_per_unit)
    return Target("ext", name, sources, cflags, ldflags, units, "opgen/ms.h" if pch else None)


def _ms_version() -> str:
    try:
        import mindspore

        return str(mindspore.__version__)
    except ImportError:
        return "none"


def _toolchain(target: Target) -> str:
    """What, besides sources and flags, decides the objects: compiler, Python, MindSpore."""
    ms = _ms_version() if target.kind == "ext" else ""
    return f"{BUILD_FORMAT}\n{_compiler_identity()}\npython {sys.version_info[:2]}\nmindspore {ms}\n"


def target_key(target: Target) -> str:
    """Content hash (sha256, hex) of everything that determines the library's bytes."""
    h = hashlib.sha256()
    h.update(f"{target.kind}\n{target.name}\n{_toolchain(target)}".encode())
    h.update("\0".join(target.cflags + ("--",) + target.ldflags).encode())
    h.update(f"\npch={target.pch}\n".encode())
    for unit in target.units:
        h.update(f"{unit.obj}:{','.join(s.name for s in unit.sources)}\n".encode())
    csrc = target.sources[0].parent if target.sources else None
    files = list(target.sources)
    if csrc is not None:
        files += sorted(csrc.glob("*.h"))
    files += sorted((include_dir() / "opgen").glob("*.h"))
    for f in files:
        h.update(str(f.name).encode() + b"\0")
        h.update(f.read_bytes())
        h.update(b"\0")
    return h.hexdigest()


def artifact_path(pkg_dir: Path, target: Target, key: str, root: str | os.PathLike[str] | None = None) -> Path:
    """Where the published library for ``key`` lives."""
    return package_build_dir(pkg_dir, root) / f"{target.name}-{key[:16]}.so"


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
    bdir.mkdir(parents=True, exist_ok=True)
    path = bdir / "build.lock"
    limit = _lock_timeout() if timeout is None else timeout
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
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


def _ninja_file(target: Target) -> str:
    q = shlex.quote
    k = target.kind
    stamp = f"{k}/toolchain.stamp"
    # $$$$ is the shell's $$: a per-command temporary name, renamed once complete.
    tmp = "$out.$$$$.tmp"
    lines = [
        "# @generated by opgen build -- do not edit",
        "ninja_required_version = 1.7",
        f"builddir = {k}",
        f"cxx = {' '.join(q(w) for w in _compiler_argv())}",
        f"cflags = {' '.join(q(f) for f in target.cflags)}",
        f"ldflags = {' '.join(q(f) for f in target.ldflags)}",
        "",
        "rule compile",
        f"  command = $cxx -MMD -MT $out -MF $out.d $cflags $pchflags -c $in -o {tmp} && mv -f {tmp} $out",
        "  depfile = $out.d",
        "  deps = gcc",
        "  description = compiling $label",
        "",
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
    implicit = [stamp]
    pchflags = ""
    if target.pch:
        header = f"{k}/pch/opgen_pch.h"
        lines += [f"build {header}.gch: pch {header} | {stamp}", f"  label = {target.pch}", ""]
        implicit.append(f"{header}.gch")
        pchflags = f"-include {header} -Winvalid-pch"
    objs = []
    for unit in target.units:
        src = unit.wrapper or str(unit.sources[0])
        objs.append(unit.obj)
        lines.append(f"build {unit.obj}: compile {_esc(src)} | {' '.join(implicit)}")
        lines.append(f"  label = {unit.label}")
        if pchflags:
            lines.append(f"  pchflags = {pchflags}")
    lines.append(f"build {k}/{target.name}.so: link {' '.join(objs)} | {stamp}")
    lines.append(f"  label = {target.name}.so")
    lines.append(f"default {k}/{target.name}.so")
    return "\n".join(lines) + "\n"


def _esc(path: str) -> str:
    return path.replace("$", "$$").replace(" ", "$ ").replace(":", "$:")


def _write_if_changed(path: Path, text: str) -> None:
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


def _write_inputs(bdir: Path, target: Target) -> Path:
    """Write the ninja file, unity sources, PCH header and toolchain stamp; return the ninja file.

    Objects and unity sources of an earlier unit layout are deleted.
    """
    k = target.kind
    keep = {unit.obj for unit in target.units} | {unit.wrapper for unit in target.units if unit.wrapper}
    for old in list((bdir / k).glob("*.o")) + list((bdir / k).glob("*.cc")):
        if f"{k}/{old.name}" not in keep:
            old.unlink(missing_ok=True)
    for unit in target.units:
        if unit.wrapper:
            body = "".join(f"#include {_c_string(str(s))}\n" for s in unit.sources)
            _write_if_changed(bdir / unit.wrapper, f"// @generated by opgen build: unit {unit.label}\n{body}")
    if target.pch:
        _write_if_changed(bdir / k / "pch" / "opgen_pch.h", f'#include "{target.pch}"\n')
    _write_if_changed(bdir / k / "toolchain.stamp", _toolchain(target))
    ninja_path = bdir / f"{k}.ninja"
    _write_if_changed(ninja_path, _ninja_file(target))
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
    """Compile progress on stderr: one updating line on a terminal, plain lines otherwise."""

    def __init__(self, stream: TextIO, quiet: bool):
        self.stream = stream
        self.quiet = quiet
        self.tty = stream.isatty() and os.environ.get("TERM", "") != "dumb"
        self.open_line = False

    def step(self, done: int, total: int, what: str) -> None:
        if self.quiet:
            return
        text = f"opgen: [{done}/{total}] {what}"
        if self.tty:
            self.stream.write(f"\r\x1b[K{text}")
            self.open_line = True
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def close(self) -> None:
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


def _run_ninja(bdir: Path, ninja_path: Path, jobs: int, quiet: bool) -> NinjaRun:
    env = dict(os.environ, NINJA_STATUS="[%f/%t] ")
    cmd = [_ninja(), "-f", ninja_path.name, "-j", str(jobs), "-k", "0"]
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

_DIAG = re.compile(
    r"^(?P<file>[^\s:][^:]*\.ya?ml):(?P<line>\d+):(?P<col>\d+): (?P<level>error|warning|note): (?P<msg>.*)$"
)
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
    for header in sorted(csrc.glob("*_kernel.h")):
        op = header.name[: -len("_kernel.h")]
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
    keep_snippet = False
    for raw in output.splitlines():
        m = _DIAG.match(raw)
        if m is None:
            if keep_snippet and _SNIPPET.match(raw):
                out.append(raw)
            else:
                keep_snippet = False
            continue
        file, line, col = m.group("file"), int(m.group("line")), int(m.group("col"))
        source = _read_line(root, file, line)
        spliced = body_lines.get((file, line))
        if source is not None and spliced is not None and source.strip() == spliced.text.strip() and source.strip():
            col = max(1, col - _lead(spliced.text) + _lead(source))
        op = spliced.op if spliced else ops.get(file)
        level, msg = m.group("level"), m.group("msg").replace("\u2018", "'").replace("\u2019", "'")
        prefix = f"op '{op}': " if op and level != "note" else ""
        shown = f"{_display(root, file)}:{line}:{col}: {level}: {prefix}{msg}"
        if shown in seen:
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
    if out:
        return "\n".join(out), True
    noise = ("FAILED: ", "ninja: ")
    command = " ".join(shlex.quote(w) for w in _compiler_argv()) + " "
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


def build(pkg_dir: Path, kind: str, quiet: bool = False, *, build_dir: str | os.PathLike[str] | None = None,
          jobs: int | None = None, ops_per_unit: int | None = None, pch: bool | None = None) -> Path:
    """Build (or find cached) library ``kind`` (``aot`` or ``ext``) of a generated package.

    Args:
        build_dir: root of the build folders (default ``$OPGEN_BUILD_DIR`` or ``~/.cache/opgen``).
        jobs: parallel compile jobs (default ``$OPGEN_JOBS`` or the available CPUs).
        ops_per_unit: ext sources per translation unit (default ``$OPGEN_OPS_PER_UNIT`` or automatic).
        pch: precompile the support header once per build folder (``opgen/ms.h``, i.e. MindSpore's
            headers, for ext; ``opgen/aot.h`` for aot); default ``$OPGEN_PCH``.

    Returns:
        Path of the library; unchanged inputs return at once without starting any process.

    Raises:
        BuildError: on a compile or link error (the previous library stays in place and keeps
            working), or when the build lock cannot be had in time.
    """
    return build_library(pkg_dir, kind, quiet, build_dir=build_dir, jobs=jobs, ops_per_unit=ops_per_unit,
                         pch=pch).path


def build_library(pkg_dir: Path, kind: str, quiet: bool = False, *,
                  build_dir: str | os.PathLike[str] | None = None, jobs: int | None = None,
                  ops_per_unit: int | None = None, pch: bool | None = None) -> BuildResult:
    """Like :func:`build`, but also says what was compiled (see :class:`BuildResult`)."""
    if kind not in KINDS:
        raise ValueError(f"unknown library kind {kind!r}; expected one of {KINDS}")
    started = time.monotonic()
    pkg_dir = pkg_dir.resolve()
    njobs = jobs or default_jobs()
    use_pch = _env_flag("OPGEN_PCH") if pch is None else pch
    if kind == "aot":
        target = aot_target(pkg_dir, pch=use_pch)
    else:
        per_unit = ops_per_unit if ops_per_unit is not None else _env_ops_per_unit()
        target = ext_target(pkg_dir, ops_per_unit=per_unit, pch=use_pch)
    if not target.sources:
        raise BuildError(f"{pkg_dir}/csrc has no sources for the {kind} library; run 'opgen generate' first")
    key = target_key(target)
    artifact = artifact_path(pkg_dir, target, key, build_dir)
    if artifact.exists():
        return BuildResult(artifact, (), time.monotonic() - started, True)
    bdir = package_build_dir(pkg_dir, build_dir)
    with build_lock(bdir, quiet=quiet):
        if artifact.exists():  # another process built it while we waited
            return BuildResult(artifact, (), time.monotonic() - started, True)
        if not quiet:
            print(f"opgen: building {target.name} ({len(target.units)} unit{'s' if len(target.units) != 1 else ''}, "
                  f"{njobs} job{'s' if njobs != 1 else ''}) in {bdir}", file=sys.stderr)
        _remove_stale_temporaries(bdir, kind)
        ninja_path = _write_inputs(bdir, target)
        run = _run_ninja(bdir, ninja_path, njobs, quiet)
        csrc = pkg_dir / "csrc"
        if run.returncode != 0:
            text, _ = format_compiler_output(run.output, csrc)
            log = bdir / kind / "last-failure.log"
            _write_if_changed(log, run.output)
            raise BuildError((text or f"ninja exited with status {run.returncode}") + f"\n(full log: {log})")
        warnings, from_yaml = format_compiler_output(run.output, csrc)
        if from_yaml and not quiet:
            print(warnings, file=sys.stderr)
        if "not used because" in run.output and not quiet:
            print("opgen: warning: the precompiled header was not used (see the compiler's note above)",
                  file=sys.stderr)
        tmp = bdir / f".{artifact.name}.{os.getpid()}.tmp"
        shutil.copy2(bdir / kind / f"{target.name}.so", tmp)
        os.replace(tmp, artifact)
        for old in bdir.glob(f"{target.name}-*.so"):
            if old != artifact and time.time() - old.stat().st_mtime > 3600:
                old.unlink(missing_ok=True)
        took = time.monotonic() - started
        if not quiet:
            print(f"opgen: built {artifact.name} in {took:.1f}s "
                  f"({len(run.compiled)} unit{'s' if len(run.compiled) != 1 else ''} compiled)", file=sys.stderr)
    return BuildResult(artifact, tuple(run.compiled), took, False)
