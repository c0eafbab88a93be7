"""The device axis (opgen/devices): targets, toolchain discovery, nvcc diagnostics, what each
device renders. Fast: no compiler runs here (tests/test_cuda_build.py compiles)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from opgen import build, devices
from opgen.backends import get as get_backend
from opgen.devices import cuda
from opgen.env import EnvError
from opgen.pipeline import load_ops

SPEC = """\
name: twice
doc: Doubles x.
inputs:
  - {name: x, doc: any tensor}
outputs:
  - {name: out, doc: 2 * x, shape: x, dtype: x}
dtype_format:
  CPU:
    - [F32_Default, F32_Default]
  GPU:
    - [F32_Default, F32_Default]
    - [BF16_Default, BF16_Default]
elementwise:
  forward: 2 * x
  grad:
    x: 2 * dout
"""


def _ops(tmp_path: Path, text: str = SPEC) -> list:
    spec = tmp_path / "twice.yaml"
    spec.write_text(text, encoding="utf-8")
    ops, diags = load_ops([spec])
    assert diags == []
    return ops


def test_targets_map_to_devices() -> None:
    assert devices.for_target("CPU") is devices.get("cpu")
    assert devices.for_target("GPU") is devices.get("cuda")
    assert devices.for_target("Ascend") is None and "Ascend" in devices.UNBUILT_TARGETS
    assert devices.targets() == ("CPU", "GPU")
    with pytest.raises(KeyError, match="expected one of: cpu, cuda"):
        devices.get("rocm")


def test_gpu_rows_render_cuda_units_for_both_frameworks(tmp_path: Path) -> None:
    ops = _ops(tmp_path)
    ms = get_backend("mindspore").render(ops, "p", "generated/p")
    pt = get_backend("torch").render(ops, "p", "generated/p_torch")
    for files in (ms, pt):
        # the same elementwise expression, lowered once per device
        assert "[&](C x) noexcept -> C { return (C(2.0) * x); }" in files["csrc/twice_kernel.h"]
        cuh = files["csrc/twice_kernel.cuh"]
        assert "[=] __host__ __device__(C x) -> C { return (C(2.0) * x); }" in cuh
        assert "namespace cuda {" in cuh
        assert "template void forward<opgen::bfloat16, opgen::bfloat16>" in files["csrc/twice_kernel.cu"]
        assert "template void forward<opgen::bfloat16" not in files["csrc/twice_kernel.cc"]  # a GPU-only row
        assert "extern template void forward<opgen::bfloat16, opgen::bfloat16>" in files["csrc/twice_kernel_decl.h"]
    aot = ms["csrc/twice_aot_gpu.cc"]  # the seed's ABI, on the stream MindSpore passes; host code
    assert '#include "opgen/cuda.h"' in aot and '#include "opgen/cuda.h"' not in ms["csrc/twice_aot.cc"]
    assert "StreamScope opgen_stream(static_cast<cudaStream_t>(stream))" in aot and "(void)stream" not in aot
    assert "opgen_op::cuda::forward<opgen::bfloat16, opgen::bfloat16>" in aot
    glue = pt["csrc/twice_cuda.cc"]
    assert "TORCH_LIBRARY_IMPL(p_torch, CUDA, m)" in glue and "TORCH_LIBRARY_FRAGMENT" not in glue
    assert "cuda::forward<opgen::bfloat16, opgen::bfloat16>" in glue
    assert 'opgen::pt::output("twice", "out", out_shape, at::kBFloat16, opgen_device)' in glue
    cpu = pt["csrc/twice_torch.cc"]
    assert "TORCH_LIBRARY_IMPL(p_torch, CPU, m)" in cpu and "TORCH_LIBRARY_FRAGMENT(p_torch, m)" in cpu
    # one row index on both devices: the CPU kernel dispatches row 0 only, the autograd node all
    assert "row = 1;" in glue and cpu.count("row = 1;") == 1


def test_cpu_only_op_renders_no_cuda_unit(tmp_path: Path) -> None:
    text = SPEC.replace("  GPU:\n    - [F32_Default, F32_Default]\n    - [BF16_Default, BF16_Default]\n", "")
    ops = _ops(tmp_path, text)
    for backend in ("mindspore", "torch"):
        files = get_backend(backend).render(ops, "p", "generated/p")
        assert not [f for f in files if f.endswith((".cu", ".cuh", "_cuda.cc", "_aot_gpu.cc"))]


def test_gpu_body_replaces_the_default_for_gpu_rows_only(tmp_path: Path) -> None:
    text = SPEC.replace("""elementwise:
  forward: 2 * x
  grad:
    x: 2 * dout
""", """kernel:
  forward: |
    for (int64_t i = 0; i < x.numel; ++i) out[i] = 2 * x[i];  // CPU_BODY
  backward: |
    for (int64_t i = 0; i < dx.numel; ++i) dx[i] = 2 * dout[i];
  GPU:
    forward: |
      opgen::map(out, [=] __host__ __device__ (float v) { return 2 * v; }, x);  // GPU_BODY
""")
    files = get_backend("torch").render(_ops(tmp_path, text), "p", "generated/p_torch")
    assert "CPU_BODY" in files["csrc/twice_kernel.h"] and "GPU_BODY" not in files["csrc/twice_kernel.h"]
    assert "GPU_BODY" in files["csrc/twice_kernel.cuh"] and "CPU_BODY" not in files["csrc/twice_kernel.cuh"]
    # no backward of its own: the default one serves the GPU too
    assert "dx[i] = 2 * dout[i]" in files["csrc/twice_kernel.cuh"]
    assert '#line 20 "' in files["csrc/twice_kernel.cuh"]  # GPU_BODY's YAML line, for nvcc's diagnostics


def _executable(path: Path, text: str = "#!/bin/sh\nexit 0\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_nvcc_is_found_through_cuda_home_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    nvcc = _executable(tmp_path / "toolkit" / "bin" / "nvcc")
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "toolkit"))
    assert cuda.find_nvcc() == nvcc


def test_missing_nvcc_is_one_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(cuda, "STANDARD_LOCATION", tmp_path / "none" / "nvcc")
    why = cuda.DEVICE.unavailable()
    assert why is not None and why.startswith("nvcc not found: set CUDA_HOME")
    with pytest.raises(build.BuildError, match="nvcc not found"):
        build.device_toolchain("cuda")


def test_a_library_linking_nvcc_objects_is_keyed_by_nvcc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # MindSpore's GPU aot library compiles its entry points with the host compiler and links nvcc's
    # kernel objects: another nvcc must give another key, as for the kernel objects themselves
    from opgen.backends.mindspore import build as ms_build

    pkg = tmp_path / "p"
    (pkg / "csrc").mkdir(parents=True)
    (pkg / "csrc" / "twice_aot_gpu.cc").write_text("// entry points\n")
    (pkg / "csrc" / "twice_kernel.cu").write_text("// kernels\n")
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "one"))
    _executable(tmp_path / "one" / "bin" / "nvcc")
    target = ms_build.aot_gpu_target(pkg)
    assert target.device == "cpu" and target.linked_devices == ("cuda",)
    first = build.target_key(target)
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "two"))
    _executable(tmp_path / "two" / "bin" / "nvcc", "#!/bin/sh\n# another toolkit\nexit 0\n")
    assert build.target_key(ms_build.aot_gpu_target(pkg)) != first


@pytest.mark.parametrize("given,archs", [("80;90", ("80", "90")), ("sm_90a", ("90a",)), ("86, sm_89", ("86", "89"))])
def test_cuda_arch_from_the_environment(given: str, archs: tuple[str, ...], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPGEN_CUDA_ARCH", given)
    assert cuda.archs() == archs


def test_bad_cuda_arch_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPGEN_CUDA_ARCH", "volta")
    with pytest.raises(EnvError, match="OPGEN_CUDA_ARCH='volta'"):
        cuda.archs()


def test_default_archs_embed_ptx_for_newer_gpus() -> None:
    flags = cuda.gencode_flags(cuda.DEFAULT_ARCHS)
    assert flags == ("-gencode=arch=compute_80,code=sm_80", "-gencode=arch=compute_90,code=sm_90",
                     "-gencode=arch=compute_90,code=compute_90")


def test_nvcc_diagnostics_map_to_the_yaml_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = SPEC.replace("""elementwise:
  forward: 2 * x
  grad:
    x: 2 * dout
""", """kernel:
  forward: |
    opgen::map(out, [=] __host__ __device__ (float v) { return host_only(v); }, x);
  backward: |
    opgen::map(dx, [=] __host__ __device__ (float g) { return 2 * g; }, dout);
""")
    monkeypatch.chdir(tmp_path)
    ops = _ops(tmp_path, text)
    files = get_backend("torch").render(ops, "p", "out/p_torch")
    csrc = tmp_path / "out" / "p_torch" / "csrc"
    csrc.mkdir(parents=True)
    for rel, body in files.items():
        if rel.startswith("csrc/"):
            (tmp_path / "out" / "p_torch" / rel).write_text(body)
    spec = os.path.relpath(tmp_path / "twice.yaml", tmp_path)
    nvcc_says = (f'{spec}(15): error #20011-D: calling a __host__ function("host_only") from a __host__ __device__ '
                 'function("operator()") is not allowed\n')
    text_out, mapped = build.format_compiler_output(nvcc_says, csrc)
    assert mapped
    first = text_out.splitlines()[0]
    assert first == (f"{spec}:15:5: error: op 'twice': calling a __host__ function(\"host_only\") from a __host__ "
                     "__device__ function(\"operator()\") is not allowed")
    assert "   15 |     opgen::map(out" in text_out
