"""Names that become file names: the longest op and package names generate and build; one byte
more is a diagnostic at the spec's line (issue 25 item 7), as are ``name: yes`` and a file that
starts with two byte-order marks."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from opgen import backends, build
from opgen.build import group_units
from opgen.names import NAME_MAX, OP_NAME_MAX, PACKAGE_NAME_MAX, package_name_problem
from opgen.pipeline import generate, load_ops

ROOT = Path(__file__).resolve().parents[1]

TINY = """\
name: {name}
doc: Twice x.
inputs: [{{name: x, doc: x}}]
outputs: [{{name: out, doc: o, shape: x, dtype: x}}]
dtype_format: {{CPU: [[F32_Default, F32_Default]]}}
elementwise: {{forward: x * 2, grad: {{x: dout * 2}}}}
"""


def _cli(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "opgen", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120)


def test_longest_names_generate_and_build(tmp_path: Path) -> None:
    """An op name of OP_NAME_MAX bytes in a package of PACKAGE_NAME_MAX: every backend writes its
    files, and the aot library (kernel and aot units, their records) builds and publishes."""
    op = ("o" * OP_NAME_MAX)
    pkg = "p" * PACKAGE_NAME_MAX
    (tmp_path / "ops").mkdir()
    (tmp_path / "ops" / "long.yaml").write_text(TINY.format(name=op), encoding="utf-8")
    for name in backends.names():
        res = generate([tmp_path / "ops"], tmp_path / "gen", pkg, backend=name)
        assert not res.diagnostics, [d.format() for d in res.diagnostics]
        longest = max(len(p.name.encode()) for p in res.package_dir.rglob("*"))
        assert longest <= NAME_MAX
    mindspore_pkg = backends.get(backends.DEFAULT).package_dir(tmp_path / "gen", pkg)
    lib = backends.build_library(mindspore_pkg, "aot", quiet=True, build_dir=tmp_path / "b").path
    assert build.is_published(lib)
    assert max(len(p.name.encode()) for p in (tmp_path / "b").rglob("*")) <= NAME_MAX


def test_units_of_two_long_op_names_fit() -> None:
    """An extension unit of several ops is named after its first and last op; with two long names
    it is named after the first and its count, so that ``<unit>.o.d`` fits."""
    srcs = [Path(f"csrc/{c * OP_NAME_MAX}_function.cc") for c in "abcd"]
    units = group_units("ext", srcs, 2)
    assert [u.obj for u in units] == [f"ext/{'a' * OP_NAME_MAX}--2.o", f"ext/{'c' * OP_NAME_MAX}--2.o"]
    short = group_units("ext", [Path(f"csrc/{c}_function.cc") for c in "abcd"], 2)
    assert [u.obj for u in short] == ["ext/a--b.o", "ext/c--d.o"]


def test_too_long_names_are_diagnostics(tmp_path: Path) -> None:
    (tmp_path / "ops").mkdir()
    (tmp_path / "ops" / "over.yaml").write_text(TINY.format(name="o" * (OP_NAME_MAX + 1)), encoding="utf-8")
    (tmp_path / "ops" / "huge.yaml").write_text(TINY.format(name="h" * 10_000), encoding="utf-8")
    r = _cli(["generate", "ops", "-o", "gen"], tmp_path)
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    lines = r.stderr.splitlines()
    over = next(ln for ln in lines if ln.startswith("ops/over.yaml:1:1: error: "))
    assert f"is {OP_NAME_MAX + 1} bytes long; at most {OP_NAME_MAX}" in over
    assert "longest file named after it, '<op>_function.o.4194304.tmp', fits the file system's 255-byte" in over
    huge = next(ln for ln in lines if ln.startswith("ops/huge.yaml:1:1: error: "))
    assert "is 10000 bytes long" in huge and len(huge) < 400, huge
    assert not (tmp_path / "gen").exists()
    r = _cli(["generate", "ops", "-o", "gen", "-p", "p" * (PACKAGE_NAME_MAX + 1)], tmp_path)
    assert r.returncode == 2 and f"at most {PACKAGE_NAME_MAX}" in r.stderr, r.stderr
    assert package_name_problem("p" * PACKAGE_NAME_MAX) is None


def test_yaml11_boolean_name_is_located_with_a_note(tmp_path: Path) -> None:
    for word in ("yes", "No", "on", "OFF"):
        (tmp_path / f"{word}.yaml").write_text(TINY.format(name=word), encoding="utf-8")
    (tmp_path / "true.yaml").write_text(TINY.format(name="true"), encoding="utf-8")
    _, diags = load_ops([tmp_path])
    by_file = {Path(d.location.file).stem: d.format() for d in diags}
    assert set(by_file) == {"yes", "No", "on", "OFF", "true"}
    assert by_file["yes"].endswith(
        "yes.yaml:1:7: error: name must be a string, got boolean\n"
        f"{tmp_path}/yes.yaml:1:7: note: YAML 1.1 reads the unquoted word yes as the boolean true; quote it to "
        'mean the text: name: "yes"'), by_file["yes"]
    assert 'the boolean false; quote it to mean the text: name: "OFF"' in by_file["OFF"]
    assert "note:" not in by_file["true"]  # plainly a boolean: no guess about a word


@pytest.mark.parametrize("boms, ok", [(1, True), (2, False), (3, False)])
def test_byte_order_marks(tmp_path: Path, boms: int, ok: bool) -> None:
    (tmp_path / "b.yaml").write_bytes(b"\xef\xbb\xbf" * boms + TINY.format(name="b").encode())
    ops, diags = load_ops([tmp_path])
    if ok:
        assert [op.name for op in ops] == ["b"] and not diags
    else:
        assert [d.format() for d in diags] == [
            f"{tmp_path}/b.yaml:1:1: error: spec starts with more than one byte-order mark (U+FEFF, bytes EF BB "
            "BF); keep at most one"]


SAME_CLASS = """
name: {name}
doc: x + {c}.
inputs:
  - {{name: x, doc: any}}
outputs:
  - {{name: out, doc: x + {c}, shape: x, dtype: x}}
dtype_format:
  CPU:
    - [F32_Default, F32_Default]
elementwise:
  forward: x + {c}
  grad:
    x: dout * {c}
"""


def test_names_that_share_a_class_name_or_the_package_name_do_not_collide(tmp_path: Path) -> None:
    """Issue 33 item 8: ``a_1`` and ``a1`` (both class ``A1``) and an op named like its package are
    accepted, and nothing they generate collides: each op's C++ (its ``Function<T>`` class
    included) lives in ``namespace <package>::<op>``, no generated Python module defines a name
    twice, and no two files share a path. (Built and called once by hand on both frameworks, both
    MindSpore paths: forward and gradient of each op its own; this test pins what made that so.)"""
    import ast

    (tmp_path / "ops").mkdir()
    for name, c in (("a_1", 1), ("a1", 2), ("pk", 3)):
        (tmp_path / "ops" / f"{name}.yaml").write_text(SAME_CLASS.format(name=name, c=c), encoding="utf-8")
    for backend in backends.names():
        res = generate([tmp_path / "ops"], tmp_path / "gen", "pk", backend=backend)
        assert not res.diagnostics, [d.format() for d in res.diagnostics]
        files = [p for p in res.package_dir.rglob("*") if p.is_file()]
        for py in (p for p in files if p.suffix in (".py", ".pyi")):
            tree = ast.parse(py.read_text(encoding="utf-8"))
            names = [n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))]
            for n in (n for n in tree.body if isinstance(n, ast.Assign)):
                reads = {r.id for r in ast.walk(n.value) if isinstance(r, ast.Name)}
                # ``a1 = _ms.pynative_entry(a1, ...)`` wraps the function of that name: no collision
                names += [t.id for t in n.targets if isinstance(t, ast.Name) and t.id not in reads]
            overloads = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)
                         and any(getattr(d, "id", getattr(d, "attr", "")) == "overload" for d in n.decorator_list)}
            dup = sorted({n for n in names if names.count(n) > 1} - overloads)
            assert not dup, f"{py.name} ({backend}) defines {dup} more than once"
        for cc in (p for p in files if p.suffix in (".cc", ".h", ".cu", ".cuh")):
            text = cc.read_text(encoding="utf-8")
            if "class A1 " in text:
                op = "a_1" if cc.name.startswith("a_1_") else "a1"
                assert f"namespace {op} {{" in text.split("class A1 ")[0], cc.name
