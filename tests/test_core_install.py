"""A core-only wheel install (``pip install opgen``, no MindSpore) in a fresh virtual environment.

validate, generate and docs work; build and test say that they need ``pip install 'opgen[run]'``
(naming the versions) and exit 1; the spec's ``$schema`` line and every guide opgen points at
exist after the install. The venv gets opgen's wheel and its small dependencies with
``--no-deps`` from the warm pip cache (seconds); skipped when they cannot be installed offline.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CORE_DEPS = ["jinja2", "markupsafe", "pyyaml", "jsonschema", "jsonschema-specifications", "referencing",
             "rpds-py", "attrs", "pybind11", "typing_extensions"]


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("core")
    wheels = base / "wheels"
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", str(ROOT),
                        "-w", str(wheels)], text=True, capture_output=True, timeout=300)
    assert r.returncode == 0, r.stderr
    env_dir = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(env_dir)], check=True, timeout=300)
    py = env_dir / "bin" / "python"
    # no PYTHONPATH: a checkout on it (with the opgen.egg-info that pip wheel leaves there) would
    # make pip take opgen as installed and skip the wheel
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    r = subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", *map(str, wheels.glob("*.whl")),
                        *CORE_DEPS], text=True, capture_output=True, timeout=300, env=env)
    if r.returncode != 0:
        pytest.skip(f"cannot install opgen's core dependencies here: {r.stderr[-500:]}")
    return env_dir


def _run(venv: Path, cwd: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["NO_COLOR"] = "1"
    return subprocess.run([str(venv / "bin" / "opgen"), *argv], cwd=cwd, env=env, text=True, capture_output=True,
                          timeout=300)


def test_core_install_works_and_names_the_run_extra(venv: Path, tmp_path: Path) -> None:
    r = subprocess.run([str(venv / "bin" / "python"), "-c", "import mindspore"], capture_output=True)
    assert r.returncode != 0  # the point: no MindSpore in this environment
    for argv in (["new", "my_op"], ["validate"], ["generate"], ["generate", "--check"], ["docs"]):
        r = _run(venv, tmp_path, *argv)
        assert r.returncode == 0, f"opgen {' '.join(argv)}: {r.stderr}"
    for argv in (["build"], ["test"], ["generate", "--build"]):
        r = _run(venv, tmp_path, *argv)
        assert r.returncode == 1, f"opgen {' '.join(argv)} -> {r.returncode}: {r.stderr}"
        assert "internal error" not in r.stderr and "Traceback" not in r.stderr
        assert "mindspore" in r.stderr and "pip install 'opgen[run]' (mindspore==2.10.0, numpy<2, ninja>=" in r.stderr
        assert "or use PyTorch instead: --backend torch" in r.stderr  # the other way out


def test_what_opgen_points_at_exists_after_a_wheel_install(venv: Path, tmp_path: Path) -> None:
    r = _run(venv, tmp_path, "new", "my_op")
    assert r.returncode == 0, r.stderr
    spec = (tmp_path / "ops/my_op.yaml").read_text()
    ref = re.match(r"# yaml-language-server: \$schema=(\S+)\n", spec)
    assert ref and not os.path.isabs(ref.group(1)) and "venv" not in ref.group(1)
    assert (tmp_path / "ops" / ref.group(1)).resolve().is_file()
    # every guide --help points at ("See .../testing.md") is a file that exists
    seen = 0
    for command in ("test", "build", "docs", "new", "generate"):
        text = " ".join(_run(venv, tmp_path, command, "--help").stdout.split())
        for path in re.findall(r"\b[Ss]ee (\S+\.md)\b", text.replace("- ", "-")):
            seen += 1
            assert Path(path).is_absolute() and Path(path).is_file(), f"opgen {command} --help names {path}"
    assert seen
    # the example ops ship in the wheel: 'opgen new NAME --from EXAMPLE' copies one, and it validates
    r = _run(venv, tmp_path, "new", "my_norm", "--from", "rms_norm")
    assert r.returncode == 0, r.stderr
    r = _run(venv, tmp_path, "validate", "ops/my_norm.yaml")
    assert r.returncode == 0, r.stderr
    assert "rms_norm" in _run(venv, tmp_path, "new", "--list-examples").stdout.split()
    # the skeleton's command for the spec reference works as written
    cmd = re.search(r"'(opgen docs --spec-reference -o spec-reference.md)'", spec.replace("\n# ", " "))
    assert cmd
    r = _run(venv, tmp_path, *cmd.group(1).split()[1:])
    assert r.returncode == 0 and (tmp_path / "spec-reference.md").is_file(), r.stderr
    assert any((venv / "lib").glob("python*/site-packages/opgen/_docs/kernel-api.md"))
