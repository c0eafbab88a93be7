"""Building a generated PyTorch package: one shared library of operators, loaded with
``torch.ops.load_library``.

Targets (one ninja file per package, :func:`opgen.build.build_target`: same cache, lock and
publish step as the MindSpore libraries):

- ``kernels``: each op's kernel layer (``csrc/<op>_kernel.cc``), compiled again here with
  ``-D_GLIBCXX_USE_CXX11_ABI=1`` (PyTorch's ABI; MindSpore's objects use 0, and ``Attrs`` hold
  ``std::string``).
- ``torch``: the operator units (``csrc/<op>_torch.cc``), grouped :data:`OPS_PER_UNIT` to a
  translation unit (each unit pays ~8 CPU s for PyTorch's headers, measured with
  ``<torch/library.h>`` + ``<ATen/core/Tensor.h>``; ``<torch/extension.h>`` costs ~40 s), with
  PyTorch's include paths, C++20, linked against ``torch``, ``torch_cpu`` and ``c10`` with an
  rpath to PyTorch's library directory.
- ``kernels_cuda`` (when :func:`cuda_unavailable` says nothing against it: a torch built with CUDA,
  nvcc here, and ops with ``GPU`` rows): each such op's CUDA kernel layer (``csrc/<op>_kernel.cu``,
  nvcc, PyTorch's ABI), linked into the same library with the CUDA dispatch key's glue
  (``csrc/<op>_cuda.cc``, host compiler, torch's ``c10/cuda`` headers and the toolkit's), against
  ``torch_cuda``, ``c10_cuda`` and ``cudart``. nvcc never sees a torch header.
"""

from __future__ import annotations

import functools
import math
import sysconfig
from pathlib import Path

from ... import build as _b
from ...devices import cuda as _cuda
from ...resources import include_dir

KIND = "torch"
"""The library kind (``opgen build --only torch``)."""

OPS_PER_UNIT = 8
"""Operator sources per translation unit by default (``opgen build --ops-per-unit`` overrides)."""


@functools.lru_cache(maxsize=1)
def torch_location() -> tuple[tuple[str, ...], tuple[str, ...], str]:
    """(include dirs, library dirs, version) of the installed PyTorch.

    Raises:
        ImportError: PyTorch is not installed.
    """
    import torch
    from torch.utils import cpp_extension

    return (tuple(cpp_extension.include_paths()), tuple(cpp_extension.library_paths()),
            str(torch.__version__))


@functools.lru_cache(maxsize=1)
def torch_cuda_version() -> str | None:
    """The CUDA version the installed PyTorch is built with (``"13.0"``), or None for a CPU build."""
    import torch

    return getattr(torch.version, "cuda", None) or None


def cuda_unavailable(pkg_dir: Path) -> str | None:
    """Why the library of ``pkg_dir`` is built without CUDA kernels, or None when it has them:
    no op has ``GPU`` rows, PyTorch is a CPU build, or nvcc is missing."""
    if not any((pkg_dir / "csrc").glob("*_cuda.cc")):
        return "no op has GPU rows"
    if torch_cuda_version() is None:
        return "this PyTorch is a CPU build (torch.version.cuda is None)"
    return _cuda.DEVICE.unavailable()


def cuda_glue_cflags(pkg_dir: Path) -> tuple[str, ...]:
    """The host compiler's flags for the CUDA dispatch key's units (``csrc/<op>_cuda.cc``): the
    operator units' flags plus the toolkit's headers (``cuda_runtime_api.h`` for ``c10/cuda``)."""
    return torch_cflags(pkg_dir) + _b.cuda_host_cflags()


def cuda_kernel_target(pkg_dir: Path) -> _b.Target:
    """The CUDA kernel layer of every op with ``GPU`` rows, with PyTorch's C++ ABI (nvcc)."""
    return _b.cuda_kernel_target(pkg_dir, ("-D_GLIBCXX_USE_CXX11_ABI=1",), "torch cxx11abi 1")


def kernel_target(pkg_dir: Path) -> _b.Target:
    """The kernel layer of every op, with PyTorch's C++ ABI."""
    return _b.kernel_target(pkg_dir, ("-D_GLIBCXX_USE_CXX11_ABI=1",))


def _units(sources: list[Path], ops_per_unit: int | None) -> tuple[_b.Unit, ...]:
    per = ops_per_unit or OPS_PER_UNIT
    srcs = sorted(sources, key=lambda p: p.name)
    n = len(srcs)
    count = max(1, math.ceil(n / per)) if n else 0
    units = []
    for i in range(count):
        chunk = srcs[i * n // count:(i + 1) * n // count]
        names = [s.stem[: -len("_torch")] for s in chunk]
        obj = f"{KIND}/{chunk[0].stem}.o" if len(chunk) == 1 else f"{KIND}/{names[0]}--{names[-1]}.o"
        label = (", ".join(names) if len(names) <= 3 else f"{names[0]} ... {names[-1]} ({len(names)} ops)") + " (torch)"
        units.append(_b.Unit(obj, tuple(chunk), label))
    return tuple(units)


def torch_target(pkg_dir: Path, *, ops_per_unit: int | None = None) -> _b.Target:
    """The operator library of the PyTorch package in ``pkg_dir``."""
    _includes, libdirs, version = torch_location()
    csrc = pkg_dir / "csrc"
    sources = tuple(sorted(csrc.glob("*_torch.cc")))
    kernels = kernel_target(pkg_dir)
    cflags = torch_cflags(pkg_dir)
    objects = tuple(u.obj for u in kernels.units)
    inputs = kernels.sources
    cuda_libs: tuple[str, ...] = ()
    linked: tuple[str, ...] = ()
    toolchain = f"torch {version} cxx11abi 1"
    if cuda_unavailable(pkg_dir) is None:  # the CUDA key's glue (host compiler) and kernels (nvcc)
        linked = ("cuda",)
        sources += tuple(sorted(csrc.glob("*_cuda.cc")))
        cflags = cuda_glue_cflags(pkg_dir)
        cuda_kernels = cuda_kernel_target(pkg_dir)
        objects += tuple(u.obj for u in cuda_kernels.units)
        inputs += cuda_kernels.sources
        cuda_libs = ("-ltorch_cuda", "-lc10_cuda", *_b.cuda_link_flags())
        toolchain += f" cuda {torch_cuda_version()}"
    package, ops = _b.user_flags(pkg_dir)
    merged = package
    for f in ops.values():
        merged = merged | f
    ldflags = ("-shared", "-pthread", *merged.link_flags(pkg_dir), *(f"-L{d}" for d in libdirs),
               "-ltorch", "-ltorch_cpu", "-lc10", *cuda_libs, *(f"-Wl,-rpath,{d}" for d in libdirs)) \
        + _b.kernel_flags()[1] + _b.sanitize_flags()
    return _b.Target(KIND, f"lib{pkg_dir.name}", sources, cflags, ldflags, _units(list(sources), ops_per_unit),
                     None, objects, inputs, toolchain=toolchain, linked_devices=linked)


def torch_cflags(pkg_dir: Path) -> tuple[str, ...]:
    """The host compiler's flags for the operator units of ``pkg_dir``: C++20, PyTorch's ABI and
    include paths, Python's headers, opgen's kernel flags."""
    includes, _libdirs, _version = torch_location()
    csrc = pkg_dir / "csrc"
    py_inc = sysconfig.get_path("include", scheme="posix_prefix")
    return ("-O3", "-std=c++20", "-fPIC", "-D_GLIBCXX_USE_CXX11_ABI=1", "-Wall", "-Wno-unused-variable",
            "-Wno-unused-function", *(f"-isystem{d}" for d in includes), f"-isystem{py_inc}",
            f"-I{include_dir()}", f"-I{csrc}") + _b.kernel_flags()[0] + _b.sanitize_flags() + _b.checked_flags()


def build_library(pkg_dir: Path, quiet: bool = False, *, build_dir: str | None = None, jobs: int | None = None,
                  ops_per_unit: int | None = None) -> _b.BuildResult:
    """Build (or find cached) the operator library of the PyTorch package in ``pkg_dir``.

    Raises:
        opgen.build.BuildError: a compile or link error (at the YAML line of a kernel body).
    """
    pkg_dir = pkg_dir.resolve()
    target = torch_target(pkg_dir, ops_per_unit=ops_per_unit)

    def companions() -> list[_b.Target]:
        cuda = [cuda_kernel_target(pkg_dir)] if cuda_unavailable(pkg_dir) is None else []
        return [kernel_target(pkg_dir), *cuda, target]

    return _b.build_target(pkg_dir, target, companions, quiet, build_dir=build_dir, jobs=jobs)


def build(pkg_dir: Path, quiet: bool = False, *, build_dir: str | None = None, jobs: int | None = None,
          ops_per_unit: int | None = None) -> Path:
    """:func:`build_library`'s path."""
    return build_library(pkg_dir, quiet, build_dir=build_dir, jobs=jobs, ops_per_unit=ops_per_unit).path

