"""``opgen.load()``: generate, build and import a package of ops from Python in one call.

Like ``torch.utils.cpp_extension.load``: the specs are validated and generated into the build
root (``<build root>/load/<package>-<hash of the spec paths>/<package>``), both libraries are
built with the same content-hash cache and build lock as ``opgen build``, and the package is
imported.  A bad spec raises :class:`LoadError` carrying the ``file:line:col`` diagnostics; a
compile error raises :class:`opgen.build.BuildError` with the kernel's YAML line.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import re
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

from .diagnostics import Diagnostic, Location, display_path
from .model import BuildFlags
from .names import package_name_problem
from .writer import MANIFEST


class LoadError(Exception):
    """The specs given to :func:`load` have errors; ``str()`` lists them, each at ``file:line:col``."""

    def __init__(self, diagnostics: Sequence[Diagnostic]):
        self.diagnostics = list(diagnostics)
        super().__init__("\n".join(d.format() for d in self.diagnostics))


def _default_package(paths: Sequence[Path]) -> str:
    stem = paths[0].stem if len(paths) == 1 and paths[0].is_file() else paths[0].resolve().name
    name = re.sub(r"\W", "_", stem).strip("_").lower() or "ops"
    if name[0].isdigit():
        name = "ops_" + name
    return name if name.endswith("_ops") else f"{name}_ops"


def load(paths: str | Path | Sequence[str | Path], package: str | None = None,
         build_dir: str | Path | None = None, verbose: bool = False, *,
         extra_cflags: Sequence[str] = (), extra_include_paths: Sequence[str] = (),
         extra_ldflags: Sequence[str] = (), libraries: Sequence[str] = (), backend: str | None = None) -> ModuleType:
    """Generate, build and import the ops of ``paths`` (spec files or directories of ``*.yaml``).

    Args:
        paths: spec files or directories.
        package: the Python package name (default: from the spec file or directory name,
            ``<name>_ops``).  It is also the C++ namespace and the symbol prefix.
        build_dir: root of the build folders (default ``$OPGEN_BUILD_DIR`` or ``~/.cache/opgen``);
            the generated package lives there too.
        verbose: print what is generated and the build's progress (stderr).
        extra_cflags, extra_include_paths, extra_ldflags, libraries: package-wide user flags, as
            ``opgen generate --cflag/--include-dir/--ldflag/--library`` (part of the cache key).
        backend: the framework (:func:`opgen.backends.names`; default MindSpore). ``"torch"``
            returns the PyTorch package ``<package>_torch`` (its ops are ``torch.ops`` operators);
            PyTorch cannot unregister operators, so after an edit a torch package loads in a new
            process only (a second load in the same process raises torch's RuntimeError).

    Returns:
        The package module: its ops are the Custom (aot) path, ``.function`` the Function<T> path,
        exactly as after ``opgen generate`` + ``opgen build`` + ``import``.  Calling again after
        editing a spec rebuilds what changed and returns the new module.  Threads may call it at
        once: the import at its end is serialized.

    Raises:
        LoadError: a spec is invalid (every diagnostic, each at its ``file:line:col``), or
            ``package`` cannot name a package (the rule of ``opgen generate -p``,
            :func:`opgen.names.package_name_problem`), or names a module already imported in this
            process that opgen did not generate (``json``).
        opgen.build.BuildError: a kernel does not compile (at its YAML line), or the build lock
            could not be had.
    """
    from . import backends, runtime_base
    from . import build as _build
    from .pipeline import generate

    chosen = backends.get(backend or backends.DEFAULT)

    started = time.monotonic()
    specs = [Path(p) for p in ([paths] if isinstance(paths, (str, Path)) else paths)]
    if not specs:
        raise LoadError([Diagnostic(_no_location(), "opgen.load() needs at least one spec file or directory")])
    name = package or _default_package(specs)
    problem = package_name_problem(name) or _imported_elsewhere(name)
    if problem:
        raise LoadError([Diagnostic(_no_location(), problem)])
    tag = hashlib.sha256("\0".join(str(p.resolve()) for p in specs).encode()).hexdigest()[:10]
    out_dir = _build.build_root(build_dir) / "load" / f"{name}-{tag}"
    flags = BuildFlags(tuple(extra_cflags), tuple(str(Path(d).resolve()) for d in extra_include_paths),
                       tuple(extra_ldflags), tuple(libraries))
    res = generate([str(p) for p in specs], out_dir, name, flags=flags if flags != BuildFlags() else None,
                   backend=chosen.name)
    if res.diagnostics:
        raise LoadError(res.diagnostics)
    pkg_dir = res.package_dir.resolve()
    if verbose and res.write is not None:
        print(f"opgen: {len(res.ops)} op(s) -> {display_path(pkg_dir)}: {len(res.write.written)} written, "
              f"{len(res.write.unchanged)} unchanged", file=sys.stderr)
    options = backends.BuildOptions(build_dir=None if build_dir is None else str(build_dir), quiet=not verbose)
    # the libraries it can build here; a device's (MindSpore's aot_gpu) builds when its package is
    # imported under that device target
    for kind in chosen.buildable_kinds(pkg_dir)[0]:
        if kind not in chosen.device_kinds:
            chosen.build(pkg_dir, kind, options)
    name = pkg_dir.name  # with the backend's suffix
    with _import_lock:  # the swap of sys.modules entries below, one thread at a time
        runtime_base.set_build_dir(pkg_dir, build_dir)
        for mod in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
            del sys.modules[mod]  # a load after an edit imports the new package, not the cached one
        spec = importlib.util.spec_from_file_location(name, pkg_dir / "__init__.py",
                                                      submodule_search_locations=[str(pkg_dir)])
        if spec is None or spec.loader is None:  # pragma: no cover - importlib contract
            raise ImportError(f"cannot import {pkg_dir}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
            if chosen.name == "mindspore":
                module.function = importlib.import_module(f"{name}.function")  # type: ignore[attr-defined]
        except BaseException:
            sys.modules.pop(name, None)
            raise
    if verbose:
        print(f"opgen: loaded {name} in {time.monotonic() - started:.1f}s", file=sys.stderr)
    return module


_import_lock = threading.Lock()
"""Serializes the end of :func:`load` (removing a package's modules from ``sys.modules`` and
importing it again): threads loading at once got ``KeyError: '<pkg>.custom'`` or
``ModuleNotFoundError`` from each other's half-done swaps."""


def _imported_elsewhere(name: str) -> str | None:
    """Why ``name`` cannot be loaded in this process: a module of that name is already imported
    and is not a package opgen generated (``json``, ``pytest``...), or None."""
    module = sys.modules.get(name)
    if module is None:
        return None
    file = getattr(module, "__file__", None)
    if file and (Path(file).parent / MANIFEST).is_file():
        return None  # a generated package (an earlier load): replaced by the new one
    return (f"package name {name!r} is the name of a module already imported in this process "
            f"({file or 'built in'}); loading would replace it: pick another package name")


def _no_location() -> Location:
    return Location("opgen.load")
