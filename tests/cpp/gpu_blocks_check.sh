#!/bin/bash
# One device check of the CUDA kernel layer: build and run cuda_blocks_test (with opgen::gemm on
# cuBLAS where libcublas is found: the toolkit's, or the nvidia-cublas wheel a CUDA torch brings),
# memcheck it, bench. Usage (repo root, a machine with an NVIDIA GPU):
#   tests/cpp/gpu_blocks_check.sh [OUTDIR]
set -u
out=${1:-${OUT:-/tmp}}
arch=${OPGEN_CUDA_ARCH:-native}
nvidia-smi -L
nvcc --version | tail -2
f="-std=c++17 --extended-lambda -arch=$arch -Iopgen/include"
lib=$(ls /usr/local/cuda/lib64/libcublas.so.[0-9]* 2>/dev/null | head -1)
[ -z "$lib" ] && lib=$(find /usr/local/lib /usr/lib /opt /root -maxdepth 8 -name 'libcublas.so.1[0-9]' 2>/dev/null | head -1)
blas=""
if [ -n "$lib" ]; then
  dir=$(dirname "$lib")
  inc=$dir/../include
  [ -f "$inc/cublas_v2.h" ] || inc=/usr/local/cuda/include
  [ -f "$inc/cublas_v2.h" ] && blas="-DOPGEN_CUBLAS -I$inc -L$dir -l:$(basename "$lib") -Xlinker -rpath,$dir"
fi
echo "cuBLAS: ${lib:-not found} ${blas:+(gemm tested)}"
nvcc $f $blas tests/cpp/cuda_blocks_test.cu -o $out/cuda_blocks_test &
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
