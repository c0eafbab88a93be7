"""Where opgen's data files live: templates, schemas and the C++ support headers.

From a checkout, ``templates/`` and ``schemas/`` sit beside the ``opgen`` package; after a
(non-editable) ``pip install`` they are shipped inside it as ``opgen/_templates`` and
``opgen/_schemas`` (see pyproject.toml).  Both layouts are tried, checkout first.
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


def include_dir() -> Path:
    """Directory to pass as ``-I`` so that ``#include "opgen/kernel.h"`` resolves."""
    return _PKG / "include"
