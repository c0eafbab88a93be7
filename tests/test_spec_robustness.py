"""Spec-side findings of issue 16: each one a diagnostic (never an internal error, exit 3), or
generated code that compiles and means what the spec said.  Front end only (no MindSpore, no
compiler) except the build-cache case, which compiles one tiny aot library."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from opgen import backends, build
from opgen.pipeline import generate, load_ops

ROOT = Path(__file__).resolve().parents[1]
MUL = (ROOT / "ops" / "mul.yaml").read_text(encoding="utf-8")


def _spec(**changes: Any) -> str:
    spec: dict[str, Any] = {
        "name": "op", "doc": "d",
        "inputs": [{"name": "x", "doc": "x"}],
        "outputs": [{"name": "out", "doc": "o", "shape": "x", "dtype": "x"}],
        "attrs": [{"name": "alpha", "type": "float", "doc": "a", "default": 1.0}],
        "dtype_format": {"CPU": [["F32_Default", "F32_Default"]]},
        "elementwise": {"forward": "x * alpha", "grad": {"x": "dout * alpha"}},
    }
    spec.update(changes)
    return yaml.safe_dump(spec, sort_keys=False)


def _cli(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "opgen", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, errors="replace", timeout=120)


# Item 7: names ending in a newline. Item 9: internal errors. Item 13: bad values. One CLI run over
# every case: each file is named with its diagnostic, no traceback, exit 1.
NL = "\n"
CASES: dict[str, tuple[str, str]] = {
    "name_newline": (_spec(name="op" + NL), "name is 'op\\n'; expected snake_case"),
    "attr_newline": (_spec(attrs=[{"name": "alpha" + NL, "type": "float", "doc": "a", "default": 1.0}]),
                     "attrs[0].name is 'alpha\\n'; expected an identifier"),
    "input_newline": (_spec(inputs=[{"name": "x" + NL, "doc": "x"}]), "inputs[0].name is 'x\\n'"),
    "typevar_newline": (_spec(type_vars={"T" + NL: ["float32"]}), "'T\\n'"),
    "digits_400": (_spec(elementwise={"forward": "x * " + "9" * 400, "grad": {"x": "dout"}}),
                   "number '999999999999 ... 999999999999' is too large (beyond float64)"),
    "float_literal_inf": (_spec(elementwise={"forward": "x * 1e999", "grad": {"x": "dout"}}),
                          "number '1e999' is too large"),
    "nested_3000_parens": (_spec(elementwise={"forward": "(" * 3000 + "x" + ")" * 3000, "grad": {"x": "dout"}}),
                           "too many nested parentheses"),
    "nested_3000_ops": (_spec(elementwise={"forward": "x" + " + x" * 3000, "grad": {"x": "dout"}}),
                        "is nested more than 100 levels deep"),
    "nested_3000_unary": (_spec(elementwise={"forward": "-" * 3000 + "x", "grad": {"x": "dout"}}),
                          "is nested more than 100 levels deep"),
    "nested_3000_grad": (_spec(elementwise={"forward": "x", "grad": {"x": "-" * 200 + "dout"}}),
                         "is nested more than 100 levels deep"),
    "reference_yield": (_spec(reference="yield x"), "reference body uses 'yield', which makes it a generator"),
    "reference_yield_from": (_spec(reference="y = x\nyield from y\n"), "uses 'yield from'"),
    "reference_no_return": (_spec(reference="y = x * 2\n"), "reference body never returns a value"),
    "float_default_1e400": (_spec().replace("default: 1.0", "default: 1.0e+400"),
                            "number 1.0e+400 is beyond float64"),
    "float_range_1e400": (_spec(attrs=[{"name": "alpha", "type": "float", "doc": "a", "default": 1.0,
                                        "range": [-7.5, 2.0]}]).replace("-7.5", "-1.0e+400"),
                          "number -1.0e+400 is beyond float64"),
    "float_default_1e39": (_spec().replace("default: 1.0", "default: 1.0e+39"), "does not fit a float attr"),
}


def test_spec_cases_are_diagnostics_through_the_cli(tmp_path: Path) -> None:
    (tmp_path / "specs").mkdir()
    for case, (text, _) in CASES.items():
        (tmp_path / "specs" / f"{case}.yaml").write_text(text, encoding="utf-8")
    r = _cli(["generate", "specs", "-o", "out"], tmp_path)
    assert r.returncode == 1, r.stderr
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr, r.stderr
    lines = r.stderr.splitlines()
    for case, (_, expected) in CASES.items():
        mine = [ln for ln in lines if ln.startswith(f"specs/{case}.yaml:")]
        assert any(expected in ln for ln in mine), (case, mine)
    assert not (tmp_path / "out").exists()


def test_valid_edges_are_accepted(tmp_path: Path) -> None:
    """What the fixes must not reject: ``.inf``, a range bound beyond float64 (an unbounded side),
    a reference that only raises, and a nested def holding ``yield``."""
    specs = {
        "inf_default": _spec().replace("default: 1.0", "default: .inf"),
        "big_bound": _spec(attrs=[{"name": "n", "type": "int", "doc": "n", "default": 1,
                                   "range": [0, 10 ** 400]}], elementwise={"forward": "x", "grad": {"x": "dout"}}),
        "raises": _spec(reference="raise NotImplementedError('no oracle')"),
        "nested_yield": _spec(reference="def gen(a):\n    yield a\nreturn x * alpha\n"),
        "deep_enough": _spec(elementwise={"forward": "(" * 40 + "x * alpha" + ")" * 40, "grad": {"x": "dout * alpha"}}),
    }
    for name, text in specs.items():
        (tmp_path / f"{name}.yaml").write_text(text.replace("name: op", f"name: {name}"), encoding="utf-8")
    ops, diags = load_ops([tmp_path])
    assert not diags, [d.format() for d in diags]
    big = next(op for op in ops if op.name == "big_bound")
    assert big.attrs[0].range == (0.0, float("inf"))


# Item 8: spec file names in generated code.


@pytest.mark.parametrize("fname", ['we"ird.yaml', 'a"""b\\c.yaml', "it's #1 *.yaml", "sp ace{{x}}.yaml"])
def test_odd_spec_file_names_generate_valid_code(fname: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ops").mkdir()
    (tmp_path / "ops" / fname).write_text(MUL, encoding="utf-8")
    res = generate(["ops"], tmp_path / "out", "pkg")
    assert not res.diagnostics, [d.format() for d in res.diagnostics]
    pkg = tmp_path / "out" / "pkg"
    for py in pkg.glob("*.py*"):
        compile(py.read_text(encoding="utf-8"), str(py), "exec")
    meta = ast.parse((pkg / "meta.py").read_text(encoding="utf-8"))
    sources = [ast.literal_eval(v) for n in ast.walk(meta) if isinstance(n, ast.Dict)
               for k, v in zip(n.keys, n.values) if isinstance(k, ast.Constant) and k.value == "source"]
    assert sources == [f"ops/{fname}"]
    init_doc = ast.get_docstring(ast.parse((pkg / "__init__.py").read_text(encoding="utf-8")))
    assert init_doc is not None and f"ops/{fname}" in init_doc
    for cc in (pkg / "csrc").iterdir():  # no comment continued onto the next line
        assert not [ln for ln in cc.read_text(encoding="utf-8").splitlines() if "//" in ln and ln.endswith("\\")]


def test_unusable_spec_file_names_are_diagnostics(tmp_path: Path) -> None:
    """A newline or a byte that is not UTF-8 in a spec's path: a diagnostic printed on one line
    (escaped), exit 1, nothing written -- not an internal error in the writer."""
    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "new\nline.yaml").write_text(MUL.replace("name: mul", "name: newline"), encoding="utf-8")
    (specs / os.fsdecode(b"bad\xffname.yaml")).write_text(MUL.replace("name: mul", "name: badname"),
                                                          encoding="utf-8")
    r = _cli(["generate", "specs", "-o", "out"], tmp_path)
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert "specs/new\\nline.yaml: error: the spec's path holds a control character" in r.stderr
    assert "specs/bad\\xffname.yaml: error: the spec's path holds bytes that are not UTF-8" in r.stderr
    assert not (tmp_path / "out").exists()


# Item 10: locations. Item 12: what the path is.


def test_file_level_problems_name_the_file(tmp_path: Path) -> None:
    cases = {"scalar.yaml": "hello\n", "number.yaml": "42\n", "empty.yaml": "", "dashes.yaml": "---\n",
             "null.yaml": "~\n", "block.yaml": "--- |\n  text\n", "big.yaml": 'doc: "' + "a" * 1_000_001 + '"\n'}
    for name, text in cases.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    os.mkfifo(tmp_path / "fifo.yaml")
    os.symlink("loop_b.yaml", tmp_path / "loop_a.yaml")
    os.symlink("loop_a.yaml", tmp_path / "loop_b.yaml")
    os.symlink("nowhere.yaml", tmp_path / "broken.yaml")
    paths = [str(tmp_path / n) for n in cases] + [str(tmp_path / n) for n in
                                                  ("fifo.yaml", "loop_a.yaml", "broken.yaml", "missing.yaml")]
    _, diags = load_ops([*paths, "/dev/null"])
    text = {d.location.file.rsplit("/", 1)[-1]: str(d.location) + ": " + d.message for d in diags}
    assert "<spec>" not in "\n".join(text.values())
    for name in cases:
        assert f"{name}:1:1: " in text[name], text[name]
    assert "empty spec file" in text["dashes.yaml"] and "empty spec file" in text["null.yaml"]
    assert "got string" in text["scalar.yaml"] and "got integer" in text["number.yaml"]
    assert "the limit is 1000000" in text["big.yaml"]
    assert "a named pipe (FIFO), not a spec file" in text["fifo.yaml"]
    assert "symbolic link loop" in text["loop_a.yaml"]
    assert "broken symbolic link (to 'nowhere.yaml')" in text["broken.yaml"]
    assert text["missing.yaml"].endswith("no such file or directory")
    assert "a character device, not a spec file" in text["null"]


# Item 9 (build side) and item 11: the build cache.

TINY = """\
name: tiny
doc: Twice x.
inputs: [{name: x, doc: x}]
outputs: [{name: out, doc: o, shape: x, dtype: x}]
dtype_format: {CPU: [[F32_Default, F32_Default]]}
elementwise: {forward: x * 2, grad: {x: dout * 2}}
"""


def test_unwritable_build_folder_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "ops").mkdir()
    (tmp_path / "ops" / "tiny.yaml").write_text(TINY, encoding="utf-8")
    assert _cli(["generate", "ops", "-o", "gen", "-q"], tmp_path).returncode == 0
    (tmp_path / "a_file").write_text("")
    r = _cli(["build", "gen/opgen_ops", "--only", "aot", "--build-dir", "a_file/sub"], tmp_path)
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert "cannot use the build folder" in r.stderr and "Not a directory" in r.stderr, r.stderr


def test_damaged_published_library_is_rebuilt(tmp_path: Path) -> None:
    """A published library that lost bytes after it was published (truncated by a copy, a full
    disk, a user) is not taken as current: its recorded size and hash no longer match."""
    (tmp_path / "ops").mkdir()
    (tmp_path / "ops" / "tiny.yaml").write_text(TINY, encoding="utf-8")
    res = generate([tmp_path / "ops"], tmp_path / "gen", "tinypkg")
    assert not res.diagnostics
    bdir = tmp_path / "builds"
    first = backends.build_library(res.package_dir, "aot", quiet=True, build_dir=bdir)
    data = first.path.read_bytes()
    assert build.is_published(first.path, verify=True)
    first.path.write_bytes(data[: len(data) // 2])  # truncated in place
    assert not build.is_published(first.path, verify=False)
    again = backends.build_library(res.package_dir, "aot", quiet=True, build_dir=bdir)
    assert again.path == first.path and not again.cached and again.path.read_bytes() == data
    flipped = bytearray(data)
    flipped[len(data) // 2] ^= 0xFF  # same size, other bytes: caught by the hash
    first.path.write_bytes(bytes(flipped))
    assert not build.is_published(first.path, verify=True)
    (first.path.with_name(first.path.name + ".sha256")).unlink()  # a library without its record
    assert not backends.build_library(res.package_dir, "aot", quiet=True, build_dir=bdir).cached
    assert first.path.read_bytes() == data
