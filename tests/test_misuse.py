"""Runtime misuse of generated ops on both paths (Custom ``generated.opgen_ops`` and Function
``generated.opgen_ops.function``; ops add, mul, square, plus a package with int/float/bool attrs
with range and choices): wrong dtypes, shapes that do not broadcast, None, wrong argument
counts, bad attrs, non-contiguous, empty and 0-d tensors. And the public op as a user gets it
(``auto``: the Function<T> path in PyNative, the Custom path in graphs), which must raise the
very exception, message included, that the Custom path raises.

Each case runs in its own child process (see tests/misuse_runner.py) and must exit normally --
no segfault, no abort -- having either raised an exception that names the op and what it
supports, or computed what numpy computes.

The attr package lives in pytest's cache directory so its Function<T> extension (about two
minutes to compile on 2 cores) is built once per checkout and reused by later runs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from misuse_runner import CASES, prepare, selected_paths

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def records(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    paths = selected_paths()
    cache = getattr(request.config, "cache", None)  # None under -p no:cacheprovider: build in a tmp dir
    home = Path(cache.mkdir("opgen-misuse")) if cache is not None else tmp_path_factory.mktemp("misuse-home")
    out = prepare(home, ("aot", "ext") if "function" in paths else ("aot",))
    work = tmp_path_factory.mktemp("misuse")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(out), str(ROOT / "tests")]), OPGEN_QUIET="1")
    loaded: dict[str, Any] = {}
    # the auto cases in a process of their own: OPGEN_PYNATIVE_PATH is read when a package is imported
    for run, choice in ((("custom", "function"), "custom"), (("auto",), "auto")):
        names = [n for n in CASES if CASES[n].path in paths and CASES[n].path in run]
        if not names:
            continue
        records_file = work / f"records-{choice}.json"
        r = subprocess.run([sys.executable, str(ROOT / "tests" / "misuse_runner.py"), str(records_file),
                            "misuse_ops", *names], cwd=work, env=dict(env, OPGEN_PYNATIVE_PATH=choice),
                           capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stderr[-5000:]
        loaded.update(json.loads(records_file.read_text(encoding="utf-8")))
    return loaded


def _param(name: str) -> Any:
    case = CASES[name]
    marks = [pytest.mark.xfail(strict=True, reason=case.xfail)] if case.xfail else []
    return pytest.param(name, marks=marks)


@pytest.mark.parametrize("name", [_param(n) for n in CASES])
def test_misuse(name: str, records: dict[str, Any]) -> None:
    if CASES[name].path not in selected_paths():
        pytest.skip(f"OPGEN_MISUSE_PATHS={os.environ.get('OPGEN_MISUSE_PATHS')}")
    rec = records[name]
    # never a crash: the child exited by itself, normally
    assert rec["exit"] == 0, f"exit {rec['exit']} (negative: killed by signal)\n{rec['log']}"
    for bad in ("Segmentation fault", "core dumped", "Aborted", "terminate called", "ERROR: AddressSanitizer",
                "runtime error:"):
        assert bad not in rec["log"]
    expect = CASES[name].expect
    if expect == "answer":
        assert rec["outcome"] == "answer", rec
        return
    exc_type, parts = expect
    assert rec["outcome"] == "raised", rec
    assert rec["type"] == exc_type, rec
    for part in parts:
        assert part in rec["message"], f"{part!r} not in {rec['message']!r}"
    twin = records.get("custom-" + name.removeprefix("auto-"))
    if name.startswith("auto-") and twin is not None and CASES["custom-" + name.removeprefix("auto-")].expect == expect:
        assert (rec["type"], rec["message"]) == (twin["type"], twin["message"]), "the Custom path raises otherwise"
