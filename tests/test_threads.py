"""Generated ops called from several Python threads at once (issue 25, item 1).

MindSpore 2.10's PyNative is not thread-safe: before the Custom path serialized its calls
(``opgen.backends.mindspore.runtime.CALL_LOCK``), four threads calling ``matmul`` 300 times each
got 11 wrong products (off by up to 7) and 14 ``RuntimeError: The pointer[runtime_info] is null``.
Here every result of every thread is checked against numpy: one wrong number fails the test, and
so does any exception. Both paths, 4 threads x 250 calls each per op, one shape per op (about 30 s in all).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from mindspore import Tensor

from generated import opgen_ops as G

THREADS = 4
CALLS = 250


def _hammer(call: Callable[[np.random.Generator], tuple[Any, np.ndarray]]) -> tuple[list[str], list[str]]:
    """Run ``call`` CALLS times in each of THREADS threads; the wrong results and the errors."""
    wrong: list[str] = []
    errors: list[str] = []
    start = threading.Barrier(THREADS)

    def work(seed: int) -> None:
        rng = np.random.default_rng(seed)
        start.wait()
        for i in range(CALLS):
            try:
                got, want = call(rng)
                got = got.asnumpy()
                if got.shape != want.shape or not np.allclose(got, want, rtol=1e-5, atol=1e-5):
                    wrong.append(f"thread {seed} call {i}: max error {np.abs(got - want).max()}")
            except Exception as exc:  # every exception is a failure of the test
                errors.append(f"thread {seed} call {i}: {type(exc).__name__}: {str(exc)[:200]}")

    threads = [threading.Thread(target=work, args=(s,)) for s in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return wrong, errors


def _matmul(op: Callable[..., Any]) -> Callable[[np.random.Generator], tuple[Any, np.ndarray]]:
    def call(rng: np.random.Generator) -> tuple[Any, np.ndarray]:
        m = 13  # one shape: the wrapper's last-call path, where the race showed
        a = rng.standard_normal((m, 4)).astype(np.float32)
        b = rng.standard_normal((4, 4)).astype(np.float32)
        return op(Tensor(a), Tensor(b)), a @ b
    return call


def _leaky_relu(op: Callable[..., Any]) -> Callable[[np.random.Generator], tuple[Any, np.ndarray]]:
    def call(rng: np.random.Generator) -> tuple[Any, np.ndarray]:
        x = rng.standard_normal((64,)).astype(np.float32)
        alpha = float(rng.choice([0.01, 0.2, 0.5]))
        return op(Tensor(x), alpha=alpha), np.where(x > 0, x, alpha * x).astype(np.float32)
    return call


def _concat(op: Callable[..., Any]) -> Callable[[np.random.Generator], tuple[Any, np.ndarray]]:
    def call(rng: np.random.Generator) -> tuple[Any, np.ndarray]:
        xs = [rng.standard_normal((int(rng.integers(1, 5)), 3)).astype(np.float32) for _ in range(3)]
        return op([Tensor(x) for x in xs], axis=0), np.concatenate(xs, axis=0)
    return call


CASES = {"matmul": _matmul, "leaky_relu": _leaky_relu, "concat": _concat}


@pytest.mark.parametrize("name", sorted(CASES))
def test_custom_path_threads_get_right_numbers(ms: Any, name: str) -> None:  # type: ignore[no-untyped-def]
    ms.set_context(mode=ms.PYNATIVE_MODE)
    wrong, errors = _hammer(CASES[name](getattr(G, name)))
    assert not wrong and not errors, (wrong[:5], errors[:5])


@pytest.mark.parametrize("name", sorted(CASES))
def test_function_path_threads_get_right_numbers(ms: Any, name: str) -> None:  # type: ignore[no-untyped-def]
    from generated.opgen_ops import function

    ms.set_context(mode=ms.PYNATIVE_MODE)
    wrong, errors = _hammer(CASES[name](getattr(function, name)))
    assert not wrong and not errors, (wrong[:5], errors[:5])
