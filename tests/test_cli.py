"""The command line on real specs: validation diagnostics, generation, --check, determinism."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Callable

from opgen.cli import main

ROOT = Path(__file__).resolve().parents[1]

GOOD = """
name: twice
doc: Doubles x.
inputs:
  - {name: x, doc: any tensor}
outputs:
  - {name: out, doc: 2 * x, shape: x, dtype: x}
dtype_format:
  CPU:
    - [F32_Default, F32_Default]
elementwise:
  forward: 2 * x
  grad:
    x: 2 * dout
"""


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "opgen", *args], cwd=cwd, env=env, text=True,
                          capture_output=True, timeout=120)


def test_validate_repo_ops(capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["validate", str(ROOT / "ops")]) == 0
    names = sorted(p.stem for p in (ROOT / "ops").glob("*.yaml"))  # each spec is named after its op
    assert f"{len(names)} op(s) valid: {', '.join(names)}\n" in capsys.readouterr().out


def test_generated_matches_ops() -> None:
    r = run_cli("generate", "ops/", "--check", cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert "up to date" in r.stdout


def test_unknown_key_points_at_it_and_writes_nothing(tmp_path: Path, write_spec: Callable[[str, str], Path]) -> None:
    typo = GOOD.replace("  - {name: x, doc: any tensor}", "  - {name: x, doc: any tensor, kidn: optional}")
    write_spec("bad.yaml", typo)
    r = run_cli("generate", "specs", "-o", "out", cwd=tmp_path)
    assert r.returncode == 1
    assert "specs/bad.yaml:4:32: error: op 'twice': unknown key 'kidn' in inputs[0]" in r.stderr
    assert "note: did you mean 'kind'?" in r.stderr
    assert "Traceback" not in r.stderr
    assert not (tmp_path / "out").exists()


def test_yaml_syntax_error_and_duplicate_key(tmp_path: Path, write_spec: Callable[[str, str], Path]) -> None:
    write_spec("a.yaml", GOOD.replace("doc: Doubles x.", "doc: [unclosed"))
    write_spec("b.yaml", GOOD.replace("doc: Doubles x.", "doc: Doubles x.\ndoc: again"))
    r = run_cli("validate", "specs", cwd=tmp_path)
    assert r.returncode == 1
    assert "specs/a.yaml:" in r.stderr and "error: invalid YAML" in r.stderr
    assert "specs/b.yaml:3:1: error: duplicate key 'doc'" in r.stderr
    assert "specs/b.yaml:2:1: note: first defined here" in r.stderr
    assert "2 errors generated." in r.stderr


def test_semantic_errors_all_reported(tmp_path: Path, write_spec: Callable[[str, str], Path]) -> None:
    bad = GOOD.replace("    - [F32_Default, F32_Default]", "    - [F32_Default]\n    - [F33_Default, F32_Default]")
    bad = bad.replace("    x: 2 * dout", "    y: 2 * dout")
    write_spec("twice.yaml", bad)
    r = run_cli("validate", "specs", cwd=tmp_path)
    assert r.returncode == 1
    err = r.stderr
    assert "specs/twice.yaml:9:7: error: op 'twice': dtype_format row has 1 column(s); expected 2" in err
    assert "specs/twice.yaml:10:7: error: op 'twice': unknown DataType 'F33_Default' in column 'x'" in err
    assert "note: did you mean 'F32_Default'?" in err
    assert "elementwise.grad names unknown input 'y'" in err
    assert "differentiable input 'x' has no gradient" in err


def test_generate_is_deterministic_and_incremental(tmp_path: Path) -> None:
    outs = []
    for seed in ("0", "1"):
        work = tmp_path / f"work{seed}"
        (work / "ops").mkdir(parents=True)
        for spec in sorted((ROOT / "ops").glob("*.yaml"), reverse=seed == "1"):  # other creation order
            (work / "ops" / spec.name).write_bytes(spec.read_bytes())
        env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONHASHSEED=seed)
        r = subprocess.run([sys.executable, "-m", "opgen", "generate", "ops/"], cwd=work,
                           env=env, text=True, capture_output=True, timeout=120)
        assert r.returncode == 0, r.stderr
        outs.append(work / "generated")
    # the generate lock (flock'ed, kept between runs, gitignored) is not generated output
    files0 = sorted(p.relative_to(outs[0]) for p in outs[0].rglob("*") if p.is_file() and p.suffix != ".lock")
    files1 = sorted(p.relative_to(outs[1]) for p in outs[1].rglob("*") if p.is_file() and p.suffix != ".lock")
    assert files0 == files1 and len(files0) >= 15
    for rel in files0:
        assert (outs[0] / rel).read_bytes() == (outs[1] / rel).read_bytes(), rel
        assert (outs[0] / rel).read_bytes() == (ROOT / "generated" / rel).read_bytes(), rel
    # a second run over unchanged specs rewrites nothing (timestamps stay)
    mtimes = {rel: (outs[0] / rel).stat().st_mtime_ns for rel in files0}
    r = run_cli("generate", "ops/", cwd=tmp_path / "work0")
    assert "0 wrote" in r.stdout, r.stdout
    assert mtimes == {rel: (outs[0] / rel).stat().st_mtime_ns for rel in files0}


def test_generated_header_names_the_yaml() -> None:
    text = (ROOT / "generated/opgen_ops/csrc/mul_kernel.h").read_text()
    assert text.startswith("// @generated by opgen from ops/mul.yaml -- do not edit")
    assert '#line' not in text or 'ops/mul.yaml' in text
    assert (ROOT / "generated/opgen_ops/custom.py").read_text().startswith(
        "# @generated by opgen from " + ", ".join(f"ops/{p.name}" for p in sorted((ROOT / "ops").glob("*.yaml")))
        + " -- do not edit")
