"""The data and initial weights of the MLP examples (examples/mlp.py on MindSpore,
examples/mlp_torch.py on PyTorch): numpy only, so that both frameworks train the same network
from the same start. Also used by the data-parallel tests (tests/ms_data_parallel_worker.py,
tests/torch_ddp_worker.py)."""

from __future__ import annotations

from typing import Any

import numpy as np

N, D_IN, HIDDEN, CLASSES = 256, 16, 64, 4
EPS = 1e-5
Array = np.ndarray[Any, Any]


def data(seed: int = 0) -> tuple[Array, Array, list[Array]]:
    """Inputs (N, D_IN), one-hot labels (N, CLASSES) from a random linear teacher, and the initial
    weights [w1 (D_IN, HIDDEN), b1, gamma, beta (HIDDEN,), w2 (HIDDEN, CLASSES), b2 (CLASSES,)],
    all float32."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((N, D_IN)).astype(np.float32)
    teacher = rng.standard_normal((D_IN, CLASSES))
    labels = np.argmax(x @ teacher, axis=1)
    onehot = np.eye(CLASSES, dtype=np.float32)[labels]
    weights = [
        (rng.standard_normal((D_IN, HIDDEN)) / np.sqrt(D_IN)).astype(np.float32),  # w1
        np.zeros(HIDDEN, np.float32),  # b1
        np.ones(HIDDEN, np.float32),  # gamma
        np.zeros(HIDDEN, np.float32),  # beta
        (rng.standard_normal((HIDDEN, CLASSES)) / np.sqrt(HIDDEN)).astype(np.float32),  # w2
        np.zeros(CLASSES, np.float32),  # b2
    ]
    return x, onehot, weights
