"""The generator's half of the packages' runtime: building a package's libraries at import.

A package ``opgen generate`` wrote has no prebuilt libraries; its runtime (``<pkg>/_runtime/``,
copied from :mod:`opgen.runtime`) asks opgen for them through :func:`build_library` (found by
:func:`opgen.runtime.base.generator`), which builds them when missing or stale
(:func:`opgen.backends.build`) under the build root :func:`set_build_dir` gave the package, and
holds them for the life of the process. A wheel's package never imports this module.
"""

from __future__ import annotations

import os
from pathlib import Path

from . import backends
from . import build as _build
from . import env as _env
from .runtime.base import check_dtype_names as check_dtype_names
from .runtime.base import load_library_module as load_library_module
from .runtime.base import package_library as package_library
from .runtime.base import prebuilt_library as prebuilt_library
from .runtime.base import require_sanitizer_runtime as require_sanitizer_runtime

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


def quiet() -> bool:
    """Whether import-time builds keep quiet (``OPGEN_QUIET``)."""
    return _env.flag("OPGEN_QUIET")


def build_library(pkg_dir: Path, kind: str) -> Path:
    """Build (or find) library ``kind`` of ``pkg_dir`` (resolved) and hold it for the life of this
    process (:func:`opgen.build.hold_library`), so that ``opgen clean`` and later builds leave it
    in place: what a generated package's runtime calls when it has no prebuilt library.

    Raises:
        opgen.build.BuildError: when it does not compile.
        ImportError: when it is removed each time it is built.
    """
    for _ in range(3):
        path = backends.build(pkg_dir, kind, quiet=quiet(), build_dir=_build_dirs.get(pkg_dir))
        if _build.hold_library(path):
            return path
    raise ImportError(f"the {kind} library of {pkg_dir} was removed each time it was built ({path}); "
                      "is something deleting the build folder?")


def library_built(pkg_dir: Path, kind: str) -> bool:
    """Whether library ``kind`` of ``pkg_dir`` (resolved) is built and up to date, so that loading
    it starts no build (MindSpore's ``ext``: the PyNative path's choice, ``OPGEN_PYNATIVE_PATH=auto``)."""
    from .backends.mindspore.build import built_library

    return built_library(pkg_dir, kind, _build_dirs.get(pkg_dir)) is not None
