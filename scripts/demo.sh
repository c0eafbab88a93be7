#!/usr/bin/env bash
# The main job, on a fresh machine: set up, generate generated/ from ops/ (both frameworks'
# packages, as [tool.opgen] backends says), build the MindSpore package's aot library and
# Function<T> extension and the PyTorch package's operator library, and call the generated ops
# on real tensors: examples/demo.py on MindSpore, examples/mlp_torch.py (a short training run
# next to torch's own ops) on PyTorch.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/opgen generate ops/
.venv/bin/opgen build generated/opgen_ops
.venv/bin/opgen build generated/opgen_ops_torch
.venv/bin/python examples/demo.py
.venv/bin/python examples/mlp_torch.py --steps 50
