"""Killed and concurrent runs: ``opgen generate`` SIGKILLed while it writes, two generates on one
tree at once, ``opgen build`` SIGKILLed mid-compile.

Afterwards the previous ``generated/`` package (byte for byte) and the last good library are
intact and usable, and the next run succeeds with no manual cleanup.  Kill points come from
real timing (the run is watched until it is inside the phase of interest), not from hooks.
"""

from __future__ import annotations

import ctypes
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
MUL = (ROOT / "ops" / "mul.yaml").read_text(encoding="utf-8")


def _env(**extra: str) -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(ROOT), **extra)


def _write_specs(d: Path, n: int, tag: str) -> None:
    """``n`` copies of ops/mul.yaml named mul_<i>, their docs marked with ``tag``."""
    d.mkdir(parents=True, exist_ok=True)
    for old in d.glob("*.yaml"):
        old.unlink()
    for i in range(n):
        text = MUL.replace("name: mul", f"name: mul_{i}").replace("Element-wise product", f"{tag} product")
        (d / f"mul_{i}.yaml").write_text(text, encoding="utf-8")


def _snapshot(pkg: Path) -> dict[str, bytes]:
    return {p.relative_to(pkg).as_posix(): p.read_bytes() for p in sorted(pkg.rglob("*")) if p.is_file()}


def _generate(work: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "opgen", "generate", *args, "-q"], cwd=work, env=_env(),
                          capture_output=True, text=True, timeout=300)


def _staging(out: Path) -> list[Path]:
    return [p for p in out.iterdir() if ".opgen-staging-" in p.name] if out.is_dir() else []


def test_generate_killed_while_writing_keeps_old_package(tmp_path: Path) -> None:
    """SIGKILL at random instants of the write phase: the package is the old one or the new one."""
    work = tmp_path / "w"
    n = 40
    _write_specs(work / "ops", n, "OLD")
    assert _generate(work, "ops").returncode == 0
    pkg = work / "generated" / "opgen_ops"
    old = _snapshot(pkg)
    # 8 C++ files per op (mul has GPU rows: its CUDA kernel layer and GPU aot entry points too),
    # bindings.cc, 5 .py, 3 .pyi, manifest, and the package's runtime (_runtime/: 6 modules)
    assert len(old) == 8 * n + 10 + 6
    _write_specs(work / "ops", n - 10, "NEW")  # every file changes, 30 files go away
    rng = random.Random(7)
    outcomes: list[str] = []
    leftovers = 0
    # Kill later and later into the write phase until a run gets through the swap.
    for delay in (0.0, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.4, 0.8, 1.6, 3.2):
        before = set(_staging(work / "generated"))  # a killed run's leftovers
        proc = subprocess.Popen([sys.executable, "-m", "opgen", "generate", "ops", "-q"], cwd=work, env=_env(),
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while not set(_staging(work / "generated")) - before and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.002)
        time.sleep(delay * rng.uniform(0.8, 1.2))
        alive = proc.poll() is None
        if alive:
            proc.kill()  # SIGKILL
        proc.wait()
        leftovers += bool(_staging(work / "generated"))
        now = _snapshot(pkg)
        if now == old:
            assert alive
            outcomes.append("old")
            continue
        assert len(now) == 8 * (n - 10) + 10 + 6, "a killed run left a mix of old and new files"
        assert all(b"OLD product" not in data for data in now.values())
        outcomes.append("new" if alive else "finished")
        break  # the new package is complete: later kills would find nothing to do
    print(f"kill outcomes: {outcomes}, staging leftovers: {leftovers}")
    # at least the first kill (right as staging appears) landed inside the write phase; how many
    # more do depends on the machine's speed (a fast disk writes 120 files in under 20 ms)
    assert outcomes.count("old") >= 1, outcomes
    assert leftovers >= 1
    # the next run needs no cleanup: it finishes the job and removes the killed runs' leftovers
    r = _generate(work, "ops")
    assert r.returncode == 0, r.stderr
    assert not _staging(work / "generated")
    new = _snapshot(pkg)
    assert len(new) == 8 * (n - 10) + 10 + 6 and b"NEW product" in new["custom.py"]
    fresh = tmp_path / "fresh"
    _write_specs(fresh / "ops", n - 10, "NEW")
    assert _generate(fresh, "ops").returncode == 0
    assert new == _snapshot(fresh / "generated" / "opgen_ops")
    for rel, data in new.items():
        if rel.endswith(".py"):
            compile(data, rel, "exec")


def test_concurrent_generates_never_interleave(tmp_path: Path) -> None:
    """Two runs with different specs on one tree: the result is one of them whole, each time."""
    expected = {}
    for tag in ("A", "B"):
        solo = tmp_path / f"solo{tag}"
        _write_specs(solo / f"ops{tag}", 20 if tag == "A" else 15, tag)
        assert _generate(solo, f"ops{tag}").returncode == 0
        expected[tag] = _snapshot(solo / "generated" / "opgen_ops")
    work = tmp_path / "shared"
    for tag in ("A", "B"):
        _write_specs(work / f"ops{tag}", 20 if tag == "A" else 15, tag)
    seen = set()
    for round_ in range(2):
        procs = [subprocess.Popen([sys.executable, "-m", "opgen", "generate", f"ops{tag}", "-q"], cwd=work,
                                  env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for tag in (("A", "B") if round_ % 2 == 0 else ("B", "A"))]
        for p in procs:
            _out, err = p.communicate(timeout=300)
            assert p.returncode == 0, err
        final = _snapshot(work / "generated" / "opgen_ops")
        match = [tag for tag, files in expected.items() if final == files]
        assert match, "two concurrent runs interleaved their output"
        seen.add(match[0])
        assert not _staging(work / "generated")
    assert seen <= {"A", "B"}


# ------------------------------------------------------------------------------- build


HALVE = """
name: {name}
doc: Scales x by {factor}.
inputs:
  - {{name: x, doc: any tensor}}
outputs:
  - {{name: out, doc: x times {factor}, shape: x, dtype: x}}
dtype_format:
  CPU:
    - [F32_Default, F32_Default]
elementwise:
  forward: x * {factor}
  grad:
    x: dout * {factor}
"""


def _call_aot(lib: Path, symbol: str, x: np.ndarray) -> np.ndarray:
    """Call an aot forward entry point through MindSpore's C ABI, as MindSpore does."""
    so = ctypes.CDLL(str(lib))
    fn = getattr(so, symbol)
    fn.restype = ctypes.c_int
    out = np.zeros_like(x)
    params = (ctypes.c_void_p * 2)(x.ctypes.data, out.ctypes.data)
    shape = (ctypes.c_int64 * 1)(x.size)
    shapes = (ctypes.POINTER(ctypes.c_int64) * 2)(shape, shape)
    ndims = (ctypes.c_int * 2)(1, 1)
    dtypes = (ctypes.c_char_p * 2)(b"float32", b"float32")
    rc = fn(2, params, ndims, shapes, dtypes, None, None)
    assert rc == 0
    return out


def _session(sid: int) -> list[int]:
    """Processes of session ``sid`` (ninja puts each compiler in its own process group)."""
    pids = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[3]) == sid:
            pids.append(int(d.name))
    return pids


def _compilers_in_session(sid: int) -> list[int]:
    out = []
    for pid in _session(sid):
        try:
            if Path(f"/proc/{pid}/comm").read_text().strip() == "cc1plus":
                out.append(pid)
        except OSError:
            pass
    return out


def test_build_killed_mid_compile_keeps_last_good_library(tmp_path: Path) -> None:
    """SIGKILL ``opgen build`` and everything it started (ninja, the compilers) while a compiler
    runs; the last good library still loads and computes, the next build succeeds."""
    work = tmp_path / "w"
    specs = work / "ops"
    specs.mkdir(parents=True)
    env = _env(OPGEN_BUILD_DIR=str(tmp_path / "build"))
    names = ["scale0"]

    def generate_and_build(factor: float, kill: bool) -> Path | None:
        for name in names:
            (specs / f"{name}.yaml").write_text(HALVE.format(name=name, factor=factor), encoding="utf-8")
        assert _generate(work, "ops").returncode == 0
        cmd = [sys.executable, "-m", "opgen", "build", "generated/opgen_ops", "--only", "aot"]
        proc = subprocess.Popen(cmd, cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, start_new_session=True)
        if kill:
            deadline = time.monotonic() + 120
            while not _compilers_in_session(proc.pid) and time.monotonic() < deadline and proc.poll() is None:
                time.sleep(0.01)
            assert proc.poll() is None, "the build ended before a compiler started"
            time.sleep(0.2)
            for pid in [proc.pid, *_session(proc.pid)]:  # opgen, ninja and the compilers
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            proc.communicate()
            return None
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        return Path(out.strip().split("aot: ", 1)[1])

    good = generate_and_build(2.0, kill=False)
    assert good is not None
    good_bytes = good.read_bytes()
    x = np.arange(5, dtype=np.float32)
    np.testing.assert_array_equal(_call_aot(good, "opgen_ops_scale0_forward", x), x * 2)
    generate_and_build(3.0, kill=True)
    assert good.read_bytes() == good_bytes
    np.testing.assert_array_equal(_call_aot(good, "opgen_ops_scale0_forward", x), x * 2)
    fresh = generate_and_build(3.0, kill=False)  # no cleanup in between
    assert fresh is not None and fresh != good
    np.testing.assert_array_equal(_call_aot(fresh, "opgen_ops_scale0_forward", x), x * 3)


def test_killing_only_opgen_build_ends_its_ninja_and_compilers(tmp_path: Path) -> None:
    """Kill only the ``opgen build`` process mid-compile (not its session): ninja learns of it
    (PR_SET_PDEATHSIG) and ends its compilers, so no orphan keeps compiling beside the next
    build, which runs at once and succeeds. (Even an orphan that lived on could not spoil it:
    every object is written to a per-process temporary name and renamed when complete.)"""
    work = tmp_path / "w"
    (work / "ops").mkdir(parents=True)
    (work / "ops" / "s0.yaml").write_text(HALVE.format(name="s0", factor=2.0), encoding="utf-8")
    assert _generate(work, "ops").returncode == 0
    env = _env(OPGEN_BUILD_DIR=str(tmp_path / "build"))
    cmd = [sys.executable, "-m", "opgen", "build", "generated/opgen_ops", "--only", "aot"]
    first = subprocess.Popen(cmd, cwd=work, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while not (compilers := _compilers_in_session(first.pid)) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert compilers, "no compiler started"
        first.kill()
        first.wait()
        deadline = time.monotonic() + 30
        while _session(first.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _session(first.pid), "ninja or a compiler outlived the killed build"
        second = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True, timeout=300)
        assert second.returncode == 0, second.stderr
        assert "waiting for another build" not in second.stderr
        assert "built libopgen_ops_aot" in second.stderr, second.stderr
    finally:
        for pid in _session(first.pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def test_writer_fallback_swap_and_recovery(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where renameat2(RENAME_EXCHANGE) is refused (EINVAL: an unknown flag here, a file system
    without it elsewhere) the writer swaps with two renames; a run killed between them leaves the
    old package parked, and the next run puts it back before writing."""
    from opgen import writer

    pkg = tmp_path / "out" / "p"
    writer.write_package(pkg, {"a.txt": "old a\n", "b.txt": "b\n"})
    monkeypatch.setattr(writer, "_RENAME_EXCHANGE", 1 << 30)  # the kernel answers EINVAL
    result = writer.write_package(pkg, {"a.txt": "new a\n", "b.txt": "b\n"})
    assert result.written == ["a.txt"] and (pkg / "a.txt").read_text() == "new a\n"
    assert sorted(p.name for p in pkg.parent.iterdir()) == ["p"]
    # a run killed between the two renames: the package is parked at .p.opgen-previous
    os.rename(pkg, pkg.parent / ".p.opgen-previous")
    writer.write_package(pkg, {"a.txt": "new a\n", "b.txt": "b\n", "c.txt": "c\n"})
    assert {p.name: p.read_text() for p in pkg.iterdir() if not p.name.startswith(".")} == {
        "a.txt": "new a\n", "b.txt": "b\n", "c.txt": "c\n"}
    assert sorted(p.name for p in pkg.parent.iterdir()) == ["p"]
