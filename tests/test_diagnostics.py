"""Pinned diagnostics: each tiny invalid spec gives exactly this text (snapshot style)."""

from __future__ import annotations

from pathlib import Path

import pytest

from opgen.pipeline import load_ops

BASE = """\
name: twice
doc: Doubles x.
inputs:
  - {name: x, doc: any tensor}
outputs:
  - {name: out, doc: 2 * x, shape: x, dtype: x}
attrs:
  - {name: alpha, type: float, doc: scale, default: 1.0, range: [0, 10]}
dtype_format:
  CPU:
    - [F32_Default, F32_Default]
elementwise:
  forward: 2 * x * alpha
  grad:
    x: 2 * dout * alpha
"""

# (name, (old, new) replacements applied to BASE, expected diagnostics text)
CASES: list[tuple[str, list[tuple[str, str]], str]] = [
    ("name_not_snake", [("name: twice", "name: Twice")],
     "s.yaml:1:7: error: op 'Twice': name is 'Twice'; expected snake_case: lower-case letters, digits and '_', "
     "starting with a letter"),
    ("missing_doc", [("doc: Doubles x.\n", "")],
     "s.yaml:1:1: error: op 'twice': spec is missing required key 'doc'"),
    ("typo_top_key", [("dtype_format:", "dtype_fromat:")],
     "s.yaml:1:1: error: op 'twice': spec is missing required key 'dtype_format'\n"
     "s.yaml:9:1: error: op 'twice': unknown key 'dtype_fromat' in spec; expected one of: $schema, name, doc, "
     "targets, inputs, outputs, attrs, type_vars, dtype_format, elementwise, kernel, reference, test\n"
     "s.yaml:9:1: note: did you mean 'dtype_format'?"),
    ("keyword_input", [("name: x,", "name: class,"), ("2 * x * alpha", "2 * alpha"), ("    x: 2", "    class: 2")],
     "s.yaml:4:5: error: op 'twice': input name 'class' is a Python keyword\n"
     "s.yaml:6:5: error: op 'twice': output 'out': dtype rule 'x' is neither an input name nor a dtype\n"
     "s.yaml:6:5: error: op 'twice': output 'out': shape rule 'x' refers to unknown name 'x'"),
    ("reserved_input", [("name: x,", "name: ctx,"), ("shape: x, dtype: x", "shape: ctx, dtype: ctx"),
                        ("2 * x * alpha", "2 * alpha"), ("    x: 2", "    ctx: 2")],
     "s.yaml:4:5: error: op 'twice': input name 'ctx' is reserved for generated code"),
    ("duplicate_row", [("    - [F32_Default, F32_Default]\n", "    - [F32_Default, F32_Default]\n" * 2)],
     "s.yaml:12:7: error: op 'twice': duplicate dtype_format row\ns.yaml:11:7: note: first given here"),
    ("format_not_default", [("[F32_Default, F32_Default]", "[F32_NCHW, F32_Default]")],
     "s.yaml:11:7: error: op 'twice': DataType 'F32_NCHW' (column 'x'): format 'NCHW' cannot be taken by target "
     "CPU; use 'F32_Default'"),
    ("complex64_unsupported", [("[F32_Default, F32_Default]", "[C64_Default, C64_Default]")],
     "s.yaml:11:7: error: op 'twice': DataType 'C64_Default' (column 'out'): C64 kernels are not supported by "
     "opgen yet; supported: F32, F64, F16, BF16, I8, I16, I32, I64, U8, BOOL\n"
     "s.yaml:11:7: error: op 'twice': DataType 'C64_Default' (column 'x'): C64 kernels are not supported by "
     "opgen yet; supported: F32, F64, F16, BF16, I8, I16, I32, I64, U8, BOOL"),
    ("dtype_rule_disagrees", [("[F32_Default, F32_Default]", "[F32_Default, F64_Default]")],
     "s.yaml:11:7: error: op 'twice': output 'out' has dtype rule 'x' (same as input 'x'), but this row gives "
     "F32_Default for 'x' and F64_Default for 'out'"),
    ("unknown_dtype_rule", [("dtype: x}", "dtype: flaot32}")],
     "s.yaml:6:5: error: op 'twice': output 'out': dtype rule 'flaot32' is neither an input name nor a dtype\n"
     "s.yaml:6:5: note: did you mean 'float32'?"),
    ("shape_unknown_name", [("shape: x,", "shape: 'broadcast(x, z)',")],
     "s.yaml:6:5: error: op 'twice': output 'out': shape rule 'broadcast(x, z)' refers to unknown name 'z'"),
    ("target_without_rows", [("doc: Doubles x.\n", "doc: Doubles x.\ntargets: [CPU, GPU]\n")],
     "s.yaml:3:10: error: op 'twice': target 'GPU' is listed but dtype_format has no rows for it"),
    ("default_out_of_range", [("default: 1.0", "default: 11.0")],
     "s.yaml:8:5: error: op 'twice': attr 'alpha': default 11.0 is outside the range [0, 10]"),
    ("default_wrong_type", [("default: 1.0", "default: fast")],
     "s.yaml:8:5: error: op 'twice': attr 'alpha': default 'fast' is not a float"),
    ("expr_unknown_name", [("2 * x * alpha", "2 * x * beta")],
     "s.yaml:13:20: error: op 'twice': elementwise.forward: unknown name 'beta'"),
    ("expr_unknown_function", [("2 * x * alpha", "softsign(x)")],
     "s.yaml:13:12: error: op 'twice': elementwise.forward: unknown function 'softsign'; supported: abs, erf, exp, "
     "expm1, log, log1p, maximum, minimum, pow, rsqrt, sigmoid, sign, sqrt, tanh"),
    ("grad_for_nondifferentiable",
     [("{name: x, doc: any tensor}", "{name: x, doc: any tensor, differentiable: false}")],
     "s.yaml:15:8: error: op 'twice': elementwise.grad gives a gradient for input 'x', which is not differentiable"),
    ("body_both_forms", [("elementwise:", "kernel: {forward: 'x;'}\nelementwise:")],
     "s.yaml:12:1: error: op 'twice': 'elementwise' and 'kernel' are mutually exclusive; keep one\n"
     "s.yaml:13:1: note: 'elementwise' is here"),
    ("attr_list_bool", [("type: float, doc: scale, default: 1.0, range: [0, 10]",
                         "type: 'list[bool]', doc: flags, default: [1, 2]"), (" * alpha", "")],
     "s.yaml:8:5: error: op 'twice': attr 'alpha': default [1, 2] is not a list[bool]: item 0 is 1, not a bool"),
]


@pytest.mark.parametrize("name,edits,expected", CASES, ids=[c[0] for c in CASES])
def test_pinned_diagnostic(name: str, edits: list[tuple[str, str]], expected: str, tmp_path: Path,
                           monkeypatch: pytest.MonkeyPatch) -> None:
    text = BASE
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new)
    monkeypatch.chdir(tmp_path)
    Path("s.yaml").write_text(text, encoding="utf-8")
    ops, diags = load_ops(["s.yaml"])
    assert ops == []
    assert "\n".join(d.format() for d in diags) == expected


def test_base_spec_is_valid(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    Path("s.yaml").write_text(BASE, encoding="utf-8")
    ops, diags = load_ops(["s.yaml"])
    assert diags == [] and [o.name for o in ops] == ["twice"]


def test_duplicate_op_across_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    Path("a.yaml").write_text(BASE, encoding="utf-8")
    Path("b.yaml").write_text(BASE, encoding="utf-8")
    _, diags = load_ops(["a.yaml", "b.yaml"])
    assert "\n".join(d.format() for d in diags) == (
        "b.yaml:1:1: error: op 'twice': op 'twice' is defined twice\na.yaml:1:1: note: first defined here")
