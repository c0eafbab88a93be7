"""Train a small MLP built from generated ops, next to the same network built from MindSpore's.

The network: logits = W2 gelu(layer_norm(W1 x + b1)) + b2, loss = mean negative log-likelihood of
log_softmax(logits) against one-hot labels; the classes of the synthetic data come from a random
linear teacher. Every step is a plain SGD update p <- p - lr * dloss/dp.

- ``--mode graph``: GRAPH_MODE, the Custom (aot) path (``generated.opgen_ops.custom``) inside an
  ``nn.Cell`` train step, against the same Cell over builtin ops;
- ``--mode pynative``: PyNative, the Function<T> path (``generated.opgen_ops.function``; its
  first import builds the C++ extension, minutes), against builtin ops in PyNative.

Each run prints one line, e.g. ``[graph/opgen] loss 1.3843 -> 0.1012 over 300 steps, 1.234 ms/step``
(time per step after the first, which compiles). Run from the repository root:
``python examples/mlp.py --steps 300 --mode both``.
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

import mindspore as ms  # noqa: E402
from mindspore import Parameter, ParameterTuple, Tensor, nn, ops  # noqa: E402
from mlp_data import EPS, Array  # noqa: E402
from mlp_data import data as _data  # noqa: E402


def _builtin_ops() -> SimpleNamespace:
    """MindSpore's own ops behind the generated ops' names and signatures."""
    ln = ops.LayerNorm(begin_norm_axis=-1, begin_params_axis=-1, epsilon=EPS)

    def matmul(a: Any, b: Any) -> Any:
        return ops.matmul(a, b)

    def add(x: Any, y: Any) -> Any:
        return ops.add(x, y)

    def mul(x: Any, y: Any) -> Any:
        return ops.mul(x, y)

    def layer_norm(x: Any, gamma: Any, beta: Any, eps: float = EPS) -> Any:
        return ln(x, gamma, beta)

    def gelu(x: Any) -> Any:
        return ops.gelu(x, approximate="none")

    def log_softmax(x: Any, axis: int = -1) -> Any:
        return ops.log_softmax(x, axis)

    def reduce_sum(x: Any, axis: Any = (), keep_dims: bool = False) -> Any:
        return ops.sum(x, tuple(axis), keep_dims)

    def reduce_mean(x: Any, axis: Any = (), keep_dims: bool = False) -> Any:
        return ops.mean(x, axis=None, keep_dims=keep_dims)

    return SimpleNamespace(matmul=matmul, add=add, mul=mul, layer_norm=layer_norm, gelu=gelu,
                           log_softmax=log_softmax, reduce_sum=reduce_sum, reduce_mean=reduce_mean)


class MLP(nn.Cell):  # type: ignore[misc]
    """Loss of the MLP on a batch, over the ops in ``lib`` (generated or builtin)."""

    def __init__(self, lib: Any, weights: list[Array]) -> None:
        super().__init__()
        self.matmul, self.add, self.mul = lib.matmul, lib.add, lib.mul
        self.layer_norm, self.gelu, self.log_softmax = lib.layer_norm, lib.gelu, lib.log_softmax
        self.reduce_sum, self.reduce_mean = lib.reduce_sum, lib.reduce_mean
        names = ("w1", "b1", "gamma", "beta", "w2", "b2")
        self.w1, self.b1, self.gamma, self.beta, self.w2, self.b2 = (
            Parameter(Tensor(w.copy()), name=n) for n, w in zip(names, weights)
        )

    def construct(self, x: Any, onehot: Any) -> Any:
        h = self.add(self.matmul(x, self.w1), self.b1)
        h = self.gelu(self.layer_norm(h, self.gamma, self.beta, eps=EPS)[0])
        logits = self.add(self.matmul(h, self.w2), self.b2)
        logp = self.log_softmax(logits, axis=-1)
        return -self.reduce_mean(self.reduce_sum(self.mul(logp, onehot), axis=[1]))


class TrainStep(nn.Cell):  # type: ignore[misc]
    """One plain SGD step: loss and gradients, then p <- p - lr * g for every parameter."""

    def __init__(self, net: MLP, lr: float) -> None:
        super().__init__()
        self.net = net
        self.weights = ParameterTuple(net.trainable_params())
        self.grad = ms.value_and_grad(net, None, self.weights)
        self.lr = lr

    def construct(self, x: Any, onehot: Any) -> Any:
        loss, grads = self.grad(x, onehot)
        for p, g in zip(self.weights, grads):
            ops.assign(p, p - self.lr * g)
        return loss


def train(lib: Any, label: str, steps: int, lr: float) -> tuple[float, float, float]:
    """Train from the same initial weights; print and return (first loss, last loss, s/step)."""
    x, onehot, weights = _data()
    step = TrainStep(MLP(lib, weights), lr)
    xt, yt = Tensor(x), Tensor(onehot)
    first = float(step(xt, yt).asnumpy())  # compiles in GRAPH_MODE; not timed
    last = first
    start = time.perf_counter()
    for _ in range(steps - 1):
        last = float(step(xt, yt).asnumpy())
    per_step = (time.perf_counter() - start) / max(steps - 1, 1)
    print(f"[{label}] loss {first:.4f} -> {last:.4f} over {steps} steps, {per_step * 1e3:.3f} ms/step", flush=True)
    return first, last, per_step


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300, help="SGD steps per run (default 300)")
    parser.add_argument("--mode", choices=["graph", "pynative", "both"], default="both",
                        help="GRAPH_MODE with the Custom path, PyNative with the Function path, or both")
    parser.add_argument("--lr", type=float, default=0.5, help="SGD learning rate (default 0.5)")
    args = parser.parse_args(argv)
    if args.steps < 2:
        parser.error("--steps must be at least 2")
    ms.set_device("CPU")
    builtin = _builtin_ops()
    if args.mode in ("graph", "both"):
        from generated.opgen_ops import custom

        ms.set_context(mode=ms.GRAPH_MODE)
        train(custom, "graph/opgen", args.steps, args.lr)
        train(builtin, "graph/builtin", args.steps, args.lr)
    if args.mode in ("pynative", "both"):
        ms.set_context(mode=ms.PYNATIVE_MODE)
        from generated.opgen_ops import function

        train(function, "pynative/opgen", args.steps, args.lr)
        train(builtin, "pynative/builtin", args.steps, args.lr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
