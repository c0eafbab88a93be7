"""opgen.load() and the CLI on one package, on the real compiler and MindSpore: the compiler
processes a cold build, a no-change build and a kernel-body edit start (the edit: only the
edited op's kernel unit, then the two links), the ops of both paths after each, and a bad spec
raising its file:line:col diagnostics.

Compilers are counted through OPGEN_CXX_LAUNCHER (a script that logs, then runs the compiler):
a launcher is not part of the cache key, so the per-toolchain support object is the one the
whole test run shares ($OPGEN_SUPPORT_DIR, set by conftest).
"""

from __future__ import annotations

import concurrent.futures
import os
import re
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from small_specs import HALVE

import opgen
from opgen.cli import main

LAUNCHER = """\
#!/bin/sh
echo "$*" >> "$OPGEN_TEST_CXX_LOG"
exec "$@"
"""


def shared_build_root(tmp_path: Path) -> Path:
    """A fresh build root; the support object is shared through $OPGEN_SUPPORT_DIR (conftest)."""
    root = tmp_path / "build"
    root.mkdir()
    return root


def compiles(log: Path) -> list[str]:
    """Compiler processes logged since the last reset, but the one-off support object."""
    if not log.exists():
        return []
    lines = log.read_text().splitlines()
    return [ln for ln in lines if "ms_support.cc" not in ln]


def test_load_and_cli_cold_edit_no_change(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    import mindspore as ms

    root = shared_build_root(tmp_path)
    launcher = tmp_path / "launcher"
    launcher.write_text(LAUNCHER)
    launcher.chmod(0o755)
    log = tmp_path / "cxx.log"
    monkeypatch.setenv("OPGEN_CXX_LAUNCHER", str(launcher))
    monkeypatch.setenv("OPGEN_TEST_CXX_LOG", str(log))
    monkeypatch.delenv("OPGEN_BUILD_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    spec = tmp_path / "specs" / "halve.yaml"
    spec.parent.mkdir()
    spec.write_text(textwrap.dedent(HALVE).lstrip())
    x = ms.Tensor(np.array([2.0, -3.0], np.float32))

    # cold: every unit once (kernel, aot, Function<T>, bindings) and two links
    mod = opgen.load(spec, package="ld_ops", build_dir=root)
    calls = compiles(log)
    assert sum(" -c " in c for c in calls) == 4 and sum("-shared" in c for c in calls) == 2, calls
    assert sum("halve_kernel.cc" in c for c in calls) == 1  # one kernel unit for both libraries
    assert mod.halve(x).asnumpy().tolist() == [1.0, -1.5]
    assert mod.function.halve(x).asnumpy().tolist() == [1.0, -1.5]
    assert ms.grad(lambda t: mod.function.halve(t))(x).asnumpy().tolist() == [0.5, 0.5]

    # no change: opgen.load and opgen build start no process
    log.unlink()
    pkg = next((root / "load").glob("ld_ops-*")) / "ld_ops"
    assert opgen.load(spec, package="ld_ops", build_dir=root).halve(x).asnumpy().tolist() == [1.0, -1.5]
    assert main(["build", str(pkg), "--build-dir", str(root), "-q"]) == 0
    assert compiles(log) == []

    # threads (issue 25 item 9): 4 x 10 loads of the cached package at once, every one whole
    def loads() -> list[str]:
        errors = []
        for _ in range(10):
            try:
                m = opgen.load(spec, package="ld_ops", build_dir=root)
                assert m.function.halve is not None and m.halve is not None
            except Exception as exc:  # noqa: BLE001 - collected, then reported
                errors.append(f"{type(exc).__name__}: {exc}")
        return errors

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        failed = [e for errors in pool.map(lambda _: loads(), range(4)) for e in errors]
    assert failed == [] and compiles(log) == []

    # a body edit, through the CLI: only halve's kernel unit, then both links
    spec.write_text(spec.read_text().replace("out[i] = x[i] / 2;", "out[i] = x[i] / 4;"))
    assert main(["generate", str(spec), "-o", str(pkg.parent), "-p", "ld_ops", "-q"]) == 0
    assert main(["build", str(pkg), "--build-dir", str(root), "-q"]) == 0
    calls = compiles(log)
    assert [c for c in calls if " -c " in c and "halve_kernel.cc" not in c] == [] and len(calls) == 3, calls
    # ... and opgen.load finds it built, then imports the new libraries in this process
    log.unlink()
    mod = opgen.load(spec, package="ld_ops", build_dir=root)
    assert compiles(log) == []
    assert mod.halve(x).asnumpy().tolist() == [0.5, -0.75]
    assert mod.function.halve(x).asnumpy().tolist() == [0.5, -0.75]

    # a bad spec: LoadError with the diagnostics at file:line:col, nothing built
    spec.write_text(spec.read_text().replace("dtype: x}", "dtype: y}"))
    with pytest.raises(opgen.LoadError) as info:
        opgen.load(spec, package="ld_ops", build_dir=root)
    assert f"specs{os.sep}halve.yaml:6:" in str(info.value) or "specs/halve.yaml:6:" in str(info.value)
    assert info.value.diagnostics and compiles(log) == []


@pytest.mark.parametrize("package, message", [
    ("opgen", "'opgen' would shadow a module the generated code imports"),
    ("class", "'class' is a Python or C++ keyword; pick another package name"),
    ("My-Ops", "'My-Ops' is not a package name: use snake_case"),
    ("json", "package name 'json' is the name of a module already imported in this process"),
    ("p" * 201, "package name is 201 bytes long; at most 200"),
])
def test_load_refuses_package_names_the_cli_refuses(package: str, message: str, tmp_path: Path) -> None:
    """One rule for ``-p`` and ``load(package=)`` (it replaced ``sys.modules['opgen']`` and gave
    g++ errors for ``class``); a module this process imported is not replaced. Nothing is written."""
    import json  # noqa: F401 - imported, as in any process

    spec = tmp_path / "halve.yaml"
    spec.write_text(textwrap.dedent(HALVE).lstrip())
    before = sys.modules.get("opgen")
    with pytest.raises(opgen.LoadError, match=re.escape(message)):
        opgen.load(spec, package=package, build_dir=tmp_path / "build")
    assert sys.modules.get("opgen") is before and not (tmp_path / "build").exists()
