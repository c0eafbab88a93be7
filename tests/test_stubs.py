"""The generated ``.pyi`` stubs: real signatures that ``mypy --strict`` checks usage against,
and the same parameter names and defaults as the Python functions they describe."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "generated" / "opgen_ops"

GOOD = """
from typing import Tuple

from mindspore import Tensor

import opgen_ops_ext
from generated import opgen_ops
from generated.opgen_ops import custom, function


def use(x: Tensor, y: Tensor) -> Tuple[Tensor, ...]:
    z: Tensor = opgen_ops.mul(x, y)
    y2, mean, rstd = opgen_ops.layer_norm(x, eps=1e-3)        # three outputs
    g = function.layer_norm(x, gamma=None, beta=y)[0]        # optional inputs
    c = function.concat([x, y], axis=0)                      # a dynamic input
    r = custom.reduce_sum(x, axis=[0], keep_dims=True)       # list[int] and bool attrs
    prim = opgen_ops.clip_primitive(0.0, 1.0)
    e = opgen_ops_ext.layer_norm(x, None, None, 1e-5)[0]     # the compiled extension
    return z, y2, g, c, r, prim(x), e, function.gelu(x, approximate="tanh")
"""

BAD = """
from mindspore import Tensor

from generated import opgen_ops
from generated.opgen_ops import function


def use(x: Tensor) -> None:
    a, b = opgen_ops.layer_norm(x)
    function.gelu(x, approximate=1)
    opgen_ops.mul(x)
    function.concat(x, axis="0")
"""

CONFIG = """
[mypy]
strict = True
[mypy-mindspore]
ignore_missing_imports = True
[mypy-mindspore.*]
ignore_missing_imports = True
"""


def _mypy(tmp_path: Path, code: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "mypy.ini").write_text(CONFIG)
    sample = tmp_path / "sample.py"
    sample.write_text(textwrap.dedent(code))
    env = dict(os.environ, MYPYPATH=os.pathsep.join([str(ROOT), str(PKG)]))
    return subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(tmp_path / "mypy.ini"),
                           "--cache-dir", str(tmp_path / "cache"), str(sample)],
                          env=env, cwd=tmp_path, text=True, capture_output=True, timeout=300)


def test_mypy_strict_accepts_correct_usage(tmp_path: Path) -> None:
    r = _mypy(tmp_path, GOOD)
    assert r.returncode == 0, r.stdout + r.stderr


def test_mypy_strict_rejects_wrong_usage(tmp_path: Path) -> None:
    r = _mypy(tmp_path, BAD)
    assert r.returncode == 1
    out = r.stdout
    assert "sample.py:9: error: Too many values to unpack (2 expected, 3 provided)" in out
    assert 'sample.py:10: error: Argument "approximate" to "gelu" has incompatible type "int"; expected "str"' in out
    assert 'sample.py:11: error: Missing positional argument "y" in call to "mul"' in out
    assert 'sample.py:12: error: Argument "axis" to "concat" has incompatible type "str"; expected "int"' in out


def _signatures(path: Path) -> dict[str, tuple[list[str], list[str]]]:
    """Public top-level functions: (parameter names, defaults as source text)."""
    out = {}
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
            a = node.args
            out[node.name] = ([p.arg for p in a.args], [ast.unparse(d) for d in a.defaults])
    return out


def test_stubs_match_the_modules() -> None:
    for module in ("custom", "function"):
        real = _signatures(PKG / f"{module}.py")
        stub = _signatures(PKG / f"{module}.pyi")
        assert real.keys() == stub.keys()
        for name, (params, defaults) in real.items():
            assert stub[name][0] == params, (module, name)
            assert len(stub[name][1]) == len(defaults), (module, name)
            for shown, actual in zip(stub[name][1], defaults):
                assert shown in (actual, "..."), (module, name, shown, actual)


def test_stubs_raise_no_mypy_error_without_any_config(tmp_path: Path) -> None:
    # a user's script, checked with mypy's defaults: the stubs' own `from mindspore import Tensor`
    # must not report import-untyped (MindSpore has no py.typed)
    code = """
    from generated import opgen_ops
    from generated.opgen_ops import function


    def use(x: object) -> object:
        return opgen_ops.mul(x, x), function.gelu(x)
    """
    sample = tmp_path / "sample.py"
    sample.write_text(textwrap.dedent(code))
    (tmp_path / "mypy.ini").write_text("[mypy]\n")
    env = dict(os.environ, MYPYPATH=os.pathsep.join([str(ROOT), str(PKG)]))
    r = subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(tmp_path / "mypy.ini"), "--cache-dir",
                        str(tmp_path / "cache"), str(sample)], env=env, cwd=tmp_path, text=True, capture_output=True,
                       timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "import-untyped" not in r.stdout


def test_the_readme_mypy_config_silences_a_users_own_import(tmp_path: Path) -> None:
    import re

    block = re.search(r"```toml\n( *\[\[tool\.mypy\.overrides\]\].*?)\n *```",
                      (ROOT / "README.md").read_text(), re.S)
    assert block
    (tmp_path / "pyproject.toml").write_text(textwrap.dedent(block.group(1)) + "\n")
    (tmp_path / "sample.py").write_text("import mindspore\n\nx = mindspore.Tensor\n")
    r = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(tmp_path / "cache"), "sample.py"],
                       cwd=tmp_path, text=True, capture_output=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
