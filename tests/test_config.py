"""A project is configured once: ``[tool.opgen]`` in pyproject.toml is read by every command and
by the pre-commit hooks, and every hint opgen prints is a command that works as printed."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import yaml

from opgen.cli import main

ROOT = Path(__file__).resolve().parents[1]

PYPROJECT = """\
[project]
name = "my-project"

[tool.opgen]
specs = "specs"
output = "gen"
package = "my_ops"
jobs = 1
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A configured project with one spec (``opgen new`` writes it into the configured specs dir)."""
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("NO_COLOR", "1")
    assert main(["new", "my_op", "--elementwise", "-q"]) == 0
    assert (tmp_path / "specs" / "my_op.yaml").is_file()
    return tmp_path


def _hint(text: str) -> list[str]:
    """The command of the ``run '...'`` hint in ``text``."""
    m = re.search(r"run '([^']+)'", text)
    assert m, text
    return shlex.split(m.group(1))


def test_every_command_needs_no_arguments(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate"]) == 0
    assert "1 op(s) valid: my_op" in capsys.readouterr().out
    assert main(["generate", "--check"]) == 1
    err = capsys.readouterr().err
    assert "gen/my_ops does not exist; run 'opgen generate' to write it." in err
    assert "differs" not in err  # no line per file of a package that does not exist
    assert _hint(err) == ["opgen", "generate"]
    assert main(["generate", "-q"]) == 0
    assert (project / "gen" / "my_ops" / "custom.py").is_file()
    assert main(["generate", "--check"]) == 0
    assert main(["docs", "-q"]) == 0 and (project / "docs/ops/my_ops.md").is_file()
    assert main(["docs", "--check", "-q"]) == 0


def test_build_and_test_read_the_table(project: Path, capsys: pytest.CaptureFixture[str],
                                       monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("OPGEN_BUILD_DIR", str(tmp_path / "builds"))
    assert main(["build"]) == 1  # before generate: the hint says how to write the package
    err = capsys.readouterr().err
    assert "gen/my_ops is not a generated package" in err and _hint(err) == ["opgen", "generate"]
    assert main(_hint(err)[1:] + ["-q"]) == 0
    assert main(["build", "--only", "aot"]) == 0
    captured = capsys.readouterr()
    assert "1 kernel, 1 job)" in captured.err  # jobs = 1 from the table
    assert f"{tmp_path / 'builds'}" in captured.out
    assert main(["test", "--only", "reference"]) == 0
    out = capsys.readouterr()
    assert "testing gen/my_ops (up to date with the specs)" in out.err
    assert "1 passed" in out.out


def test_pre_commit_hooks_use_the_table(project: Path) -> None:
    hooks = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    assert [h["id"] for h in hooks] == ["opgen-validate", "opgen-check-generated"]
    assert main(["generate", "-q"]) == 0
    for hook in hooks:
        argv = shlex.split(hook["entry"]) + hook.get("args", [])
        assert argv[0] == "opgen"
        assert main(argv[1:]) == 0, hook["id"]
    (project / "specs" / "my_op.yaml").write_text(
        (project / "specs" / "my_op.yaml").read_text().replace("x + alpha * y", "x - alpha * y"))
    check = next(h for h in hooks if h["id"] == "opgen-check-generated")
    assert main(shlex.split(check["entry"])[1:] + check.get("args", [])) == 1


def test_hints_of_an_unconfigured_project_work_as_printed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")  # no [tool.opgen]: defaults
    assert main(["new", "my_op", "--elementwise", "-o", "specs"]) == 0
    out = capsys.readouterr().out
    steps = [shlex.split(line.split("#")[0]) for line in out.splitlines() if line.startswith("  opgen ")]
    assert steps[1] == ["opgen", "generate", "specs/"] and steps[2] == ["opgen", "build"]
    assert steps[3] == ["opgen", "test", "my_op", "specs/"]
    assert main(["validate", "specs", "-q"]) == 0
    assert main(["generate", "specs", "-p", "my_ops", "--check"]) == 1
    hint = _hint(capsys.readouterr().err)
    assert hint == ["opgen", "generate", "specs", "-p", "my_ops"]
    assert main(hint[1:] + ["-q"]) == 0
    assert main(["generate", "specs", "-p", "my_ops", "--check", "-q"]) == 0
    (tmp_path / "specs" / "my_op.yaml").write_text(
        (tmp_path / "specs" / "my_op.yaml").read_text().replace("x + alpha * y", "x - alpha * y"))
    assert main(["generate", "specs", "-p", "my_ops", "--check"]) == 1
    assert main(_hint(capsys.readouterr().err)[1:] + ["-q"]) == 0
    assert main(["docs", "specs", "-p", "my_ops", "-q"]) == 0
    (tmp_path / "docs/ops/my_ops.md").write_text("stale\n")
    assert main(["docs", "specs", "-p", "my_ops", "--check"]) == 1
    hint = _hint(capsys.readouterr().err)
    assert hint == ["opgen", "docs", "specs", "-p", "my_ops"]
    assert main(hint[1:] + ["-q"]) == 0
    assert main(["build", "generated/other_ops", "--only", "aot"]) == 1  # no ops/: a template, said to be one
    assert ("generate it first: opgen generate SPECS -p other_ops (SPECS: your spec files or directories; or set "
            "[tool.opgen] specs)") in capsys.readouterr().err


@pytest.mark.parametrize(("table", "expected"), [
    ("spec = 'specs'", "pyproject.toml:2:1: error: unknown key 'spec' in [tool.opgen]; expected one of: specs, "
     "output, package, backends, build-dir, checked, jobs,"),
    ("backends = ['mindspore', 'tensorflow']", "pyproject.toml:2:1: error: [tool.opgen] backends: unknown backend "
     "'tensorflow'; expected one of: mindspore"),
    ("package = 'My-Ops'", "pyproject.toml:2:1: error: [tool.opgen] package: 'My-Ops' is not a package name"),
    ("jobs = 0", "pyproject.toml:2:1: error: [tool.opgen] jobs: expected a positive integer, got '0'"),
    ("specs = 3", "pyproject.toml:2:1: error: [tool.opgen] specs must be a path or a list of paths"),
    ("specs = [", "pyproject.toml: error: invalid TOML"),
])
def test_a_bad_table_is_an_error_at_its_line(table: str, expected: str, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("NO_COLOR", "1")
    (tmp_path / "pyproject.toml").write_text(f"[tool.opgen]\n{table}\n")
    assert main(["generate"]) == 1
    assert expected in capsys.readouterr().err


def test_the_readme_table_is_valid(tmp_path: Path) -> None:
    from opgen import config

    block = re.search(r"```toml\n(\[tool\.opgen\].*?)\n```", (ROOT / "README.md").read_text(), re.S)
    assert block
    (tmp_path / "pyproject.toml").write_text(block.group(1))
    cfg = config.load(frozenset({"build-dir", "jobs", "ops-per-unit", "pch"}), start=tmp_path)
    assert cfg.package == "my_ops" and cfg.build == {"jobs": 2} and cfg.file == tmp_path / "pyproject.toml"
