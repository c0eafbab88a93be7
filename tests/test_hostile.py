"""Hostile spec files end quickly in a diagnostic, execute nothing and write nothing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _bomb() -> bytes:
    lines = ['a0: &a0 ["x","x","x","x","x","x","x","x","x"]']
    for i in range(1, 8):
        refs = ",".join([f"*a{i - 1}"] * 9)
        lines.append(f"a{i}: &a{i} [{refs}]")
    return ("\n".join(lines) + "\n").encode()


CASES = {
    "alias_bomb": (_bomb(), "alias bomb"),
    "deep_flow": (b"name: " + b"[" * 10000 + b"]" * 10000 + b"\n", "nesting deeper than 64 levels"),
    "deep_block": ("".join("  " * i + f"k{i}:\n" for i in range(500)).encode(), "nesting deeper than 64 levels"),
    "python_tag": (b'name: !!python/object/apply:os.system ["echo PWNED > pwned.txt"]\n', "is not allowed"),
    "bad_utf8": (b'name: add\ndoc: "\xff\xfe"\n', ":2:7: error: spec is not valid UTF-8 (byte 0xff)"),
    "nul_byte": (b"name: add\x00\n", ":1:10: error: NUL byte in spec file"),
    "ten_mb": (b'doc: "' + b"a" * 10_000_000 + b'"\n', "the limit is 1000000"),
    "not_a_mapping": (b"- just\n- a list\n", "a spec must be a mapping"),
    "empty": (b"", "empty spec file"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_hostile_spec(case: str, tmp_path: Path) -> None:
    data, expected = CASES[case]
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / f"{case}.yaml").write_bytes(data)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    r = subprocess.run([sys.executable, "-m", "opgen", "generate", "specs", "-o", "out"], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1, r.stderr
    assert f"specs/{case}.yaml" in r.stderr and expected in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
    assert not (tmp_path / "out").exists()
    assert not (tmp_path / "pwned.txt").exists()
