"""Positive controls for the sanitizer mode (``OPGEN_SANITIZE=1``, run by scripts/sanitize.sh):
an aot library built with ``-fsanitize=address,undefined`` and loaded by MindSpore (ASan runtime
preloaded) reports a heap overflow and a signed overflow planted in kernel bodies, and nothing
for a correct kernel.  Without these, "zero findings" could just mean "not instrumented".

Skipped unless ``OPGEN_SANITIZE=1`` (the instrumented build takes a minute or two on 2 cores).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from opgen import backends
from opgen.cli import main

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(os.environ.get("OPGEN_SANITIZE") != "1",
                                reason="sanitizer mode: run scripts/sanitize.sh (OPGEN_SANITIZE=1)")

SPECS = {
    "overflow_heap": ("F32", """\
        std::vector<float> tmp(static_cast<size_t>(out.numel));
        for (int64_t i = 0; i <= out.numel; ++i) tmp[static_cast<size_t>(i)] = x[0];  // one past the end
        for (int64_t i = 0; i < out.numel; ++i) out[i] = tmp[static_cast<size_t>(i)];
        """),
    "overflow_signed": ("I32", """\
        for (int64_t i = 0; i < out.numel; ++i) {
          int32_t v = x[i];
          v += 2147483647;  // signed overflow for x > 0
          out[i] = v;
        }
        """),
    "correct": ("F32", """\
        std::vector<float> tmp(static_cast<size_t>(out.numel));
        for (int64_t i = 0; i < out.numel; ++i) tmp[static_cast<size_t>(i)] = x[i] * 2;
        for (int64_t i = 0; i < out.numel; ++i) out[i] = tmp[static_cast<size_t>(i)];
        """),
}

RUN = """
import sys
import numpy as np
import mindspore as ms
ms.set_device("CPU")
ms.set_context(mode=ms.PYNATIVE_MODE)
from san_pkg import custom as C
dtype = np.int32 if sys.argv[1] == "overflow_signed" else np.float32
print(getattr(C, sys.argv[1])(ms.Tensor(np.arange(1, 7, dtype=dtype))).asnumpy())
"""


def _preload() -> str:
    """libasan first, and libstdc++ (so that ASan finds the real ``__cxa_throw`` when it starts)."""
    cxx = os.environ.get("CXX", "g++")
    return " ".join(subprocess.run([cxx, f"-print-file-name={lib}"], capture_output=True, text=True,
                                   check=True).stdout.strip() for lib in ("libasan.so", "libstdc++.so"))


def test_sanitizers_catch_planted_bugs_and_pass_a_correct_kernel(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    specs = tmp_path / "specs"
    specs.mkdir()
    for name, (dt, body) in SPECS.items():
        (specs / f"{name}.yaml").write_text(textwrap.dedent(f"""\
            name: {name}
            doc: sanitizer control
            inputs: [{{name: x, doc: x, differentiable: false}}]
            outputs: [{{name: out, doc: o, shape: x, dtype: x}}]
            dtype_format: {{CPU: [[{dt}_Default, {dt}_Default]]}}
            kernel:
              forward: |
            """) + textwrap.indent(textwrap.dedent(body), "    "), encoding="utf-8")
    assert main(["generate", str(specs), "-o", str(tmp_path / "out"), "-p", "san_pkg", "-q"]) == 0
    monkeypatch.setenv("OPGEN_BUILD_DIR", str(tmp_path / "build"))
    monkeypatch.delenv("LD_PRELOAD", raising=False)  # the compilers must not run under ASan
    lib = backends.build(tmp_path / "out" / "san_pkg", "aot", quiet=True)
    assert "-fsanitize=address,undefined" in (lib.parent / "build.ninja").read_text()
    found = {}
    for name in SPECS:
        logs = tmp_path / f"logs-{name}"
        logs.mkdir()
        env = dict(os.environ, LD_PRELOAD=_preload(), OPGEN_QUIET="1",
                   PYTHONPATH=os.pathsep.join([str(tmp_path / "out"), str(ROOT)]),
                   ASAN_OPTIONS=f"detect_leaks=0:log_path={logs}/asan",
                   UBSAN_OPTIONS=f"print_stacktrace=1:log_path={logs}/ubsan")
        r = subprocess.run([sys.executable, "-c", RUN, name], env=env, capture_output=True, text=True, timeout=300)
        # ASan honours log_path; UBSan's reports (handled by libasan's runtime) still go to stderr
        reports = "".join(p.read_text(errors="replace") for p in sorted(logs.iterdir())) + r.stderr
        found[name] = (r.returncode, reports, r.stdout)
    code, reports, _ = found["overflow_heap"]
    assert code != 0 and "ERROR: AddressSanitizer: heap-buffer-overflow" in reports, reports
    assert "overflow_heap" in reports  # the stack points into the kernel
    code, reports, stdout = found["overflow_signed"]
    assert "runtime error: signed integer overflow" in reports, reports
    code, reports, stdout = found["correct"]
    assert code == 0 and "AddressSanitizer" not in reports and "runtime error" not in reports, reports
    assert "[ 2.  4.  6.  8. 10. 12.]" in stdout
