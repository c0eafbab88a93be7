"""Shared fixtures: the repository root on sys.path (so ``generated.opgen_ops`` imports), the
real MindSpore on CPU, and helpers to write small specs into temporary directories."""

from __future__ import annotations

import os
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Callable

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# One per-toolchain MindSpore support object for the whole run (builds in temporary build roots
# included, subprocesses too): it costs ~30 CPU s to compile (docs/build.md).
from opgen import build as _build  # noqa: E402

os.environ.setdefault("OPGEN_SUPPORT_DIR", str(_build.build_root(None) / "support"))

# A package's public ops (``<pkg>.<op>``, ``<pkg>.custom.<op>``) are the Custom path in PyNative
# here, as the tests of that path expect: in the default (auto) they take the Function<T> path
# whenever its extension is built. Tests of the choice itself set OPGEN_PYNATIVE_PATH themselves
# (tests/test_pynative_path.py, the 'auto' misuse cases).
os.environ["OPGEN_PYNATIVE_PATH"] = "custom"


@pytest.fixture(autouse=True)
def _environment_restored() -> Iterator[None]:
    """Each test leaves ``os.environ`` as it found it. ``opgen test`` and ``opgen build --checked``
    run in-process (``cli.main``) set ``OPGEN_CHECK`` for the build flags they read; without this,
    a later test in the same worker saw checked mode (test_checked_mode failed under xdist's
    ordering)."""
    saved = dict(os.environ)
    yield
    if os.environ != saved:
        os.environ.clear()
        os.environ.update(saved)


@pytest.fixture(scope="session")
def ms():  # type: ignore[no-untyped-def]
    """The real MindSpore, on CPU."""
    import mindspore

    mindspore.set_device("CPU")
    return mindspore


@pytest.fixture(params=["GRAPH", "PYNATIVE"])
def mode(request: pytest.FixtureRequest, ms):  # type: ignore[no-untyped-def]
    """Run the test once in GRAPH_MODE and once in PYNATIVE_MODE."""
    ms.set_context(mode=ms.GRAPH_MODE if request.param == "GRAPH" else ms.PYNATIVE_MODE)
    yield request.param
    ms.set_context(mode=ms.PYNATIVE_MODE)


@pytest.fixture
def write_spec(tmp_path: Path) -> Callable[[str, str], Path]:
    """Write ``text`` (dedented) as ``tmp_path/specs/<name>`` and return its path."""

    def _write(name: str, text: str) -> Path:
        d = tmp_path / "specs"
        d.mkdir(exist_ok=True)
        p = d / name
        p.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
        return p

    return _write
