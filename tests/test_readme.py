"""The README is true: its quick starts run as written (new op -> generate -> build -> test ->
import -> forward and gradient: MindSpore in PyNative and GRAPH_MODE; PyTorch eager and compiled,
in a fresh venv holding only torch and ``pip install '.[torch]'``), its commands parse, the cheap
ones exit 0, and its links and fresh-machine commands exist.

Each quick start compiles one op: a minute or more on a 2-core machine, once per build directory
($OPGEN_BUILD_DIR); later runs find it built. The PyTorch one's venv is made once (torch from
pip's cache, a few minutes) and kept under the build root; each run reinstalls opgen into it.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from opgen.cli import make_parser

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _block(marker: str) -> str:  # markers: shell, python (MindSpore), torch-shell, torch-python
    """The fenced block right after ``<!-- quickstart:<marker> -->``."""
    m = re.search(rf"<!-- quickstart:{marker} -->\n```\w*\n(.*?)\n```", README, re.S)
    assert m, f"README has no quickstart:{marker} block"
    return m.group(1)


def _commands(block: str) -> list[list[str]]:
    """The ``opgen ...`` command lines of a shell block, comments dropped."""
    out = []
    for line in block.splitlines():
        line = line.split("  #", 1)[0].strip()
        if line.startswith("opgen "):
            out.append(shlex.split(line))
    return out


def _env(path: Path = ROOT) -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=str(path), NO_COLOR="1")
    env.pop("OPGEN_PYNATIVE_PATH", None)  # as a user runs it: the public op takes the Function<T> path in PyNative
    return env


def _opgen(argv: list[str], cwd: Path, path: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "opgen", *argv[1:]], cwd=cwd, env=_env(path), text=True,
                          capture_output=True, timeout=900)


def test_quick_start_as_written() -> None:
    # a fresh directory at a fixed place: builds are cached per package path, so a second run
    # of this test finds its libraries built (seconds) instead of compiling again (minutes)
    from opgen.build import build_root

    tmp_path = build_root() / "readme-quickstart"
    shutil.rmtree(tmp_path, ignore_errors=True)
    tmp_path.mkdir(parents=True)
    # opgen as a user gets it: installed from its wheel (no checkout on the path); MindSpore from
    # this environment
    site = tmp_path / "site"
    r = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                        "--target", str(site), str(ROOT)], text=True, capture_output=True, timeout=600)
    assert r.returncode == 0, r.stderr
    work = tmp_path / "work"
    work.mkdir()
    commands = _commands(_block("shell"))
    assert [c[1] for c in commands] == ["new", "validate", "generate", "build", "test"]
    for argv in commands:
        r = _opgen(argv, work, site)
        assert r.returncode == 0, f"{' '.join(argv)} -> {r.returncode}\n{r.stdout}\n{r.stderr[-4000:]}"
        if argv[1] == "new":  # the skeleton's $schema line points at a file that exists
            assert "$schema=../schemas/op.schema.json" in (work / "ops" / "my_op.yaml").read_text()
            assert (work / "schemas" / "op.schema.json").is_file()
    assert (work / "ops" / "my_op.yaml").is_file()
    r = subprocess.run([sys.executable, "-c", "import opgen; print(opgen.__file__)"], cwd=work, env=_env(site),
                       text=True, capture_output=True)
    assert r.stdout.startswith(str(site)), r.stdout + r.stderr

    script = _block("python")
    (work / "quickstart.py").write_text(script)
    r = subprocess.run([sys.executable, "quickstart.py"], cwd=work, env=_env(site), text=True,
                       capture_output=True, timeout=600)
    assert r.returncode == 0, r.stderr[-4000:]
    expected = [line.split("# ", 1)[1].strip() for line in script.splitlines()
                if line.startswith("print(") and "# " in line]
    got = [line.strip() for line in r.stdout.splitlines() if line.strip()]
    assert len(expected) == 6
    assert [" ".join(g.split()) for g in got] == [" ".join(e.split()) for e in expected]


def _expected_prints(script: str) -> list[str]:
    """The ``# result`` comment of every ``print(...)`` line of a quick-start script."""
    return [line.rsplit("# ", 1)[1].strip() for line in script.splitlines()
            if line.startswith("print(") and "# " in line]


def _torch_venv(base: Path) -> Path:
    """A venv holding torch (this process's version) and numpy 2, then ``pip install '<checkout>[torch]'``
    as a PyTorch user runs it; made once under ``base``, opgen reinstalled from the checkout each call."""
    import torch

    venv = base / "venv"
    py = venv / "bin" / "python"
    version = str(torch.__version__).split("+")[0]
    stamp = venv / ".torch-made"
    if not stamp.is_file():
        shutil.rmtree(venv, ignore_errors=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
        r = subprocess.run([str(py), "-m", "pip", "install", "-q", f"torch=={version}", "numpy>=2"], text=True,
                           capture_output=True, timeout=1800)
        if r.returncode != 0:
            pytest.skip(f"cannot install torch=={version} into a fresh venv here: {r.stderr[-800:]}")
        stamp.write_text(version)
    r = subprocess.run([str(py), "-m", "pip", "install", "-q", f"{ROOT}[torch]"], text=True, capture_output=True,
                       timeout=1800)
    if r.returncode != 0 and "No matching distribution" in r.stderr:
        pytest.skip(f"cannot install opgen's dependencies here: {r.stderr[-800:]}")
    assert r.returncode == 0, r.stderr[-3000:]
    # the checkout as it is now (pip keeps an installed opgen of the same version)
    r = subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", "--force-reinstall", str(ROOT)],
                       text=True, capture_output=True, timeout=1800)
    assert r.returncode == 0, r.stderr[-3000:]
    return venv


def test_torch_quick_start_in_a_fresh_venv() -> None:
    """The PyTorch quick start, followed literally by a PyTorch user: a venv with torch (and numpy 2,
    which the torch extra leaves alone), ``pip install '.[torch]'``, then the commands and the script."""
    pytest.importorskip("torch")
    from opgen.build import build_root

    base = build_root() / "readme-torch"
    venv = _torch_venv(base)
    py = str(venv / "bin" / "python")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "OPGEN_PYNATIVE_PATH")}
    env.update(NO_COLOR="1", PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}")
    probe = ("import importlib.util as u, numpy, opgen; print(opgen.__file__); print(numpy.__version__); "
             "print(u.find_spec('mindspore') is None)")
    r = subprocess.run([py, "-c", probe], cwd=base, env=env, text=True, capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr
    where, numpy_version, no_mindspore = r.stdout.split()
    assert where.startswith(str(venv)) and numpy_version.startswith("2.") and no_mindspore == "True"

    work = base / "work"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    commands = _commands(_block("torch-shell"))
    assert [c[1] for c in commands] == ["new", "validate", "generate", "build", "test"]
    for argv in commands:
        r = subprocess.run([str(venv / "bin" / "opgen"), *argv[1:]], cwd=work, env=env, text=True,
                           capture_output=True, timeout=900)
        assert r.returncode == 0, f"{' '.join(argv)} -> {r.returncode}\n{r.stdout}\n{r.stderr[-4000:]}"
        assert "mindspore" not in (r.stdout + r.stderr).lower(), f"{' '.join(argv)} speaks of MindSpore:\n{r.stdout}"
        if argv[1] == "new":  # the next steps printed are PyTorch's
            assert "for PyTorch" in r.stdout and "--backend torch" in r.stdout
    script = _block("torch-python")
    (work / "quickstart.py").write_text(script)
    r = subprocess.run([py, "quickstart.py"], cwd=work, env=env, text=True, capture_output=True, timeout=900)
    assert r.returncode == 0, r.stderr[-4000:]
    expected = _expected_prints(script)
    assert len(expected) == 3
    assert [ln.strip() for ln in r.stdout.splitlines() if ln.strip()] == expected


def _code_lines() -> list[str]:
    """Every line of every fenced block in the README."""
    lines: list[str] = []
    for block in re.findall(r"```\w*\n(.*?)\n```", README, re.S):
        lines.extend(block.splitlines())
    return lines


def _is_synopsis(line: str) -> bool:
    """A synopsis line (``opgen build [DIR] [--only aot|ext]``), as opposed to a runnable command."""
    code = line.split("  #", 1)[0]
    return "[" in code or re.search(r"\b[A-Z]{3,}\b", code) is not None


def test_every_runnable_readme_command_parses() -> None:
    parser = make_parser()
    runnable = [ln for ln in _code_lines() if ln.startswith("opgen ") and not _is_synopsis(ln)]
    assert len(runnable) >= 5
    for line in runnable:
        argv = shlex.split(line.split("  #", 1)[0])[1:]
        try:
            parser.parse_args(argv)
        except SystemExit as exc:  # pragma: no cover - a failure message
            pytest.fail(f"README command does not parse: {line!r} ({exc})")


def test_synopsis_names_only_real_commands_and_options() -> None:
    sub = next(a for a in make_parser()._actions if a.dest == "command")
    parsers = sub.choices  # type: ignore[union-attr]
    synopsis = [ln for ln in _code_lines() if ln.startswith("opgen ") and _is_synopsis(ln)]
    assert {ln.split()[1] for ln in synopsis} == set(parsers)  # every command is in the synopsis
    for line in synopsis:
        p = parsers[line.split()[1]]  # type: ignore[index]
        known = {s for a in p._actions for s in a.option_strings}
        for opt in re.findall(r"(?<![\w-])(--?[a-z][\w-]*)", line.split("  #", 1)[0]):
            assert opt in known, f"{opt} in {line!r}"


@pytest.mark.parametrize("argv", [
    ["opgen", "validate", "ops/"],
    ["opgen", "generate", "ops/", "--check"],
    ["opgen", "docs", "--check"],
    ["opgen", "docs", "--spec-reference", "--check"],
    ["opgen", "--help"],
])
def test_cheap_readme_commands_exit_0(argv: list[str]) -> None:
    assert " ".join(argv) in README or argv[1] in ("docs", "--help")
    r = _opgen(argv, ROOT)
    assert r.returncode == 0, r.stderr


def test_links_and_fresh_machine_commands_exist() -> None:
    for target in re.findall(r"\]\(([^)#]+)\)", README):
        if not target.startswith("http"):
            assert (ROOT / target).exists(), target
    for doc in ("docs/build.md", "docs/performance.md", "docs/robustness.md", "docs/testing.md", "docs/kernel-api.md",
                "docs/spec-reference.md", "docs/torch.md", "docs/backends.md"):
        assert f"]({doc})" in README
    assert "bash scripts/demo.sh" in README and "bash scripts/test.sh" in README
    assert "bash scripts/test.sh" in (ROOT / ".ci" / "run").read_text()
    assert "scripts/setup.sh" in (ROOT / "scripts" / "demo.sh").read_text()
    assert "scripts/setup.sh" in (ROOT / "scripts" / "test.sh").read_text()
    assert (ROOT / ".pre-commit-hooks.yaml").is_file()


def test_excerpts_of_generated_code_are_current() -> None:
    section = README.split("## What comes out", 1)[1].split("\n## ", 1)[0]
    generated = "\n".join(p.read_text() for p in sorted((ROOT / "generated" / "opgen_ops").rglob("*"))
                          if p.is_file() and p.suffix in (".py", ".pyi", ".cc", ".h"))
    blocks = re.findall(r"```\w*\n(.*?)\n```", section, re.S)
    assert len(blocks) == 4
    for block in blocks:
        for line in block.splitlines():
            shown = line.strip()
            if shown and "..." not in shown:
                assert shown in generated, f"README excerpt is stale: {shown!r}"
