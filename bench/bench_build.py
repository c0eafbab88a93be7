"""Generation and build times: prints figures, asserts nothing about speed.

Run from the repository root::

    PYTHONPATH=$PWD .venv/bin/python bench/bench_build.py [--ops N] [--repeat R]
        [--skip-ext] [--build-ops N] [--ops-per-unit K] [--pch] [--keep DIR]

Measured, each ``--repeat`` times (default 2), with the load average before each run:

1. generate: a synthetic package of ``--ops`` (default 1000) specs (half elementwise, half
   kernel bodies with an attr) into an empty directory, then again unchanged (0 files written).
   In-process ``opgen.pipeline.generate`` (wall, user and system CPU seconds: the system share
   is the kernel writing the files) and the ``opgen generate`` command end to end.
2. build of ``ops/`` (the repository's specs), or of ``--build-ops N`` synthetic specs, in a
   temporary build folder: the aot library and the extension cold (units, compiler processes,
   per-unit times from ninja's log, seconds per op), nothing changed (compiler processes: 0),
   and after editing one op's body (units compiled).  CPU seconds are those of the compilers
   (load from other processes stretches wall times much more than CPU times).  Compiler
   processes are counted through a ``CXX`` wrapper that logs each call.
   ``--skip-ext`` leaves out the extension (minutes on 2 cores).
3. import: in a fresh process, ``import mindspore``, then ``from <pkg> import function`` with
   the extension already built (opgen's share: the cache check and loading the library).
4. ``--units``: one extension unit compiled alone with CustomOpBuilder's flags at -O2, with a
   precompiled ``opgen/ms.h`` (and the time to build it), at -O3, -O1, -O0, and a unit holding
   only the headers: where an extension unit's time goes.

5. ``--targets``: the targets of issue 15 next to their measured figures, each through the
   ``opgen`` command in fresh processes with a fresh build root: the per-machine work (the
   MindSpore support object), a new one-op package cold once it is cached, an edited kernel
   body rebuilt (``opgen generate`` + ``opgen build``) and importable, a ``--targets-ops``-op
   package cold (default 100; 0 leaves it out), a no-change import.

Nothing outside a temporary directory is touched (``--keep DIR`` keeps it for inspection).
"""

from __future__ import annotations

import argparse
import functools
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from opgen import backends  # noqa: E402
from opgen import build as opgen_build  # noqa: E402
from opgen.backends.mindspore import build as ms_build  # noqa: E402
from opgen.pipeline import generate  # noqa: E402

ELEMENTWISE = """\
name: {name}
doc: Synthetic elementwise op {i}.
inputs:
  - {{name: x, doc: First input.}}
  - {{name: y, doc: Second input.}}
outputs:
  - {{name: out, doc: Result., shape: "broadcast(x, y)", dtype: x}}
dtype_format:
  CPU:
    - [F32_Default, F32_Default, F32_Default]
    - [F64_Default, F64_Default, F64_Default]
elementwise:
  forward: x * y + {i}
  grad:
    x: dout * y
    y: dout * x
"""

KERNEL = """\
name: {name}
doc: Synthetic kernel op {i}.
inputs:
  - {{name: x, doc: Input.}}
outputs:
  - {{name: out, doc: Result., shape: x, dtype: x}}
attrs:
  - {{name: scale, type: float, default: 1.0, doc: Scale.}}
dtype_format:
  CPU:
    - [F32_Default, F32_Default]
kernel:
  forward: |
    for (int64_t i = 0; i < out.numel; ++i) out[i] = x[i] * scale + {i};
  backward: |
    for (int64_t i = 0; i < dx.numel; ++i) dx[i] = dout[i] * scale;
"""

WRAPPER = """\
#!/bin/sh
echo "$*" >> "{log}"
exec {cxx} "$@"
"""


def write_synthetic_specs(directory: Path, count: int) -> None:
    """``count`` valid specs ``op0000.yaml``...: even ones kernel bodies, odd ones elementwise."""
    directory.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        name = f"op{i:04d}"
        text = (KERNEL if i % 2 == 0 else ELEMENTWISE).format(name=name, i=i)
        (directory / f"{name}.yaml").write_text(text, encoding="utf-8")


def load() -> str:
    """The 1-minute load average, as text."""
    return f"{os.getloadavg()[0]:.2f}"


def machine() -> str:
    """One paragraph describing this machine and toolchain."""
    cpu = platform.processor() or "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = "?"
    try:
        kb = int(Path("/proc/meminfo").read_text().split()[1])
        mem = f"{kb / 1024 / 1024:.0f} GiB"
    except (OSError, ValueError, IndexError):
        pass
    cxx = os.environ.get("CXX", "g++")
    try:
        gcc = subprocess.run([cxx, "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    except (OSError, IndexError):
        gcc = "?"
    try:
        import mindspore

        ms = str(mindspore.__version__)
    except ImportError:
        ms = "not installed"
    cpus = opgen_build.default_jobs()
    return (f"{platform.system()} {platform.release()}, {cpu}, {cpus} CPUs usable, {mem} RAM; {gcc}; "
            f"Python {platform.python_version()}; MindSpore {ms}")


def timed(fn: Any) -> tuple[Any, float, float, float]:
    """(result, wall, user CPU, system CPU seconds of this process) of ``fn()``."""
    w0, t0 = time.perf_counter(), os.times()
    res = fn()
    t1 = os.times()
    return res, time.perf_counter() - w0, t1.user - t0.user, t1.system - t0.system


def bench_generate(work: Path, count: int, repeat: int) -> None:
    """Figure 1: generating and regenerating a ``count``-op package."""
    specs = work / "gen-specs"
    write_synthetic_specs(specs, count)
    print(f"\n## generate: {count} synthetic specs")
    print("| run | load | cold: wall / user / system s | files written (MiB) | unchanged: wall / user / system s | "
          "files written | `opgen generate` unchanged, wall s |")
    print("|---|---|---|---|---|---|---|")
    cwd = os.getcwd()
    os.chdir(work)
    try:
        for r in range(repeat):
            out = work / f"gen-out-{r}"
            ld = load()
            run = functools.partial(generate, [specs.name], Path(out.name), "synth")
            cold, w1, u1, s1 = timed(run)
            assert not cold.diagnostics and cold.write is not None
            mib = sum(f.stat().st_size for f in out.rglob("*") if f.is_file()) / 2**20
            again, w2, u2, s2 = timed(run)
            assert again.write is not None
            t0 = time.perf_counter()
            proc = subprocess.run([sys.executable, "-m", "opgen", "generate", specs.name, "-o", out.name,
                                   "-p", "synth", "-q"], env=dict(os.environ, PYTHONPATH=str(ROOT)))
            w3 = time.perf_counter() - t0
            assert proc.returncode == 0
            print(f"| {r + 1} | {ld} | {w1:.2f} / {u1:.2f} / {s1:.2f} | {len(cold.write.written)} ({mib:.0f}) | "
                  f"{w2:.2f} / {u2:.2f} / {s2:.2f} | {len(again.write.written)} | {w3:.2f} |")
    finally:
        os.chdir(cwd)


class Counter:
    """A CXX wrapper that logs each compiler process."""

    def __init__(self, work: Path):
        self.log = work / "cxx.log"
        self.path = work / "cxx-counting"
        real = shutil.which(os.environ.get("CXX", "g++")) or "g++"
        self.path.write_text(WRAPPER.format(log=self.log, cxx=real))
        self.path.chmod(0o755)

    def take(self) -> list[str]:
        """The calls logged since the last take."""
        if not self.log.exists():
            return []
        calls = self.log.read_text().splitlines()
        self.log.unlink()
        return calls


def unit_times(bdir: Path, kind: str) -> list[tuple[str, float]]:
    """(output, seconds) of the edges of the last ninja run, from its log."""
    log = bdir / kind / ".ninja_log"
    if not log.exists():
        return []
    rows: dict[str, float] = {}
    for line in log.read_text().splitlines()[1:]:
        parts = line.split("\t")
        if len(parts) >= 4:
            rows[parts[3]] = (int(parts[1]) - int(parts[0])) / 1000.0
    return sorted(rows.items())


def children_cpu() -> float:
    """User + system CPU seconds of finished child processes (ninja and the compilers)."""
    t = os.times()
    return t.children_user + t.children_system


def copy_specs(src: Path, dst: Path) -> None:
    dst.mkdir(parents=True, exist_ok=True)
    for spec in sorted(src.glob("*.yaml")):
        shutil.copy2(spec, dst / spec.name)


def edit_one_body(specs: Path) -> str:
    """Change one op's body without changing what it computes; returns the op's name."""
    for spec in sorted(specs.glob("*.yaml")):
        text = spec.read_text(encoding="utf-8")
        if "kernel:" in text and "forward: |\n" in text:
            spec.write_text(text.replace("forward: |\n", "forward: |\n    // edited\n", 1), encoding="utf-8")
            return spec.stem
    for spec in sorted(specs.glob("*.yaml")):
        text = spec.read_text(encoding="utf-8")
        m = re.search(r"^  forward: (.+)$", text, flags=re.M)
        if m:
            spec.write_text(text.replace(m.group(0), f"  forward: ({m.group(1)})", 1), encoding="utf-8")
            return spec.stem
    raise SystemExit("no op body to edit")


def bench_build(work: Path, args: argparse.Namespace, kinds: list[str]) -> Path | None:
    """Figure 2: cold, no-change and one-edit builds of one package per repeat."""
    counter = Counter(work)
    os.environ["CXX"] = str(counter.path)  # kept for the import figure (same key as these builds)
    if args.ops_per_unit:
        os.environ["OPGEN_OPS_PER_UNIT"] = str(args.ops_per_unit)
    if args.pch:
        os.environ["OPGEN_PCH"] = "1"
    n_specs = args.build_ops or len(list((ROOT / "ops").glob("*.yaml")))
    what = f"{args.build_ops} synthetic specs" if args.build_ops else f"ops/ ({n_specs} specs)"
    extra = []
    if args.ops_per_unit:
        extra.append(f"--ops-per-unit {args.ops_per_unit}")
    if args.pch:
        extra.append("--pch")
    print(f"\n## build: {what}, {opgen_build.default_jobs()} jobs{' ' + ' '.join(extra) if extra else ''}")
    print("| run | library | load | cold: wall / CPU s | units | compiler processes | per op: wall / CPU s | "
          "unit wall times s | no change: s, processes | one body edited: wall / CPU s, processes, units |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    last_pkg = None
    for r in range(repeat_count(args)):
        case = work / f"build-{r}"
        specs = case / "specs"
        if args.build_ops:
            write_synthetic_specs(specs, args.build_ops)
        else:
            copy_specs(ROOT / "ops", specs)
        cwd = os.getcwd()
        os.chdir(case)
        try:
            res = generate(["specs"], Path("generated"), "bench_ops")
            assert not res.diagnostics
            pkg = res.package_dir.resolve()
            os.environ["OPGEN_BUILD_DIR"] = str(case / "build")
            rows = []
            for kind in kinds:
                counter.take()
                ld = load()
                cpu0 = children_cpu()
                cold = backends.build_library(pkg, kind, quiet=True)
                cold_cpu = children_cpu() - cpu0
                calls = counter.take()
                bdir = opgen_build.package_build_dir(pkg)
                times = unit_times(bdir, kind)
                units = [t for name, t in times if name.endswith(".o")]
                again = backends.build_library(pkg, kind, quiet=True)
                rows.append([kind, ld, cold, cold_cpu, calls, units, again, len(counter.take())])
            edited = edit_one_body(specs)
            res = generate(["specs"], Path("generated"), "bench_ops")
            assert not res.diagnostics
            for row in rows:
                kind = row[0]
                counter.take()
                cpu0 = children_cpu()
                after = backends.build_library(pkg, kind, quiet=True)
                row.append((after, children_cpu() - cpu0, len(counter.take()), edited))
        finally:
            os.chdir(cwd)
        for kind, ld, cold, cold_cpu, calls, units, again, again_calls, edit in rows:
            after, after_cpu, after_calls, edited = edit
            spread = ", ".join(f"{t:.1f}" for t in units)
            print(f"| {r + 1} | {kind} | {ld} | {cold.seconds:.1f} / {cold_cpu:.1f} | {len(cold.compiled)} | "
                  f"{len(calls)} | {cold.seconds / n_specs:.1f} / {cold_cpu / n_specs:.1f} | {spread} | "
                  f"{again.seconds:.3f}, {again_calls} | {after.seconds:.1f} / {after_cpu:.1f}, {after_calls}, "
                  f"{len(after.compiled)} ({edited}: {', '.join(after.compiled)}) |")
        last_pkg = pkg
    return last_pkg


def repeat_count(args: argparse.Namespace) -> int:
    return int(args.repeat)


IMPORT_PROBE = """\
import time
t0 = time.perf_counter()
import mindspore
t1 = time.perf_counter()
from bench_ops import function
t2 = time.perf_counter()
print(f"{t1 - t0:.3f} {t2 - t1:.3f}")
"""


def bench_import(pkg: Path, repeat: int) -> None:
    """Figure 3: import time of the Function<T> path with the extension already built."""
    print("\n## import (extension already built)")
    print("| run | load | `import mindspore` s | then `from bench_ops import function` s (cache check + dlopen) |")
    print("|---|---|---|---|")
    env = dict(os.environ, PYTHONPATH=f"{pkg.parent}{os.pathsep}{ROOT}")
    for r in range(repeat):
        ld = load()
        out = subprocess.run([sys.executable, "-c", IMPORT_PROBE], env=env, check=True, capture_output=True,
                             text=True).stdout.split()
        print(f"| {r + 1} | {ld} | {float(out[0]):.2f} | {float(out[1]):.3f} |")


UNIT_VARIANTS = {
    "-O2 (CustomOpBuilder's flags)": ([], False),
    "-O2, precompiled opgen/ms.h": ([], True),
    "-O3": (["-O3"], False),
    "-O1": (["-O1"], False),
    "-O0": (["-O0"], False),
}


def bench_units(work: Path, repeat: int) -> None:
    """Figure 4: one extension unit (square's Function<T> source) compiled with variants."""
    from opgen.resources import include_dir

    specs = work / "unit-specs"
    copy_specs(ROOT / "ops", specs)
    cwd = os.getcwd()
    os.chdir(work)
    try:
        res = generate([specs.name], Path("unit-gen"), "unit_ops")
    finally:
        os.chdir(cwd)
    pkg = (work / "unit-gen" / "unit_ops").resolve()
    target = ms_build.ext_target(pkg, ops_per_unit=1)
    src = pkg / "csrc" / "square_function.cc"
    empty = work / "empty_unit.cc"
    empty.write_text('#include "opgen/ms.h"\n')
    assert res.write is not None and src.is_file() and include_dir().is_dir()
    cxx = shutil.which(os.environ.get("CXX", "g++")) or "g++"
    base = [f for f in target.cflags]
    print("\n## one extension unit (csrc/square_function.cc), compiled alone")
    print("| run | variant | load | wall s | user+sys CPU s |")
    print("|---|---|---|---|---|")

    def compile_once(flags: list[str], source: Path, out: Path, header: bool = False) -> tuple[float, float]:
        cmd = [cxx, *flags, "-w"]
        cmd += ["-x", "c++-header"] if header else ["-c"]
        cmd += [str(source), "-o", str(out)]
        before = os.times()
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True)
        wall = time.perf_counter() - t0
        after = os.times()
        cpu = (after.children_user - before.children_user) + (after.children_system - before.children_system)
        return wall, cpu

    for r in range(repeat):
        for name, (override, pch) in UNIT_VARIANTS.items():
            flags = [f for f in base if not f.startswith("-O")] + (override or ["-O2"])
            if pch:
                pch_dir = work / "pch"
                pch_dir.mkdir(exist_ok=True)
                header = pch_dir / "opgen_pch.h"
                header.write_text('#include "opgen/ms.h"\n')
                ld = load()
                wall, cpu = compile_once(flags, header, pch_dir / "opgen_pch.h.gch", header=True)
                size = (pch_dir / "opgen_pch.h.gch").stat().st_size / 2**20
                print(f"| {r + 1} | building the precompiled header ({size:.0f} MiB) | {ld} | {wall:.1f} | {cpu:.1f} |")
                flags = flags + ["-include", str(header), "-Winvalid-pch"]
            ld = load()
            wall, cpu = compile_once(flags, src, work / "unit.o")
            print(f"| {r + 1} | {name} | {ld} | {wall:.1f} | {cpu:.1f} |")
        ld = load()
        wall, cpu = compile_once([f for f in base], empty, work / "empty.o")
        print(f"| {r + 1} | a unit holding only `#include \"opgen/ms.h\"` (-O2) | {ld} | {wall:.1f} | {cpu:.1f} |")


TARGET_SPEC = """\
name: {name}
doc: Scales x.
inputs:
  - {{name: x, doc: Input.}}
outputs:
  - {{name: out, doc: Result., shape: x, dtype: x}}
dtype_format:
  CPU:
    - [F32_Default, F32_Default]
kernel:
  forward: |
    for (int64_t i = 0; i < out.numel; ++i) out[i] = x[i] * {factor};
  backward: |
    for (int64_t i = 0; i < dx.numel; ++i) dx[i] = dout[i] * {factor};
"""

IMPORT_BOTH = """
import sys, time
import mindspore
t0 = time.perf_counter()
import {pkg}
from {pkg} import function
print(time.perf_counter() - t0)
"""


CPU_LAUNCHER = """\
#!/bin/sh
# bench launcher: runs the compiler under /usr/bin/time, appending "user system" CPU seconds
exec /usr/bin/time -f "%U %S" -a -o "$OPGEN_BENCH_CPU_LOG" "$@"
"""


class CpuLog:
    """CPU seconds of every compiler and linker process, through OPGEN_CXX_LAUNCHER (not in the key)."""

    def __init__(self, work: Path, env: dict[str, str]):
        self.path = work / "cpu.log"
        launcher = work / "cpu-launcher"
        launcher.write_text(CPU_LAUNCHER)
        launcher.chmod(0o755)
        if Path("/usr/bin/time").exists():
            env["OPGEN_CXX_LAUNCHER"] = str(launcher)
            env["OPGEN_BENCH_CPU_LOG"] = str(self.path)

    def take(self) -> tuple[float, float, int]:
        """(total CPU s, longest process CPU s, processes) since the last call."""
        try:
            lines = [ln.split() for ln in self.path.read_text().splitlines() if ln and ln[0].isdigit()]
        except OSError:
            return 0.0, 0.0, 0
        self.path.unlink(missing_ok=True)
        cpu = [float(a) + float(b) for a, b, *_ in lines]
        return sum(cpu), max(cpu, default=0.0), len(cpu)


def _opgen(args: list[str], env: dict[str, str]) -> float:
    """Wall seconds of one ``opgen`` command in a fresh process (fails loudly)."""
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "opgen", *args, "-q"], env=env, check=True)
    return time.perf_counter() - t0


def _cpu_text(cpu: CpuLog, jobs: int = 2) -> str:
    total, longest, n = cpu.take()
    if not n:
        return ""
    return (f"; compilers {total:.1f} CPU s in {n} processes, longest {longest:.1f} s "
            f"(quiet {jobs}-core estimate {max(total / jobs, longest):.1f} s)")


def bench_targets(work: Path, big: int) -> None:
    """Figure 5: the build targets of issue 15 next to their measured figures."""
    root = work / "targets-build"
    env = dict(os.environ, OPGEN_BUILD_DIR=str(root), PYTHONPATH=str(ROOT))
    env.pop("OPGEN_CXX_LAUNCHER", None)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # imports as users have them: from cached bytecode
    cpu = CpuLog(work, env)
    rows: list[tuple[str, str, str]] = []
    one = work / "one"
    (one / "specs").mkdir(parents=True, exist_ok=True)
    (one / "specs" / "scale_one.yaml").write_text(TARGET_SPEC.format(name="scale_one", factor="2"))
    out = one / "out"

    # per-machine work: MindSpore's flags and the support object, in a fresh build root
    ld = load()
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c",
                    "from opgen.backends.mindspore import build as b; b.ensure_support(quiet=True)"],
                   env=env, check=True)
    rows.append(("per-machine work (support object), once", "<= 90 s",
                 f"{time.perf_counter() - t0:.1f} s (load {ld}){_cpu_text(cpu, 1)}"))

    # a new one-op package, cold, once the per-machine work is cached
    _opgen(["generate", str(one / "specs"), "-o", str(out), "-p", "one_ops"], env)
    cpu.take()
    ld = load()
    cold = _opgen(["build", str(out / "one_ops")], env)
    rows.append(("new one-op package, cold (aot + extension)", "<= 15 s", f"{cold:.1f} s (load {ld}){_cpu_text(cpu)}"))

    # an edited kernel body: generate + build, then importable (both paths, fresh process)
    spec = one / "specs" / "scale_one.yaml"
    spec.write_text(TARGET_SPEC.format(name="scale_one", factor="3"))
    ld = load()
    edit = _opgen(["generate", str(one / "specs"), "-o", str(out), "-p", "one_ops"], env)
    edit += _opgen(["build", str(out / "one_ops")], env)
    ienv = dict(env, PYTHONPATH=f"{out}{os.pathsep}{ROOT}")
    imp = float(subprocess.run([sys.executable, "-c", IMPORT_BOTH.format(pkg="one_ops")], env=ienv, check=True,
                               capture_output=True, text=True).stdout.split()[-1])
    rows.append(("edited kernel body rebuilt and importable", "<= 5 s",
                 f"{edit:.1f} s generate + build, then {imp:.2f} s import (load {ld}){_cpu_text(cpu)}"))
    rows.append(("no-change import (both paths, after `import mindspore`)", "<= 0.1 s", f"{imp:.3f} s"))

    if big:
        specs = work / "big-specs"
        write_synthetic_specs(specs, big)
        _opgen(["generate", str(specs), "-o", str(work / "big"), "-p", "big_ops"], env)
        ld = load()
        t = _opgen(["build", str(work / "big" / "big_ops")], env)
        rows.append((f"{big}-op package, cold (aot + extension)", "<= 180 s" if big >= 100 else "-",
                     f"{t:.1f} s (load {ld}){_cpu_text(cpu)}"))
    print("\n## targets (issue 15)")
    print("| target | goal | measured |")
    print("|---|---|---|")
    for what, goal, got in rows:
        print(f"| {what} | {goal} | {got} |")


def main() -> int:
    """Run the benchmarks and print Markdown tables."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ops", type=int, default=1000, help="synthetic specs for the generation figure")
    p.add_argument("--repeat", type=int, default=2, help="runs of each measurement")
    p.add_argument("--skip-generate", action="store_true", help="leave out the generation figure")
    p.add_argument("--skip-build", action="store_true", help="leave out the build figures")
    p.add_argument("--skip-ext", action="store_true", help="build only the aot library")
    p.add_argument("--build-ops", type=int, default=0, help="build N synthetic specs instead of ops/")
    p.add_argument("--ops-per-unit", type=int, default=None, help="ext ops per unit (default automatic)")
    p.add_argument("--pch", action="store_true", help="precompiled header for the units")
    p.add_argument("--units", action="store_true",
                   help="also compile one extension unit with -O0..-O3 and a precompiled header (minutes)")
    p.add_argument("--targets", action="store_true", help="only the issue-15 targets next to their figures")
    p.add_argument("--targets-ops", type=int, default=100, help="ops of the big package for --targets (0: none)")
    p.add_argument("--keep", help="work in this directory and keep it")
    args = p.parse_args()
    print(f"machine: {machine()}")
    work = Path(args.keep).resolve() if args.keep else Path(tempfile.mkdtemp(prefix="opgen-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        if args.targets:
            bench_targets(work, args.targets_ops)
            return 0
        if not args.skip_generate:
            bench_generate(work, args.ops, args.repeat)
        if not args.skip_build:
            kinds = ["aot"] if args.skip_ext else ["aot", "ext"]
            pkg = bench_build(work, args, kinds)
            if pkg is not None and "ext" in kinds:
                bench_import(pkg, args.repeat)
        if args.units:
            bench_units(work, args.repeat)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
