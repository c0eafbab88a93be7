"""Fuzzing the spec pipeline with hypothesis: 1,000+ generated specs per run, valid ones and
mutations of valid ones (dropped keys, wrong types, swapped rows, renamed references, bad names,
corrupted YAML text), through load -> validate -> generate, in-process.

Each spec must end either in generated code (every generated ``.py`` compiles) or in
diagnostics that name the spec file and a line -- never in an exception.  A sample of the
valid specs is then compiled for real (the aot library, with ``opgen.build``) and called
through the generated ``custom.py`` on real MindSpore in PyNative, forward and backward,
against the generated numpy reference.  The run is derandomized (same specs every run).
"""

from __future__ import annotations

import ast
import contextlib
import io
import json
import os
import subprocess
import sys
import textwrap
import time
import zlib
from collections import Counter
from pathlib import Path
from typing import Any

from fuzzspecs import dump, mutated_specs, valid_specs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from opgen import backends, loader, render
from opgen import shapes as lang
from opgen.cli import main
from opgen.diagnostics import SpecError
from opgen.model import Op
from opgen.pipeline import load_ops

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = 1000
CLI_EVERY = 40  # every 40th spec goes through `opgen generate` (writer included) instead
DIFFERENTIAL_EVERY = 10  # about one in 10 is also parsed with PyYAML's pure-Python parser; not texts with
# a U+FEFF inside: PyYAML does not count it as a column, libyaml does (columns after it differ by one)
SAMPLE = 6  # valid specs compiled and called on MindSpore


def _attr_order_bug(op: Op) -> bool:
    """A required attr after one with a default: the generated ``def`` is a SyntaxError
    (pinned in tests/test_hostile.py::test_known_generator_bug[required_attr_after_default])."""
    seen_default = False
    for a in op.attrs:
        if a.has_default:
            seen_default = True
        elif seen_default:
            return True
    return False


KNOWN_BUGS = {"required_attr_after_default": _attr_order_bug}


def _constant_divisor(text: str) -> bool:
    """``1.5 / 0``-like division by a constant subexpression: the numpy reference evaluates it in
    plain Python and raises ZeroDivisionError where the kernel gives inf (reported bug)."""
    return any(isinstance(n, ast.BinOp) and isinstance(n.op, ast.Div)
               and not any(isinstance(m, ast.Name) for m in ast.walk(n.right))
               for n in ast.walk(ast.parse(text, mode="eval")))


def _input_shape(op: Op) -> tuple[int, ...] | None:
    """The shape the sample runner gives every input (the last one of a broadcast rule gets its
    last row), such that the inputs broadcast to the output's shape: (2, 3), or an output's own
    literal dims; ``None`` when its shape expression admits neither."""
    node = op.outputs[0].shape.node
    if isinstance(node, lang.ShapeOf) or (isinstance(node, lang.Call) and node.fn.name == "broadcast"):
        return (2, 3)
    if lang.attrs_used(node):
        return None
    env = {n: (2, 3) for n in lang.tensors_used(node)}
    try:
        out = tuple(int(d) for d in lang.evaluate(node, env))
    except (ValueError, KeyError, TypeError):
        return None
    if not env:
        return out
    return (2, 3) if out[-2:] == (2, 3) else None


def _sample_worthy(op: Op) -> bool:
    """Elementwise, float rows only, output dtype following an input (the numpy reference then
    computes in the same type as the kernel; see docs/robustness.md for the integer-row bugs),
    output shape following the inputs."""
    ew = op.elementwise
    if ew is None:
        return False
    exprs = [ew.forward, *(g[1] for g in ew.grads)]
    int_attrs = {a.name for a in op.attrs if a.type in ("int", "bool")}
    return (all(c.startswith("F") for r in op.rows for c in r.columns)
            and op.outputs[0].dtype in [x.name for x in op.inputs] and not _attr_order_bug(op)
            and _input_shape(op) is not None
            and not any(_constant_divisor(e.text) for e in exprs)
            # int attrs make opgen::math functions compute in integers (pinned bug, test_hostile.py)
            and not any(int_attrs & set(e.names) for e in exprs))


def _load(text: str) -> Any:
    """The marked tree (with its locations) or the diagnostics' locations of one spec text."""
    try:
        tree = loader.load_text(text, "fuzz/spec.yaml")
    except SpecError as exc:
        return [d.location for d in exc.diagnostics]
    return tree, getattr(tree, "value_locations", None), getattr(tree, "key_locations", None)


def _same_with_both_parsers(text: str) -> None:
    """libyaml's parser (the default) and PyYAML's pure-Python one (the fallback) give the same
    tree and the same locations."""
    fast = _load(text)
    saved, loader._CParser = loader._CParser, None
    try:
        assert _load(text) == fast
    finally:
        loader._CParser = saved


def _check_generated(files: dict[str, str]) -> None:
    for rel, text in files.items():
        if rel.endswith(".py"):
            compile(text, rel, "exec")
        # the package's runtime (_runtime/) is copied from opgen/runtime/, not made from the spec
        first = text.splitlines()[0]
        if rel.startswith("_runtime/"):
            assert "@generated by opgen" in first and "from opgen/runtime/" in first, rel
        else:
            assert "@generated by opgen from fuzz/spec.yaml" in first, rel


def run_fuzz() -> tuple[Counter[str], list[str]]:
    """The fuzz loop, in the current directory; returns the counts and the sample to compile."""
    Path("fuzz").mkdir()
    spec = Path("fuzz/spec.yaml")
    stats: Counter[str] = Counter()
    sample: list[str] = []

    def one(text: str, mutations: list[str]) -> None:
        stats["specs"] += 1
        for m in mutations:
            stats[f"mutation:{m}"] += 1
        spec.write_text(text, encoding="utf-8")
        # branch on a property of the text, not of the run: hypothesis replays take the same path
        crc = zlib.crc32(text.encode("utf-8", "surrogatepass"))
        if crc % CLI_EVERY == 0:
            err = io.StringIO()
            with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
                rc = main(["generate", str(spec), "-o", "out", "-p", "fuzz_pkg", "-q"])
            stats["via_cli"] += 1
            assert rc in (0, 1), err.getvalue()
            if rc == 1:
                assert "fuzz/spec.yaml:" in err.getvalue() and "error: " in err.getvalue()
                stats["diagnostics"] += 1
                return
            pkg = Path("out/fuzz_pkg")
            files = {p.relative_to(pkg).as_posix(): p.read_text(encoding="utf-8") for p in pkg.rglob("*")
                     if p.is_file() and not p.name.startswith(".")}
            _check_generated(files)
            stats["generated"] += 1
            return
        if crc // CLI_EVERY % DIFFERENTIAL_EVERY == 0 and "\ufeff" not in text:
            _same_with_both_parsers(text)
            stats["parser_differential"] += 1
        ops, diags = load_ops([spec])
        if diags:
            assert not ops
            for d in diags:
                assert d.location.file == "fuzz/spec.yaml" and d.message, d
                assert d.format().startswith("fuzz/spec.yaml")
            assert mutations, "a valid-by-construction spec was rejected:\n" + text + "\n" + "\n".join(
                d.format() for d in diags)
            stats["diagnostics"] += 1
            return
        assert len(ops) == 1
        files = render.render_package(ops, "fuzz_pkg", "out/fuzz_pkg")
        try:
            _check_generated(files)
        except SyntaxError:
            known = [name for name, pred in KNOWN_BUGS.items() if pred(ops[0])]
            if not known:
                raise
            stats[f"known_bug:{known[0]}"] += 1
            return
        stats["generated"] += 1
        if not mutations and len(sample) < SAMPLE and _sample_worthy(ops[0]):
            sample.append(text)

    @settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(st.one_of(valid_specs().map(lambda s: (dump(s), [])), mutated_specs()))
    def fuzz(case: tuple[str, list[str]]) -> None:
        one(*case)

    started, cpu = time.perf_counter(), time.process_time()
    fuzz()
    stats["seconds"] = round(time.perf_counter() - started)
    stats["cpu_seconds"] = round(time.process_time() - cpu)
    return stats, sample


def test_fuzz_specs(tmp_path: Path) -> None:
    """Runs the fuzz in a fresh interpreter: hypothesis mixes constants from every local module
    imported so far into its draws, so only a fixed set of imports gives the same 1,000 specs in
    every run, whatever other tests ran before."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    r = subprocess.run([sys.executable, __file__, str(tmp_path)], env=env, capture_output=True, text=True,
                       timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-10000:]
    result = json.loads((tmp_path / "fuzz.json").read_text(encoding="utf-8"))
    stats, sample = Counter(result["stats"]), result["sample"]
    print("\nfuzz:", json.dumps(dict(sorted(stats.items()))))
    assert stats["specs"] >= EXAMPLES
    assert stats["generated"] >= EXAMPLES // 4 and stats["diagnostics"] >= EXAMPLES // 4
    assert stats["via_cli"] >= EXAMPLES // CLI_EVERY // 2 and stats["parser_differential"] >= EXAMPLES // 20
    assert len(sample) == SAMPLE
    _compile_and_call(sample, tmp_path)


RUNNER = """
import sys, json
import numpy as np
import mindspore as ms
ms.set_device("CPU")
ms.set_context(mode=ms.PYNATIVE_MODE)
from fuzz_pkg import custom as C, reference as R
from opgen.pipeline import load_ops
rng = np.random.default_rng(0)
shapes = json.loads(sys.argv[1])
checked = 0
ops, _ = load_ops(sys.argv[2:])
for op in ops:
    fn, ref, gref = getattr(C, op.name), getattr(R, op.name), getattr(R, op.name + "_grad", None)
    attrs = {}
    for a in op.attrs:
        if a.has_default:
            attrs[a.name] = a.default
        elif a.choices:
            attrs[a.name] = a.choices[0]
        elif a.range:
            v = (a.range[0] + a.range[1]) / 2
            attrs[a.name] = int(v) if a.type == "int" else v
        else:
            attrs[a.name] = {"int": 2, "float": 0.5, "bool": True, "str": "s", "list[int]": (1, 2),
                             "list[float]": (0.5,), "list[bool]": (True, False), "list[str]": ("s", "")}[a.type]
        if a.type.startswith("list["):
            attrs[a.name] = tuple(attrs[a.name])
    for row in op.rows:
        shape = tuple(shapes[op.name])
        arrays = [rng.uniform(0.5, 2.0, shape).astype(row.dtype(i).name) for i in range(len(op.inputs))]
        if op.outputs[0].shape.call == "broadcast" and len(arrays) > 1:
            arrays[-1] = arrays[-1][0]  # shape (3,): broadcast against (2, 3)
        tensors = [ms.Tensor(a) for a in arrays]
        out = fn(*tensors, **attrs).asnumpy()
        expected = np.asarray(ref(*arrays, *attrs.values()))
        assert out.dtype == np.dtype(row.dtype(len(op.inputs)).name), (op.name, out.dtype)
        np.testing.assert_allclose(out, expected, rtol=2e-4, atol=1e-5, equal_nan=True, err_msg=op.name)
        checked += 1
        if gref is not None:
            grads = ms.grad(lambda *xs: fn(*xs, **attrs), grad_position=tuple(range(len(tensors))))(*tensors)
            grads = grads if isinstance(grads, tuple) else (grads,)
            want = gref(*arrays, out, np.ones_like(out), *attrs.values())
            for x, g, w in zip(op.inputs, grads, want):
                if w is not None:
                    np.testing.assert_allclose(g.asnumpy(), w, rtol=2e-4, atol=1e-4, equal_nan=True,
                                               err_msg=f"{op.name} d{x.name}")
                    checked += 1
print(json.dumps({"checked": checked, "ops": [o.name for o in ops]}))
"""


def _compile_and_call(sample: list[str], tmp_path: Path) -> None:
    specs = tmp_path / "sample"
    specs.mkdir()
    for i, text in enumerate(sample):
        lines = text.splitlines()
        assert lines[0].startswith("name: ")
        (specs / f"fz{i}.yaml").write_text("\n".join([f"name: fz{i}", *lines[1:]]) + "\n", encoding="utf-8")
    os.environ["OPGEN_BUILD_DIR"] = str(tmp_path / "build")
    try:
        assert main(["generate", str(specs), "-o", str(tmp_path / "out"), "-p", "fuzz_pkg", "-q"]) == 0
        lib = backends.build(tmp_path / "out" / "fuzz_pkg", "aot", quiet=True)
    finally:
        del os.environ["OPGEN_BUILD_DIR"]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path / "out"), str(ROOT)]),
               OPGEN_BUILD_DIR=str(lib.parent.parent), OPGEN_QUIET="1")
    ops, _ = load_ops([specs])
    shapes = json.dumps({op.name: _input_shape(op) for op in ops})
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(RUNNER), shapes, *sorted(map(str, specs.glob("*.yaml")))],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    result = json.loads(r.stdout.strip().splitlines()[-1])
    print("fuzz sample:", result)
    assert result["checked"] >= SAMPLE


if __name__ == "__main__":
    os.chdir(sys.argv[1])
    counts, chosen = run_fuzz()
    Path("fuzz.json").write_text(json.dumps({"stats": counts, "sample": chosen}), encoding="utf-8")
