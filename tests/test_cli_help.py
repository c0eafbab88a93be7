"""The command line as a newcomer meets it: every help has examples and exit codes, -q/-v on
every subcommand, colour only on a terminal and never with NO_COLOR."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from opgen import cli
from opgen.cli import main, make_parser

ROOT = Path(__file__).resolve().parents[1]
COMMANDS = ["validate", "generate", "build", "wheel", "test", "new", "docs", "clean"]


def _help(argv: list[str], capsys) -> str:  # type: ignore[no-untyped-def]
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 0
    return str(capsys.readouterr().out)


def test_top_level_help_has_examples_and_exit_codes(capsys) -> None:  # type: ignore[no-untyped-def]
    out = _help(["--help"], capsys)
    assert "examples:\n  opgen new my_op" in out
    assert "exit codes: 0 ok, 1 spec or build errors, 2 usage errors" in out
    for command in COMMANDS:
        assert f"    {command} " in out


@pytest.mark.parametrize("command", COMMANDS)
def test_subcommand_help_has_examples_exit_codes_and_verbosity(command: str, capsys) -> None:  # type: ignore[no-untyped-def]
    out = _help([command, "--help"], capsys)
    assert f"examples:\n  opgen {command}" in out
    assert "exit codes: 0 " in out and "2 usage errors" in out
    assert "-q, --quiet" in out and "-v, --verbose" in out


def test_quiet_and_verbose_together_cancel_out(capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["validate", "-q", "-v", str(ROOT / "ops" / "mul.yaml")]) == 0
    assert capsys.readouterr().out == "opgen: 1 op(s) valid: mul\n"  # neither quiet nor verbose
    assert main(["validate", "-q", "-v", "-q", str(ROOT / "ops" / "mul.yaml")]) == 0
    assert capsys.readouterr().out == ""
    assert main(["validate", "-vv", "-q", str(ROOT / "ops" / "mul.yaml")]) == 0
    assert "op 'mul' ok" in capsys.readouterr().out


def test_a_mistyped_command_gets_a_suggestion(capsys) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(SystemExit) as exc:
        main(["generat", "ops/"])
    assert exc.value.code == 2
    assert "opgen: error: unknown command 'generat'; did you mean 'generate'?" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["-q"])  # no command at all: argparse's own message
    assert "the following arguments are required: COMMAND" in capsys.readouterr().err


def test_force_color_and_the_color_option(monkeypatch, tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.setenv("FORCE_COLOR", "1")
    assert cli.use_color(io.StringIO())  # FORCE_COLOR wins over NO_COLOR and a pipe
    monkeypatch.setenv("FORCE_COLOR", "0")
    assert not cli.use_color(_Tty())
    monkeypatch.delenv("NO_COLOR")
    monkeypatch.delenv("FORCE_COLOR")
    assert cli.use_color(_Tty()) and not cli.use_color(_Tty(), "never") and cli.use_color(io.StringIO(), "always")
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: Bad\n")
    assert main(["validate", str(bad), "--color=always"]) == 1
    assert "\033[1;31merror\033[0m" in capsys.readouterr().err
    monkeypatch.setenv("FORCE_COLOR", "1")
    assert main(["validate", str(bad), "--color", "never"]) == 1
    assert "\033[" not in capsys.readouterr().err
    assert main(["validate", str(bad)]) == 1
    assert "\033[1;31merror" in capsys.readouterr().err
    assert main(["--color", "never", "validate", str(bad)]) == 1  # before the command too
    assert "\033[" not in capsys.readouterr().err


def test_verbose_lists_every_spec(capsys, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.chdir(ROOT)
    assert main(["validate", "-v", "ops/mul.yaml", "ops/exp.yaml"]) == 0
    out = capsys.readouterr().out
    assert "  ops/exp.yaml: op 'exp' ok\n  ops/mul.yaml: op 'mul' ok\n" in out
    assert main(["validate", "-q", "ops/mul.yaml"]) == 0
    assert capsys.readouterr().out == ""


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_colour_only_on_a_terminal_without_no_color(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    assert cli.use_color(_Tty())
    assert not cli.use_color(io.StringIO())
    monkeypatch.setenv("NO_COLOR", "1")
    assert not cli.use_color(_Tty())
    assert cli.paint("a.yaml:1:2: error: op 'x': bad") == "a.yaml:1:2: \033[1;31merror\033[0m: op 'x': bad"


def test_every_subcommand_is_documented_in_the_parser() -> None:
    sub = next(a for a in make_parser()._actions if a.dest == "command")
    assert sorted(sub.choices) == sorted(COMMANDS)  # type: ignore[arg-type]
