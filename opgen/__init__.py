"""opgen: one YAML file per MindSpore custom operator.

``opgen generate ops/`` validates every spec (JSON Schema + semantic checks) and renders, with
Jinja2, the Custom (aot) wrappers, aot C ABI kernels, ``Function<T>`` classes and pybind11
bindings of a Python package; ``opgen build`` compiles them. See README.md.

From Python, ``opgen.load(paths)`` does all three and imports the package (docs/build.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from .loading import LoadError, load

__all__ = ["LoadError", "load", "__version__"]


def __getattr__(name: str) -> Any:
    # opgen.load / opgen.LoadError without importing the pipeline when only the CLI runs
    if name in ("load", "LoadError"):
        from . import loading

        return getattr(loading, name)
    raise AttributeError(f"module 'opgen' has no attribute {name!r}")
