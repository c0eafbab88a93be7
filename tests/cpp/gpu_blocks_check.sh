#!/bin/bash
# One device check of the CUDA kernel layer: build and run cuda_blocks_test, memcheck it, bench.
# Usage (repo root, a machine with an NVIDIA GPU): tests/cpp/gpu_blocks_check.sh [OUTDIR]
set -u
out=${1:-${OUT:-/tmp}}
arch=${OPGEN_CUDA_ARCH:-native}
nvidia-smi -L
nvcc --version | tail -2
f="-std=c++17 --extended-lambda -arch=$arch -Iopgen/include"
nvcc $f tests/cpp/cuda_blocks_test.cu -o $out/cuda_blocks_test &
nvcc $f -O3 tests/cpp/cuda_blocks_bench.cu -o $out/cuda_blocks_bench &
wait
echo "== cuda_blocks_test"
timeout 120 $out/cuda_blocks_test; echo "rc=$?"
echo "== cuda_blocks_bench"
timeout 60 $out/cuda_blocks_bench; echo "rc=$?"
if command -v compute-sanitizer >/dev/null; then
  echo "== compute-sanitizer memcheck"
  timeout 150 compute-sanitizer --tool memcheck --print-limit 5 $out/cuda_blocks_test | tail -12; echo "rc=${PIPESTATUS[0]}"
fi
