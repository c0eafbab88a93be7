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

EW = """\
elementwise:
  forward: 2 * x * alpha
  grad:
    x: 2 * dout * alpha
"""
"""BASE's body, for cases that replace it with a kernel."""

ROW = "    - [F32_Default, F32_Default]\n"
"""BASE's one dtype_format row."""
KERNEL = "kernel:\n  forward: out[0] = x[0];\n  backward: dx[0] = dout[0];\n"
"""A kernel body for BASE (the cases that give a target its own bodies)."""

# (name, (old, new) replacements applied to BASE, expected diagnostics text)
CASES: list[tuple[str, list[tuple[str, str]], str]] = [
    ("ascend_rows_nothing_builds", [(ROW, ROW + "  Ascend:\n" + ROW)],
     "s.yaml:13:7: error: op 'twice': target 'Ascend': no device builds target 'Ascend' yet: an Ascend kernel is an "
     "AscendC aot kernel (MindSpore ops.Custom func_type='aot' with target 'Ascend') or a Function<T> calling aclnn, "
     "and neither compiles nor runs without CANN and an Ascend NPU (docs/devices.md); opgen builds CPU, GPU"),
    ("gpu_body_without_gpu_rows", [(EW, KERNEL + "  GPU:\n    forward: opgen::map(out, [=] __device__ (float v) "
                                        "{ return v; }, x);\n")],
     "s.yaml:15:3: error: op 'twice': kernel.GPU gives bodies for target 'GPU', which has no dtype_format rows\n"
     "s.yaml:15:3: note: add rows under 'dtype_format.GPU' or remove it"),
    ("gpu_backward_of_another_form", [(ROW, ROW + "  GPU:\n" + ROW),
                                      (EW, KERNEL + "  GPU:\n    forward: out[0] = x[0];\n    backward:\n"
                                       "      x: dx[0] = dout[0];\n")],
     "s.yaml:17:3: error: op 'twice': kernel.GPU.backward is one body per input, kernel.backward one body: a "
     "target's backward takes the default's form"),
    ("name_not_snake", [("name: twice", "name: Twice")],
     "s.yaml:1:7: error: op 'Twice': name is 'Twice'; expected snake_case: lower-case letters, digits and '_', "
     "starting with a letter"),
    ("missing_doc", [("doc: Doubles x.\n", "")],
     "s.yaml:1:1: error: op 'twice': spec is missing required key 'doc'"),
    ("typo_top_key", [("dtype_format:", "dtype_fromat:")],
     "s.yaml:1:1: error: op 'twice': spec is missing required key 'dtype_format'\n"
     "s.yaml:9:1: error: op 'twice': unknown key 'dtype_fromat' in spec; expected one of: $schema, name, "
     "doc, targets, inputs, outputs, attrs, type_vars, dtype_format, elementwise, kernel, requires, "
     "reference, build, test\n"
     "s.yaml:9:1: note: did you mean 'dtype_format'?"),
    ("comma_split_flow_value", [("doc: any tensor}", "doc: any tensor, any shape.}")],
     "s.yaml:4:32: error: op 'twice': unknown key 'any shape.' in inputs[0]; expected one of: name, doc, kind, "
     "differentiable, writes\n"
     "s.yaml:4:20: note: in a flow mapping {...} a comma ends a plain value: 'doc: any tensor, any shape.' was "
     "split at the comma into 'doc: any tensor' and a key 'any shape.'; quote the value: "
     "doc: \"any tensor, any shape.\""),
    ("exponent_without_sign", [("range: [0, 10]", "range: [0, 1e6]")],
     "s.yaml:8:69: error: op 'twice': attrs[0].range[1] must be a number, got string\n"
     "s.yaml:8:69: note: '1e6' is a string to YAML 1.1, which reads a number with an exponent only with a '.' "
     "and the exponent's sign; write 1.0e+6"),
    ("default_exponent_without_sign", [("default: 1.0, range: [0, 10]", "default: 2.5e3")],
     "s.yaml:8:53: error: op 'twice': attr 'alpha': default '2.5e3' is not a float\n"
     "s.yaml:8:53: note: '2.5e3' is a string to YAML 1.1, which reads a number with an exponent only with a '.' "
     "and the exponent's sign; write 2.5e+3"),
    ("list_default_exponent_without_sign", [("type: float, doc: scale, default: 1.0, range: [0, 10]",
                                             "type: 'list[float]', doc: scale, default: [1.5, 1e-3]"),
                                            ("2 * x * alpha", "2 * x"), ("2 * dout * alpha", "2 * dout")],
     "s.yaml:8:61: error: op 'twice': attr 'alpha': default [1.5, '1e-3'] is not a list[float]: item 1 is '1e-3', "
     "not a float\n"
     "s.yaml:8:61: note: '1e-3' is a string to YAML 1.1, which reads a number with an exponent only with a '.' "
     "and the exponent's sign; write 1.0e-3"),
    ("row_of_type_vars_too_long",
     [("    - [F32_Default, F32_Default]\n", "    - [T, T, T]\ntype_vars:\n  T: [float32, float64]\n")],
     "s.yaml:11:7: error: op 'twice': dtype_format row has 3 column(s); expected 2, one per input then per output: "
     "x, out"),
    ("keyword_input", [("name: x,", "name: class,"), ("2 * x * alpha", "2 * alpha"), ("    x: 2", "    class: 2")],
     "s.yaml:4:5: error: op 'twice': input name 'class' is a Python keyword\n"
     "s.yaml:6:5: error: op 'twice': output 'out': dtype rule 'x' is neither an input name nor a dtype\n"
     "s.yaml:6:36: error: op 'twice': output 'out': bad shape: unknown name 'x'; expected an input or attr of the op"),
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
     "s.yaml:6:50: error: op 'twice': output 'out': bad shape: unknown name 'z'; expected an input or attr of the op"),
    ("target_without_rows", [("doc: Doubles x.\n", "doc: Doubles x.\ntargets: [CPU, GPU]\n")],
     "s.yaml:3:10: error: op 'twice': target 'GPU' is listed but dtype_format has no rows for it"),
    ("default_out_of_range", [("default: 1.0", "default: 11.0")],
     "s.yaml:8:53: error: op 'twice': attr 'alpha': default 11.0 is outside the range [0, 10]"),
    ("default_wrong_type", [("default: 1.0", "default: fast")],
     "s.yaml:8:53: error: op 'twice': attr 'alpha': default 'fast' is not a float"),
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
     "s.yaml:8:60: error: op 'twice': attr 'alpha': default [1, 2] is not a list[bool]: item 0 is 1, not a bool"),
    ("name_not_a_string", [("name: twice", "name: 5")],
     "s.yaml:1:7: error: name must be a string, got integer"),
    ("unknown_input_key", [("{name: x, doc: any tensor}", "{name: x, doc: any tensor, differentiabel: false}")],
     "s.yaml:4:32: error: op 'twice': unknown key 'differentiabel' in inputs[0]; expected one of: "
     "name, doc, kind, differentiable, writes\n"
     "s.yaml:4:32: note: did you mean 'differentiable'?"),
    ("unknown_attr_key", [("default: 1.0,", "defualt: 1.0,")],
     "s.yaml:8:44: error: op 'twice': unknown key 'defualt' in attrs[0]; expected one of: name, "
     "type, doc, default, range, choices\n"
     "s.yaml:8:44: note: did you mean 'default'?"),
    ("duplicate_key", [("doc: Doubles x.\n", "doc: Doubles x.\ndoc: Twice x.\n")],
     "s.yaml:3:1: error: duplicate key 'doc'\n"
     "s.yaml:2:1: note: first defined here"),
    ("attr_type_unknown", [("type: float,", "type: flaot,")],
     "s.yaml:8:25: error: op 'twice': attrs[0].type is 'flaot'; expected one of: int, float, bool, "
     "str, list[int], list[float], list[bool], list[str], list[list[int]], list[list[float]]\n"
     "s.yaml:8:25: note: did you mean 'float'?"),
    ("input_kind_unknown", [("{name: x, doc: any tensor}", "{name: x, doc: any tensor, kind: optinal}")],
     "s.yaml:4:38: error: op 'twice': inputs[0].kind is 'optinal'; expected one of: required, "
     "optional, dynamic\n"
     "s.yaml:4:38: note: did you mean 'optional'?"),
    ("input_name_not_identifier", [("{name: x,", "{name: 2x,")],
     "s.yaml:4:12: error: op 'twice': inputs[0].name is '2x'; expected an identifier: letters, "
     "digits and '_', not starting with a digit"),
    ("input_cpp_keyword",
     [("name: x,", "name: new,"),
      ("shape: x, dtype: x", "shape: new, dtype: new"),
      ("2 * x * alpha", "2 * new * alpha"),
      ("    x: 2", "    new: 2")],
     "s.yaml:4:5: error: op 'twice': input name 'new' is a C++ keyword"),
    ("output_named_like_input",
     [("{name: out, doc: 2 * x,", "{name: x, doc: 2 * x,"),
      ("2 * dout * alpha", "2 * dx * alpha")],
     "s.yaml:4:5: error: op 'twice': 'dx', the name of the gradient of input 'x', is already used by "
     "the gradient of output 'x'\n"
     "s.yaml:6:5: note: first used here\n"
     "s.yaml:6:5: error: op 'twice': output name 'x' is already used by input 'x'\n"
     "s.yaml:4:5: note: first used here"),
    ("attr_named_like_input",
     [("{name: alpha,", "{name: x,"),
      ("2 * x * alpha", "2 * x"),
      ("2 * dout * alpha", "2 * dout")],
     "s.yaml:8:5: error: op 'twice': attr name 'x' is already used by input 'x'\n"
     's.yaml:4:5: note: first used here'),
    ("input_named_like_a_gradient",
     [("name: x,", "name: dout,"),
      ("shape: x, dtype: x", "shape: dout, dtype: dout"),
      ("2 * x * alpha", "2 * dout * alpha"),
      ("    x: 2 * dout * alpha", "    dout: 2 * alpha")],
     "s.yaml:6:5: error: op 'twice': 'dout', the name of the gradient of output 'out', is already "
     "used by input 'dout'\n"
     "s.yaml:4:5: note: first used here"),
    ("row_wrong_length", [("[F32_Default, F32_Default]", "[F32_Default]")],
     "s.yaml:11:7: error: op 'twice': dtype_format row has 1 column(s); expected 2, one per input "
     "then per output: x, out"),
    ("unknown_datatype", [("[F32_Default, F32_Default]", "[F32_Defualt, F32_Default]")],
     "s.yaml:11:7: error: op 'twice': DataType 'F32_Defualt' (column 'x'): format 'Defualt' cannot "
     "be taken by target CPU; use 'F32_Default'"),
    ("duplicate_row_after_expansion",
     [("dtype_format:\n", "type_vars:\n  T: [float32, float64]\ndtype_format:\n"),
      ("    - [F32_Default, F32_Default]\n", "    - [F32_Default, F32_Default]\n    - [T, T]\n")],
     "s.yaml:14:7: error: op 'twice': dtype_format row ['T', 'T'] expands to ['F32_Default', "
     "'F32_Default'], a duplicate row\n"
     "s.yaml:13:7: note: first given here"),
    ("type_var_unused", [("dtype_format:\n", "type_vars:\n  T: [float32]\ndtype_format:\n")],
     "s.yaml:10:6: error: op 'twice': type variable 'T' is declared but no dtype_format row uses it"),
    ("type_var_undeclared", [("[F32_Default, F32_Default]", "[T, T]")],
     "s.yaml:11:7: error: op 'twice': dtype_format row uses type variable 'T', which is not declared "
     "in type_vars\n"
     "s.yaml:11:7: note: declare it, e.g. 'type_vars: {T: [float32]}'"),
    ("type_var_unknown_dtype",
     [("dtype_format:\n", "type_vars:\n  T: [flaot32]\ndtype_format:\n"),
      ("[F32_Default, F32_Default]", "[T, T]")],
     "s.yaml:10:7: error: op 'twice': type variable 'T': unknown dtype 'flaot32'\n"
     "s.yaml:10:7: note: did you mean 'float32'?"),
    ("default_not_a_choice", [("default: 1.0, range: [0, 10]", "default: 3.0, choices: [1.0, 2.0]")],
     "s.yaml:8:53: error: op 'twice': attr 'alpha': default 3.0 is not one of the choices [1.0, 2.0]"),
    ("choice_wrong_type", [("default: 1.0, range: [0, 10]", "default: 1.0, choices: [1.0, two]")],
     "s.yaml:8:5: error: op 'twice': attr 'alpha': choice 'two' is not a float"),
    ("range_on_str",
     [("type: float, doc: scale, default: 1.0", "type: str, doc: scale, default: a"),
      ("2 * x * alpha", "2 * x"),
      ("2 * dout * alpha", "2 * dout")],
     "s.yaml:8:5: error: op 'twice': attr 'alpha': 'range' applies to int and float attrs, not str"),
    ("range_empty", [("range: [0, 10]", "range: [10, 0]")],
     "s.yaml:8:5: error: op 'twice': attr 'alpha': range [10, 0] is empty; write [low, high]"),
    ("int_default_beyond_int64",
     [("type: float", "type: int"),
      ("default: 1.0, range: [0, 10]", "default: 99999999999999999999")],
     "s.yaml:8:51: error: op 'twice': attr 'alpha': default 99999999999999999999 does not fit an int "
     "attr (int64: -2**63 to 2**63-1)"),
    ("float_default_beyond_float32", [("default: 1.0, range: [0, 10]", "default: 1.0e+39")],
     "s.yaml:8:53: error: op 'twice': attr 'alpha': default 1e+39 does not fit a float attr (float32: "
     "at most 3.4028235e+38 in magnitude, or .inf)"),
    ("shape_dim_float_attr", [("shape: x,", "shape: '[alpha]',")],
     "s.yaml:6:38: error: op 'twice': output 'out': bad shape: a dimension must be an int, but 'alpha' is a float\n"
     's.yaml:6:38: note: float attrs can only be compared; shapes are ints'),
    ("shape_dim_is_input", [("shape: x,", "shape: '[x]',")],
     "s.yaml:6:38: error: op 'twice': output 'out': bad shape: a dimension must be an int, but 'x' is a tensor\n"
     "s.yaml:6:38: note: use 'x.shape' for its shape or 'x.rank' for its rank"),
    ("shape_dim_negative", [("shape: x,", "shape: [2, -1],")],
     "s.yaml:6:36: error: op 'twice': output 'out': shape dim -1 is negative; a dim is a size, 0 or more"),
    ("shape_rule_syntax", [("shape: x,", "shape: 'x +',")],
     "s.yaml:6:37: error: op 'twice': output 'out': bad shape: cannot parse 'x +': invalid syntax"),
    ("broadcast_one_input", [("shape: x,", "shape: 'broadcast(x)',")],
     "s.yaml:6:37: error: op 'twice': output 'out': bad shape: broadcast() needs at least two inputs: "
     "broadcast(x, y, ...)"),
    ("reduce_axis_float_attr", [("shape: x,", "shape: 'reduce(x, alpha)',")],
     "s.yaml:6:47: error: op 'twice': output 'out': bad shape: argument 'axis' of reduce() must be an int "
     "or list[int], but 'alpha' is a float\n"
     's.yaml:6:47: note: float attrs can only be compared; shapes are ints'),
    ("matmul_arg_is_input", [("shape: x,", "shape: 'matmul(x, x, x)',")],
     "s.yaml:6:50: error: op 'twice': output 'out': bad shape: argument 'transpose_a' of matmul() must be "
     "a bool, but 'x' is a tensor\n"
     "s.yaml:6:50: note: use 'x.shape' for its shape or 'x.rank' for its rank"),
    ("concat_of_required_input", [("shape: x,", "shape: 'concat(x, 0)',")],
     "s.yaml:6:44: error: op 'twice': output 'out': bad shape: argument 'xs' of concat() must be a "
     "dynamic (list) input, but 'x' is a single tensor"),
    ("dynamic_input_in_elementwise", [("{name: x, doc: any tensor}", "{name: x, doc: any tensor, kind: dynamic}")],
     "s.yaml:4:5: error: op 'twice': input 'x' is dynamic; elementwise ops take required inputs only (use "
     "'kernel' bodies)\n"
     "s.yaml:6:36: error: op 'twice': output 'out': bad shape: input 'x' is dynamic (a list of tensors), "
     "not one shape; use concat(x, axis)"),
    ("expr_syntax_error", [("2 * x * alpha", "2 * * x")],
     "s.yaml:13:16: error: op 'twice': elementwise.forward: cannot parse expression '2 * * x': invalid syntax"),
    ("expr_arity", [("2 * x * alpha", "exp(x, x)")],
     "s.yaml:13:12: error: op 'twice': elementwise.forward: exp() takes 1 argument(s), got 2"),
    ("expr_unsupported_operator", [("2 * x * alpha", "x % 2")],
     "s.yaml:13:12: error: op 'twice': elementwise.forward: operator 'Mod' is not supported; use + - * / **"),
    ("str_attr_in_expression",
     [("type: float, doc: scale, default: 1.0, range: [0, 10]", "type: str, doc: mode, default: a")],
     "s.yaml:13:20: error: op 'twice': elementwise.forward: attr 'alpha' is a str; expressions take "
     "int, float and bool attrs only\n"
     "s.yaml:8:5: note: attr 'alpha' is declared here\n"
     "s.yaml:13:20: note: use a 'kernel' body to compute with it\n"
     "s.yaml:15:19: error: op 'twice': elementwise.grad.x: attr 'alpha' is a str; expressions take "
     "int, float and bool attrs only\n"
     "s.yaml:8:5: note: attr 'alpha' is declared here\n"
     "s.yaml:15:19: note: use a 'kernel' body to compute with it"),
    ("grad_unknown_input", [("    x: 2 * dout * alpha", "    x: 2 * dout * alpha\n    z: dout")],
     "s.yaml:16:8: error: op 'twice': elementwise.grad names unknown input 'z'"),
    ("grad_missing", [("  grad:\n    x: 2 * dout * alpha\n", "")],
     "s.yaml:4:5: error: op 'twice': differentiable input 'x' has no gradient in elementwise.grad\n"
     "s.yaml:4:5: note: add 'grad: {x: ...}' or mark the input 'differentiable: false'"),
    ("differentiable_int_input", [("[F32_Default, F32_Default]", "[I32_Default, I32_Default]")],
     "s.yaml:4:5: error: op 'twice': input 'x' is differentiable, but every dtype_format row gives "
     "it an integer or bool type; such inputs are never differentiable\n"
     "s.yaml:4:5: note: add 'differentiable: false' to the input"),
    ("fixed_dtype_disagrees", [("dtype: x}", "dtype: float64}")],
     "s.yaml:11:7: error: op 'twice': output 'out' has fixed dtype 'float64', but this row gives F32_Default"),
    ("rows_for_unlisted_target",
     [("doc: Doubles x.\n", "doc: Doubles x.\ntargets: [CPU]\n"),
      ("    - [F32_Default, F32_Default]\n", "    - [F32_Default, F32_Default]\n"
       "  GPU:\n"
       "    - [F32_Default, F32_Default]\n")],
     "s.yaml:14:7: error: op 'twice': dtype_format has rows for target 'GPU', which is not in targets ['CPU']"),
    ("op_name_builtin", [("name: twice", "name: list")],
     "s.yaml:1:1: error: op 'list': op name 'list' is a Python builtin or module that the generated "
     "modules use"),
    ("op_name_submodule", [("name: twice", "name: meta")],
     "s.yaml:1:1: error: op 'meta': op name 'meta' is the name of a generated submodule (custom, "
     "function, reference, meta)"),
    ("op_name_keyword", [("name: twice", "name: class")],
     "s.yaml:1:1: error: op 'class': op name 'class' is a Python keyword"),
    ("reference_syntax_error", [("elementwise:", "reference: |\n  y = x *\n  return y\nelementwise:")],
     "s.yaml:13:8: error: op 'twice': reference body does not compile: invalid syntax (line 1 of the body)"),
    ("unknown_datatype_prefix", [("[F32_Default, F32_Default]", "[F23_Default, F32_Default]")],
     "s.yaml:11:7: error: op 'twice': unknown DataType 'F23_Default' in column 'x'\n"
     "s.yaml:11:7: note: did you mean 'F32_Default'?"),
    ("unknown_target", [("  CPU:\n", "  TPU:\n")],
     "s.yaml:10:3: error: op 'twice': unknown key 'TPU' in dtype_format; expected one of: CPU, GPU, Ascend\n"
     "s.yaml:10:3: note: did you mean 'GPU'?"),
    ("empty_inputs", [("inputs:\n  - {name: x, doc: any tensor}\n", "inputs: []\n")],
     "s.yaml:3:9: error: op 'twice': inputs must not be empty"),
    ("two_outputs_elementwise",
     [("  - {name: out, doc: 2 * x, shape: x, dtype: x}\n", "  - {name: out, doc: 2 * x, shape: x, dtype: x}\n"
       "  - {name: out2, doc: o, shape: x, dtype: x}\n"),
      ("[F32_Default, F32_Default]", "[F32_Default, F32_Default, F32_Default]")],
     "s.yaml:1:1: error: op 'twice': 'elementwise' ops have exactly one output; this one has 2"),
    ("shape_axis_past_rank", [("shape: x,", "shape: '[x.shape[99]]',")],
     "s.yaml:6:38: error: op 'twice': output 'out': 'x.shape[99]' indexes past any rank a tensor can have"),
    ("elementwise_reduce_shape", [("shape: x,", "shape: 'reduce(x, 0)',")],
     "s.yaml:6:5: error: op 'twice': output 'out': an 'elementwise' op's output takes a shape its inputs "
     "broadcast to ('x', 'broadcast(x, y)' or a dims list), not reduce()\n"
     "s.yaml:6:5: note: use a 'kernel' body for a reduce op"),
    ("attr_missing_type", [("type: float, ", "")],
     "s.yaml:8:5: error: op 'twice': attrs[0] is missing required key 'type'"),
    ("default_list_for_scalar", [("default: 1.0,", "default: [1.0],")],
     "s.yaml:8:53: error: op 'twice': attr 'alpha': default [1.0] is not a float"),
    ("expr_function_as_name", [("2 * x * alpha", "exp * x")],
     "s.yaml:13:12: error: op 'twice': elementwise.forward: 'exp' is a function; call it as exp(...)"),
    ("kernel_backward_unknown_input",
     [(EW, "kernel:\n"
       "  forward: 'out[0] = x[0];'\n"
       "  backward:\n"
       "    x: 'dx[0] = dout[0];'\n"
       "    y: 'dy[0] = 0;'\n")],
     "s.yaml:16:8: error: op 'twice': kernel.backward names unknown input 'y'"),
    ("kernel_backward_never_writes",
     [(EW, "kernel:\n"
       "  forward: 'out[0] = x[0];'\n"
       "  backward: 'dz[0] = dout[0];'\n")],
     "s.yaml:14:13: error: op 'twice': kernel.backward never writes 'dx', the gradient of "
     "differentiable input 'x'"),
    ("grad_views_shape_rule",
     [(EW, "kernel:\n"
       "  forward: 'out[0] = x[0];'\n"
       "  backward: 'dx[0] = dout[0];'\n"
       "  grad_views: [x]\n")],
     "s.yaml:15:16: error: op 'twice': kernel.grad_views: the gradient of 'x' is a view of 'dout' only when "
     "output 'out''s shape rule is one of concat(xs, axis), reduce(x, axis, keep_dims) with 'x' as its first "
     "argument; it is 'x'\n"
     "s.yaml:15:16: note: remove the input from kernel.grad_views: kernel.backward computes its gradient"),
    ("grad_views_unknown_input",
     [("shape: x,", "shape: 'reduce(x, [0])',"),
      (EW, "kernel:\n"
       "  forward: 'out[0] = x[0];'\n"
       "  backward: 'dx[0] = dout[0];'\n"
       "  grad_views: [xx]\n")],
     "s.yaml:15:16: error: op 'twice': kernel.grad_views: names unknown input 'xx'\n"
     "s.yaml:15:16: note: did you mean 'x'?"),
    ("grad_views_dtype_rule",
     [("shape: x, dtype: x}", "shape: 'reduce(x, [0])', dtype: float64}"),
      ("[F32_Default, F32_Default]", "[F32_Default, F64_Default]"),
      (EW, "kernel:\n"
       "  forward: 'out[0] = x[0];'\n"
       "  backward: 'dx[0] = dout[0];'\n"
       "  grad_views: [x]\n")],
     "s.yaml:15:16: error: op 'twice': kernel.grad_views: a view of 'dout' has the output's dtype, so output "
     "'out''s dtype rule must be 'x', not 'float64'"),
    ("kernel_save_unknown",
     [(EW, "kernel:\n"
       "  forward: 'out[0] = x[0];'\n"
       "  backward: 'dx[0] = dout[0];'\n"
       "  save: [x, y]\n")],
     "s.yaml:15:9: error: op 'twice': kernel.save names 'y', which is not an input or output"),
    ("kernel_without_backward", [(EW, "kernel:\n  forward: 'out[0] = x[0];'\n")],
     "s.yaml:1:1: error: op 'twice': differentiable input(s) x but no kernel.backward\n"
     "s.yaml:1:1: note: add kernel.backward or mark the inputs 'differentiable: false'"),
    ("optional_before_required",
     [("  - {name: x, doc: any tensor}\n", "  - {name: b, doc: bias, kind: optional, differentiable: false}\n"
       "  - {name: x, doc: any tensor}\n"),
      ("[F32_Default, F32_Default]", "[F32_Default, F32_Default, F32_Default]"),
      (EW, "kernel:\n"
       "  forward: 'out[0] = x[0];'\n"
       "  backward: 'dx[0] = dout[0];'\n")],
     "s.yaml:4:5: error: op 'twice': optional input 'b' is followed by 'x', which has no default; "
     "optional inputs default to None, so everything after them needs a default\n"
     "s.yaml:4:5: note: move optional input 'b' after input 'x'"),
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


@pytest.mark.parametrize("suffix", ["primitive", "grad", "backward"])
def test_op_named_like_another_ops_generated_name(suffix: str, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    Path("a.yaml").write_text(BASE, encoding="utf-8")
    Path("b.yaml").write_text(BASE.replace("name: twice", f"name: twice_{suffix}"), encoding="utf-8")
    _, diags = load_ops(["a.yaml", "b.yaml"])
    assert "\n".join(d.format() for d in diags) == (
        f"b.yaml:1:1: error: op 'twice_{suffix}': op name 'twice_{suffix}' collides with the generated "
        f"'twice_{suffix}' of op 'twice'\n"
        "a.yaml:1:1: note: op 'twice' is defined here\n"
        "b.yaml:1:1: note: rename one of them; opgen appends _primitive, _grad, _backward to op names")


def test_enough_distinct_diagnostics_are_pinned() -> None:
    """Issue 3: at least 50 invalid specs, each with its exact diagnostic text."""
    assert len({c[2] for c in CASES}) == len(CASES) >= 50
