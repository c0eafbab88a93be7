"""MindSpore 2.10 CPU data parallelism (msrun, 2 processes) runs generated ops on both paths.

examples/mlp.py's network over generated ops trains 20 SGD steps data-parallel under ``msrun
--worker_num 2`` (``mindspore.communication.init()``, the ``mccl`` backend on CPU; gradients
all-reduced by ``nn.DistributedGradReducer``), in GRAPH_MODE over the ops.Custom path and in
PyNative over the Function<T> path, and must end at the parameters that one process reaches with
the full batch (tests/ms_data_parallel_worker.py; docs/distributed.md).

Tolerance: both ranks must hold bitwise-equal parameters (they apply the same all-reduced gradient
to the same start; a sum of two floats does not depend on order). Against one process, 1e-5
absolute: the full-batch gradient is one float32 sum over 256 rows, the data-parallel one two sums
over 128 rows averaged, so they differ by rounding (measured: at most 1.2e-7 after 20 steps on
parameters of magnitude <= 1.2); a rank that trained on its half alone, without the all-reduce, differs by 0.15.

CI time: ~45 s on 2 cores (the single process runs both modes, ~10 s; msrun starts a scheduler and
two workers, each importing MindSpore, ~30 s). The generated package must be built; the single
process runs first so that two workers never build it at once.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
WORKER = ROOT / "tests" / "ms_data_parallel_worker.py"
MODES = ("graph", "pynative")
STEPS = 20


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _env() -> dict[str, str]:
    # msrun starts its workers as `python SCRIPT`: the first python on PATH must be this one
    path = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")
    env = dict(os.environ, PATH=path, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("MS_ROLE", None)
    return env


def _logs(log_dir: Path) -> str:
    return "\n".join(f"== {p.name}\n{p.read_text(errors='replace')[-3000:]}" for p in sorted(log_dir.glob("*.log")))


def test_msrun_two_processes_train_to_the_single_process_parameters(tmp_path: Path) -> None:
    single = subprocess.run([sys.executable, str(WORKER), str(tmp_path / "single"), *MODES, "--steps", str(STEPS)],
                            cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=1800)
    assert single.returncode == 0, single.stderr[-4000:]

    log_dir = tmp_path / "msrun"
    cmd = [sys.executable, "-m", "mindspore.parallel.cluster.run", "--worker_num", "2", "--local_worker_num", "2",
           "--master_port", str(_free_port()), "--join", "True", "--cluster_time_out", "300",
           "--log_dir", str(log_dir), str(WORKER), str(tmp_path / "dp"), *MODES, "--steps", str(STEPS)]
    dp = subprocess.run(cmd, cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=900)
    assert dp.returncode == 0, dp.stderr[-2000:] + _logs(log_dir)

    for mode in MODES:
        ref = np.load(tmp_path / f"single.{mode}.0.npz")
        ranks = [np.load(tmp_path / f"dp.{mode}.{r}.npz") for r in (0, 1)]
        # the data was split: the two ranks' losses are over different halves of the batch...
        assert abs(ranks[0]["losses"][0] - ranks[1]["losses"][0]) > 1e-3, mode
        # ...whose mean is the full batch's loss at the start
        assert abs((ranks[0]["losses"][0] + ranks[1]["losses"][0]) / 2 - ref["losses"][0]) < 1e-5, mode
        names = [k for k in ref.files if k.startswith("p")]
        assert len(names) == 6, ref.files
        for name in names:
            np.testing.assert_array_equal(ranks[0][name], ranks[1][name], err_msg=f"{mode} {name}: ranks differ")
            np.testing.assert_allclose(ranks[0][name], ref[name], rtol=0, atol=1e-5,
                                       err_msg=f"{mode} {name}: data-parallel != one process with the full batch")
        assert ref["losses"][-1] < 0.7 * ref["losses"][0], f"{mode}: the network did not train"
