"""Publishing generated files: only changed bytes are rewritten, ``--check`` and ``--dry-run``
write nothing and say what differs, a removed op's files are deleted."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import pytest
from small_specs import TWICE

from opgen.cli import main


def snapshot(root: Path) -> dict[str, tuple[bytes, int]]:
    """Every file under ``root``: bytes and mtime (ns)."""
    return {str(p.relative_to(root)): (p.read_bytes(), p.stat().st_mtime_ns) for p in root.rglob("*") if p.is_file()}


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, write_spec: Callable[[str, str], Path],
         capsys: pytest.CaptureFixture[str]) -> Path:
    monkeypatch.chdir(tmp_path)
    write_spec("twice.yaml", TWICE)
    write_spec("thrice.yaml", TWICE.replace("twice", "thrice").replace("2 *", "3 *"))
    assert main(["generate", "specs", "-o", "out", "-p", "pkg", "-q"]) == 0
    capsys.readouterr()
    return tmp_path / "out"


def test_editing_one_spec_rewrites_only_its_files(work: Path, write_spec: Callable[[str, str], Path],
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    before = snapshot(work)
    write_spec("thrice.yaml", TWICE.replace("twice", "thrice").replace("2 *", "4 *"))
    assert main(["generate", "specs", "-o", "out", "-p", "pkg"]) == 0
    out = capsys.readouterr().out
    after = snapshot(work)
    changed = sorted(rel for rel in after if after[rel] != before.get(rel))
    assert changed, "the edit changed nothing"
    assert all("twice" not in rel for rel in changed)  # twice's own files kept bytes and mtime
    assert "pkg/csrc/thrice_kernel.h" in changed
    for rel in changed:
        assert f"wrote out/{rel}" in out
    assert f"{len(changed)} wrote" in out
    assert not list(work.parent.glob("out/.opgen-staging-*"))  # staging is cleaned up


def test_check_exits_1_and_lists_what_differs_writing_nothing(work: Path, write_spec: Callable[[str, str], Path],
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["generate", "specs", "-o", "out", "-p", "pkg", "--check"]) == 0
    assert "is up to date (2 ops)" in capsys.readouterr().out
    before = snapshot(work)
    write_spec("thrice.yaml", TWICE.replace("twice", "thrice").replace("2 *", "4 *"))
    (work.parent / "specs" / "twice.yaml").unlink()
    assert main(["generate", "specs", "-o", "out", "-p", "pkg", "--check"]) == 1
    err = capsys.readouterr().err
    assert "opgen: out/pkg is out of date with its specs:" in err
    assert "  differs: out/pkg/csrc/thrice_kernel.h" in err
    assert "  stale:   out/pkg/csrc/twice_kernel.h" in err
    assert "run 'opgen generate specs -o out -p pkg' to update it." in err  # the command, as it works
    assert snapshot(work) == before


def test_dry_run_lists_changes_and_writes_nothing(work: Path, write_spec: Callable[[str, str], Path],
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    before = snapshot(work)
    (work.parent / "specs" / "twice.yaml").unlink()
    assert main(["generate", "specs", "-o", "out", "-p", "pkg", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "would remove out/pkg/csrc/twice_kernel.h" in out
    assert "would write out/pkg/custom.py" in out
    assert snapshot(work) == before
    # the real run then removes exactly the files of the removed op
    assert main(["generate", "specs", "-o", "out", "-p", "pkg", "-q"]) == 0
    assert not any("twice" in p.name for p in work.rglob("*"))
    assert (work / "pkg" / "csrc" / "thrice_kernel.h").is_file()
