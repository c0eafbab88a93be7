"""``opgen new``: the skeleton validates and generates as written, never overwrites, and a bad
NAME is a usage error.  (tests/test_readme.py builds and runs one, and runs ``opgen test`` on it.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from opgen import skeleton
from opgen.cli import main

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("form", [[], ["--elementwise"]])
def test_skeleton_validates_and_generates(tmp_path: Path, monkeypatch, capsys, form: list[str]) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.chdir(tmp_path)
    assert main(["new", "my_op", *form]) == 0
    text = (tmp_path / "ops" / "my_op.yaml").read_text()
    # a relative path that survives a commit, to a copy of the schema that 'opgen new' keeps current
    assert text.startswith("# yaml-language-server: $schema=../schemas/op.schema.json\n")
    assert (tmp_path / "schemas/op.schema.json").read_bytes() == (ROOT / "schemas/op.schema.json").read_bytes()
    assert ("elementwise:" in text) == bool(form) and ("kernel:" in text) != bool(form)
    assert "opgen test my_op" in capsys.readouterr().out
    assert main(["validate", "-q", "ops/"]) == 0
    assert main(["generate", "-q", "ops/", "-p", "my_ops"]) == 0
    assert (tmp_path / "generated" / "my_ops" / "csrc" / "my_op_aot.cc").is_file()


def test_schema_line_is_relative_inside_the_checkout() -> None:
    assert skeleton.schema_ref(ROOT / "ops") == "../schemas/op.schema.json"
    assert skeleton.refresh_schema_copy(ROOT / "ops") is None  # opgen's own schema: no copy


def test_schema_copy_sits_beside_pyproject_and_is_refreshed(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    monkeypatch.chdir(tmp_path)
    assert main(["new", "my_op", "-o", "src/specs", "-q"]) == 0
    text = (tmp_path / "src/specs/my_op.yaml").read_text()
    assert text.startswith("# yaml-language-server: $schema=../../schemas/op.schema.json\n")
    copy = tmp_path / "schemas/op.schema.json"
    copy.write_text("{}")  # an older opgen's copy
    assert main(["new", "other", "-o", "src/specs", "-q"]) == 0
    assert copy.read_bytes() == (ROOT / "schemas/op.schema.json").read_bytes()


def test_refuses_to_overwrite(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["new", "my_op", "-o", str(tmp_path), "-q"]) == 0
    before = (tmp_path / "my_op.yaml").read_text()
    assert main(["new", "my_op", "--elementwise", "-o", str(tmp_path)]) == 1
    assert "exists already; not overwritten" in capsys.readouterr().err
    assert (tmp_path / "my_op.yaml").read_text() == before


@pytest.mark.parametrize("name", ["MyOp", "1op", "my-op", "class", "new", ""])
def test_bad_name_is_a_usage_error(tmp_path: Path, name: str, capsys) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(SystemExit) as exc:
        main(["new", name, "-o", str(tmp_path)])
    assert exc.value.code == 2
    assert "argument NAME" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())


def test_next_steps_are_the_chosen_backends(tmp_path: Path, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.chdir(tmp_path)
    assert main(["new", "my_op", "--backend", "torch"]) == 0
    out = capsys.readouterr().out
    assert "for PyTorch (backend 'torch')" in out
    steps = [ln.split("#", 1)[0].split() for ln in out.splitlines() if ln.startswith("  opgen ")]
    assert [s[1] for s in steps] == ["validate", "generate", "build", "test"]
    assert all(s[-2:] == ["--backend", "torch"] for s in steps[1:])
    assert "generated/opgen_ops_torch" in out and "Function<T>" not in out
    # [tool.opgen] backends = ["torch"]: the default, so no flag
    (tmp_path / "pyproject.toml").write_text('[tool.opgen]\nbackends = ["torch"]\n')
    assert main(["new", "other"]) == 0
    out = capsys.readouterr().out
    assert "for PyTorch" in out and "--backend" not in out


def test_from_copies_a_shipped_example_renamed(tmp_path: Path, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.chdir(tmp_path)
    assert "rms_norm" in skeleton.examples() and len(skeleton.examples()) == len(list((ROOT / "ops").glob("*.yaml")))
    assert main(["new", "my_norm", "--from", "rms_norm"]) == 0
    text = (tmp_path / "ops" / "my_norm.yaml").read_text()
    assert text.startswith("# yaml-language-server: $schema=../schemas/op.schema.json\n")
    assert "\nname: my_norm\n" in text and "kernel:" in text
    assert "example op rms_norm" in capsys.readouterr().out
    assert main(["validate", "-q", "ops/"]) == 0
    assert main(["generate", "-q", "ops/", "-p", "my_ops", "--backend", "torch"]) == 0
    assert (tmp_path / "generated" / "my_ops_torch" / "csrc" / "my_norm_torch.cc").is_file()
    # a misspelt example: a usage error with the nearest name; nothing written
    assert main(["new", "other", "--from", "rms_nrom"]) == 2
    assert "did you mean 'rms_norm'?" in capsys.readouterr().err
    assert not (tmp_path / "ops" / "other.yaml").exists()
    assert main(["new", "--list-examples"]) == 0
    assert "rms_norm" in capsys.readouterr().out.split()


def test_missing_framework_names_both_ways_out() -> None:
    from opgen import extras

    text = extras.message("build", ["torch"], "torch")
    assert "pip install 'opgen[torch]' (torch" in text and "--backend mindspore" in text
    text = extras.message("test", ["mindspore"], "mindspore")
    assert "pip install 'opgen[run]' (mindspore==" in text and "--backend torch" in text
    # numpy<2 is MindSpore's alone (pyproject itself: the installed metadata may be an older checkout's)
    import tomllib

    extras_table = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert "numpy<2" in extras_table["run"] and not any(r.startswith("numpy<") for r in extras_table["torch"])
    assert not any(r.startswith("torch==") for r in extras_table["torch"])
