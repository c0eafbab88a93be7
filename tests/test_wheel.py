"""opgen wheel: a wheel of a generated package with its libraries prebuilt, installed into a
fresh venv that has MindSpore but no compiler on PATH and an empty build root; its ops run on both
paths there (PyNative, GRAPH_MODE, gradients).  Under another MindSpore version its import fails
naming the version it was built for. The same for a PyTorch package (``opgen wheel --backend
torch``), in a fresh venv that has torch and its dependencies and nothing of the generator (no
opgen, jinja2, jsonschema or yaml: the package carries its runtime, ``_runtime/``): eager and
autograd there, and an ImportError naming both torch versions under another one.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

from small_specs import HALVE

from opgen.backends.mindspore import build as ms_build
from opgen.cli import main
from opgen.pipeline import generate

SCRIPT = """
import mindspore as ms, numpy as np
import whl_ops
from whl_ops import function
x = ms.Tensor(np.array([2.0, -3.0], np.float32))
print("custom", whl_ops.halve(x).asnumpy().tolist(), ms.grad(lambda t: whl_ops.halve(t))(x).asnumpy().tolist())
print("pynative path", whl_ops.custom.PYNATIVE_PATH)  # the prebuilt extension: the Function<T> path
print("function", function.halve(x).asnumpy().tolist(), ms.grad(lambda t: function.halve(t))(x).asnumpy().tolist())
ms.set_context(mode=ms.GRAPH_MODE)
class Net(ms.nn.Cell):
    def construct(self, t):
        return whl_ops.halve(t)
print("graph", Net()(x).asnumpy().tolist(), ms.grad(Net())(x).asnumpy().tolist())
import sys
print("generator modules", sorted({m.split(".")[0] for m in sys.modules} & {"opgen", "jinja2", "jsonschema", "yaml"}))
"""


def test_wheel_installs_and_runs_without_a_compiler(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    root = tmp_path / "build"  # the support object is shared through $OPGEN_SUPPORT_DIR (conftest)
    root.mkdir()
    monkeypatch.chdir(tmp_path)
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "halve.yaml").write_text(textwrap.dedent(HALVE).lstrip())
    assert not generate(["specs"], Path("out"), "whl_ops").diagnostics
    assert main(["wheel", "out/whl_ops", "-o", "dist", "--build-dir", str(root), "-q"]) == 0
    wheels = list((tmp_path / "dist").glob("whl_ops-0.1.0-*.whl"))
    assert len(wheels) == 1

    # a fresh venv: MindSpore importable, nothing of the generator (opgen, jinja2...), no compiler, nothing built
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = Path(sysconfig.get_path("purelib", vars={"base": str(venv), "platbase": str(venv)}))
    (site / "deps.pth").write_text(f"{framework_site(tmp_path / 'ms-site', 'mindspore')}\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "-q",
                    "--no-deps", "--no-index", str(wheels[0])], check=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPGEN_", "CXX", "PYTHON"))}
    env.update(PATH=str(venv / "bin"), OPGEN_BUILD_DIR=str(tmp_path / "empty-build-root"), GLOG_v="3")
    assert_no_generator(venv / "bin" / "python", env, tmp_path)
    script = tmp_path / "dist" / "use_wheel.py"  # GRAPH_MODE parses the Cell's source file
    script.write_text(SCRIPT)
    run = subprocess.run([str(venv / "bin" / "python"), str(script)], env=env, cwd=tmp_path / "dist",
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "custom [1.0, -1.5] [0.5, 0.5]" in run.stdout
    assert "function [1.0, -1.5] [0.5, 0.5]" in run.stdout
    assert "graph [1.0, -1.5] [0.5, 0.5]" in run.stdout
    assert "pynative path function" in run.stdout
    assert "generator modules []" in run.stdout
    assert not (tmp_path / "empty-build-root").exists()  # nothing was built there
    assert "opgen: building" not in run.stderr

    # the same wheel under another MindSpore version: a clear error naming the one it was built for
    record = site / "whl_ops" / "_prebuilt.json"
    facts = json.loads(record.read_text())
    assert facts["mindspore"] == ms_build.version()
    record.write_text(json.dumps(dict(facts, mindspore="2.9.0")))
    run = subprocess.run([str(venv / "bin" / "python"), "-c", "import whl_ops"], env=env, cwd=tmp_path / "dist",
                         capture_output=True, text=True)
    assert run.returncode != 0
    assert "was built by opgen wheel for mindspore 2.9.0" in run.stderr
    assert f"but this is mindspore {ms_build.version()}" in run.stderr

    # tampered installs (issue 25 item 4): each library is checked against its recorded sha256
    record.write_text(json.dumps(facts))
    _tampered_libraries_are_clear_errors(site / "whl_ops", facts)
    aot = site / "whl_ops" / facts["libraries"]["aot"]
    aot.write_bytes(aot.read_bytes()[: aot.stat().st_size // 2])
    run = subprocess.run([str(venv / "bin" / "python"), "-c", "import whl_ops"], env=env, cwd=tmp_path / "dist",
                         capture_output=True, text=True)
    assert run.returncode == 1 and "Traceback" in run.stderr, run.stderr[-2000:]  # was SIGBUS at the first call
    assert f"ImportError: the prebuilt library {aot} is damaged or was altered" in run.stderr


def _tampered_libraries_are_clear_errors(pkg: Path, facts: dict) -> None:  # type: ignore[type-arg]
    """Truncated, emptied and 7-bytes-altered libraries, and a damaged ``_prebuilt.json``: an
    ImportError naming the file (in-process: the check needs no MindSpore)."""
    import pytest

    from opgen.runtime import base as runtime_base
    from opgen.runtime import mindspore as ms_runtime

    record = pkg / "_prebuilt.json"
    for kind in ("aot", "ext"):
        lib = pkg / facts["libraries"][kind]
        good = lib.read_bytes()
        middle = len(good) // 2
        for damage in (good[:middle], b"", good[:middle] + b"\x00" * 7 + good[middle + 7:]):
            lib.write_bytes(damage)
            runtime_base._verified.clear()
            with pytest.raises(ImportError, match=f"^the prebuilt library {lib} is damaged or was altered "
                               f"after it was installed \\({len(damage)} bytes, sha256 "):
                ms_runtime.prebuilt_library(pkg, kind)
        record.write_text(json.dumps({k: v for k, v in facts.items() if k != "sha256"}))
        runtime_base._verified.clear()
        with pytest.raises(ImportError, match="is damaged or was altered"):  # the wheel's RECORD has it too
            ms_runtime.prebuilt_library(pkg, kind)
        lib.write_bytes(good)
        assert ms_runtime.prebuilt_library(pkg, kind) == str(lib)
        record.write_text(json.dumps(facts))
    for text, message in (("{not json", f"{record} is damaged (Expecting property name"),
                          (json.dumps({k: v for k, v in facts.items() if k != "libraries"}),
                           f"{record} names no aot library"),
                          ("[]", f"{record} names no aot library")):
        record.write_text(text)
        with pytest.raises(ImportError, match="^" + re.escape(message)):
            ms_runtime.prebuilt_library(pkg, "aot")
    record.write_text(json.dumps(facts))


TORCH_SCRIPT = """
import sys
import torch
import whl_ops_torch
x = torch.tensor([2.0, -3.0], requires_grad=True)
y = whl_ops_torch.halve(x)
y.sum().backward()
print("eager", y.tolist(), x.grad.tolist())
print("ops", torch.ops.whl_ops_torch.halve.default(x.detach()).tolist())
print("runtime", whl_ops_torch._rt.__name__)
print("generator modules", sorted({m.split(".")[0] for m in sys.modules} & {"opgen", "jinja2", "jsonschema", "yaml"}))
"""

GENERATOR = ("opgen", "jinja2", "jsonschema", "yaml")
"""Modules of the generator that a wheel's package must not need (nor import) at run time."""


def framework_site(dest: Path, framework: str) -> Path:
    """A folder of links to the installed files of ``framework`` and of what it requires, all the
    way down, and nothing else: a venv whose ``.pth`` names it has the framework but not opgen,
    jinja2, jsonschema or yaml (torch requires jinja2, read only by torch.compile's inductor: it is
    left out, so a package that needs it fails here)."""
    dest.mkdir()
    todo, seen = [framework, "numpy"], {"jinja2", "markupsafe"}  # numpy: the wheels' other requirement
    while todo:
        name = re.sub(r"[-_.]+", "-", todo.pop()).lower()
        if name in seen:
            continue
        seen.add(name)
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:  # an optional or platform-only requirement
            continue
        todo += [re.match(r"[A-Za-z0-9._-]+", r)[0] for r in dist.requires or () if "extra ==" not in r]  # type: ignore[index]
        tops = {f.parts[0] for f in dist.files or () if f.parts[0] != ".." and not f.parts[0].endswith(".pth")}
        for top in sorted(tops - {"__pycache__", "bin"}):
            source = Path(str(dist.locate_file(top)))
            if source.exists() and not (dest / top).exists():
                (dest / top).symlink_to(source)
    linked = sorted(p.name for p in dest.iterdir())
    assert not any(m in linked or f"{m}.py" in linked for m in GENERATOR), linked
    return dest


def assert_no_generator(python: Path, env: dict[str, str], cwd: Path) -> None:
    """None of :data:`GENERATOR` imports under ``python``."""
    for module in GENERATOR:
        absent = subprocess.run([str(python), "-c", f"import {module}"], env=env, cwd=cwd, capture_output=True,
                                text=True)
        assert f"No module named '{module}'" in absent.stderr, (module, absent.stderr[-500:])


def test_torch_wheel_installs_and_runs_without_a_compiler(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """opgen wheel --backend torch: the PyTorch package's operator library prebuilt; a fresh venv with
    torch but not opgen (nor jinja2, jsonschema, yaml), no compiler and an empty build root runs it
    (eager and autograd) from its own copy of the runtime, and declares no requirement on opgen;
    under another torch version the import is an ImportError naming both versions. (~40 s: one small
    torch library.)"""
    import pytest

    torch = pytest.importorskip("torch")
    root = tmp_path / "build"
    monkeypatch.chdir(tmp_path)
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "halve.yaml").write_text(textwrap.dedent(HALVE).lstrip())
    (tmp_path / "pyproject.toml").write_text('[tool.opgen]\nspecs = "specs"\noutput = "out"\npackage = "whl_ops"\n'
                                             'backends = ["torch"]\n')
    assert not generate(["specs"], Path("out"), "whl_ops", backend="torch").diagnostics
    assert main(["wheel", "--backend", "torch", "-o", "dist", "--build-dir", str(root), "-q"]) == 0
    wheels = list((tmp_path / "dist").glob("whl_ops_torch-0.1.0-*.whl"))
    assert len(wheels) == 1

    venv = tmp_path / "venv"  # torch and its dependencies, nothing of the generator
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = Path(sysconfig.get_path("purelib", vars={"base": str(venv), "platbase": str(venv)}))
    (site / "deps.pth").write_text(f"{framework_site(tmp_path / 'torch-site', 'torch')}\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "-q",
                    "--no-deps", "--no-index", str(wheels[0])], check=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPGEN_", "CXX", "PYTHON"))}
    env.update(PATH=str(venv / "bin"), OPGEN_BUILD_DIR=str(tmp_path / "empty-build-root"))
    assert_no_generator(venv / "bin" / "python", env, tmp_path)
    run = subprocess.run([str(venv / "bin" / "python"), "-c", TORCH_SCRIPT], env=env, cwd=tmp_path / "dist",
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "eager [1.0, -1.5] [0.5, 0.5]" in run.stdout
    assert "ops [1.0, -1.5]" in run.stdout
    assert "runtime whl_ops_torch._runtime.pytorch" in run.stdout
    assert "generator modules []" in run.stdout
    assert not (tmp_path / "empty-build-root").exists()
    assert "opgen: building" not in run.stderr

    record = site / "whl_ops_torch" / "_prebuilt.json"
    facts = json.loads(record.read_text())
    assert facts["torch"] == str(torch.__version__) and set(facts["libraries"]) == {"torch"}
    record.write_text(json.dumps(dict(facts, torch="2.0.1")))
    run = subprocess.run([str(venv / "bin" / "python"), "-c", "import whl_ops_torch"], env=env,
                         cwd=tmp_path / "dist", capture_output=True, text=True)
    assert run.returncode != 0
    assert "ImportError: package 'whl_ops_torch' was built by opgen wheel for torch 2.0.1 (PyTorch 2.0.1, " \
        in run.stderr, run.stderr[-2000:]
    assert "(it runs under any PyTorch 2.0.x build), but this is torch" in run.stderr
    assert f"but this is torch {torch.__version__}" in run.stderr
    # another build of the same release (a CUDA build, a patch release): the same C++ ABI, so it imports
    release = ".".join(str(torch.__version__).split("+")[0].split(".")[:2])
    record.write_text(json.dumps(dict(facts, torch=f"{release}.9+cu999")))
    run = subprocess.run([str(venv / "bin" / "python"), "-c", "import whl_ops_torch"], env=env,
                         cwd=tmp_path / "dist", capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-2000:]
    # and pip is told the same: any build of this release, no exact local version (+cpu)
    metadata = next(site.glob("whl_ops_torch-*.dist-info")).joinpath("METADATA").read_text()
    requires = [ln for ln in metadata.splitlines() if ln.startswith("Requires-Dist:")]
    assert f"Requires-Dist: torch=={release}.*" in requires and not any("+" in ln for ln in requires), requires
    assert not any("opgen" in ln for ln in requires), requires  # the package carries its runtime
    # a wheel whose library holds CUDA kernels needs a CUDA build of torch of the same major version
    assert facts["devices"] == ({} if torch.version.cuda is None else facts["devices"])
    record.write_text(json.dumps(dict(facts, devices={"cuda": {"version": "7.5", "archs": ["90"]}})))
    run = subprocess.run([str(venv / "bin" / "python"), "-c", "import whl_ops_torch"], env=env,
                         cwd=tmp_path / "dist", capture_output=True, text=True)
    assert run.returncode != 0
    assert "ImportError: package 'whl_ops_torch' was built by opgen wheel with CUDA kernels for CUDA 7.5 (GPU " \
        "architectures 90), but this process runs" in run.stderr, run.stderr[-2000:]
