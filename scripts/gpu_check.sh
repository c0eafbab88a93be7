#!/usr/bin/env bash
# On a machine with an NVIDIA GPU: build both frameworks' CUDA libraries of ops/ and check them,
# then print one summary (docs/devices.md). Needs nvcc, a CUDA build of torch, and opgen's Python
# dependencies (jinja2, pyyaml, jsonschema, numpy; a .whl/ folder of wheels is installed first when
# present). MindSpore is not needed: its GPU entry points are checked through their C ABI.
#
#   bash scripts/gpu_check.sh [WORK_DIR]      # default /tmp/opgen-gpu-check; OPGEN_CUDA_ARCH=native by default
#   GPU_CHECK_QUICK=1: forward and gradient checks on the eager path only, a smaller benchmark
#   GPU_CHECK_LOGS=DIR: where each step's log goes (default WORK_DIR)
#
# Steps (each with its own time limit; the summary lists each one's status and seconds):
#   generate   opgen generate ops/ (both frameworks) into WORK_DIR/gen
#   ms-build   MindSpore's GPU aot library (nvcc; no MindSpore needed)
#   ms-abi     its entry points through ctypes, on CUDA buffers and torch's stream (scripts/gpu_check.py)
#   build      the PyTorch library (CPU + CUDA dispatch keys)
#   test-cuda  opgen test --device cuda: every op with GPU rows, forward and gradients against the numpy
#              reference on CUDA tensors, every GPU row (16-bit ones included), dtype and contract errors
#   torch      opcheck, torch.compile, torch.export, CUDA-graph replay, mixed devices (scripts/gpu_check.py)
#   memcheck   compute-sanitizer --tool memcheck on a sample of ops forward and backward
#   bench      bench/bench_gpu.py (GPU figures, ratios measured in one process)
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
WORK=${1:-/tmp/opgen-gpu-check}
PY=${PYTHON:-python3}
QUICK=${GPU_CHECK_QUICK:-0}
LOGS=${GPU_CHECK_LOGS:-$WORK}
mkdir -p "$WORK" "$LOGS"
if [ -d .whl ] && ls .whl/*.whl >/dev/null 2>&1; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$WORK/site" .whl/*.whl
  export PYTHONPATH="$WORK/site:${PYTHONPATH:-}"
fi
export PYTHONPATH="$ROOT:${PYTHONPATH:-}" PYTHONUNBUFFERED=1
export OPGEN_CUDA_ARCH=${OPGEN_CUDA_ARCH:-native} OPGEN_BUILD_DIR=${OPGEN_BUILD_DIR:-$WORK/build}
GEN=$WORK/gen
SUMMARY=()
FAILED=0

step() {  # step NAME SECONDS COMMAND...
  local name=$1 limit=$2
  shift 2
  local t0=$SECONDS
  echo "=== $name (limit ${limit}s): $*"
  timeout --kill-after=10 "$limit" "$@" 2>&1 | tee "$LOGS/$name.log"
  local rc=${PIPESTATUS[0]}
  local took=$((SECONDS - t0))
  if [ "$rc" -eq 0 ]; then SUMMARY+=("ok     $name (${took}s)"); else
    FAILED=1
    [ "$rc" -eq 124 ] && SUMMARY+=("TIMEOUT $name (${took}s)") || SUMMARY+=("FAIL   $name (${took}s, exit $rc)")
  fi
}

nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader || true
"$PY" -c "import torch; print('torch', torch.__version__, 'CUDA', torch.version.cuda, torch.cuda.get_device_name())"

step generate 120 "$PY" -m opgen.cli generate ops/ -o "$GEN" -p opgen_ops -q
step ms-build 420 "$PY" -m opgen.cli build "$GEN/opgen_ops" --only aot_gpu -q
step ms-abi 120 "$PY" scripts/gpu_check.py ms-abi "$GEN"
step build 420 "$PY" -m opgen.cli build "$GEN/opgen_ops_torch" -q
ONLY=()
[ "$QUICK" = 1 ] && ONLY=(--only 'forward/eager-cuda' --only 'grad/eager-cuda')
step test-cuda 900 "$PY" -m opgen.cli test --backend torch --device cuda --unchecked --package-dir "$GEN/opgen_ops_torch" -q "${ONLY[@]}"
step torch 300 "$PY" scripts/gpu_check.py torch-extra "$GEN/opgen_ops_torch"
if command -v compute-sanitizer >/dev/null; then
  step memcheck 300 compute-sanitizer --tool memcheck --error-exitcode 9 "$PY" scripts/gpu_check.py sanitize "$GEN/opgen_ops_torch"
else
  SUMMARY+=("n/a    memcheck (compute-sanitizer not found)")
fi
BENCH=()
[ "$QUICK" = 1 ] && BENCH=(--quick)
step bench 600 "$PY" bench/bench_gpu.py --package-dir "$GEN/opgen_ops_torch" "${BENCH[@]}"

echo
echo "=== gpu_check summary ($(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1))"
printf '%s\n' "${SUMMARY[@]}"
grep -h "^RESULT\|^opgen test:.*checks" "$LOGS"/*.log 2>/dev/null
exit $FAILED
