"""opgen's framework-free C++ headers, compiled with g++ and run.

Drivers in ``tests/cpp`` are built at -O2 (the Function<T> path's level) and -O3 (the aot
path's), with ``-Wall -Wextra -Werror``: ``parallel_test.cc`` checks opgen::parallel_for and its
thread pool itself.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from opgen.resources import include_dir

CPP = Path(__file__).resolve().parent / "cpp"
CXX = os.environ.get("CXX", "g++")
FLAGS = ["-std=c++17", "-Wall", "-Wextra", "-Werror", "-pthread", "-D_GLIBCXX_USE_CXX11_ABI=0", f"-I{include_dir()}"]

pytestmark = pytest.mark.skipif(shutil.which(CXX) is None, reason=f"C++ compiler {CXX} not found")


@pytest.fixture(scope="module", params=["-O2", "-O3"])
def opt(request: pytest.FixtureRequest) -> str:
    """Optimisation level the drivers are compiled at."""
    return str(request.param)


def compile_driver(name: str, opt: str, out_dir: Path) -> Path:
    """Compile ``tests/cpp/<name>.cc`` into ``out_dir``."""
    out = out_dir / f"{name}{opt}"
    if not out.exists():
        subprocess.run([CXX, opt, *FLAGS, str(CPP / f"{name}.cc"), "-o", str(out), "-ldl"], check=True)
    return out


@pytest.fixture(scope="module")
def drivers(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Directory the compiled drivers live in (shared by the module's tests)."""
    return tmp_path_factory.mktemp("kernel_headers")


Runner = Callable[..., str]


@pytest.fixture
def run(opt: str, drivers: Path, tmp_path: Path) -> Runner:
    """Run a driver (``half_test`` or ``parallel_test``) in one mode; returns its stdout.

    Arguments default to ``tmp_path``, where the array modes read and write.
    """

    def _run(driver: str, mode: str, *args: str, env: dict[str, str] | None = None) -> str:
        exe = compile_driver(driver, opt, drivers)
        proc = subprocess.run([str(exe), mode, *(args or (str(tmp_path),))], capture_output=True, text=True,
                              env={**os.environ, **(env or {})}, timeout=300)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return proc.stdout

    return _run


# -------------------------------------------------------------------------------- parallel


def test_parallel_for(run: Runner) -> None:
    """Coverage, chunk sizes, threads used, exceptions, nesting, concurrent callers, fork."""
    out = run("parallel_test", "parallel", ".")
    assert "FAIL" not in out
    assert out.count("ok ") == 18, out


def test_parallel_for_single_thread(run: Runner) -> None:
    """OPGEN_NUM_THREADS=1: no pool, every loop on the calling thread, same results."""
    out = run("parallel_test", "parallel", ".", env={"OPGEN_NUM_THREADS": "1"})
    assert out.startswith("threads 1\n") and "FAIL" not in out
    assert "ok threads used 1" in out


def test_library_with_pool_survives_dlclose(run: Runner, tmp_path: Path) -> None:
    """MindSpore may dlclose an aot library; one whose pool threads exist stays mapped."""
    lib = tmp_path / "libparallel.so"
    subprocess.run([CXX, "-O2", "-fPIC", "-shared", *FLAGS, str(CPP / "parallel_lib.cc"), "-o", str(lib)], check=True)
    out = run("parallel_test", "dlclose", str(lib))
    assert "ok library pinned after dlclose" in out


def test_flat_loop_vectorises_at_O2(tmp_path: Path) -> None:
    """The flat map loop is vectorised at -O2 (CustomOpBuilder's level), not only at -O3."""
    src = tmp_path / "vec.cc"
    src.write_text('#include "opgen/kernel.h"\n'
                   "void mul(opgen::Out<float> o, opgen::In<float> a, opgen::In<float> b) {\n"
                   "  opgen::map(o, [](float x, float y) { return x * y; }, a, b);\n}\n")
    proc = subprocess.run([CXX, "-O2", *FLAGS, "-c", str(src), "-o", str(tmp_path / "vec.o"),
                           "-fopt-info-vec-optimized"], capture_output=True, text=True, check=True)
    kernel_lines = [ln for ln in proc.stderr.splitlines() if "kernel.h" in ln and "loop vectorized" in ln]
    assert kernel_lines, proc.stderr
