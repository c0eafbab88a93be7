"""What building and running need beyond opgen's core, per backend: MindSpore's ``run`` extra
(MindSpore, numpy<2, ninja), PyTorch's ``torch`` extra (torch, numpy, ninja).

``pip install opgen`` gives validate, generate, docs and new; ``opgen build``, ``opgen test`` and
``opgen wheel`` need the extra of the package's backend. Commands check for it first and say so
(exit 1) instead of failing on an import deep inside, naming both ways out: install that extra,
or use the other backend.
"""

from __future__ import annotations

import importlib.util
import re
from importlib import metadata

_FALLBACK = {
    "run": ("mindspore==2.10.0", "numpy<2", "ninja>=1.11"),
    "torch": ("torch>=2.13", "numpy", "ninja>=1.11"),
}
_EXTRA = {"mindspore": "run", "torch": "torch"}
"""Each backend's extra of opgen (``pip install 'opgen[<extra>]'``)."""
_LABEL = {"mindspore": "MindSpore", "torch": "PyTorch"}


def extra_of(backend: str) -> str:
    """The extra of opgen that ``backend``'s builds and runs need (``run`` for MindSpore)."""
    return _EXTRA.get(backend, backend)


def requirements(extra: str = "run") -> tuple[str, ...]:
    """The requirements of opgen's extra ``extra``, as installed opgen's metadata states them."""
    try:
        reqs = metadata.requires("opgen") or []
    except metadata.PackageNotFoundError:  # a checkout on sys.path without an install
        return _FALLBACK.get(extra, ())
    out = tuple(r.split(";")[0].strip() for r in reqs
                if re.search(rf"extra\s*==\s*['\"]{re.escape(extra)}['\"]", r))
    return out or _FALLBACK.get(extra, ())


def run_requirements() -> tuple[str, ...]:
    """The requirements of MindSpore's ``run`` extra."""
    return requirements("run")


def missing(modules: tuple[str, ...] = ("mindspore", "numpy", "ninja")) -> list[str]:
    """The modules of ``modules`` that cannot be imported here."""
    return [m for m in modules if importlib.util.find_spec(m) is None]


def install_command(backend: str) -> str:
    """``pip install 'opgen[<extra>]'`` for ``backend``."""
    return f"pip install 'opgen[{extra_of(backend)}]'"


def message(command: str, modules: list[str], backend: str = "mindspore") -> str:
    """What to tell a user whose ``command`` for a ``backend`` package needs ``modules``, which are
    not installed: the extra to install, and the other backend (named with the flag that picks it)."""
    names = modules[0] if len(modules) == 1 else f"{', '.join(modules[:-1])} and {modules[-1]}"
    extra = extra_of(backend)
    label = _LABEL.get(backend, backend)
    text = (f"opgen {command}: {names} {'is' if len(modules) == 1 else 'are'} not installed; "
            f"building and running {label} packages (backend '{backend}') need opgen's '{extra}' extra: "
            f"{install_command(backend)} ({', '.join(requirements(extra))})")
    others = [b for b in _EXTRA if b != backend]
    for other in others:
        have = "installed here" if not missing((other,)) else install_command(other)
        text += (f"; or use {_LABEL[other]} instead: --backend {other} on generate, build and test, or "
                 f"backends = [\"{other}\"] in [tool.opgen] ({other}: {have})")
    return text
