"""Stage 7 — build: compile a generated package's C++ into its two shared libraries.

- the aot library ``lib<package>_aot.so`` from ``csrc/*_aot.cc`` (no MindSpore headers), and
- the pybind11 extension ``<package>_ext.so`` from ``csrc/*_function.cc`` + ``csrc/bindings.cc``,
  with MindSpore's own ``CustomOpBuilder(backend="CPU")`` include paths and flags.

One ninja file drives both, one translation unit per op and per path, in parallel.  Each
finished library is published under a name holding the hash of everything that went into it
(sources, headers, flags, compiler, MindSpore version): when that file exists, nothing runs,
not even ninja.  The build directory (``$OPGEN_BUILD_DIR``, default ``~/.cache/opgen``) holds
a per-package folder guarded by an ``flock`` that the kernel drops if a build is killed.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from .resources import include_dir

LOCK_TIMEOUT_S = 900.0


class BuildError(RuntimeError):
    """A failed compile or link; the message holds the compiler's diagnostics."""


def build_root() -> Path:
    """Root of all opgen builds: ``$OPGEN_BUILD_DIR`` or ``~/.cache/opgen``."""
    env = os.environ.get("OPGEN_BUILD_DIR")
    if env:
        return Path(env).expanduser().resolve()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return (base / "opgen").resolve()


def package_build_dir(pkg_dir: Path) -> Path:
    """Build folder of one generated package (keyed by its absolute path)."""
    pkg_dir = pkg_dir.resolve()
    tag = hashlib.sha256(str(pkg_dir).encode()).hexdigest()[:10]
    return build_root() / f"{pkg_dir.name}-{tag}"


@dataclass(frozen=True)
class Target:
    """One library to build: its kind (``aot`` or ``ext``), sources and flags."""

    kind: str
    name: str
    sources: tuple[Path, ...]
    cflags: tuple[str, ...]
    ldflags: tuple[str, ...]


def _compiler() -> str:
    return os.environ.get("CXX", "g++")


def _compiler_identity() -> str:
    path = shutil.which(_compiler())
    if path is None:
        raise BuildError(f"C++ compiler '{_compiler()}' not found (set CXX or install g++)")
    real = os.path.realpath(path)
    st = os.stat(real)
    return f"{real}:{st.st_size}:{int(st.st_mtime)}"


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
    if os.environ.get("OPGEN_SANITIZE") in ("1", "true", "yes"):
        return ("-fsanitize=address,undefined", "-fno-omit-frame-pointer", "-g")
    return ()


def aot_target(pkg_dir: Path) -> Target:
    """The aot library of a generated package."""
    csrc = pkg_dir / "csrc"
    sources = tuple(sorted(csrc.glob("*_aot.cc")))
    cflags = (
        "-O3", "-std=c++17", "-fPIC", "-D_GLIBCXX_USE_CXX11_ABI=0", "-Wall", "-Wno-unused-variable",
        f"-I{include_dir()}", f"-I{csrc}",
    ) + sanitize_flags()
    ldflags = ("-shared", "-pthread") + sanitize_flags()
    return Target("aot", f"lib{pkg_dir.name}_aot", sources, cflags, ldflags)


def ext_target(pkg_dir: Path) -> Target:
    """The pybind11 extension of a generated package, with CustomOpBuilder's CPU flags."""
    from mindspore.ops import CustomOpBuilder  # the real MindSpore; imported only to build

    name = f"{pkg_dir.name}_ext"
    csrc = pkg_dir / "csrc"
    sources = tuple(sorted(csrc.glob("*_function.cc"))) + (csrc / "bindings.cc",)
    builder = CustomOpBuilder(name, [str(s) for s in sources], backend="CPU")
    includes = [f"-I{p}" for p in builder.get_include_paths()]
    py_inc = sysconfig.get_path("include", scheme="posix_prefix")
    cflags = tuple(includes) + (f"-isystem{py_inc}", f"-I{include_dir()}", f"-I{csrc}")
    cflags += tuple(builder.get_cflags()) + sanitize_flags()
    ldflags = tuple(builder.get_ldflags()) + ("-pthread",) + sanitize_flags()
    return Target("ext", name, sources, cflags, ldflags)


def _ms_version() -> str:
    try:
        import mindspore

        return str(mindspore.__version__)
    except ImportError:
        return "none"


def target_key(target: Target) -> str:
    """Content hash of everything that determines the library's bytes."""
    h = hashlib.sha256()
    h.update(f"opgen-build-v1\n{target.kind}\n{target.name}\n".encode())
    h.update("\0".join(target.cflags + target.ldflags).encode())
    h.update(_compiler_identity().encode())
    h.update(f"{sys.version_info[:2]}\n{_ms_version() if target.kind == 'ext' else ''}\n".encode())
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


def artifact_path(pkg_dir: Path, target: Target, key: str) -> Path:
    """Where the published library for ``key`` lives."""
    return package_build_dir(pkg_dir) / f"{target.name}-{key[:16]}.so"


@contextmanager
def _build_lock(bdir: Path) -> Iterator[None]:
    bdir.mkdir(parents=True, exist_ok=True)
    fd = os.open(bdir / "build.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline = time.monotonic() + LOCK_TIMEOUT_S
        announced = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if not announced:
                    print(f"opgen: waiting for another build in {bdir}", file=sys.stderr)
                    announced = True
                if time.monotonic() > deadline:
                    raise BuildError(
                        f"timed out after {LOCK_TIMEOUT_S:.0f}s waiting for the build lock in {bdir}"
                    ) from None
                time.sleep(0.1)
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        yield
    finally:
        os.close(fd)


def _ninja_file(bdir: Path, target: Target) -> str:
    q = shlex.quote
    lines = [
        "# @generated by opgen build -- do not edit",
        "ninja_required_version = 1.3",
        f"cxx = {_compiler()}",
        f"cflags = {' '.join(q(f) for f in target.cflags)}",
        f"ldflags = {' '.join(q(f) for f in target.ldflags)}",
        "",
        "rule compile",
        "  command = $cxx -MMD -MF $out.d $cflags -c $in -o $out",
        "  depfile = $out.d",
        "  deps = gcc",
        "  description = compiling $label",
        "",
        "rule link",
        "  command = $cxx $in $ldflags -o $out",
        "  description = linking $out",
        "",
    ]
    objs = []
    for src in target.sources:
        obj = f"{target.kind}/{src.stem}.o"
        objs.append(obj)
        label = src.stem.replace("_function", " (Function<T>)").replace("_aot", " (aot)")
        lines.append(f"build {obj}: compile {str(src).replace(' ', '$ ')}")
        lines.append(f"  label = {label}")
    lines.append(f"build {target.name}.so: link {' '.join(objs)}")
    lines.append(f"default {target.name}.so")
    return "\n".join(lines) + "\n"


def _run_ninja(bdir: Path, ninja_path: Path, quiet: bool) -> None:
    env = dict(os.environ)
    env.setdefault("NINJA_STATUS", "[%f/%t] ")
    cmd = [_ninja(), "-f", str(ninja_path), "-j", str(max(1, os.cpu_count() or 1))]
    proc = subprocess.Popen(cmd, cwd=bdir, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, text=True)
    assert proc.stdout is not None
    captured = []
    for line in proc.stdout:
        captured.append(line)
        if not quiet and line.startswith("[") and "]" in line and ("compiling" in line or "linking" in line):
            print(f"opgen: {line.rstrip()}", file=sys.stderr)
    rc = proc.wait()
    if rc != 0:
        keep = [ln for ln in captured if not ln.startswith(_compiler() + " ") and not ln.startswith("[")]
        raise BuildError("".join(keep).strip() or f"ninja exited with {rc}")


def build(pkg_dir: Path, kind: str, quiet: bool = False) -> Path:
    """Build (or find cached) library ``kind`` (``aot`` or ``ext``) of a generated package.

    Returns:
        Path of the library; unchanged inputs return at once without any process.

    Raises:
        BuildError: on a compile or link error (the previous library stays in place), or when
            the build lock cannot be had within :data:`LOCK_TIMEOUT_S`.
    """
    pkg_dir = pkg_dir.resolve()
    target = aot_target(pkg_dir) if kind == "aot" else ext_target(pkg_dir)
    if not target.sources:
        raise BuildError(f"{pkg_dir}/csrc has no sources for the {kind} library; run 'opgen generate' first")
    key = target_key(target)
    artifact = artifact_path(pkg_dir, target, key)
    if artifact.exists():
        return artifact
    bdir = package_build_dir(pkg_dir)
    with _build_lock(bdir):
        if artifact.exists():  # another process built it while we waited
            return artifact
        started = time.monotonic()
        if not quiet:
            print(f"opgen: building {target.name} ({len(target.sources)} units) in {bdir}", file=sys.stderr)
        ninja_path = bdir / f"{target.kind}.ninja"
        text = _ninja_file(bdir, target)
        if not ninja_path.exists() or ninja_path.read_text() != text:
            ninja_path.write_text(text)
        _run_ninja(bdir, ninja_path, quiet)
        tmp = artifact.with_suffix(".so.tmp")
        shutil.copy2(bdir / f"{target.name}.so", tmp)
        os.replace(tmp, artifact)
        for old in bdir.glob(f"{target.name}-*.so"):
            if old != artifact and time.time() - old.stat().st_mtime > 3600:
                old.unlink(missing_ok=True)
        if not quiet:
            print(f"opgen: built {artifact.name} in {time.monotonic() - started:.1f}s", file=sys.stderr)
    return artifact
