"""opgen's kernel layer on CUDA (opgen/cuda.h, opgen/device.h and the OPGEN_HD scalars), with nvcc.

- ``tests/cpp/cuda_blocks_test.cu`` (map, map_reduce_to, math, 16-bit conversions, streams and the
  device error word, each compared with the same lambda on the host) is compiled wherever nvcc
  is, and run where a GPU is (``nvidia-smi -L`` lists one).
- A unit shaped like the generator's CUDA output (``#define OPGEN_DEVICE_CUDA 1``, a body calling
  ``opgen::map``/``map_reduce_to`` with ``[=] __host__ __device__`` lambdas, explicit
  instantiations for float, half, bfloat16 and double) compiles as CUDA device code.
- The generated bodies of the ``elementwise:`` ops (generated/opgen_ops/csrc) compile as CUDA
  device code once their lambdas are respelled ``[=] __host__ __device__``, with half and
  bfloat16 instantiations added.

nvcc is found through ``CUDA_HOME``, PATH or /usr/local/cuda; without it these tests skip. The
architecture is ``OPGEN_CUDA_ARCH`` (e.g. ``sm_90``), else the visible GPU's (``native``), else
sm_80.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from opgen.resources import include_dir

ROOT = Path(__file__).resolve().parents[1]
CPP = ROOT / "tests" / "cpp"
CSRC = ROOT / "generated" / "opgen_ops" / "csrc"


def find_nvcc() -> str | None:
    """nvcc from ``CUDA_HOME``, PATH or the toolkit's standard install location."""
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    candidates = [str(Path(home) / "bin" / "nvcc")] if home else []
    candidates += [shutil.which("nvcc") or "", "/usr/local/cuda/bin/nvcc"]
    return next((c for c in candidates if c and os.access(c, os.X_OK)), None)


def cuda_include() -> Path | None:
    """The toolkit's include directory (cuda_runtime_api.h): beside nvcc, CUDA_HOME, /usr/local/cuda."""
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    roots = ([Path(home)] if home else []) + ([Path(NVCC).resolve().parents[1]] if NVCC else [])
    roots.append(Path("/usr/local/cuda"))
    return next((r / "include" for r in roots if (r / "include" / "cuda_runtime_api.h").is_file()), None)


def cublas_include() -> Path | None:
    """Where cublas_v2.h is: ``OPGEN_CUBLAS_INCLUDE``, the toolkit's include directory, or an
    nvidia-cublas wheel's (``nvidia/cu13/include``)."""
    dirs = [Path(os.environ["OPGEN_CUBLAS_INCLUDE"])] if os.environ.get("OPGEN_CUBLAS_INCLUDE") else []
    inc = cuda_include()
    dirs += [inc] if inc else []
    try:
        import nvidia  # type: ignore[import-not-found, import-untyped, unused-ignore]

        dirs += [Path(p) / sub / "include" for p in nvidia.__path__ for sub in ("cu13", "cu12", "cublas")]
    except ImportError:
        pass
    return next((d for d in dirs if (d / "cublas_v2.h").is_file()), None)


def have_gpu() -> bool:
    """Whether ``nvidia-smi -L`` lists a GPU."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return False
    try:
        proc = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return proc.returncode == 0 and "GPU" in proc.stdout


NVCC = find_nvcc()
GPU = NVCC is not None and have_gpu()
ARCH = os.environ.get("OPGEN_CUDA_ARCH") or ("native" if GPU else "sm_80")
FLAGS = ["-std=c++17", "--extended-lambda", f"-arch={ARCH}", "-Werror=all-warnings", "-Xcompiler", "-Wall,-Wextra",
         f"-I{include_dir()}"]

pytestmark = pytest.mark.skipif(NVCC is None, reason="nvcc not found (CUDA_HOME, PATH, /usr/local/cuda/bin): "
                                                     "the CUDA kernel layer is compile-checked only where nvcc is")


def nvcc(*args: str, werror: bool = True) -> None:
    assert NVCC is not None
    flags = FLAGS if werror else [f for f in FLAGS if f != "-Werror=all-warnings"]
    proc = subprocess.run([NVCC, *flags, *args], capture_output=True, text=True)
    assert proc.returncode == 0, f"nvcc {' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}"


@pytest.fixture(scope="module")
def blocks_test(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """tests/cpp/cuda_blocks_test.cu, compiled (shared by the module's tests)."""
    exe = tmp_path_factory.mktemp("cuda") / "cuda_blocks_test"
    nvcc(str(CPP / "cuda_blocks_test.cu"), "-o", str(exe))
    return exe


def test_blocks_test_compiles(blocks_test: Path) -> None:
    assert blocks_test.is_file()


@pytest.mark.skipif(not GPU, reason="no NVIDIA GPU (nvidia-smi -L): cuda_blocks_test compiled, not run")
def test_blocks_match_the_host(blocks_test: Path) -> None:
    proc = subprocess.run([str(blocks_test)], capture_output=True, text=True, timeout=600)
    print(proc.stdout)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert re.search(r"cuda_blocks_test: \d+ checks, 0 failed", proc.stdout)


GENERATOR_LIKE_UNIT = r"""
#define OPGEN_DEVICE_CUDA 1
#include "opgen/kernel.h"

namespace demo {
struct Attrs {
  double negative_slope = 0.01;
};

template <typename x_t, typename out_t>
void forward(const Attrs &attrs, const opgen::In<x_t> &x, const opgen::Out<out_t> &out) {
  using C = opgen::common_compute_t<out_t, x_t>;
  const C slope = C(attrs.negative_slope);
  opgen::map<opgen::kMemoryBoundIsa>(out, [=] __host__ __device__(C x) -> C {
    return opgen::select(x > C(0), x * opgen::math::exp(-x * x), slope * opgen::math::tanh(x)) +
           C(opgen::half(0.5f) * opgen::bfloat16(x));
  }, x);
}

template <typename x_t, typename out_t>
void backward(const Attrs &attrs, const opgen::In<x_t> &x, const opgen::In<out_t> &dout, const opgen::Out<x_t> &dx) {
  using C = opgen::common_compute_t<out_t, x_t>;
  const C slope = C(attrs.negative_slope);
  const opgen::Shape iter_shape = dout.shape_vector();
  if (dx) {
    opgen::map_reduce_to<opgen::kMemoryBoundIsa>(dx, iter_shape, [=] __host__ __device__(C dout, C x) -> C {
      return dout * opgen::select(x > C(0), C(1), slope) * opgen::math::sigmoid(x);
    }, dout, x);
  }
}

#define DEMO_ROW(T)                                                                                      \
  template void forward<T, T>(const Attrs &, const opgen::In<T> &, const opgen::Out<T> &);               \
  template void backward<T, T>(const Attrs &, const opgen::In<T> &, const opgen::In<T> &, const opgen::Out<T> &);
DEMO_ROW(float)
DEMO_ROW(opgen::half)
DEMO_ROW(opgen::bfloat16)
DEMO_ROW(double)
}  // namespace demo

// the glue's side: the stream scope and the unit's device error word
void demo_call(cudaStream_t stream, const opgen::In<float> &x, const opgen::Out<float> &out, bool checked) {
  opgen::cuda::StreamScope scope(stream);
  demo::forward<float, float>(demo::Attrs{}, x, out);
  if (checked) opgen::cuda::check_errors();
}
"""


def test_a_generator_like_unit_compiles_for_float_half_bfloat16_double(tmp_path: Path) -> None:
    src = tmp_path / "demo_kernel.cu"
    src.write_text(GENERATOR_LIKE_UNIT)
    nvcc("-c", str(src), "-o", str(tmp_path / "demo_kernel.o"))


def test_the_stream_api_compiles_with_gxx(tmp_path: Path) -> None:
    # the framework glue includes opgen/cuda.h for StreamScope from a g++ unit
    include = cuda_include()
    assert include is not None, "nvcc found but not cuda_runtime_api.h"
    src = tmp_path / "glue.cc"
    src.write_text('#include "opgen/cuda.h"\n'
                   "int glue(cudaStream_t s) {\n"
                   "  opgen::cuda::StreamScope scope(s);\n"
                   "  opgen::cuda::check(cudaSuccess, \"nothing\");\n"
                   "  return opgen::cuda::current_stream() == s ? 0 : 1;\n"
                   "}\n")
    gxx = os.environ.get("CXX", "g++")
    proc = subprocess.run([gxx, "-std=c++17", "-Wall", "-Wextra", "-Werror", f"-I{include_dir()}",
                           f"-I{include}", "-c", str(src), "-o", str(tmp_path / "glue.o")],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


# The generated CUDA units themselves (every op of ops/ with GPU rows, as the generator writes them,
# built and linked into MindSpore's GPU library): tests/test_cuda_build.py.


@pytest.mark.skipif(cublas_include() is None, reason="cublas_v2.h not found (OPGEN_CUBLAS_INCLUDE, the toolkit, an "
                                                     "nvidia-cublas wheel): opgen::gemm on CUDA not compile-checked")
def test_gemm_on_cublas_and_the_matmul_body_compile(tmp_path: Path) -> None:
    # opgen::gemm with -DOPGEN_CUBLAS (cublasGemmEx), called by cuda_blocks_test and by the generated
    # matmul body, for float, double, half and bfloat16
    inc = cublas_include()
    shutil.copy(CSRC / "matmul_kernel.h", tmp_path)
    shutil.copy(CSRC / "matmul_kernel_decl.h", tmp_path)
    rows = (CSRC / "matmul_kernel.cc").read_text()
    extra = [line.replace("float", low) for line in rows.splitlines()
             if line.startswith("template void") and "<float" in line for low in ("opgen::half", "opgen::bfloat16")]
    (tmp_path / "matmul_kernel.cc").write_text(rows.replace("}  // namespace matmul",
                                                            "\n".join(extra) + "\n}  // namespace matmul"))
    (tmp_path / "matmul.cu").write_text('#define OPGEN_DEVICE_CUDA 1\n#include "matmul_kernel.cc"\n')
    nvcc("-DOPGEN_CUBLAS", f"-I{inc}", "-I", str(tmp_path), "-c", str(tmp_path / "matmul.cu"), "-o",
         str(tmp_path / "matmul.o"), werror=False)
    nvcc("-DOPGEN_CUBLAS", f"-I{inc}", "-c", str(CPP / "cuda_blocks_test.cu"), "-o", str(tmp_path / "blocks.o"))


@pytest.mark.skipif(shutil.which("nm") is None, reason="nm not found")
def test_cuda_blocks_do_not_share_symbols_with_the_cpu_blocks(tmp_path: Path) -> None:
    # an op's CPU unit and CUDA unit are linked into one library: the CUDA unit must not define
    # (weak) opgen::map / reduce_sum / softmax symbols that the CPU unit defines too
    src = tmp_path / "both.cu"
    src.write_text('#define OPGEN_DEVICE_CUDA 1\n#include "opgen/kernel.h"\n'
                   "struct Twice {\n  __host__ __device__ float operator()(float v) const { return 2 * v; }\n};\n"
                   "void run(const opgen::In<float> &x, const opgen::Out<float> &y, const opgen::Shape &kept) {\n"
                   "  opgen::map(y, Twice{}, x);\n  opgen::reduce_sum(x, kept, y);\n  opgen::softmax(x, 0, y);\n}\n")
    nvcc("-c", str(src), "-o", str(tmp_path / "both.o"))
    names = subprocess.run(["nm", "-C", str(tmp_path / "both.o")], capture_output=True, text=True, check=True).stdout
    assert "opgen::cuda::map<" in names and "opgen::cuda::reduce_sum<" in names
    assert not re.search(r"\bopgen::(map|reduce_sum|softmax)<", names), names
