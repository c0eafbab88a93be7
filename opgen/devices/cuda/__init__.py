"""The CUDA device: kernel units compiled by nvcc, run on an NVIDIA GPU on the caller's stream.

Its kernel layer is ``opgen/include/opgen/cuda/`` (``opgen::map``/``map_reduce_to`` as grid-stride
launches on ``opgen::cuda::current_stream()``, ``__host__ __device__`` math and 16-bit types),
selected in units that define ``OPGEN_DEVICE_CUDA``; ``elementwise:`` expressions become
``[=] __host__ __device__`` lambdas (nvcc ``--extended-lambda``). Each op's bodies compile into
``csrc/<op>_kernel.cu`` (one instantiation per ``GPU:`` row), which sees no framework header;
each backend launches them from its own glue (torch's ``CUDA`` dispatch key, MindSpore's GPU aot
entry points with the stream they are given).

nvcc is found at ``$CUDA_HOME/bin/nvcc``, on ``PATH``, or at ``/usr/local/cuda/bin/nvcc`` (CUDA's
standard install location); code is generated for ``$OPGEN_CUDA_ARCH`` (``80;90``, ``sm_90``,
``native``), else for the visible GPUs (``nvidia-smi``), else for sm_80 and sm_90 with PTX for
compute_90 (which newer GPUs JIT-compile).
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import ClassVar

from ... import env as _env
from .. import NVCC_DIAGNOSTIC, Device, DeviceName, DeviceUnavailable, TolerancePolicy, Toolchain
from ..cpu import program_identity

DEFAULT_ARCHS = ("80", "90")
"""Compute capabilities built when no GPU is visible and ``OPGEN_CUDA_ARCH`` is unset (A100, H100);
PTX of the last is embedded too."""

STANDARD_LOCATION = Path("/usr/local/cuda/bin/nvcc")

_ARCH = re.compile(r"^(?:sm_|compute_)?(\d{2,3}[af]?)$")


def find_nvcc() -> Path | None:
    """nvcc: ``$CUDA_HOME/bin/nvcc`` (also ``$CUDA_PATH``), else on ``PATH``, else CUDA's standard
    install location; None when none exists."""
    for var in ("CUDA_HOME", "CUDA_PATH"):
        home = os.environ.get(var, "").strip()
        if home and (Path(home) / "bin" / "nvcc").is_file():
            return Path(home) / "bin" / "nvcc"
    found = shutil.which("nvcc")
    if found:
        return Path(found)
    return STANDARD_LOCATION if STANDARD_LOCATION.is_file() else None


@functools.lru_cache(maxsize=4)
def _toolkit_root(nvcc: Path) -> Path | None:
    here = nvcc.resolve().parent.parent
    if any((d / "cuda_runtime_api.h").is_file() for d in (here / "include", *here.glob("targets/*/include"))):
        return here
    # a wrapper script (``exec /usr/local/cuda-13.0/bin/nvcc "$@"``): nvcc's dry run names its TOP
    try:
        out = subprocess.run([str(nvcc), "-dryrun", "-x", "cu", "-E", os.devnull], capture_output=True, text=True,
                             timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.search(r"^#\$ TOP=(.+)$", out.stdout + out.stderr, re.M)
    return Path(m.group(1).strip()).resolve() if m else None


def toolkit_root() -> Path | None:
    """The CUDA toolkit's root (nvcc's ``bin/..``, through a wrapper script too), or None without nvcc."""
    nvcc = find_nvcc()
    return _toolkit_root(nvcc) if nvcc else None


def include_dirs() -> tuple[Path, ...]:
    """The toolkit's header directories (``cuda_runtime_api.h``), for host units that include
    CUDA headers (torch's ``c10/cuda``) compiled by g++."""
    root = toolkit_root()
    if root is None:
        return ()
    found = [d.resolve() for d in (root / "include", *sorted(root.glob("targets/*/include")))
             if (d / "cuda_runtime_api.h").is_file()]
    return tuple(dict.fromkeys(found))


def library_dirs() -> tuple[Path, ...]:
    """The toolkit's library directories (``libcudart.so``)."""
    root = toolkit_root()
    if root is None:
        return ()
    found = [d for d in (root / "lib64", root / "lib", *sorted(root.glob("targets/*/lib")))
             if any(d.glob("libcudart.so*"))]
    found = [d.resolve() for d in found]
    return tuple(dict.fromkeys(found))


@functools.lru_cache(maxsize=1)
def visible_archs() -> tuple[str, ...]:
    """The compute capabilities of the visible GPUs (``nvidia-smi``), e.g. ``("90",)``; empty
    without a GPU or a driver."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return ()
    try:
        out = subprocess.run([smi, "--query-gpu=compute_cap", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ()
    if out.returncode != 0:
        return ()
    caps = [line.strip().replace(".", "") for line in out.stdout.splitlines() if line.strip()]
    return tuple(dict.fromkeys(c for c in caps if c.isdigit()))


def archs() -> tuple[str, ...]:
    """The compute capabilities to build for (``"90"``...): ``$OPGEN_CUDA_ARCH`` (``;`` or ``,``
    separated, ``sm_`` optional; ``native``: the visible GPUs), else the visible GPUs, else
    :data:`DEFAULT_ARCHS`.

    Raises:
        opgen.env.EnvError: ``OPGEN_CUDA_ARCH`` holds something else.
    """
    given = _env.command("OPGEN_CUDA_ARCH")
    if given:
        if given.strip() == "native":
            return visible_archs() or DEFAULT_ARCHS
        out = []
        for word in re.split(r"[;,\s]+", given.strip()):
            m = _ARCH.match(word)
            if not m:
                raise _env.EnvError(f"OPGEN_CUDA_ARCH={given!r}: {word!r} is not a compute capability "
                                    "(80, sm_90, 90a, or 'native'); fix it or unset it")
            out.append(m.group(1))
        return tuple(dict.fromkeys(out))
    return visible_archs() or DEFAULT_ARCHS


def gencode_flags(capabilities: tuple[str, ...]) -> tuple[str, ...]:
    """nvcc's ``-gencode`` flags: SASS for each capability, PTX for the last (JIT on newer GPUs)."""
    flags = [f"-gencode=arch=compute_{c},code=sm_{c}" for c in capabilities]
    last = capabilities[-1].rstrip("af")
    flags.append(f"-gencode=arch=compute_{last},code=compute_{last}")
    return tuple(flags)


NVCC_FLAGS = ("-std=c++17", "--extended-lambda", "--expt-relaxed-constexpr", "-Xcompiler", "-fPIC",
              "-DOPGEN_DEVICE_CUDA=1", "-Xcudafe", "--display_error_number")
"""What every CUDA unit is compiled with: device lambdas (``__host__ __device__`` functors),
constexpr host functions in device code (std::numeric_limits), position-independent code, the
CUDA half of the kernel layer (``OPGEN_DEVICE_CUDA``), and EDG's error numbers in diagnostics.
Where the toolkit has cuBLAS, :func:`cublas_flags` adds ``opgen::gemm`` through it."""


def has_cublas() -> bool:
    """Whether the toolkit has cuBLAS (``cublas_v2.h``): a minimal nvcc install has not."""
    return any((d / "cublas_v2.h").is_file() for d in include_dirs())


def cublas_flags() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(compile, link) flags of ``opgen::gemm`` on CUDA (``-DOPGEN_CUBLAS``, ``-lcublas``) where the
    toolkit has cuBLAS; none otherwise (``opgen::gemm`` is then opgen's own tiled kernel: correct,
    far slower than cuBLAS)."""
    return (("-DOPGEN_CUBLAS=1",), ("-lcublas",)) if has_cublas() else ((), ())


class CudaDevice(Device):
    """An NVIDIA GPU through CUDA (spec target ``GPU``; torch dispatch key ``CUDA``; MindSpore
    target ``GPU``)."""

    name: ClassVar[DeviceName] = "cuda"
    target: ClassVar[str] = "GPU"
    suffix: ClassVar[str] = "_cuda"
    kernel_header: ClassVar[str] = "{op}_kernel.cuh"
    kernel_unit: ClassVar[str] = "{op}_kernel.cu"
    namespace: ClassVar[str] = "cuda"
    host_header: ClassVar[str] = "opgen/cuda.h"
    tolerance: ClassVar[TolerancePolicy] = TolerancePolicy(
        4.0, ("CUDA's exp/log/tanh/erf differ from glibc's by a few ulp and nvcc contracts a*b+c into fmas",))

    def lambda_head(self) -> str:
        return "[=] __host__ __device__"

    def lambda_tail(self, noexcept: str) -> str:
        return ""

    def unavailable(self) -> str | None:
        if find_nvcc() is None:
            return ("nvcc not found: set CUDA_HOME to the CUDA toolkit (or put nvcc on PATH; looked in $CUDA_HOME/bin, "
                    f"PATH and {STANDARD_LOCATION.parent})")
        return None

    def toolchain(self) -> Toolchain:
        nvcc = find_nvcc()
        if nvcc is None:
            raise DeviceUnavailable(self.unavailable() or "nvcc not found")
        argv = [str(nvcc)]
        host = os.environ.get("CXX", "").strip()
        if host and shutil.which(host.split()[-1]):
            argv += ["-ccbin", host.split()[-1]]
        return Toolchain("compile_cuda", tuple(argv), ("-MD", "-MT", "$out", "-MF", "$out.d"), ("-x", "cu"),
                         program_identity(argv[:1], "CUDA compiler") + f" archs {','.join(archs())}", NVCC_DIAGNOSTIC)

    def gpu_present(self) -> bool:
        """Whether this machine has a GPU to run on (``nvidia-smi`` lists one)."""
        return bool(visible_archs())


DEVICE = CudaDevice()
