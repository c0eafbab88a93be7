"""Where opgen's data files live: templates, schemas, docs and the C++ support headers.

From a checkout, ``templates/``, ``schemas/``, ``docs/`` and ``ops/`` (the example ops) sit
beside the ``opgen`` package; after a (non-editable) ``pip install`` they are shipped inside it as
``opgen/_templates``, ``opgen/_schemas``, ``opgen/_docs`` and ``opgen/_examples`` (see
pyproject.toml).  Both layouts are tried, checkout first.
"""

from __future__ import annotations

from pathlib import Path

_PKG = Path(__file__).resolve().parent


def _find(checkout_name: str, installed_name: str) -> Path:
    for candidate in (_PKG.parent / checkout_name, _PKG / installed_name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"opgen installation is incomplete: no {checkout_name}/ directory found near {_PKG}")


def templates_dir() -> Path:
    """Directory of the Jinja2 templates (``*.j2``)."""
    return _find("templates", "_templates")


def schemas_dir() -> Path:
    """Directory of the JSON Schemas (``*.schema.json``)."""
    return _find("schemas", "_schemas")


def docs_dir() -> Path:
    """Directory of opgen's guides (``testing.md``, ``kernel-api.md``, ``spec-reference.md``...)."""
    for candidate in (_PKG.parent / "docs", _PKG / "_docs"):  # a site-packages/docs of another package: no
        if (candidate / "spec-reference.md").is_file():
            return candidate
    raise FileNotFoundError(f"opgen installation is incomplete: no docs/ directory found near {_PKG}")


def examples_dir() -> Path:
    """Directory of opgen's example op specs (``rms_norm.yaml``...; ``opgen new NAME --from EXAMPLE``)."""
    for candidate in (_PKG.parent / "ops", _PKG / "_examples"):  # a site-packages/ops of another package: no
        if (candidate / "rms_norm.yaml").is_file():
            return candidate
    raise FileNotFoundError(f"opgen installation is incomplete: no example ops (ops/) found near {_PKG}")


def doc(name: str) -> str:
    """Where the guide ``name`` (e.g. ``testing.md``) is, as a path to show: relative when below the cwd."""
    from .diagnostics import display_path

    return display_path(docs_dir() / name)


def include_dir() -> Path:
    """Directory to pass as ``-I`` so that ``#include "opgen/kernel.h"`` resolves."""
    return _PKG / "include"
