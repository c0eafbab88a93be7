#!/usr/bin/env bash
# Set up a fresh machine for opgen: a virtual environment in .venv with opgen (editable) and
# everything that running and testing generated code needs: MindSpore 2.10 (CPU), numpy<2,
# ninja, pytest, hypothesis, mypy, ruff. Idempotent; quick when already done.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
stamp=.venv/.opgen-setup
want="$(sha256sum pyproject.toml | cut -c1-16)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q -e ".[test]"
  echo "$want" > "$stamp"
fi
