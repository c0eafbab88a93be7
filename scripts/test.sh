#!/usr/bin/env bash
# Everything CI checks: set up, validate the specs, fail if generated/ drifted from ops/,
# lint, type-check, and run the test suite (real MindSpore, real compiler).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/opgen validate ops/
.venv/bin/opgen generate ops/ --check
.venv/bin/ruff check opgen tests examples bench
.venv/bin/mypy
.venv/bin/python -m pytest -q -n 2 --dist loadfile --durations=40 "$@"
