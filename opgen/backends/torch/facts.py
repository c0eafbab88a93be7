"""What the PyTorch backend's modules share about it, in a leaf they all import (it imports
nothing of opgen): the backend package (its ``BACKEND``) and its test runner read these, so that
neither imports the other for them.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

TARGET = "CPU"
"""The spec's dtype_format target whose rows the torch backend builds."""

FLOAT_ATTR = "double"
"""The C++ type of a float attr in the kernel layer (:attr:`opgen.views.OpView.float_attr_cpp`):
the schema's ``float`` is a double, which reaches every row as the caller gave it (a float64
row computes with it; a float32 row converts it to its compute type, as before)."""

TEST_PATHS: Mapping[str, str] = {"eager": "eager", "compiled": "compiled"}
"""The paths ``opgen test`` checks each op on, each with its short name in the results table
(:attr:`opgen.backends.Backend.test_paths`)."""

DEVICE_TEST_PATHS: Mapping[str, Mapping[str, str]] = {
    "cuda": {"eager-cuda": "eager-cuda", "compiled-cuda": "comp-cuda"}}
"""The same paths on another device's kernels (``opgen test --device cuda``), with their short names
(:attr:`opgen.backends.Backend.device_test_paths`)."""


def owns(pkg_dir: Path) -> bool:
    """Whether ``pkg_dir`` is a package the torch backend generated (``__init__.py`` and
    ``csrc/*_torch.cc``)."""
    csrc = pkg_dir / "csrc"
    return (pkg_dir / "__init__.py").is_file() and csrc.is_dir() and any(csrc.glob("*_torch.cc"))
