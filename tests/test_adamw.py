"""The fused AdamW step of ops/adamw.yaml (issue 24 part 1, "optimizer steps"): it updates param
and both moments in place (``inputs[].writes``), reads the step and the learning rate as 0-d
tensors, and trains a small network in GRAPH_MODE and PyNative, on both MindSpore paths:

- to the same parameters as ``mindspore.nn.AdamWeightDecay`` over several steps
  (``bias_correction=False`` is that optimizer's update);
- to the same numbers as an AdamW written here in numpy (torch.optim.AdamW's update, with bias
  correction), with a learning rate that changes at every step;
- compiling its GRAPH_MODE step once: the step and the learning rate are tensors, so a new step
  or a new learning rate reuses the compiled graph (an attr would compile it again).

The PyTorch side (against torch.optim.AdamW, eager and compiled) is in tests/test_torch_backend.py.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
STEPS = 6
BETA1, BETA2, EPS, WD = 0.8, 0.95, 1e-6, 0.05


@pytest.fixture(scope="module")
def P(ms) -> ModuleType:  # type: ignore[no-untyped-def]
    """The committed package generated/opgen_ops (its public op: Function<T> in PyNative,
    ops.Custom in graphs; tests/conftest.py makes PyNative take the Custom path)."""
    return importlib.import_module("generated.opgen_ops")


@pytest.fixture(params=["custom", "function"])
def pynative_path(request: pytest.FixtureRequest, P: ModuleType) -> ModuleType:
    """The module of one MindSpore path, for PyNative calls."""
    return importlib.import_module(f"generated.opgen_ops.{request.param}")


def numpy_adamw(p: np.ndarray, m: np.ndarray, v: np.ndarray, g: np.ndarray, step: int, lr: float,
                bias_correction: bool) -> None:
    """One AdamW update in place, as torch.optim.AdamW writes it (float64 arithmetic)."""
    c1 = 1 - BETA1**step if bias_correction else 1.0
    c2 = 1 - BETA2**step if bias_correction else 1.0
    m[...] = BETA1 * m + (1 - BETA1) * g
    v[...] = BETA2 * v + (1 - BETA2) * g * g
    p[...] = p * (1 - lr * WD) - (lr / c1) * m / (np.sqrt(v) / np.sqrt(c2) + EPS)


def _grads(shape: tuple[int, ...]) -> list[np.ndarray]:
    rng = np.random.default_rng(7)
    return [rng.standard_normal(shape).astype(np.float32) for _ in range(STEPS)]


def _lrs() -> list[float]:
    return [0.1 * 0.7**i for i in range(STEPS)]  # a schedule: a new lr at every step


def test_pynative_steps_match_numpy_on_both_paths(pynative_path: ModuleType, ms) -> None:  # type: ignore[no-untyped-def]
    p0 = np.random.default_rng(3).standard_normal((5, 7)).astype(np.float32)
    p, m, v = ms.Parameter(ms.Tensor(p0), name="p"), ms.Tensor(np.zeros_like(p0)), ms.Tensor(np.zeros_like(p0))
    want = [p0.astype(np.float64), np.zeros(p0.shape), np.zeros(p0.shape)]
    step = ms.Tensor(np.int64(0))
    for i, (g, lr) in enumerate(zip(_grads(p0.shape), _lrs())):
        step = step + 1
        out = pynative_path.adamw(p, m, v, ms.Tensor(g), step, ms.Tensor(np.float32(lr)),
                                  beta1=BETA1, beta2=BETA2, eps=EPS, weight_decay=WD)
        assert out is None
        numpy_adamw(*want, g.astype(np.float64), i + 1, lr, True)
        for got, exp in zip((p, m, v), want):
            np.testing.assert_allclose(got.asnumpy(), exp, rtol=2e-5, atol=1e-6)


def test_step_zero_with_bias_correction_is_an_error(pynative_path: ModuleType, ms) -> None:  # type: ignore[no-untyped-def]
    p = ms.Tensor(np.ones(3, np.float32))
    before = p.asnumpy().copy()
    with pytest.raises(ValueError, match=r"adamw\(\): step must be >= 1 with bias_correction, got 0"):
        pynative_path.adamw(p, ms.Tensor(np.zeros(3, np.float32)), ms.Tensor(np.zeros(3, np.float32)),
                            ms.Tensor(np.ones(3, np.float32)), ms.Tensor(np.int64(0)), ms.Tensor(np.float32(0.1)))
    np.testing.assert_array_equal(p.asnumpy(), before)  # nothing written
    with pytest.raises(ValueError, match=r"adamw\(\): contract 'grad.shape == param.shape' does not hold"):
        pynative_path.adamw(p, ms.Tensor(np.zeros(3, np.float32)), ms.Tensor(np.zeros(3, np.float32)),
                            ms.Tensor(np.ones(4, np.float32)), ms.Tensor(np.int64(1)), ms.Tensor(np.float32(0.1)))


def _optimizer_cell(ms: Any, P: ModuleType, params: list[Any], bias_correction: bool) -> Any:
    """An optimizer Cell whose update is the generated op: step and lr are Parameters (tensors)."""
    nn, ops = ms.nn, ms.ops

    class OpgenAdamW(nn.Cell):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.params = ms.ParameterTuple(params)
            self.m = self.params.clone(prefix="m", init="zeros")
            self.v = self.params.clone(prefix="v", init="zeros")
            self.step = ms.Parameter(ms.Tensor(np.int64(0)), name="step")
            self.lr = ms.Parameter(ms.Tensor(np.float32(0.0)), name="lr")

        def construct(self, grads: Any) -> Any:
            ops.assign_add(self.step, ms.Tensor(np.int64(1)))
            for p, m, v, g in zip(self.params, self.m, self.v, grads):
                P.adamw(p, m, v, g, self.step, self.lr, beta1=BETA1, beta2=BETA2, eps=EPS, weight_decay=WD,
                        bias_correction=bias_correction)
            return self.step

    return OpgenAdamW()


def _net(ms: Any) -> Any:
    nn = ms.nn
    rng = np.random.default_rng(11)

    class Net(nn.Cell):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.fc1 = nn.Dense(4, 8, weight_init=ms.Tensor(rng.standard_normal((8, 4)).astype(np.float32) * 0.5),
                                bias_init=ms.Tensor(rng.standard_normal(8).astype(np.float32) * 0.1))
            self.fc2 = nn.Dense(8, 2, weight_init=ms.Tensor(rng.standard_normal((2, 8)).astype(np.float32) * 0.5),
                                bias_init="zeros")

        def construct(self, x: Any) -> Any:
            return self.fc2(ms.ops.tanh(self.fc1(x)))

    return Net()


class _Step:
    """One training step (loss, gradients, update) as a Cell, and its compile count."""

    def __init__(self, ms: Any, net: Any, optimizer: Any) -> None:
        nn = ms.nn

        class TrainStep(nn.Cell):  # type: ignore[misc]
            def __init__(self) -> None:
                super().__init__()
                self.loss = nn.WithLossCell(net, nn.MSELoss())
                self.weights = ms.ParameterTuple(net.trainable_params())
                self.grad = ms.ops.GradOperation(get_by_list=True)
                self.optimizer = optimizer

            def construct(self, x: Any, y: Any) -> Any:
                loss = self.loss(x, y)
                grads = self.grad(self.loss, self.weights)(x, y)
                self.optimizer(grads)
                return loss

        self.cell = TrainStep()

    def __call__(self, x: Any, y: Any) -> float:
        return float(self.cell(x, y).asnumpy())


def _data(ms: Any) -> tuple[Any, Any]:
    rng = np.random.default_rng(5)
    x = rng.standard_normal((16, 4)).astype(np.float32)
    y = np.stack([np.sin(x[:, 0]), x[:, 1] * x[:, 2]], axis=1).astype(np.float32)
    return ms.Tensor(x), ms.Tensor(y)


@pytest.fixture(params=["GRAPH", "PYNATIVE-custom", "PYNATIVE-function"])
def train_mode(request: pytest.FixtureRequest, ms, P: ModuleType) -> Any:  # type: ignore[no-untyped-def]
    """GRAPH_MODE (ops.Custom, compiled), or PyNative on one path (the public op's PyNative path is
    chosen at import, so the Function<T> path is put in place of the op for this test)."""
    mode, _, path = request.param.partition("-")
    ms.set_context(mode=ms.GRAPH_MODE if mode == "GRAPH" else ms.PYNATIVE_MODE)
    saved = P.adamw
    if path:
        P.adamw = importlib.import_module(f"generated.opgen_ops.{path}").adamw
    yield mode
    P.adamw = saved
    ms.set_context(mode=ms.PYNATIVE_MODE)


def test_trains_like_adam_weight_decay(train_mode: str, ms, P: ModuleType) -> None:  # type: ignore[no-untyped-def]
    """Six steps of the generated op (bias_correction=False) and of mindspore.nn.AdamWeightDecay
    from the same initial network: the same losses and the same parameters."""
    x, y = _data(ms)
    ours, theirs = _net(ms), _net(ms)
    opt = _optimizer_cell(ms, P, list(ours.trainable_params()), bias_correction=False)
    opt.lr.set_data(ms.Tensor(np.float32(0.05)))
    ref = ms.nn.AdamWeightDecay(theirs.trainable_params(), learning_rate=0.05, beta1=BETA1, beta2=BETA2,
                                eps=EPS, weight_decay=WD)
    step_ours, step_theirs = _Step(ms, ours, opt), _Step(ms, theirs, ref)
    losses = [(step_ours(x, y), step_theirs(x, y)) for _ in range(STEPS)]
    np.testing.assert_allclose([a for a, _ in losses], [b for _, b in losses], rtol=1e-5)
    assert losses[-1][0] < 0.8 * losses[0][0], losses  # it trains
    for a, b in zip(ours.trainable_params(), theirs.trainable_params()):
        np.testing.assert_allclose(a.asnumpy(), b.asnumpy(), rtol=1e-5, atol=1e-6, err_msg=a.name)
    assert int(opt.step.asnumpy()) == STEPS
    if train_mode == "GRAPH":
        assert len(step_ours.cell.compile_cache) == 1  # six steps, one compiled graph


def test_bias_corrected_steps_with_a_schedule_compile_once(train_mode: str, ms, P: ModuleType) -> None:  # type: ignore[no-untyped-def]
    """The optimizer Cell alone, fed given gradients, with bias correction and a learning rate
    set before each step: numpy's numbers at every step, and one compiled graph for all of them."""
    p0 = np.random.default_rng(9).standard_normal((3, 5)).astype(np.float32)
    param = ms.Parameter(ms.Tensor(p0), name="w")
    opt = _optimizer_cell(ms, P, [param], bias_correction=True)
    want = [p0.astype(np.float64), np.zeros(p0.shape), np.zeros(p0.shape)]
    for i, (g, lr) in enumerate(zip(_grads(p0.shape), _lrs())):
        opt.lr.set_data(ms.Tensor(np.float32(lr)))
        assert int(opt(ms.mutable((ms.Tensor(g),))).asnumpy()) == i + 1  # grads as variables, as a graph passes them
        numpy_adamw(*want, g.astype(np.float64), i + 1, lr, True)
        np.testing.assert_allclose(param.asnumpy(), want[0], rtol=2e-5, atol=1e-6)
        np.testing.assert_allclose(opt.m[0].asnumpy(), want[1], rtol=2e-5, atol=1e-6)
        np.testing.assert_allclose(opt.v[0].asnumpy(), want[2], rtol=2e-5, atol=1e-7)
    if train_mode == "GRAPH":
        assert len(opt.compile_cache) == 1


def test_an_attr_would_recompile(ms, P: ModuleType) -> None:  # type: ignore[no-untyped-def]
    """Why step and lr are tensors: a Cell passing a Python float to an attr (weight_decay)
    compiles a graph for each new value, while new tensor values (lr) reuse the one graph."""
    ms.set_context(mode=ms.GRAPH_MODE)
    try:
        class AttrDecay(ms.nn.Cell):  # type: ignore[misc]
            def __init__(self) -> None:
                super().__init__()
                self.opt = _optimizer_cell(ms, P, [ms.Parameter(ms.Tensor(np.ones(4, np.float32)), name="q")], False)

            def construct(self, g: Any, wd: float) -> Any:
                o = self.opt
                P.adamw(o.params[0], o.m[0], o.v[0], g, o.step, o.lr, weight_decay=wd, bias_correction=False)
                return o.step

        cell = AttrDecay()
        g = ms.Tensor(np.ones(4, np.float32))
        for wd in (0.1, 0.2, 0.3):
            cell(g, wd)
        assert len(cell.compile_cache) == 3  # one compile per attr value
        for lr in (0.1, 0.2, 0.3):
            cell.opt.lr.set_data(ms.Tensor(np.float32(lr)))
            cell.opt(ms.mutable((g,)))
        assert len(cell.opt.compile_cache) == 1  # new tensor values: one compile
    finally:
        ms.set_context(mode=ms.PYNATIVE_MODE)


# ----------------------------------------------------------------------------- PyTorch


def test_torch_steps_match_torch_optim_adamw() -> None:
    """The PyTorch package's op (eager, and inside torch.compile(fullgraph=True)) against
    torch.optim.AdamW over six steps with a new learning rate each: the same parameter and
    moments, and one compiled graph for every step (step and lr are tensors)."""
    import torch

    T = importlib.import_module("generated.opgen_ops_torch")
    p0 = np.random.default_rng(4).standard_normal((6, 3)).astype(np.float32)
    compiles = 0

    def counting_backend(gm: Any, example_inputs: Any) -> Any:
        nonlocal compiles
        compiles += 1
        return gm.forward

    compiled = torch.compile(T.adamw, fullgraph=True, backend=counting_backend)
    for fn in (T.adamw, compiled):
        ref = torch.nn.Parameter(torch.tensor(p0))
        opt = torch.optim.AdamW([ref], lr=0.1, betas=(BETA1, BETA2), eps=EPS, weight_decay=WD)
        p, m, v = torch.tensor(p0), torch.zeros(p0.shape), torch.zeros(p0.shape)
        step = torch.tensor(0, dtype=torch.int64)
        for g, lr in zip(_grads(p0.shape), _lrs()):
            opt.param_groups[0]["lr"] = lr
            ref.grad = torch.tensor(g)
            opt.step()
            step += 1
            assert fn(p, m, v, torch.tensor(g), step, torch.tensor(lr, dtype=torch.float32),
                      beta1=BETA1, beta2=BETA2, eps=EPS, weight_decay=WD) is None
            state = opt.state[ref]
            torch.testing.assert_close(p, ref.detach(), rtol=2e-5, atol=1e-6)
            torch.testing.assert_close(m, state["exp_avg"], rtol=2e-5, atol=1e-6)
            torch.testing.assert_close(v, state["exp_avg_sq"], rtol=2e-5, atol=1e-7)
    assert compiles == 1
    with pytest.raises(ValueError, match=r"adamw\(\): contract 'grad.shape == param.shape' does not hold"):
        T.adamw(p, m, v, torch.zeros(2), step, torch.tensor(0.1))


def test_torch_refuses_a_forward_mode_tangent() -> None:
    """A forward-mode tangent on the parameter or the gradient (torch.func.jvp of a step, say) is
    NotImplementedError naming the op, before the step writes anything: the op has no forward
    derivative and would drop it."""
    import torch
    import torch.autograd.forward_ad as fwAD

    T = importlib.import_module("generated.opgen_ops_torch")
    p, m, v, g = torch.ones(3), torch.zeros(3), torch.zeros(3), torch.full((3,), 0.5)
    step, lr = torch.tensor(1, dtype=torch.int64), torch.tensor(0.1)
    with fwAD.dual_level(), torch.no_grad():
        with pytest.raises(NotImplementedError, match=r"^adamw\(\): forward-mode AD"):
            T.adamw(fwAD.make_dual(p, torch.ones(3)), m, v, g, step, lr)
        with pytest.raises(NotImplementedError, match=r"^adamw\(\): forward-mode AD"):
            T.adamw(p, m, v, fwAD.make_dual(g, torch.ones(3)), step, lr)
    assert p.tolist() == [1, 1, 1] and m.tolist() == [0, 0, 0] and v.tolist() == [0, 0, 0]
