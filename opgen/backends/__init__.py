"""The Backend seam: everything that names a framework lives behind one :class:`Backend`.

The core (load, schema, model, check, the shape language, the kernel layer, references, docs)
is framework-neutral. A backend turns checked ops into a framework's package and builds and tests
it: its templates (``templates/<backend>/``), its file list, its build targets (flags, ABI), the
runtime its generated code imports, its ``opgen test`` runner and its wheel.

Backends are found by name: ``opgen.backends.<name>`` is a package whose module-level ``BACKEND``
is a :class:`Backend` instance. Adding a backend adds such a package and its templates and
touches no core module (:func:`names` lists the packages here).

Each backend writes its own package directory, ``<output>/<package><package_suffix>``:
MindSpore's is ``generated/opgen_ops`` (suffix ``""``), PyTorch's ``generated/opgen_ops_torch``,
so that both frameworks' packages of one spec directory sit side by side and import in one
process. (Design: torchgen's ``BackendIndex``; ../docs/backends.md.)
"""

from __future__ import annotations

import abc
import importlib
import os
import pkgutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:  # the model only: backends import what they need themselves
    from ..build import BuildResult
    from ..model import BuildFlags, Op
    from ..testing import Package as TestPackage

DEFAULT = "mindspore"
"""The backend used when none is named (command line, ``[tool.opgen] backends``, ``load(backend=)``)."""


@dataclass(frozen=True)
class BuildOptions:
    """Options of one build, as ``opgen build`` takes them (``None``: the environment's default)."""

    build_dir: str | None = None
    jobs: int | None = None
    ops_per_unit: int | None = None
    pch: bool | None = None
    quiet: bool = False


@dataclass(frozen=True)
class WheelFacts:
    """What ``opgen wheel`` records for a package of one backend (:meth:`Backend.wheel_facts`)."""

    framework: str
    """The key under which ``_prebuilt.json`` records the framework's version (``mindspore``,
    ``torch``): the package's runtime compares it with the running one at import."""
    version: str
    """The framework version this process runs, that the libraries are built against."""
    label: str
    """The framework's name in messages and the wheel's summary (``MindSpore``, ``PyTorch``)."""
    libraries: Mapping[str, str]
    """Each library kind (:attr:`Backend.library_kinds`) -> its path inside the installed package."""
    requires: tuple[str, ...]
    """The wheel's ``Requires-Dist`` lines besides ``opgen`` (``mindspore==2.10.0``, ``numpy``)."""


class Backend(abc.ABC):
    """One framework's half of opgen (one instance per backend package, ``BACKEND``)."""

    name: ClassVar[str]
    """The backend's name on the command line, in ``[tool.opgen]`` and in ``opgen.load``."""
    package_suffix: ClassVar[str]
    """Appended to the package name for this backend's package directory and import name."""
    library_kinds: ClassVar[tuple[str, ...]]
    """The libraries ``opgen build`` makes for a package (``opgen build --only`` picks one)."""
    runtime_modules: ClassVar[tuple[str, ...]]
    """Python modules that building, importing and testing the package need (``mindspore``...)."""
    shipped_runtime: ClassVar[tuple[str, ...]]
    """The backend's modules of :mod:`opgen.runtime` (``pytorch``) that its packages carry a copy
    of in ``<pkg>/_runtime/`` beside the neutral ones (:func:`opgen.render.runtime_files`)."""
    install_hint: ClassVar[str]
    """How to install what :attr:`runtime_modules` name (``pip install 'opgen[run]'``)."""
    target: ClassVar[str]
    """The spec's dtype_format target whose rows this backend builds (MindSpore's ``CPU``)."""
    test_paths: ClassVar[Mapping[str, str]] = {}
    """The paths ``opgen test`` checks each op on, in table order, each with its short name in
    the results table (MindSpore: ``custom-graph: graph``...); see :meth:`test_package`."""
    device_kinds: ClassVar[Mapping[str, str]] = {}
    """Library kinds of :attr:`library_kinds` that one device builds, each with its device's name
    (MindSpore's ``aot_gpu``: ``cuda``): ``opgen build`` builds one when the package has that
    device's kernel units and the device's toolchain is here (:meth:`buildable_kinds`)."""
    device_test_paths: ClassVar[Mapping[str, Mapping[str, str]]] = {}
    """Per device other than the CPU (:mod:`opgen.devices`), the paths ``opgen test --device <name>``
    checks instead of :attr:`test_paths`, with their short names (torch: ``cuda``: ``eager-cuda``,
    ``compiled-cuda``)."""
    test_libraries: ClassVar[Mapping[str, str]] = {}
    """Per test path, the library kind its runner loads: ``opgen test`` builds those of the
    selected paths before any check starts, so that a build never counts against its
    ``--timeout`` (paths not listed build when they load)."""

    def build_modules(self, kinds: Sequence[str]) -> tuple[str, ...]:
        """The Python modules building the libraries ``kinds`` needs besides ninja (``opgen
        build`` checks that they import first); :attr:`runtime_modules` unless a backend knows
        better."""
        return self.runtime_modules

    def buildable_kinds(self, pkg_dir: Path) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """(the library kinds ``opgen build`` and ``opgen wheel`` build for ``pkg_dir``, a note for
        each device kind left out because its device's toolchain is missing). A device kind is left
        out without a note when the package has no kernel unit for its device."""
        from .. import devices

        kinds, notes = [], []
        for kind in self.library_kinds:
            device_name = self.device_kinds.get(kind)
            if device_name is None:
                kinds.append(kind)
                continue
            device = devices.get(device_name)
            if not any((pkg_dir / "csrc").glob(device.kernel_unit.format(op="*"))):
                continue
            why = device.unavailable()
            if why is None:
                kinds.append(kind)
            else:
                notes.append(f"{kind} ({device.target} rows) not built: {why}")
        return tuple(kinds), tuple(notes)

    def package_dir(self, output: Path, package: str) -> Path:
        """Where this backend writes the package ``package`` under ``output``."""
        return output / (package + self.package_suffix)

    @abc.abstractmethod
    def render(self, ops: Sequence[Op], package: str, out_prefix: str,
               package_flags: BuildFlags | None = None) -> dict[str, str]:
        """Every file of the package: ``{path relative to the package directory: text}``.

        Args:
            ops: the checked ops, any order (output is sorted by op name).
            package: the package name as given (without :attr:`package_suffix`).
            out_prefix: the package directory as generated files show it (``#line``).
            package_flags: compile/link settings for the whole package.
        """

    @abc.abstractmethod
    def owns(self, pkg_dir: Path) -> bool:
        """Whether ``pkg_dir`` is a package this backend generated."""

    @abc.abstractmethod
    def build(self, pkg_dir: Path, kind: str, options: BuildOptions) -> Path:
        """Build (or find cached) library ``kind`` (one of :attr:`library_kinds`) of ``pkg_dir``.

        Raises:
            opgen.build.BuildError: a compile or link error (at the YAML line of a kernel body).
        """


    def build_library(self, pkg_dir: Path, kind: str, options: BuildOptions) -> BuildResult:
        """Like :meth:`build`, with what was compiled (:class:`opgen.build.BuildResult`): what
        :func:`opgen.backends.build_library` (and :func:`opgen.backends.build`, which import-time
        builds and ``opgen wheel`` call) runs for a package of this backend. A backend builds a
        target with :func:`opgen.build.build_target` (the neutral ninja file, lock and publish step).

        Raises:
            NotImplementedError: this backend builds only through :meth:`build` (the base class's answer).
            opgen.build.BuildError: a compile or link error.
        """
        raise NotImplementedError(f"backend '{self.name}' builds through its own build()")

    def wheel_facts(self, package: str) -> WheelFacts:
        """What ``opgen wheel`` records for the package ``package`` (its directory name): the
        framework version this process runs and where each prebuilt library goes. Imports the
        framework.

        Raises:
            NotImplementedError: this backend has no wheels (the base class's answer).
        """
        raise NotImplementedError(f"opgen wheel: backend '{self.name}' builds no wheels")

    def device_facts(self, pkg_dir: Path) -> Mapping[str, Mapping[str, object]]:
        """What ``opgen wheel`` records (``_prebuilt.json``'s ``devices``) of the device kernels the
        package's libraries hold besides the CPU's: ``{"cuda": {"version": "13.0", "archs": ["80",
        "90"]}}``; the runtime refuses such a wheel where the framework's CUDA major version differs
        (:func:`opgen.runtime.prebuilt_library`). None by default."""
        return {}

    def test_package(self, pkg_dir: Path) -> TestPackage:
        """The package in ``pkg_dir``, imported, for ``opgen test``: an :class:`opgen.testing.Package`
        whose ``runner(op, path, attrs)`` runs an op on each of :attr:`test_paths` (forward and
        the framework's gradients, numpy in and out). The checks (reference, float64 gradients
        against central differences, dtype rows, contracts, checked mode) are the neutral ones of
        :mod:`opgen.testing`; a backend implements only this runner.

        Raises:
            NotImplementedError: this backend has no ``opgen test`` runner (the base class's answer).
            FileNotFoundError: ``pkg_dir`` holds no package of this backend.
        """
        raise NotImplementedError(f"opgen test: backend '{self.name}' has no test runner")


def names() -> tuple[str, ...]:
    """The backends installed: every subpackage of ``opgen.backends``, sorted, the default first."""
    found = sorted(m.name for m in pkgutil.iter_modules(__path__) if m.ispkg)
    return tuple(sorted(found, key=lambda n: n != DEFAULT))


class UnknownBackend(ValueError):
    """A backend name that is not one of :func:`names`."""


def get(name: str) -> Backend:
    """The backend called ``name``.

    Raises:
        UnknownBackend: no such backend (the message lists the known ones).
    """
    known = names()
    if name not in known:
        raise UnknownBackend(f"unknown backend {name!r}; expected one of: {', '.join(known)}")
    module = importlib.import_module(f"{__name__}.{name}")
    backend = getattr(module, "BACKEND", None)
    if not isinstance(backend, Backend):  # pragma: no cover - a broken backend package
        raise UnknownBackend(f"opgen.backends.{name} defines no BACKEND")
    return backend


def of_package(pkg_dir: Path) -> Backend | None:
    """The backend that generated ``pkg_dir``, or None when no backend owns it."""
    for name in names():
        backend = get(name)
        if backend.owns(pkg_dir):
            return backend
    return None


def parse_list(text: str | Sequence[str]) -> tuple[str, ...]:
    """Backend names from ``--backend a,b`` or a ``[tool.opgen] backends`` list, checked, in order,
    each once.

    Raises:
        UnknownBackend: a name that is not a backend.
    """
    items = text.split(",") if isinstance(text, str) else list(text)
    out: list[str] = []
    for raw in items:
        name = raw.strip()
        if not name:
            continue
        get(name)  # raises for an unknown name
        if name not in out:
            out.append(name)
    if not out:
        raise UnknownBackend(f"no backend named; expected one or more of: {', '.join(names())}")
    return tuple(out)


# ----------------------------------------------------------------------------- building a package


def build(pkg_dir: Path, kind: str, quiet: bool = False, *, build_dir: str | os.PathLike[str] | None = None,
          jobs: int | None = None, ops_per_unit: int | None = None, pch: bool | None = None) -> Path:
    """Build (or find cached) library ``kind`` (one of its backend's ``library_kinds``: MindSpore's
    ``aot`` or ``ext``) of a generated package: the package's backend (:func:`of_package`)
    builds it (:meth:`Backend.build`).  Import-time builds (:func:`opgen.runtime.package_library`)
    and ``opgen wheel`` call it.

    Args:
        build_dir: root of the build folders (default ``$OPGEN_BUILD_DIR`` or ``~/.cache/opgen``).
        jobs: parallel compile jobs (default ``$OPGEN_JOBS`` or the available CPUs).
        ops_per_unit: ext sources per translation unit (default ``$OPGEN_OPS_PER_UNIT`` or automatic).
        pch: precompile the support header once per build folder (``opgen/ms.h``, i.e. MindSpore's
            headers, for ext; ``opgen/aot.h`` for aot); default ``$OPGEN_PCH``.

    Returns:
        Path of the library; unchanged inputs return at once without starting any process.

    Raises:
        opgen.build.BuildError: on a compile or link error (the previous library stays in place and
            keeps working), or when the build lock cannot be had in time.
        ValueError: ``kind`` is not one of the backend's library kinds.
    """
    backend, options = _backend_of(pkg_dir, kind, quiet, build_dir, jobs, ops_per_unit, pch)
    return backend.build(pkg_dir.resolve(), kind, options)


def _backend_of(pkg_dir: Path, kind: str, quiet: bool, build_dir: str | os.PathLike[str] | None, jobs: int | None,
                ops_per_unit: int | None, pch: bool | None) -> tuple[Backend, BuildOptions]:
    """The backend of the package in ``pkg_dir`` (:func:`of_package`; the default one
    for a directory no backend owns yet) and the options of a build.

    Raises:
        ValueError: ``kind`` is not one of that backend's library kinds.
    """
    backend = of_package(pkg_dir.resolve()) or get(DEFAULT)
    if kind not in backend.library_kinds:
        raise ValueError(f"unknown library kind {kind!r}; expected one of {backend.library_kinds}")
    return backend, BuildOptions(build_dir=None if build_dir is None else os.fspath(build_dir), jobs=jobs,
                                 ops_per_unit=ops_per_unit, pch=pch, quiet=quiet)


def build_library(pkg_dir: Path, kind: str, quiet: bool = False, *,
                  build_dir: str | os.PathLike[str] | None = None, jobs: int | None = None,
                  ops_per_unit: int | None = None, pch: bool | None = None) -> BuildResult:
    """Like :func:`build`, but also says what was compiled (see :class:`opgen.build.BuildResult`).

    The package's backend (:func:`of_package`; the default one for a directory no backend owns
    yet) says what to compile (:meth:`Backend.build_library`).

    Raises:
        opgen.build.BuildError: a compile or link error, or the build lock not had in time.
        ValueError: ``kind`` is not one of the backend's library kinds.
    """
    backend, options = _backend_of(pkg_dir, kind, quiet, build_dir, jobs, ops_per_unit, pch)
    return backend.build_library(pkg_dir.resolve(), kind, options)
