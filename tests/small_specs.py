"""Small specs that several test files write into temporary directories (one text each, so a
change of the spec language changes them once). Each is a complete ``ops/<name>.yaml``."""

# An elementwise op: out = 2 * x, float32 (tests/test_build.py, test_cli.py, test_writer.py).
TWICE = """
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

# A kernel: op with C++ forward and backward bodies: out = x / 2, float32 (test_load.py, test_wheel.py).
HALVE = """
name: halve
doc: Halves x.
inputs:
  - {name: x, doc: any tensor}
outputs:
  - {name: out, doc: x / 2, shape: x, dtype: x}
dtype_format:
  CPU:
    - [F32_Default, F32_Default]
kernel:
  forward: |
    for (int64_t i = 0; i < out.numel; ++i) out[i] = x[i] / 2;
  backward: |
    for (int64_t i = 0; i < dx.numel; ++i) dx[i] = dout[i] / 2;
"""

# A right op with a float attr and two test attr sets: out = alpha * x (test_testing.py, test_torch_testing.py).
SCALE = """
name: scale
doc: alpha * x.
inputs:
  - {name: x, doc: any}
attrs:
  - {name: alpha, type: float, doc: factor, default: 0.1}
outputs:
  - {name: out, doc: alpha * x, shape: x, dtype: x}
dtype_format:
  CPU:
    - [F32_Default, F32_Default]
    - [F64_Default, F64_Default]
elementwise:
  forward: alpha * x
  grad:
    x: alpha * dout
test:
  attrs:
    - {}
    - {alpha: -3.0}
"""

# A wrong gradient for y (dout instead of dout * x): opgen test must fail its gradient checks
# (test_testing.py, test_torch_testing.py).
BADGRAD = """
name: badgrad
doc: x * y with a wrong gradient for y.
inputs:
  - {name: x, doc: any}
  - {name: y, doc: broadcastable against x}
outputs:
  - {name: out, doc: x * y, shape: "broadcast(x, y)", dtype: x}
dtype_format:
  CPU:
    - [F64_Default, F64_Default, F64_Default]
elementwise:
  forward: x * y
  grad:
    x: dout * y
    y: dout
test:
  domain:
    x: [2, 3]
"""
