"""Every YAML block in README.md and docs/**/*.md is a spec (or a part of one) that validates.

A block with a top-level ``name`` is a whole spec: it goes through every stage (``opgen
validate``). Any other block is a part of a spec: its keys are put into a valid spec and checked
against the schema. A block preceded by ``<!-- yaml:invalid -->`` is wrong on purpose and must
fail. (The skeletons of ``opgen new`` are checked in tests/test_new.py.)
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from opgen import loader, schema
from opgen.pipeline import load_ops

ROOT = Path(__file__).resolve().parents[1]
_BLOCK = re.compile(r"(<!-- yaml:invalid -->\n)?```ya?ml\n(.*?)\n```", re.S)

BASE = """\
name: base
doc: A valid spec that a part of a spec is put into.
inputs:
  - {name: x, doc: any tensor}
outputs:
  - {name: out, doc: x, shape: x, dtype: x}
dtype_format:
  CPU:
    - [F32_Default, F32_Default]
elementwise:
  forward: x
"""


def _blocks() -> list[tuple[str, str, bool]]:
    """(where, text, invalid on purpose) of every YAML block of the docs."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    out = []
    for page in pages:
        text = page.read_text(encoding="utf-8")
        for m in _BLOCK.finditer(text):
            line = text.count("\n", 0, m.start(2)) + 1
            out.append((f"{page.relative_to(ROOT)}:{line}", m.group(2), m.group(1) is not None))
    return out


BLOCKS = _blocks()


def _problems(text: str, file: Path) -> list[str]:
    tree = loader.load_text(text, str(file))
    if isinstance(tree, dict) and "name" in tree:
        file.write_text(text, encoding="utf-8")
        _, diags = load_ops([file])
        return [d.format() for d in diags]
    assert isinstance(tree, dict), f"a YAML block of the docs is neither a spec nor a part of one: {text!r}"
    whole = loader.load_text(BASE, str(file))
    for key in tree:  # the block's keys replace BASE's, with their own locations
        whole[key] = tree[key]
        whole.key_locations[key] = tree.key_loc(key)
        whole.value_locations[key] = tree.loc(key)
    if "kernel" in tree:
        del whole["elementwise"]
    return [d.format() for d in schema.validate_tree(whole)]


def test_the_docs_have_yaml_blocks() -> None:
    where = {w.split(":")[0] for w, _, _ in BLOCKS}
    assert {"README.md", "docs/testing.md", "docs/kernel-api.md"} <= where


@pytest.mark.parametrize(("where", "text", "invalid"), BLOCKS, ids=[b[0] for b in BLOCKS])
def test_yaml_block_validates(where: str, text: str, invalid: bool, tmp_path: Path) -> None:
    problems = _problems(text, tmp_path / "block.yaml")
    if invalid:
        assert problems, f"{where}: marked <!-- yaml:invalid --> but it validates"
    else:
        assert not problems, f"{where}: the docs' YAML does not validate:\n" + "\n".join(problems)


# ----------------------------------------------------------------------------- Python examples

_EXAMPLE = re.compile(r"<!-- example:(\w+) -->\n```python\n(.*?)\n```", re.S)


def _examples() -> list[tuple[str, str, str]]:
    """(where, framework, code) of every Python block marked ``<!-- example:<framework> -->``."""
    out = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        text = page.read_text(encoding="utf-8")
        for m in _EXAMPLE.finditer(text):
            line = text.count("\n", 0, m.start(2)) + 1
            out.append((f"{page.relative_to(ROOT)}:{line}", m.group(1), m.group(2)))
    return out


EXAMPLES = _examples()


def test_the_torch_page_has_examples() -> None:
    assert sum(1 for w, fw, _ in EXAMPLES if w.startswith("docs/torch.md") and fw == "torch") >= 4


@pytest.mark.parametrize(("where", "framework", "code"), EXAMPLES, ids=[e[0] for e in EXAMPLES])
def test_python_example_runs(where: str, framework: str, code: str) -> None:
    """The example runs from the checkout's root (``generated`` importable) and prints what its
    ``print(...)  # expected`` comments say, line for line."""
    import os
    import subprocess
    import sys

    pytest.importorskip({"torch": "torch", "mindspore": "mindspore"}[framework])
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, text=True, capture_output=True, timeout=900)
    assert run.returncode == 0, f"{where}: {run.stderr[-3000:]}"
    expected = [line.split("# ", 1)[1].strip() for line in code.splitlines()
                if line.lstrip().startswith("print(") and "# " in line]
    got = [line.strip() for line in run.stdout.splitlines() if line.strip()]
    assert expected and got == expected, f"{where}: printed {got}, the page says {expected}"


# ----------------------------------------------------------------------------- C++ without Python

_CPP_EXAMPLE = re.compile(r"<!-- example:torch-cpp -->\n```cpp\n(.*?)\n```\n\n```bash\n(.*?)\n```", re.S)


def test_torch_library_runs_from_a_cpp_program(tmp_path: Path) -> None:
    """docs/torch.md's C++ program, built and run by the page's own shell lines (``python`` and
    ``opgen`` this environment's): it loads the generated library with dlopen and calls an op
    through the dispatcher, without Python, and prints what the page says."""
    import os
    import stat
    import subprocess
    import sys

    pytest.importorskip("torch")
    m = _CPP_EXAMPLE.search((ROOT / "docs" / "torch.md").read_text(encoding="utf-8"))
    assert m, "docs/torch.md has no example:torch-cpp block followed by its shell lines"
    code, shell = m.groups()
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for name, body in (("python", f'exec {sys.executable} "$@"'), ("opgen", f'exec {sys.executable} -m opgen "$@"')):
        (bindir / name).write_text(f"#!/bin/sh\n{body}\n")
        (bindir / name).chmod(stat.S_IRWXU)
    work = tmp_path / "work"
    work.mkdir()
    (work / "square.cc").write_text(code + "\n")
    # a project whose [tool.opgen] names this checkout's torch package, so that the page's
    # 'opgen build --backend torch' finds it from the program's folder
    (work / "pyproject.toml").write_text(f'[tool.opgen]\noutput = "{ROOT / "generated"}"\nbackends = ["torch"]\n')
    env = dict(os.environ, PYTHONPATH=str(ROOT), NO_COLOR="1", PATH=f"{bindir}{os.pathsep}{os.environ['PATH']}")
    run = subprocess.run(["bash", "-ec", shell], cwd=work, env=env, text=True, capture_output=True, timeout=1800)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
    expected = [ln.rsplit("# ", 1)[1].strip() for ln in shell.splitlines() if ln.startswith("./")]
    assert run.stdout.split()[-1:] == expected, run.stdout
