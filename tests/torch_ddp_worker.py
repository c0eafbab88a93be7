"""One process of a PyTorch DistributedDataParallel run of examples/mlp_torch.py's network.

``python tests/torch_ddp_worker.py OUT [--steps N]`` trains :class:`mlp_torch.MLP` over the
generated torch ops (``generated.opgen_ops_torch``) from examples/mlp_data.py's initial weights,
with ``torch.optim.SGD`` (lr 0.5), and writes ``OUT.<rank>.npz`` (the parameters in MLP order and
``losses``, this process's loss at every step).

With ``WORLD_SIZE`` > 1 in the environment (and ``RANK``, ``MASTER_ADDR``, ``MASTER_PORT``: the
test sets them), it joins a ``gloo`` process group, wraps the network in
``torch.nn.parallel.DistributedDataParallel`` (which all-reduces the gradients during backward and
divides by the world size) and trains on its rank's contiguous slice of the batch; otherwise it
is one process with the full batch. Used by tests/test_torch_ddp.py.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "examples"))

import mlp_data  # noqa: E402
import mlp_torch  # noqa: E402
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

LR = 0.5


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", help="output prefix: OUT.<rank>.npz")
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    from generated import opgen_ops_torch

    x, onehot, weights = mlp_data.data()
    net: torch.nn.Module = mlp_torch.MLP(opgen_ops_torch, weights)
    if world > 1:
        dist.init_process_group("gloo", rank=rank, world_size=world)
        net = torch.nn.parallel.DistributedDataParallel(net)
    if x.shape[0] % world:
        raise SystemExit(f"batch {x.shape[0]} does not split over {world} ranks")
    n = x.shape[0] // world
    xt, yt = torch.from_numpy(x[rank * n:(rank + 1) * n]), torch.from_numpy(onehot[rank * n:(rank + 1) * n])
    opt = torch.optim.SGD(net.parameters(), lr=LR)
    losses = []
    for _ in range(args.steps):
        opt.zero_grad()
        loss = net(xt, yt)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    params = {f"p{i}": p.detach().numpy() for i, p in enumerate(net.parameters())}
    np.savez(f"{args.out}.{rank}.npz", losses=np.array(losses), **params)
    print(f"rank {rank}/{world}: loss {losses[0]:.6f} -> {losses[-1]:.6f}", flush=True)
    if world > 1:
        dist.barrier()  # both ranks have written their results
        dist.destroy_process_group()
        # torch's teardown of a DDP model can deadlock (torch 2.13, gloo; seen in a full test run):
        # freeing the Reducer holds the GIL while ~ProcessGroupGloo joins its run-loop thread, which
        # is destroying the last AsyncWork and waits for the GIL (ThreadLocalState's SafePyObject).
        # The results are written and flushed: leave without the interpreter's teardown.
        sys.stderr.flush()
        os._exit(0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
