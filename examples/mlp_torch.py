"""Train examples/mlp.py's network on PyTorch, built from the generated torch ops, next to the
same network built from torch's own ops.

The network and data are examples/mlp.py's (examples/mlp_data.py): logits = W2 gelu(layer_norm(W1
x + b1)) + b2, loss = mean negative log-likelihood of log_softmax(logits) against one-hot labels,
plain SGD p <- p - lr * dloss/dp (``torch.optim.SGD``). ``generated.opgen_ops_torch`` has the
MindSpore package's function names and signatures, so :class:`MLP` is the MindSpore Cell's
``construct`` written as a ``torch.nn.Module``; its first import builds the operator library.

Each run prints one line, e.g. ``[torch/opgen] loss 1.3843 -> 0.1012 over 300 steps, 0.456 ms/step``.
Run from the repository root: ``python examples/mlp_torch.py --steps 300``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from mlp_data import EPS, Array  # noqa: E402
from mlp_data import data as _data  # noqa: E402


def builtin_ops() -> SimpleNamespace:
    """torch's own ops behind the generated ops' names and signatures."""

    def layer_norm(x: Any, gamma: Any, beta: Any, eps: float = EPS) -> Any:
        return (F.layer_norm(x, (x.shape[-1],), gamma, beta, eps),)

    def reduce_sum(x: Any, axis: Any = (), keep_dims: bool = False) -> Any:
        return torch.sum(x, list(axis), keep_dims)

    def reduce_mean(x: Any, axis: Any = (), keep_dims: bool = False) -> Any:
        return torch.mean(x)

    return SimpleNamespace(matmul=torch.matmul, add=torch.add, mul=torch.mul, layer_norm=layer_norm,
                           gelu=F.gelu, log_softmax=lambda x, axis=-1: torch.log_softmax(x, axis),
                           reduce_sum=reduce_sum, reduce_mean=reduce_mean)


class MLP(torch.nn.Module):
    """Loss of the MLP on a batch, over the ops in ``lib`` (generated or builtin)."""

    def __init__(self, lib: Any, weights: list[Array]) -> None:
        super().__init__()
        self.lib = lib
        names = ("w1", "b1", "gamma", "beta", "w2", "b2")
        for n, w in zip(names, weights):
            self.register_parameter(n, torch.nn.Parameter(torch.from_numpy(w.copy())))

    def forward(self, x: torch.Tensor, onehot: torch.Tensor) -> torch.Tensor:
        lib = self.lib
        h = lib.add(lib.matmul(x, self.w1), self.b1)
        h = lib.gelu(lib.layer_norm(h, self.gamma, self.beta, eps=EPS)[0])
        logits = lib.add(lib.matmul(h, self.w2), self.b2)
        logp = lib.log_softmax(logits, axis=-1)
        loss: torch.Tensor = -lib.reduce_mean(lib.reduce_sum(lib.mul(logp, onehot), axis=[1]))
        return loss


def train(lib: Any, label: str, steps: int, lr: float) -> tuple[float, float, float]:
    """Train from the same initial weights; print and return (first loss, last loss, s/step)."""
    x, onehot, weights = _data()
    net = MLP(lib, weights)
    opt = torch.optim.SGD(net.parameters(), lr=lr)
    xt, yt = torch.from_numpy(x), torch.from_numpy(onehot)
    losses = []
    start = 0.0
    for i in range(steps):
        if i == 1:
            start = time.perf_counter()
        opt.zero_grad()
        loss = net(xt, yt)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    per_step = (time.perf_counter() - start) / max(steps - 1, 1)
    print(f"[{label}] loss {losses[0]:.4f} -> {losses[-1]:.4f} over {steps} steps, {per_step * 1e3:.3f} ms/step",
          flush=True)
    return losses[0], losses[-1], per_step


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300, help="SGD steps per run (default 300)")
    parser.add_argument("--lr", type=float, default=0.5, help="SGD learning rate (default 0.5)")
    args = parser.parse_args(argv)
    if args.steps < 2:
        parser.error("--steps must be at least 2")
    from generated import opgen_ops_torch

    train(opgen_ops_torch, "torch/opgen", args.steps, args.lr)
    train(builtin_ops(), "torch/builtin", args.steps, args.lr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
