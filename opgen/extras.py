"""What building and running need beyond opgen's core: the ``run`` extra (MindSpore, numpy<2, ninja).

``pip install opgen`` gives validate, generate, docs and new; ``opgen build`` and ``opgen test``
need ``pip install 'opgen[run]'``. Commands check for it first and say so (exit 1) instead of
failing on an import deep inside.
"""

from __future__ import annotations

import importlib.util
import re
from importlib import metadata

_FALLBACK = ("mindspore==2.10.0", "numpy<2", "ninja>=1.11")


def run_requirements() -> tuple[str, ...]:
    """The requirements of the ``run`` extra, as installed opgen's metadata states them."""
    try:
        reqs = metadata.requires("opgen") or []
    except metadata.PackageNotFoundError:  # a checkout on sys.path without an install
        return _FALLBACK
    out = tuple(r.split(";")[0].strip() for r in reqs if re.search(r"extra\s*==\s*['\"]run['\"]", r))
    return out or _FALLBACK


def missing(modules: tuple[str, ...] = ("mindspore", "numpy", "ninja")) -> list[str]:
    """The modules of ``modules`` that cannot be imported here."""
    return [m for m in modules if importlib.util.find_spec(m) is None]


def message(command: str, modules: list[str]) -> str:
    """What to tell a user whose ``command`` needs ``modules``, which are not installed."""
    names = modules[0] if len(modules) == 1 else f"{', '.join(modules[:-1])} and {modules[-1]}"
    return (f"opgen {command}: {names} {'is' if len(modules) == 1 else 'are'} not installed; "
            f"building and running the generated code need opgen's 'run' extra: pip install 'opgen[run]' "
            f"({', '.join(run_requirements())})")
