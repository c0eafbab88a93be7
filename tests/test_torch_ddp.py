"""A network of generated torch ops trains under DistributedDataParallel (gloo, 2 processes) to
the parameters one process reaches with the full batch.

examples/mlp_torch.py's network (matmul, add, layer_norm, gelu, log_softmax, mul, reduce_sum,
reduce_mean from ``generated.opgen_ops_torch``) trains 20 SGD steps (lr 0.5) in one process on
the 256-row batch, then in two processes (tests/torch_ddp_worker.py, ``RANK``/``WORLD_SIZE`` and
a free ``MASTER_PORT`` in the environment) on 128 rows each under
``torch.nn.parallel.DistributedDataParallel`` with the ``gloo`` backend.

Tolerance: both ranks must hold bitwise-equal parameters (DDP gives every rank the same averaged
gradient, and they start equal). Against one process, 1e-5 absolute: the full-batch gradient is
one float32 sum over 256 rows, DDP's the mean of two sums over 128 rows, so they differ by
rounding (measured: see docs/distributed.md, about 1e-7 after 20 steps on parameters of magnitude
<= 1.2); a rank that trained on its half alone ends ~0.15 away (the MindSpore run's figure, same
network, data and steps).

CI time: ~35 s at load 6 (three processes importing torch; the operator library must be built, which the
single process does first).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
WORKER = ROOT / "tests" / "torch_ddp_worker.py"
STEPS = 20


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""), **extra)
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        if k not in extra:
            env.pop(k, None)
    return env


def test_ddp_two_processes_train_to_the_single_process_parameters(tmp_path: Path) -> None:
    cmd = [sys.executable, str(WORKER)]
    single = subprocess.run(cmd + [str(tmp_path / "single"), "--steps", str(STEPS)], cwd=ROOT, env=_env(),
                            capture_output=True, text=True, timeout=1800)
    assert single.returncode == 0, single.stderr[-4000:]

    port = str(_free_port())
    procs = [subprocess.Popen(cmd + [str(tmp_path / "ddp"), "--steps", str(STEPS)], cwd=ROOT,
                              env=_env(RANK=str(r), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT=port),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for r in (0, 1)]
    outs = [p.communicate(timeout=600) for p in procs]
    for r, (p, (_, err)) in enumerate(zip(procs, outs)):
        assert p.returncode == 0, f"rank {r}: {err[-4000:]}"

    ref = np.load(tmp_path / "single.0.npz")
    ranks = [np.load(tmp_path / f"ddp.{r}.npz") for r in (0, 1)]
    # the data was split: the ranks' losses are over different halves, whose mean is the full batch's
    assert abs(ranks[0]["losses"][0] - ranks[1]["losses"][0]) > 1e-3
    assert abs((ranks[0]["losses"][0] + ranks[1]["losses"][0]) / 2 - ref["losses"][0]) < 1e-5
    names = [k for k in ref.files if k.startswith("p")]
    assert len(names) == 6, ref.files
    for name in names:
        np.testing.assert_array_equal(ranks[0][name], ranks[1][name], err_msg=f"{name}: ranks differ")
        np.testing.assert_allclose(ranks[0][name], ref[name], rtol=0, atol=1e-5,
                                   err_msg=f"{name}: DDP != one process with the full batch")
    assert ref["losses"][-1] < 0.7 * ref["losses"][0], "the network did not train"
