#!/usr/bin/env bash
# The main job, on a fresh machine: set up, generate generated/ from ops/, build the aot
# library and the Function<T> extension, and call the generated ops on real tensors.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/opgen generate ops/
.venv/bin/opgen build generated/opgen_ops
.venv/bin/python examples/demo.py
