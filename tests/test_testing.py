"""``opgen test`` itself: shape sampling per rule kind, value domains, the spec's ``test``
section, and the checks on a small real package built here (Custom path only: the Function
path of every real op runs in tests/test_ops.py) with ops that are right and ops that are
deliberately wrong, so every check is seen to fail when it should."""

from __future__ import annotations

import contextlib
import os
import shlex
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from small_specs import BADGRAD, SCALE

from opgen import testing
from opgen.model import Op
from opgen.pipeline import generate, load_ops

ROOT = Path(__file__).resolve().parents[1]

SPECS = {
    # right: forward, gradient and reference agree
    "scale.yaml": SCALE,
    # wrong gradient for y (should be dout * x): grads and the reference gradient must fail
    "badgrad.yaml": BADGRAD,
    # kernel disagrees with its reference (x * x vs x * x * x); its gradient is right
    "badfwd.yaml": """
name: badfwd
doc: claims x ** 3, computes x * x.
inputs:
  - {name: x, doc: any}
outputs:
  - {name: out, doc: x * x, shape: x, dtype: x}
dtype_format:
  CPU:
    - [F32_Default, F32_Default]
    - [F64_Default, F64_Default]
kernel:
  forward: |
    for (int64_t i = 0; i < out.numel; ++i) out[i] = x[i] * x[i];
  backward: |
    for (int64_t i = 0; i < dx.numel; ++i) dx[i] = x_t(2) * x[i] * dout[i];
reference: |
  return np.asarray(x * x * x)
test:
  domain:
    x: [1.5, 2]
""",
}


@contextlib.contextmanager
def _env(**values: str) -> Iterator[None]:
    old = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("optest")
    (d / "specs").mkdir()
    for name, text in SPECS.items():
        (d / "specs" / name).write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return d


@pytest.fixture(scope="module")
def ops(workdir: Path) -> dict[str, Op]:
    found, diags = load_ops([workdir / "specs"])
    assert not diags, [d.format() for d in diags]
    return {o.name: o for o in found}


@pytest.fixture(scope="module")
def package(workdir: Path, ms) -> testing.Package:  # type: ignore[no-untyped-def]
    """The three ops generated (from the work dir, as the CLI would) and built (aot)."""
    name = f"optest_{uuid.uuid4().hex[:8]}"
    with contextlib.chdir(workdir):
        res = generate(["specs"], Path("out"), name)
    assert not res.diagnostics
    with _env(OPGEN_BUILD_DIR=str(workdir / "build"), OPGEN_QUIET="1"):
        return testing.load_package(workdir / "out" / name)


CUSTOM_CHECKS = [c for c in testing.CHECKS if c.startswith(("forward/custom", "grad/custom"))]


# ----------------------------------------------------------------------------- shapes


def _diags(tmp_path: Path, text: str) -> list[Any]:
    (tmp_path / "op.yaml").write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    found, diags = load_ops([tmp_path / "op.yaml"])
    assert not found
    return diags


def _op(tmp_path: Path, text: str) -> Op:
    (tmp_path / "op.yaml").write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    found, diags = load_ops([tmp_path / "op.yaml"])
    assert not diags, [d.format() for d in diags]
    return found[0]


def test_broadcast_cases_cover_every_style_and_follow_the_rule(ops: dict[str, Op]) -> None:
    cases = testing.shape_cases(ops["badgrad"], {}, np.random.default_rng(3))
    assert [c.style for c in cases] == ["plain", "plain", "broadcast", "broadcast", "scalar",
                                        "scalar-broadcast", "empty"]
    for c in cases:
        assert c.out_shapes == (tuple(np.broadcast_shapes(c.shapes["x"], c.shapes["y"])),)
    by = {c.style: c for c in cases}
    assert by["plain"].shapes["x"] == by["plain"].shapes["y"]
    assert by["scalar"].shapes == {"x": (), "y": ()}
    assert () in by["scalar-broadcast"].shapes.values() and by["scalar-broadcast"].out_shapes[0] != ()
    assert 0 in by["empty"].out_shapes[0]
    # broadcasting cases really broadcast: an input differs from the output shape
    for c in cases:
        if c.style == "broadcast":
            assert any(s != c.out_shapes[0] for s in c.shapes.values())


def test_same_rule_has_no_broadcast_cases(ops: dict[str, Op]) -> None:
    cases = testing.shape_cases(ops["scale"], {"alpha": 0.1}, np.random.default_rng(0))
    assert [c.style for c in cases] == ["plain", "plain", "scalar", "empty"]
    assert all(c.out_shapes == (c.shapes["x"],) for c in cases)


def test_dims_rule_needs_the_dims_it_reads(tmp_path: Path) -> None:
    op = _op(tmp_path, """
name: rows
doc: test op.
inputs:
  - {name: x, doc: any, differentiable: false}
attrs:
  - {name: n, type: int, doc: count, default: 4}
outputs:
  - {name: out, doc: o, shape: ["x.shape[1]", n, 2], dtype: x}
dtype_format:
  CPU:
    - [F32_Default, F32_Default]
kernel:
  forward: "(void)x;"
""")
    cases = testing.shape_cases(op, {"n": 4}, np.random.default_rng(1))
    assert [c.style for c in cases] == ["plain", "plain", "empty"]  # 0-d x has no shape[1]
    for c in cases:
        assert len(c.shapes["x"]) >= 2
        assert c.out_shapes == ((c.shapes["x"][1], 4, 2),)


def test_unmeetable_contracts_are_a_clear_check_error(write_spec: Callable[[str, str], Path]) -> None:

    spec = SPEC_NEVER
    ops, diags = load_ops([write_spec("never.yaml", spec)])
    assert not diags
    with pytest.raises(testing.CheckError, match=r"cannot draw shapes for 'never': no plain shapes meet the op's "
                       r"contracts in 40 draws; the last: contract 'x.rank == 2' does not hold for x=\(.*\), "
                       r"y=\(.*\); give the inputs' shapes in the spec's test.shapes"):
        testing.shape_cases(ops[0], {}, np.random.default_rng(0))


SPEC_NEVER = """
name: never
doc: d
inputs: [{name: x, doc: d, differentiable: false}, {name: y, doc: d, differentiable: false}]
requires: ["x.rank == 2", "x.rank == 3"]
outputs: [{name: out, doc: d, shape: x, dtype: x}]
dtype_format: {CPU: [[F32_Default, F32_Default, F32_Default]]}
kernel: {forward: "(void)out;"}
"""


# ----------------------------------------------------------------------------- values and settings


def test_values_stay_in_the_domain_union() -> None:
    rng = np.random.default_rng(0)
    dom = ((-2.0, -1.0), (0.5, 0.75))
    v = testing.draw_values(rng, (4000,), "float32", dom)
    assert v.dtype == np.float32
    inside = ((v >= -2) & (v <= -1)) | ((v >= 0.5) & (v <= 0.75))
    assert inside.all()
    assert 0.7 < np.mean(v < 0) < 0.9  # picked in proportion to the intervals' lengths (0.8)
    ints = testing.draw_values(rng, (500,), "int32", dom)
    assert ints.dtype == np.int32 and set(np.unique(ints)) == {-2, -1}
    assert set(np.unique(testing.draw_values(rng, (50,), "bool", dom))) == {False, True}
    with pytest.raises(testing.CheckError, match="holds no int64 value"):
        testing.draw_values(rng, (3,), "int64", ((0.2, 0.8),))


def test_a_one_point_domain_is_that_value(tmp_path: Path) -> None:
    """Issue 33: ``labels: [0, 0]`` was refused ("empty interval [0, 0]"), which stopped the whole
    package from being generated; docs/testing.md says integer rows draw the integers in the
    interval. [a, a] now gives a on an integer row and on a float row; [3, 2] stays an error."""
    spec = """
    name: pick
    doc: logits[i, labels[i]].
    inputs:
      - {name: logits, doc: "[N, C].", differentiable: false}
      - {name: labels, doc: "[N].", differentiable: false}
    requires: [logits.rank == 2, "labels.shape == logits.shape[:-1]"]
    outputs:
      - {name: out, doc: "[N].", shape: "logits.shape[:-1]", dtype: logits}
    dtype_format:
      CPU:
        - [F32_Default, I64_Default, F32_Default]
    kernel:
      forward: |
        for (int64_t i = 0; i < out.numel; ++i) out[i] = logits[i * logits.dim(1) + labels[i]];
    reference: |
      return np.take_along_axis(logits, labels[..., None], -1)[..., 0]
    test:
      domain:
        labels: [0, 0]
        logits: [[0.5, 0.5], [-1.5, -1.5]]
    """
    op = _op(tmp_path, spec)
    settings = testing.read_settings(op)
    assert settings.domain("labels") == ((0.0, 0.0),)
    rng = np.random.default_rng(0)
    case = testing.shape_cases(op, {}, rng, settings)[0]
    logits, labels = testing._draw(rng, op, case, ["float32", "int64"], settings)
    assert labels.dtype == np.int64 and labels.size and not labels.any()
    assert logits.size and set(np.unique(logits)) <= {-1.5, 0.5}
    points = testing.draw_values(rng, (200,), "float32", settings.domain("logits"))
    assert 60 < np.sum(points == 0.5) < 140 and np.sum(points == -1.5) == 200 - np.sum(points == 0.5)
    v = testing.draw_values(rng, (200,), "float64", ((0.25, 0.25), (1.0, 2.0)))
    assert ((v >= 1) & (v <= 2)).all()  # a point beside an interval has no length: never drawn
    diags = _diags(tmp_path, spec.replace("labels: [0, 0]", "labels: [3, 2]"))
    assert [d.message for d in diags] == ["test.domain.labels: empty interval [3, 2]; write [lo, hi] with lo <= hi"]


def test_bfloat16_values_are_tagged_float32_rounded_to_bfloat16() -> None:
    """numpy has no bfloat16: the checks hold one as float32 values rounded to bfloat16 (nearest,
    ties to even), tagged so that runners hand them to the framework as bfloat16 tensors."""
    rng = np.random.default_rng(0)
    v = testing.draw_values(rng, (2000,), "bfloat16", ((-2.0, 2.0),))
    assert testing.dtype_name(v) == "bfloat16" and v.dtype == np.float32 and v.shape == (2000,)
    assert ((v >= -2) & (v <= 2)).all()
    assert not (v.view(np.uint32) & 0xFFFF).any()  # bfloat16 values: the low 16 bits are zero
    assert len(np.unique(v)) > 200  # ... and not too few of them
    assert testing.dtype_name(testing.draw_values(rng, (3,), "float16", ((-2.0, 2.0),))) == "float16"
    assert testing.dtype_name(np.zeros(2, np.float32)) == "float32"
    ulp = 2.0**-7  # bfloat16's spacing in [1, 2)
    got = testing.round_bfloat16(np.array([1 + ulp / 2, 1 + 1.5 * ulp, 1 + ulp / 2 + 2.0**-30, -(1 + 1.5 * ulp),
                                           np.inf, -np.inf, np.nan, 3.4e38]))
    want = [1.0, 1 + 2 * ulp, 1 + ulp, -(1 + 2 * ulp), np.inf, -np.inf, np.nan, 2.0**127 * (2 - 2.0**-7)]
    np.testing.assert_array_equal(np.asarray(got, np.float64), want)  # float64 rounded once, not via float32
    assert testing.round_bfloat16(np.float64(1.7)).shape == ()
    assert testing.dtype_name(testing.as_dtype(np.ones(2), "bfloat16")) == "bfloat16"
    assert testing.as_dtype(v, "float32").dtype.metadata is None
    assert testing.precision("bfloat16") < testing.precision("float16") < testing.precision("float32")
    assert testing.TOLERANCES["bfloat16"].forward == 8e-3  # two bfloat16 eps (2^-8)


def test_settings_merge_defaults(ops: dict[str, Op], workdir: Path) -> None:
    with contextlib.chdir(workdir.parent):  # op.file is absolute here: any cwd works
        s = testing.read_settings(ops["scale"])
    assert [dict(a) for a in s.attr_sets] == [{"alpha": 0.1}, {"alpha": -3.0}]
    assert s.domain("x") == testing.DEFAULT_DOMAIN
    assert testing.read_settings(ops["badgrad"]).domain("x") == ((2.0, 3.0),)


def test_bad_test_section_is_diagnosed_at_its_line(tmp_path: Path) -> None:
    op = _diags(tmp_path, """
name: t
doc: test op.
inputs:
  - {name: x, doc: any}
attrs:
  - {name: lo, type: float, doc: required}
outputs:
  - {name: out, doc: o, shape: x, dtype: x}
dtype_format:
  CPU:
    - [F32_Default, F32_Default]
elementwise:
  forward: x + lo
  grad:
    x: dout
test:
  domain:
    z: [0, 1]
    x: [[0, 1], [3, 2]]
  attrs:
    - {lo: 1.0}
    - {hi: 2.0}
""")
    text = "\n".join(d.format() for d in op)  # opgen validate reports the test section too
    assert "op.yaml:18:5: error: op 't': test.domain names unknown input 'z'" in text
    assert "op.yaml:19:8: error: op 't': test.domain.x: empty interval [3, 2]; write [lo, hi] with lo <= hi" in text
    assert "op.yaml:22:7: error: op 't': test.attrs names unknown attr 'hi'" in text
    assert "op.yaml:22:7: error: op 't': attr(s) 'lo' have no default" in text


def test_schema_rejects_a_misspelt_test_key(tmp_path: Path) -> None:
    text = textwrap.dedent(SPECS["scale.yaml"]).replace("  attrs:\n    - {}", "  atrs:\n    - {}")
    (tmp_path / "op.yaml").write_text(text, encoding="utf-8")
    _, diags = load_ops([tmp_path / "op.yaml"])
    assert any("unknown key 'atrs'" in d.message for d in diags), [d.format() for d in diags]


def test_bad_dtype_combinations() -> None:
    found, _ = load_ops([ROOT / "ops" / "add.yaml", ROOT / "ops" / "exp.yaml"])
    by = {o.name: o for o in found}
    # both have float16 (and bfloat16) rows: int8 is the first dtype neither has
    assert testing.bad_dtype_combinations(by["add"]) == [("int8", "int8"), ("float64", "float32")]
    assert testing.bad_dtype_combinations(by["exp"]) == [("int8",)]


# ----------------------------------------------------------------------------- checks on a real package


def test_right_op_passes_on_both_custom_modes(package: testing.Package, ops: dict[str, Op]) -> None:
    for check in ["reference", *CUSTOM_CHECKS]:
        r = testing.run_check(package, ops["scale"], check)
        assert r.status == "pass", (check, r.messages)
        # float32 rows bound the worst error: well inside the float32 tolerance, but not exact
        assert r.worst is not None and r.worst < testing.TOLERANCES["float32"].forward
        assert r.comparisons >= 2 * 4  # both attr sets, every case


def test_wrong_gradient_fails_grad_and_reference_checks(package: testing.Package, ops: dict[str, Op]) -> None:
    op = ops["badgrad"]
    for check in ["forward/custom-graph", "forward/custom-pynative"]:
        assert testing.run_check(package, op, check).status == "pass"
    for check in ["reference", "grad/custom-graph", "grad/custom-pynative"]:
        r = testing.run_check(package, op, check)
        assert r.status == "fail", check
        problems = [m for m in r.messages if not m.startswith("... and")]
        assert problems and all("dy" in m and "dx" not in m for m in problems), r.messages
        # dy = dout instead of dout * x with x in [2, 3]: error |w - x w| / max(1, |x w|) >= 1/2
        assert r.worst is not None and r.worst > 0.3


def test_kernel_that_disagrees_with_its_reference_fails_forward(package: testing.Package,
                                                                ops: dict[str, Op]) -> None:
    op = ops["badfwd"]
    for check in ["forward/custom-graph", "forward/custom-pynative"]:
        r = testing.run_check(package, op, check)
        assert r.status == "fail"
        assert "out: error" in r.messages[0] and "(x=float32, out=float32)" in r.messages[0]
        # x in [1.5, 2]: x*x vs x**3 differ by x**2 (x - 1) / x**3 >= 1/3
        assert r.worst is not None and r.worst > 0.3
    # its own gradient matches its own forward
    assert testing.run_check(package, op, "grad/custom-pynative").status == "pass"


def test_checks_are_reproducible(package: testing.Package, ops: dict[str, Op]) -> None:
    a = testing.run_check(package, ops["scale"], "forward/custom-pynative", seed=5)
    b = testing.run_check(package, ops["scale"], "forward/custom-pynative", seed=5)
    c = testing.run_check(package, ops["scale"], "forward/custom-pynative", seed=6)
    assert a.worst == b.worst and a.worst != c.worst


def test_table_and_failures(package: testing.Package, ops: dict[str, Op]) -> None:
    checks = ["reference", "forward/custom-pynative"]
    results = testing.run_all(package, [ops["scale"], ops["badfwd"]], checks)
    table = testing.format_table(results, checks).splitlines()
    assert table[0].split() == ["op", "ref", "fwd", "pynat"]
    assert table[2].split()[0] == "scale" and table[2].count("ok ") == 2 and "FAIL" not in table[2]
    assert table[3].split()[:4] == ["badfwd", "ok", "FAIL", f"{results[3].worst:.0e}"]
    assert "FAIL badfwd forward/custom-pynative:" in testing.format_failures(results)


# ----------------------------------------------------------------------------- command line


def _cli(*args: str, cwd: Path, build: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), OPGEN_BUILD_DIR=str(build), OPGEN_QUIET="1")
    return subprocess.run([sys.executable, "-m", "opgen", "test", *args], cwd=cwd, env=env, text=True,
                          capture_output=True, timeout=600)


def test_cli_exit_codes_and_table(package: testing.Package, workdir: Path) -> None:
    pkg = f"out/{package.directory.name}"
    only = ["--only", "reference", "--only", "*/custom-pynative", "--skip", "dtypes/*", "--skip", "contracts/*"]
    ok = _cli("specs", "scale", "--package-dir", pkg, *only, cwd=workdir, build=workdir / "build")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert ok.stdout.splitlines()[0].split() == ["op", "ref", "fwd", "pynat", "grad", "pynat"]
    assert ok.stdout.splitlines()[2].startswith("scale") and "FAIL" not in ok.stdout
    assert "1 op(s), 3 checks: 3 passed, 0 failed" in ok.stdout

    bad = _cli("specs", "badgrad", "--package-dir", pkg, *only, cwd=workdir, build=workdir / "build")
    assert bad.returncode == 1
    assert "FAIL badgrad grad/custom-pynative:" in bad.stdout

    typo = _cli("specs", "scael", cwd=workdir, build=workdir / "build")
    assert typo.returncode == 2
    assert "'scael' is neither a spec path nor an op in specs; did you mean 'scale'?" in typo.stderr


def test_cli_refuses_a_stale_package(package: testing.Package, workdir: Path) -> None:
    r = _cli("specs", "--package-dir", "elsewhere/opgen_ops", cwd=workdir, build=workdir / "build")
    assert r.returncode == 1
    assert "is not what specs generate today; run 'opgen generate specs -o elsewhere -p opgen_ops'" in r.stderr


def test_stale_package_hint_never_loses_ops(tmp_path: Path) -> None:
    """Issue 25 item 10: ``opgen test specs/scale.yaml --package-dir P`` on a package of three ops.
    Up to date, the package is tested as it is; stale, the hint regenerates it from the specs of
    all three ops (it said 'opgen generate specs/scale.yaml ...', which deletes the other two);
    with another op's spec gone, the hint gives no command that would delete it."""
    (tmp_path / "specs").mkdir()
    for name, text in SPECS.items():
        (tmp_path / "specs" / name).write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    with contextlib.chdir(tmp_path):
        assert not generate(["specs"], Path("out"), "three").diagnostics
        pkg = Path("out/three")
        three = testing.package_ops(pkg)
        assert sorted(three) == ["badfwd", "badgrad", "scale"] and three["scale"] == "specs/scale.yaml"
        assert testing.package_for(["specs/scale.yaml"], pkg)[1] == (
            "testing out/three (up to date with the specs of all its ops)")
        badfwd = Path("specs/badfwd.yaml")
        badfwd.write_text(badfwd.read_text(encoding="utf-8").replace("doc: ", "doc: Edited. ", 1), encoding="utf-8")
        with pytest.raises(testing.StalePackage) as stale:
            testing.package_for(["specs/scale.yaml"], pkg)
        command = str(stale.value).split("run '")[1].split("' first")[0]
        assert command == ("opgen generate specs/scale.yaml specs/badfwd.yaml specs/badgrad.yaml -o out -p three")
    r = subprocess.run([sys.executable, "-m", "opgen", *shlex.split(command)[1:], "-q"], cwd=tmp_path, text=True,
                       capture_output=True, env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=120)
    assert r.returncode == 0, r.stderr
    with contextlib.chdir(tmp_path):
        assert sorted(testing.package_ops(pkg)) == ["badfwd", "badgrad", "scale"]  # nothing lost
        assert testing.package_for(["specs/scale.yaml"], pkg)[0] == pkg
        Path("specs/badgrad.yaml").rename("badgrad.yaml")
        badfwd.write_text(badfwd.read_text(encoding="utf-8").replace("Edited. ", ""), encoding="utf-8")
        with pytest.raises(testing.StalePackage) as lost:
            testing.package_for(["specs/scale.yaml"], pkg)
    assert "also holds op(s) badgrad whose spec is not found from here (badgrad: specs/badgrad.yaml)" in str(lost.value)
    assert "opgen generate SPECS... -o out -p three" in str(lost.value) and "run '" not in str(lost.value)
