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
"""

from __future__ import annotations

import functools
import math
import sysconfig
from pathlib import Path

from ... import build as _b
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
    includes, libdirs, version = torch_location()
    csrc = pkg_dir / "csrc"
    sources = tuple(sorted(csrc.glob("*_torch.cc")))
    kernels = kernel_target(pkg_dir)
    py_inc = sysconfig.get_path("include", scheme="posix_prefix")
    cflags = ("-O3", "-std=c++20", "-fPIC", "-D_GLIBCXX_USE_CXX11_ABI=1", "-Wall", "-Wno-unused-variable",
              "-Wno-unused-function", *(f"-isystem{d}" for d in includes), f"-isystem{py_inc}",
              f"-I{include_dir()}", f"-I{csrc}") + _b.kernel_flags()[0] + _b.sanitize_flags() + _b.checked_flags()
    package, ops = _b.user_flags(pkg_dir)
    merged = package
    for f in ops.values():
        merged = merged | f
    ldflags = ("-shared", "-pthread", *merged.link_flags(pkg_dir), *(f"-L{d}" for d in libdirs),
               "-ltorch", "-ltorch_cpu", "-lc10", *(f"-Wl,-rpath,{d}" for d in libdirs)) \
        + _b.kernel_flags()[1] + _b.sanitize_flags()
    return _b.Target(KIND, f"lib{pkg_dir.name}", sources, cflags, ldflags, _units(list(sources), ops_per_unit),
                     None, tuple(u.obj for u in kernels.units), kernels.sources,
                     toolchain=f"torch {version} cxx11abi 1")


def build_library(pkg_dir: Path, quiet: bool = False, *, build_dir: str | None = None, jobs: int | None = None,
                  ops_per_unit: int | None = None) -> _b.BuildResult:
    """Build (or find cached) the operator library of the PyTorch package in ``pkg_dir``.

    Raises:
        opgen.build.BuildError: a compile or link error (at the YAML line of a kernel body).
    """
    pkg_dir = pkg_dir.resolve()
    target = torch_target(pkg_dir, ops_per_unit=ops_per_unit)
    return _b.build_target(pkg_dir, target, lambda: [kernel_target(pkg_dir), target], quiet,
                           build_dir=build_dir, jobs=jobs)


def build(pkg_dir: Path, quiet: bool = False, *, build_dir: str | None = None, jobs: int | None = None,
          ops_per_unit: int | None = None) -> Path:
    """:func:`build_library`'s path."""
    return build_library(pkg_dir, quiet, build_dir=build_dir, jobs=jobs, ops_per_unit=ops_per_unit).path

