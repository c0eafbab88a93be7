"""The CUDA units of every op of ops/ with GPU rows compile, for both frameworks, on a machine
with nvcc and no GPU (CI's): MindSpore's GPU aot library is built and linked for real and answers
its C ABI (nothing launches: every call here is refused before a kernel runs), PyTorch's CUDA
dispatch-key glue compiles against the installed torch's headers, and PyTorch's CUDA kernel units
that differ from MindSpore's compile with nvcc. Skipped, with the reason, where
nvcc is missing. What runs on a GPU: scripts/gpu_check.sh."""

from __future__ import annotations

import ctypes
import subprocess
from pathlib import Path

import pytest

from opgen import backends, devices
from opgen.pipeline import load_ops

ROOT = Path(__file__).resolve().parents[1]
WHY = devices.get("cuda").unavailable()
pytestmark = pytest.mark.skipif(WHY is not None, reason=f"CUDA units not compile-checked: {WHY}")


def _gpu_ops() -> list[str]:
    ops, diags = load_ops([ROOT / "ops"])
    assert not diags
    return sorted(op.name for op in ops if op.rows_for("GPU"))


def test_ops_have_gpu_rows() -> None:
    # every op of ops/: its default bodies (portable blocks) or its kernel.GPU bodies build for CUDA
    ops, _ = load_ops([ROOT / "ops"])
    assert _gpu_ops() == sorted(op.name for op in ops)


def test_mindspore_gpu_aot_library_builds_and_answers_its_abi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPGEN_CUDA_ARCH", "90")  # one architecture: what the build compiles is the same code
    monkeypatch.setenv("OPGEN_CUDA_OPT", "0")  # a compile check: -O0 builds the 40 nvcc units in half the time
    pkg = ROOT / "generated" / "opgen_ops"
    lib = ctypes.CDLL(str(backends.build(pkg, "aot_gpu", quiet=True, build_dir=tmp_path / "build")))
    names = _gpu_ops()
    for op in names:
        forward = getattr(lib, f"opgen_ops_{op}_forward")
        forward.restype = ctypes.c_int
        # no attrs (extra is null): kMissingAttr for an op with attrs, else kBadParamCount
        assert forward(0, None, None, None, None, None, None) in (1, 5), op
        assert hasattr(lib, f"opgen_ops_{op}_forwardInferShape"), op
    assert len(names) == 40


def test_torch_cuda_glue_compiles_against_torch(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    from opgen.backends.torch import build as torch_build

    pkg = ROOT / "generated" / "opgen_ops_torch"
    units = sorted((pkg / "csrc").glob("*_cuda.cc"))
    assert [u.name[: -len("_cuda.cc")] for u in units] == _gpu_ops()
    # torch's CPU wheel ships c10/cuda's headers without the generated cuda_cmake_macros.h
    stub = tmp_path / "stub" / "c10" / "cuda" / "impl"
    stub.mkdir(parents=True)
    (stub / "cuda_cmake_macros.h").write_text("#pragma once\n#define C10_CUDA_BUILD_SHARED_LIBS\n")
    # every op's CUDA glue, and one op's CPU and CUDA units together: the library's build groups
    # sources into unity units as they come, so the two keys' kernels must not collide
    unity = tmp_path / "all_cuda.cc"
    unity.write_text("".join(f'#include "{u}"\n' for u in [pkg / "csrc" / "relu_torch.cc", *units]))
    run = subprocess.run(["g++", *torch_build.cuda_glue_cflags(pkg), f"-I{tmp_path / 'stub'}", "-fsyntax-only",
                          str(unity)], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-4000:]


def _kernel_text(csrc: Path, op: str, package: str) -> str:
    """An op's CUDA kernel unit and the headers it includes, with the package's name blanked."""
    names = (f"{op}_kernel.cu", f"{op}_kernel.cuh", f"{op}_kernel.h", f"{op}_kernel_decl.h")
    text = "".join((csrc / n).read_text() for n in names if (csrc / n).is_file())
    return text.replace(package, "PKG").replace(package.upper(), "PKG")


def test_torch_cuda_kernel_units_compile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # PyTorch's kernel units differ from MindSpore's where an op has float attrs (doubles on torch,
    # float32 on MindSpore): each of those compiles with nvcc as the torch library's build compiles
    # it (without libtorch_cuda it cannot link here). The others are MindSpore's text but for the
    # package's name: test_mindspore_gpu_aot_library_builds_and_answers_its_abi compiles that.
    from concurrent.futures import ThreadPoolExecutor

    from opgen import build

    monkeypatch.setenv("OPGEN_CUDA_ARCH", "90")
    monkeypatch.setenv("OPGEN_CUDA_OPT", "0")
    csrc = ROOT / "generated" / "opgen_ops_torch" / "csrc"
    ms_csrc = ROOT / "generated" / "opgen_ops" / "csrc"
    every = sorted(csrc.glob("*_kernel.cu"))
    assert [u.name[: -len("_kernel.cu")] for u in every] == _gpu_ops()
    units = [u for u in every if _kernel_text(csrc, u.name[: -len("_kernel.cu")], "opgen_ops_torch")
             != _kernel_text(ms_csrc, u.name[: -len("_kernel.cu")], "opgen_ops")]
    ops, _ = load_ops([ROOT / "ops"])
    with_float_attrs = sorted(op.name for op in ops if any(a.type in ("float", "list[float]") for a in op.attrs))
    assert [u.name[: -len("_kernel.cu")] for u in units] == with_float_attrs
    nvcc = devices.get("cuda").toolchain().argv
    flags = build.cuda_cflags(csrc)

    def compile_one(unit: Path) -> tuple[str, int, str]:
        run = subprocess.run([*nvcc, *flags, "-c", str(unit), "-o", str(tmp_path / (unit.stem + ".o"))],
                             capture_output=True, text=True)
        return unit.name, run.returncode, run.stdout + run.stderr

    with ThreadPoolExecutor(max_workers=2) as pool:
        failed = [(name, out[-2000:]) for name, rc, out in pool.map(compile_one, units) if rc != 0]
    assert not failed, failed
