"""examples/mlp.py trains: run briefly in a subprocess, in both modes, and check every loss fell.

The PyNative run imports the Function<T> path, which builds the C++ extension on first use
(minutes on a cold cache, see docs/build.md); later runs reuse it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LINE = re.compile(r"^\[(\w+)/(\w+)\] loss ([-\d.]+) -> ([-\d.]+) over (\d+) steps, ([\d.]+) ms/step$")


def test_mlp_loss_falls_in_both_modes() -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, str(ROOT / "examples" / "mlp.py"), "--steps", "30", "--mode", "both"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stderr[-4000:]
    runs = {}
    for line in proc.stdout.splitlines():
        m = LINE.match(line.strip())
        if m:
            runs[f"{m[1]}/{m[2]}"] = (float(m[3]), float(m[4]), int(m[5]))
    assert set(runs) == {"graph/opgen", "graph/builtin", "pynative/opgen", "pynative/builtin"}, proc.stdout
    for label, (first, last, steps) in runs.items():
        assert steps == 30
        assert last < 0.7 * first, f"{label}: loss {first} -> {last} did not fall"
    # the generated network computes the builtin one: same data, same start, same losses (float32 noise)
    for mode in ("graph", "pynative"):
        assert abs(runs[f"{mode}/opgen"][0] - runs[f"{mode}/builtin"][0]) < 1e-4
        assert abs(runs[f"{mode}/opgen"][1] - runs[f"{mode}/builtin"][1]) < 1e-2


def test_mlp_torch_loss_falls_and_matches_builtin() -> None:
    """examples/mlp_torch.py: the network of generated torch ops trains as torch's own does."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, str(ROOT / "examples" / "mlp_torch.py"), "--steps", "30"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stderr[-4000:]
    runs = {f"{m[1]}/{m[2]}": (float(m[3]), float(m[4]), int(m[5]))
            for m in (LINE.match(line.strip()) for line in proc.stdout.splitlines()) if m}
    assert set(runs) == {"torch/opgen", "torch/builtin"}, proc.stdout
    for label, (first, last, steps) in runs.items():
        assert steps == 30
        assert last < 0.7 * first, f"{label}: loss {first} -> {last} did not fall"
    assert abs(runs["torch/opgen"][0] - runs["torch/builtin"][0]) < 1e-4
    assert abs(runs["torch/opgen"][1] - runs["torch/builtin"][1]) < 1e-3
