"""Call the ops generated from ops/*.yaml on real tensors, on both paths, in both modes.

Run from the repository root after ``opgen generate ops/`` (``bash scripts/demo.sh`` does it
all). Prints the numbers of the MindSpore tutorials the ops come from (shared/seeds).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import mindspore as ms  # noqa: E402
from mindspore import Parameter, Tensor, nn  # noqa: E402

from generated import opgen_ops  # noqa: E402


class AddNet(nn.Cell):
    def construct(self, x: Tensor, y: Tensor) -> Tensor:
        return opgen_ops.add(x, y)


class SquareNet(nn.Cell):
    def construct(self, x: Tensor) -> Tensor:
        return opgen_ops.square(x)


def custom_path(mode: int, label: str) -> None:
    ms.set_context(mode=mode)
    x0 = Tensor(np.array([[0.0, 0.0], [1.0, 1.0]], np.float32))
    x1 = Tensor(np.array([[2.0, 2.0], [3.0, 3.0]], np.float32))
    print(f"[{label}] Custom path add:\n{AddNet()(x0, x1)}")
    x = Tensor(np.array([1.0, 4.0, 9.0], np.float32))
    print(f"[{label}] Custom path grad of square at [1, 4, 9]: {ms.grad(SquareNet())(x)}")


def function_path() -> None:
    ms.set_context(mode=ms.PYNATIVE_MODE)
    from generated.opgen_ops import function as F

    class MyNet(nn.Cell):
        def __init__(self) -> None:
            super().__init__()
            self.p = Parameter(2.0, requires_grad=True)

        def construct(self, x: Tensor, y: Tensor) -> Tensor:
            z = F.mul(x, y)
            return F.mul(z, self.p)

    x = Tensor(1.0, ms.float32) * 2
    y = Tensor(1.0, ms.float32) * 3
    net = MyNet()
    out, grads = ms.value_and_grad(net, grad_position=(0, 1), weights=net.trainable_params())(x, y)
    print("[PYNATIVE] Function path (seed op_custom_pyboost):")
    print("out:", out)
    print("grads[0]:", grads[0])
    print("grads[1]:", grads[1])


def main() -> None:
    ms.set_device("CPU")
    custom_path(ms.GRAPH_MODE, "GRAPH")
    custom_path(ms.PYNATIVE_MODE, "PYNATIVE")
    function_path()


if __name__ == "__main__":
    main()
