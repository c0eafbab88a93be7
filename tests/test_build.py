"""Building generated C++: content-hash cache (no process when nothing changed) and compile
errors in kernel bodies reported at the YAML line (``#line`` directives)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Callable

import pytest

from opgen import build
from opgen.pipeline import generate

SPEC = """
name: halve
doc: Halves x.
inputs:
  - {name: x, doc: any tensor}
outputs:
  - {name: out, doc: x / 2, shape: x, dtype: x}
dtype_format:
  CPU:
    - [F32_Default, F32_Default]
kernel:
  forward: |
    for (int64_t i = 0; i < out.numel; ++i) {
      out[i] = x[i] / 2;
    }
  backward: |
    for (int64_t i = 0; i < dx.numel; ++i) dx[i] = dout[i] / 2;
"""


@pytest.fixture
def package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, write_spec: Callable[[str, str], Path]) -> Path:
    monkeypatch.setenv("OPGEN_BUILD_DIR", str(tmp_path / "build"))
    monkeypatch.chdir(tmp_path)
    write_spec("halve.yaml", SPEC)
    res = generate(["specs"], Path("out"), "halve_pkg")
    assert not res.diagnostics
    return res.package_dir


def test_no_change_build_runs_no_process(package: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = build.build(package, "aot", quiet=True)
    assert first.is_file() and first.parent == build.package_build_dir(package)

    def forbidden(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"a process was started on a no-change build: {args}")

    monkeypatch.setattr(subprocess, "Popen", forbidden)
    monkeypatch.setattr(subprocess, "run", forbidden)
    assert build.build(package, "aot", quiet=True) == first


def test_kernel_compile_error_points_at_yaml(package: Path, write_spec: Callable[[str, str], Path]) -> None:
    good = build.build(package, "aot", quiet=True)
    write_spec("halve.yaml", SPEC.replace("out[i] = x[i] / 2;", "out[i] = x[i] / undefined_name;"))
    res = generate(["specs"], Path("out"), "halve_pkg")
    assert not res.diagnostics
    with pytest.raises(build.BuildError) as info:
        build.build(package, "aot", quiet=True)
    # line 13 of specs/halve.yaml is the body line holding the mistake
    assert "specs/halve.yaml:13:" in str(info.value)
    assert "undefined_name" in str(info.value)
    assert good.is_file()  # the last good library is still there
