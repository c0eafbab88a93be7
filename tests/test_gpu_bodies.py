"""The ``kernel.GPU`` bodies of ops/ computed on the CPU, where no GPU is (CI's machine).

A GPU body is written against opgen's portable blocks (``opgen::for_each_index``, ``map``,
``map_reduce_to``, ``Workspace``, ``raise_in_kernel``, ``check_device_errors``, ``OPGEN_LAMBDA``):
opgen/kernel.h runs them on the thread pool, opgen/cuda.h launches them on the current stream. So
the very text of each op's GPU bodies, made the op's only bodies in a copy of its spec (GPU rows as
CPU rows, float32 and float64), builds for the CPU and goes through ``opgen test`` (forward against
the numpy reference, gradients against central differences, dtype and contract refusals, checked
mode) on PyTorch's eager path; then the errors GPU bodies raise on the device (an index out of
range, a step below 1) reach the call as the op's ValueError and write nothing.

What differs on CUDA, the launches themselves, is tests/cpp/cuda_blocks_test.cu's to check on a GPU
(scripts/gpu_check.sh); tests/test_cuda_build.py compiles these bodies with nvcc for both frameworks.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[1]


def _gpu_body_variants(dst: Path) -> list[str]:
    """Writes, for each op of ops/ with a ``kernel.GPU``, a spec whose bodies are the GPU ones and
    whose CPU rows are its GPU rows (type variables cut to float32 and float64); their names."""
    names = []
    for p in sorted((ROOT / "ops").glob("*.yaml")):
        spec = yaml.safe_load(p.read_text())
        kernel = spec.get("kernel") or {}
        if "GPU" not in kernel:
            continue
        kernel.update(kernel.pop("GPU"))
        kernel.pop("CPU", None)
        spec["dtype_format"] = {"CPU": spec["dtype_format"]["GPU"]}
        for name, types in (spec.get("type_vars") or {}).items():
            spec["type_vars"][name] = [t for t in types if t in ("float32", "float64")] or types[:1]
        (dst / p.name).write_text(yaml.safe_dump(spec, sort_keys=False, width=200))
        names.append(spec["name"])
    return names


def _opgen(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "opgen", *args], capture_output=True, text=True, env=env,
                          cwd=ROOT)


@pytest.fixture(scope="module")
def gpu_bodies(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str], dict[str, str]]:
    root = tmp_path_factory.mktemp("gpu_bodies")
    specs = root / "specs"
    specs.mkdir()
    names = _gpu_body_variants(specs)
    env = {**os.environ, "OPGEN_BUILD_DIR": str(root / "build")}
    gen = _opgen("generate", str(specs), "-o", str(root / "out"), "-p", "gpubody", "--backend", "torch", env=env)
    assert gen.returncode == 0, gen.stdout + gen.stderr
    pkg = root / "out" / "gpubody_torch"
    # the checked build, which opgen test runs and OPGEN_CHECK=1 imports
    build = _opgen("build", str(pkg), "--checked", "-q", env=env)
    assert build.returncode == 0, (build.stdout + build.stderr)[-6000:]
    return pkg, names, env


def test_every_op_without_a_portable_body_has_gpu_bodies() -> None:
    # the ops whose default bodies loop over host memory (raw loops, parallel_for) carry their own
    with_gpu_bodies = sorted(p.stem for p in (ROOT / "ops").glob("*.yaml")
                             if "GPU" in (yaml.safe_load(p.read_text()).get("kernel") or {}))
    assert len(with_gpu_bodies) == 14, with_gpu_bodies


def test_gpu_bodies_pass_opgen_test_on_the_cpu(gpu_bodies: tuple[Path, list[str], dict[str, str]]) -> None:
    pkg, names, env = gpu_bodies
    run = _opgen("test", str(pkg.parents[1] / "specs"), "--package-dir", str(pkg), "--only", "*eager*", env=env)
    out = run.stdout + run.stderr
    assert run.returncode == 0, out[-6000:]
    assert f"{len(names)} op(s)" in out and " 0 failed" in out, out[-3000:]
    for name in names:
        assert f"{name}: ok" in out, out[-3000:]


def test_device_errors_reach_the_call_and_write_nothing(gpu_bodies: tuple[Path, list[str], dict[str, str]]) -> None:
    pkg, _, env = gpu_bodies
    # the checked library the fixture built (OPGEN_CHECK=1 imports it)
    script = textwrap.dedent(f"""
        import sys, torch
        sys.path.insert(0, {str(pkg.parent)!r})
        import gpubody_torch as m
        x = torch.arange(6.0).reshape(2, 3)
        try:
            m.gather(x, torch.tensor([0, 5]), axis=1)
            print("gather: no error")
        except ValueError as e:
            print("gather:", e)
        p, mm, v, g = torch.ones(4), torch.zeros(4), torch.zeros(4), torch.full((4,), 0.5)
        try:
            m.adamw(p, mm, v, g, torch.tensor(0), torch.tensor(0.1))
            print("adamw: no error")
        except ValueError as e:
            print("adamw:", e, "| unchanged:", bool(torch.equal(p, torch.ones(4)) and not mm.any() and not v.any()))
        m.adamw(p, mm, v, g, torch.tensor(1), torch.tensor(0.1))
        ref = torch.ones(4, requires_grad=True)
        opt = torch.optim.AdamW([ref], lr=0.1)
        ref.grad = g.clone()
        opt.step()
        print("adamw step 1 vs torch.optim.AdamW:", float((p - ref.detach()).abs().max()))
    """)
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         env={**env, "OPGEN_CHECK": "1"}, timeout=600)
    out = run.stdout + run.stderr
    assert run.returncode == 0, out[-4000:]
    assert "gather: gather(): index out of range" in out, out
    assert "adamw: adamw(): an input's value is outside the op's domain" in out and "unchanged: True" in out, out
    diff = float(out.split("vs torch.optim.AdamW:")[1].split()[0])
    assert diff < 1e-6, out
