"""The MindSpore backend's part of ``opgen build``: its two libraries and what they need.

- the aot library ``lib<package>_aot.so`` from ``csrc/*_aot.cc`` (no MindSpore headers), and
- the pybind11 extension ``<package>_ext.so`` from ``csrc/*_function.cc`` + ``csrc/bindings.cc``,
  with MindSpore's own ``CustomOpBuilder(backend="CPU")`` include paths and flags;
- both link each op's kernel unit (compiled once for both, with MindSpore's C++ ABI,
  :data:`ABI_FLAGS`), and the extension links opgen's MindSpore support object
  (``opgen/ms_support.cc``, the one unit that includes ``ms_extension.h``), compiled once per
  toolchain into ``<build root>/support`` and shared by every package.

The ninja file, lock, publish step and compiler diagnostics are the neutral ones of
:mod:`opgen.build` (:func:`opgen.build.build_target`).
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import sys
import sysconfig
import time
from pathlib import Path

from ...build import (
    BUILD_FORMAT,
    BuildError,
    BuildResult,
    Target,
    artifact_path,
    build_lock,
    build_target,
    checked_flags,
    compiler_argv,
    compiler_identity,
    cuda_host_cflags,
    cuda_kernel_target,
    cuda_link_flags,
    env_flag,
    env_ops_per_unit,
    esc,
    format_compiler_output,
    group_units,
    is_published,
    kernel_flags,
    kernel_target,
    plain_cflags,
    run_ninja,
    sanitize_flags,
    support_dir,
    target_key,
    user_link_flags,
    write_if_changed,
)
from ...resources import include_dir
from ...runtime.mindspore import version as version
from .. import BuildOptions
from .facts import TARGET

KINDS = ("aot", "ext", "aot_gpu")
"""The libraries of a MindSpore package: ``aot`` (loaded by ``ops.Custom`` on CPU), ``ext`` (the
``Function<T>`` pybind11 extension) and ``aot_gpu`` (loaded by ``ops.Custom`` on GPU: for the ops
with ``GPU`` rows, their CUDA kernels compiled by nvcc)."""

GPU_KIND = "aot_gpu"

ABI_FLAGS = ("-D_GLIBCXX_USE_CXX11_ABI=0",)
"""MindSpore 2.10's wheels are built with the pre-C++11 ``std::string`` ABI: every unit linked
into its libraries (the kernels too) must be."""


def build_library(pkg_dir: Path, kind: str, options: BuildOptions) -> BuildResult:
    """Build (or find cached) library ``kind`` (one of :data:`KINDS`) of a generated MindSpore
    package: what :func:`opgen.backends.build_library` does for it.

    Raises:
        ValueError: ``kind`` is not one of :data:`KINDS`.
        opgen.build.BuildError: a compile or link error (at the YAML line of a kernel body).
    """
    if kind not in KINDS:
        raise ValueError(f"unknown library kind {kind!r}; expected one of {KINDS}")
    started = time.monotonic()
    pkg_dir = pkg_dir.resolve()
    build_dir = options.build_dir
    use_pch = env_flag("OPGEN_PCH") if options.pch is None else options.pch
    per_unit = options.ops_per_unit if options.ops_per_unit is not None else env_ops_per_unit()

    def ext(allow_import: bool = True) -> Target:
        return ext_target(pkg_dir, ops_per_unit=per_unit, pch=use_pch, build_dir=build_dir,
                          allow_import=allow_import)

    target = _target(pkg_dir, kind, options)
    if kind == GPU_KIND:
        return build_target(pkg_dir, target, lambda: [_cuda_kernels(pkg_dir), target], options.quiet,
                            build_dir=build_dir, jobs=options.jobs, started=started)

    def prepare() -> tuple[str, ...]:
        if kind == "ext" and target.objects and target.objects[-1].endswith(".o") and os.path.isabs(target.objects[-1]):
            return ensure_support(build_dir, quiet=options.quiet)
        return ()

    def companions() -> list[Target]:
        # One ninja file (and ninja log) for the package: the other library's edges are written
        # too (the extension's when MindSpore's flags are known without importing it), so that
        # kernel units compiled for one library are not compiled again for the other.
        others: list[Target] = []
        if kind == "ext":
            others.append(aot_target(pkg_dir, pch=use_pch))
        else:
            try:
                others.append(ext(allow_import=False))
            except ImportError:
                pass
        return [_kernels(pkg_dir), target, *others]

    return build_target(pkg_dir, target, companions, options.quiet, build_dir=build_dir, jobs=options.jobs,
                        prepare=prepare, started=started)


def _target(pkg_dir: Path, kind: str, options: BuildOptions) -> Target:
    """The target of library ``kind`` of ``pkg_dir`` (resolved) with these options."""
    use_pch = env_flag("OPGEN_PCH") if options.pch is None else options.pch
    if kind == "aot":
        return aot_target(pkg_dir, pch=use_pch)
    if kind == GPU_KIND:
        return aot_gpu_target(pkg_dir)
    per_unit = options.ops_per_unit if options.ops_per_unit is not None else env_ops_per_unit()
    return ext_target(pkg_dir, ops_per_unit=per_unit, pch=use_pch, build_dir=options.build_dir)


def built_library(pkg_dir: Path, kind: str, build_dir: str | None = None) -> Path | None:
    """Library ``kind`` of ``pkg_dir`` if it is built and up to date -- what :func:`build_library`
    would return at once -- else None. Starts no process and takes no lock.

    Raises:
        ValueError: ``kind`` is not one of :data:`KINDS`.
        ImportError: MindSpore's flags are not known and MindSpore cannot be imported.
    """
    if kind not in KINDS:
        raise ValueError(f"unknown library kind {kind!r}; expected one of {KINDS}")
    pkg_dir = pkg_dir.resolve()
    target = _target(pkg_dir, kind, BuildOptions(build_dir=build_dir))
    if not target.sources:
        return None
    artifact = artifact_path(pkg_dir, target, target_key(target), build_dir)
    return artifact if is_published(artifact) else None


def _kernels(pkg_dir: Path) -> Target:
    """The kernel units of the package, as both libraries link them (MindSpore's ABI)."""
    return kernel_target(pkg_dir, ABI_FLAGS, "mindspore ", shares_stamp="aot")  # same flags as aot's units


def aot_target(pkg_dir: Path, *, pch: bool = False) -> Target:
    """The aot library of a generated package (one unit per op, plus each op's kernel unit).

    Args:
        pch: precompile ``opgen/aot.h`` once for every unit (measured: no gain for aot units,
            whose time is their kernels; kept for symmetry with :func:`ext_target`).
    """
    csrc = pkg_dir / "csrc"
    sources = tuple(sorted(csrc.glob("*_aot.cc")))
    kernels = _kernels(pkg_dir)
    ldflags = ("-shared", "-pthread") + user_link_flags(pkg_dir) + kernel_flags()[1] + sanitize_flags()
    return Target("aot", f"lib{pkg_dir.name}_aot", sources, plain_cflags(csrc, ABI_FLAGS), ldflags,
                  group_units("aot", sources, 1, "aot"), "opgen/aot.h" if pch else None,
                  tuple(u.obj for u in kernels.units), kernels.sources, toolchain="mindspore ")


def _cuda_kernels(pkg_dir: Path) -> Target:
    """The CUDA kernel units of the package (nvcc, MindSpore's ABI)."""
    return cuda_kernel_target(pkg_dir, ABI_FLAGS, "mindspore ")


def aot_gpu_target(pkg_dir: Path) -> Target:
    """The GPU aot library of a generated package: each op with ``GPU`` rows, its entry points
    (``csrc/<op>_aot_gpu.cc``: the seed's ABI, host code that the host compiler compiles against
    the toolkit's headers, as PyTorch's CUDA glue; one unit per op, as the CPU aot library's) and
    its CUDA kernel unit (nvcc, run on the stream MindSpore passes), linked with the CUDA runtime
    (``linked_devices``: nvcc's identity is part of the key)."""
    csrc = pkg_dir / "csrc"
    sources = tuple(sorted(csrc.glob("*_aot_gpu.cc")))
    kernels = _cuda_kernels(pkg_dir)
    ldflags = ("-shared", "-pthread") + user_link_flags(pkg_dir) + cuda_link_flags()
    return Target(GPU_KIND, f"lib{pkg_dir.name}_aot_gpu", sources, plain_cflags(csrc, ABI_FLAGS) + cuda_host_cflags(),
                  ldflags, group_units(GPU_KIND, sources, 1, "GPU aot"), None, tuple(u.obj for u in kernels.units),
                  kernels.sources, toolchain="mindspore ", linked_devices=("cuda",))


SUPPORT_SOURCE = "opgen/ms_support.cc"
"""opgen's MindSpore support unit (under :func:`~opgen.resources.include_dir`), built once per machine."""


def location() -> tuple[str, str]:
    """(MindSpore's package directory, its version), found without importing MindSpore.

    Raises:
        ImportError: when MindSpore is not installed.
    """
    import importlib.metadata
    import importlib.util

    module = sys.modules.get("mindspore")
    if module is not None and getattr(module, "__file__", None):  # imported: no metadata look-up (~20 ms)
        return os.path.dirname(str(module.__file__)), str(getattr(module, "__version__", "unknown"))
    spec = importlib.util.find_spec("mindspore")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("MindSpore is not installed (pip install mindspore): the extension needs it")
    try:
        found = importlib.metadata.version("mindspore")
    except importlib.metadata.PackageNotFoundError:
        found = version()
    return str(list(spec.submodule_search_locations)[0]), found


def ms_flags(allow_import: bool = True) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(compile flags, link flags) of MindSpore's ``CustomOpBuilder(backend=TARGET)``, without the
    extension's name, plus Python's and opgen's include dirs.

    Asking CustomOpBuilder means importing MindSpore (seconds); its answer is kept in the build
    root per MindSpore location and version, so a build that finds it there imports nothing.
    With ``allow_import=False`` a missing answer raises ImportError unless MindSpore is imported.
    """
    where, found = location()
    tag = hashlib.sha256(f"{where}\n{found}\n{sys.executable}\n{sys.version}".encode()).hexdigest()[:16]
    cache = support_dir() / f"ms-flags-{tag}.json"
    try:
        data = json.loads(cache.read_text(encoding="utf-8"))
        includes, ms_cflags, ms_ldflags = (tuple(str(x) for x in data[k]) for k in ("include", "cflags", "ldflags"))
    except (OSError, ValueError, KeyError, TypeError):
        if not allow_import and "mindspore" not in sys.modules:
            raise ImportError("MindSpore's build flags are not known yet") from None
        from mindspore.ops import CustomOpBuilder  # the real MindSpore; imported only to build

        builder = CustomOpBuilder("opgen_flags", [], backend=TARGET)
        includes = tuple(builder.get_include_paths())
        ms_cflags = tuple(f for f in builder.get_cflags() if not f.startswith("-DMS_EXTENSION_NAME="))
        ms_ldflags = tuple(builder.get_ldflags())
        write_if_changed(cache, json.dumps({"include": includes, "cflags": ms_cflags, "ldflags": ms_ldflags}))
    py_inc = sysconfig.get_path("include", scheme="posix_prefix")
    cflags = tuple(f"-I{p}" for p in includes) + (f"-isystem{py_inc}", f"-I{include_dir()}") + ms_cflags
    return cflags + sanitize_flags() + checked_flags(), ms_ldflags + ("-pthread",) + sanitize_flags()


def support_object(root: str | os.PathLike[str] | None = None) -> tuple[Path, tuple[str, ...], str]:
    """Where opgen's MindSpore support object lives for this toolchain, its flags and its key.

    It depends only on MindSpore, the compiler, Python and opgen, so one copy per build root
    (``support/ms_support-<key16>.o``) serves every package; :func:`ensure_support` builds it.
    """
    cflags, _ = ms_flags()
    h = hashlib.sha256(f"support\n{BUILD_FORMAT}\n{compiler_identity()}\npython {sys.version_info[:2]}\n"
                       f"mindspore {version()}\n".encode())
    h.update("\0".join(cflags).encode())
    for f in [include_dir() / SUPPORT_SOURCE, *sorted((include_dir() / "opgen").glob("*.h"))]:
        h.update(f.name.encode() + b"\0" + f.read_bytes() + b"\0")
    key = h.hexdigest()
    return support_dir(root) / f"ms_support-{key[:16]}.o", cflags, key


def ext_target(pkg_dir: Path, *, ops_per_unit: int | None = None, pch: bool = False,
               build_dir: str | os.PathLike[str] | None = None, allow_import: bool = True) -> Target:
    """The pybind11 extension of a generated package, with CustomOpBuilder's flags for :data:`TARGET`.

    Its units include ``opgen/ms.h`` (MindSpore's ``function.h``, not ``ms_extension.h``); it links
    each op's kernel unit and the per-machine support object (:func:`support_object`).

    Args:
        ops_per_unit: sources per translation unit (``None``: automatic, see :func:`opgen.build.group_units`).
        pch: precompile ``opgen/ms.h`` (MindSpore's headers) once and use it in every unit.
        build_dir: the build root, where the support object lives.
        allow_import: whether MindSpore may be imported to learn its flags (see :func:`ms_flags`).
    """
    name = f"{pkg_dir.name}_ext"
    csrc = pkg_dir / "csrc"
    sources = tuple(sorted(csrc.glob("*_function.cc")))
    if (csrc / "bindings.cc").is_file():
        sources += (csrc / "bindings.cc",)
    ms_cflags, ms_ldflags = ms_flags(allow_import)
    cflags = ms_cflags + (f"-I{csrc}", f"-DMS_EXTENSION_NAME={name}") + kernel_flags()[0]
    ldflags = ms_ldflags[:1] + user_link_flags(pkg_dir) + ms_ldflags[1:] + kernel_flags()[1]
    # the bindings unit stays apart: it is recompiled only when an op's Python signature changes
    units = group_units("ext", [s for s in sources if s.name != "bindings.cc"], ops_per_unit, "Function<T>")
    units += group_units("ext", [s for s in sources if s.name == "bindings.cc"], 1, "Function<T>")
    kernels = _kernels(pkg_dir)
    objects = tuple(u.obj for u in kernels.units)
    if (include_dir() / SUPPORT_SOURCE).is_file():
        objects += (str(support_object(build_dir)[0]),)
    return Target("ext", name, sources, cflags, ldflags, units, "opgen/ms.h" if pch else None,
                  objects, kernels.sources, toolchain=f"mindspore {version()}")


def ensure_support(build_dir: str | os.PathLike[str] | None = None, quiet: bool = False) -> tuple[str, ...]:
    """Build opgen's MindSpore support object for this toolchain unless the build root has it.

    Once per machine (per build root, MindSpore version, compiler, Python and opgen): ~35 CPU
    seconds, then every package's extension links the same object.  Guarded by its own lock.

    Returns:
        The labels of what was compiled (empty when the object was there).
    """
    obj, cflags, _ = support_object(build_dir)
    if obj.exists():
        return ()
    sdir = obj.parent
    with build_lock(sdir, quiet=quiet):
        if obj.exists():
            return ()
        for leftover in sdir.glob("*.tmp"):
            leftover.unlink(missing_ok=True)
        label = "opgen's MindSpore support (once per toolchain)"
        q = shlex.quote
        text = "\n".join([
            "# @generated by opgen build -- do not edit",
            "ninja_required_version = 1.7",
            "builddir = state",
            "rule compile",
            f"  command = {' '.join(q(w) for w in compiler_argv())} {' '.join(q(f) for f in cflags)} "
            "-c $in -o $out.$$$$.tmp && mv -f $out.$$$$.tmp $out",
            f"  description = compiling {label}",
            f"build {esc(obj.name)}: compile {esc(str(include_dir() / SUPPORT_SOURCE))}",
            "",
        ])
        ninja_path = sdir / f"{obj.stem}.ninja"
        write_if_changed(ninja_path, text)
        if not quiet:
            print(f"opgen: building opgen's MindSpore support object once for this toolchain in {sdir}",
                  file=sys.stderr)
        run = run_ninja(sdir, ninja_path, 1, quiet)
        if run.returncode != 0:
            text, _ = format_compiler_output(run.output, sdir)
            raise BuildError((text or f"ninja exited with status {run.returncode}") +
                             "\nopgen: the MindSpore support object does not compile with this MindSpore "
                             f"({version()}) and compiler")
        for old in sdir.glob("ms_support-*.o"):
            if old != obj and time.time() - old.stat().st_mtime > 7 * 86400:
                old.unlink(missing_ok=True)
    return (label,)
