"""One process of a MindSpore data-parallel run of examples/mlp.py's network over generated ops.

``python tests/ms_data_parallel_worker.py OUT MODE... [--steps N]`` trains the network of
examples/mlp.py (matmul, add, layer_norm, gelu, log_softmax, mul, reduce_sum, reduce_mean) from
its fixed initial weights with plain SGD, once per MODE: ``graph`` is GRAPH_MODE over the ops.Custom
path (``generated.opgen_ops.custom``), ``pynative`` is PyNative over the Function<T> path
(``generated.opgen_ops.function``). It writes ``OUT.<mode>.<rank>.npz`` (the trained parameters in
MLP order and ``losses``, this process's loss at every step).

Run plainly, it is one process with the full batch (rank 0 of 1). Run under ``msrun`` (which sets
``MS_ROLE``), it calls ``mindspore.communication.init()`` (the ``mccl`` backend on CPU), takes its
rank's contiguous slice of the batch, and all-reduces the gradients with
``nn.DistributedGradReducer(mean=True)`` before the update: the mean over ranks of half-batch mean
gradients is the full-batch mean gradient, so every rank should end at the single process's
parameters. Used by tests/test_ms_data_parallel.py.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "examples"))

import mindspore as ms  # noqa: E402
import mlp  # noqa: E402  (examples/mlp.py)
import mlp_data  # noqa: E402
from mindspore import ParameterTuple, Tensor, nn, ops  # noqa: E402

LR = 0.5


class DataParallelStep(nn.Cell):  # type: ignore[misc]
    """mlp.TrainStep with the gradients all-reduced (mean over ``group_size`` ranks) when > 1."""

    def __init__(self, net: Any, group_size: int) -> None:
        super().__init__()
        self.weights = ParameterTuple(net.trainable_params())
        self.grad = ms.value_and_grad(net, None, self.weights)
        self.reducer = nn.DistributedGradReducer(self.weights, mean=True, degree=group_size) if group_size > 1 else None

    def construct(self, x: Any, onehot: Any) -> Any:
        loss, grads = self.grad(x, onehot)
        if self.reducer is not None:
            grads = self.reducer(grads)
        for p, g in zip(self.weights, grads):
            ops.assign(p, p - LR * g)
        return loss


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", help="output prefix: OUT.<mode>.<rank>.npz")
    parser.add_argument("modes", nargs="+", choices=["graph", "pynative"])
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    ms.set_device("CPU")
    rank, size = 0, 1
    if os.environ.get("MS_ROLE"):  # launched by msrun
        from mindspore.communication import get_group_size, get_rank, init

        init()
        rank, size = get_rank(), get_group_size()
    x, onehot, weights = mlp_data.data()
    if x.shape[0] % size:
        raise SystemExit(f"batch {x.shape[0]} does not split over {size} ranks")
    n = x.shape[0] // size
    xt, yt = Tensor(x[rank * n:(rank + 1) * n]), Tensor(onehot[rank * n:(rank + 1) * n])
    for mode in args.modes:
        if mode == "graph":
            ms.set_context(mode=ms.GRAPH_MODE)
            from generated.opgen_ops import custom as lib
        else:
            ms.set_context(mode=ms.PYNATIVE_MODE)
            from generated.opgen_ops import function as lib
        step = DataParallelStep(mlp.MLP(lib, weights), size)
        losses = [float(step(xt, yt).asnumpy()) for _ in range(args.steps)]
        params = {f"p{i}": p.asnumpy() for i, p in enumerate(step.weights)}
        np.savez(f"{args.out}.{mode}.{rank}.npz", losses=np.array(losses), **params)
        print(f"rank {rank}/{size} {mode}: loss {losses[0]:.6f} -> {losses[-1]:.6f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
