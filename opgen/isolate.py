"""``opgen test``'s checks in a child process: a crash or a hang is a failed check, not the end.

A kernel body is the user's C++: it can ``std::abort()``, corrupt the heap or loop forever, and
in the test process that ended the whole run (exit 134, "malloc(): unaligned tcache chunk
detected", or a hang after "testing ...") with nothing naming the op or the check. Here the
checks run in one child process (``python -m opgen.isolate``) that reports each check's start
and result over a pipe. The parent waits for each result at most ``timeout`` seconds:

- a check that does not finish in time: the child is killed, the check fails with
  ``timed out after N s``;
- a child that dies (a signal, an abort, a non-zero exit): the check it was running fails with
  the signal and the child's last lines of output, and a hint to run ``opgen test --sanitize``;

and in both cases the op's remaining checks are reported as not run and a new child goes on with
the next op. Ctrl-C stops the child and the run at once. The child imports MindSpore (or the
package's framework) once per run, plus once per crash.

``--sanitize`` runs the child with the package's libraries built with AddressSanitizer and
UndefinedBehaviorSanitizer (``OPGEN_SANITIZE=1``) and the ASan runtime preloaded, as those tools
require: a raw-pointer overflow, a use-after-free or a signed overflow in a body aborts the child
with the sanitizer's report, which names the YAML line (the bodies carry ``#line`` directives).
"""

from __future__ import annotations

import collections
import dataclasses
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:  # the CLI imports DEFAULT_TIMEOUT from here: no numpy, no testing at import
    from .model import Op
    from .testing import Result

DEFAULT_TIMEOUT = 600.0
"""Seconds a check may run before it counts as hung (``opgen test --timeout``). Generous: the
slowest check of ops/ takes under a minute on a loaded 2-core machine."""

TAIL_LINES = 200
"""Lines of the child's output kept for a crash report (a sanitizer's report is ~50)."""

SHOWN_LINES = 12
"""Lines of them a failure shows: the last ones, or a sanitizer report's headline, frames and summary."""


def _body_of(op: Op, report: str) -> str:
    """Where in ``op``'s spec a sanitizer report's innermost kernel frame is: ``in the forward
    body of op 'x' (specs/x.yaml:7)``; "" when no frame is in one of its bodies. (A report's own
    frames give the exact YAML line when the symbolizer reads the library's line tables.)"""
    kernel = op.kernel
    if kernel is None:
        return ""
    for line in report.splitlines():
        for which in ("forward", "backward"):
            if f"::{op.name}::{which}<" in line:
                body = kernel.forward if which == "forward" else kernel.backward
                if which == "backward" and body is None and kernel.backward_per_input:
                    body = kernel.backward_per_input[0][1]
                where = f" ({body.location})" if body is not None else ""
                return f"in the {which} body of op '{op.name}'{where}"
    return ""


def crash_text(lines: Sequence[str]) -> str:
    """What a failed check shows of the child's last output: a sanitizer's report (its ``ERROR:`` /
    ``runtime error:`` line, the first frames of its stack, which name the YAML file and line of
    the body through its ``#line`` directives, and its ``SUMMARY``), else the last lines."""
    marks = [i for i, ln in enumerate(lines) if "ERROR: AddressSanitizer" in ln or "runtime error:" in ln]
    if not marks:
        return "\n".join(lines[-SHOWN_LINES:])
    report = lines[marks[0]:]
    keep = [report[0]]
    frames = [ln for ln in report if ln.lstrip().startswith("#")]
    keep += frames[:6]
    keep += [ln for ln in report if ln.startswith("SUMMARY:")][:1]
    return "\n".join(keep)

UBSAN_SUPPRESSIONS = "vptr_check:AotExtra\n"
"""UBSan suppressions for sanitized runs: opgen/aot.h calls MindSpore's ``AotExtra`` through a
layout twin of the class, which ``-fsanitize=vptr`` reports on every call (docs/robustness.md)."""


def sanitizer_env(base: dict[str, str], cxx: str | None = None) -> dict[str, str]:
    """``base`` plus what a sanitized child needs: ``OPGEN_SANITIZE=1`` (instrumented libraries,
    cached apart from the normal ones), the ASan runtime and libstdc++ preloaded (python is not
    instrumented; libstdc++ first so that ASan finds the real ``__cxa_throw``), leaks not checked
    (python and MindSpore keep allocations until exit), every report fatal.

    Raises:
        RuntimeError: the compiler knows no ASan runtime (``g++ -print-file-name=libasan.so``).
    """
    compiler = cxx or base.get("CXX") or "g++"

    def lib(name: str) -> str:
        out = subprocess.run([compiler, f"-print-file-name={name}"], capture_output=True, text=True,
                             timeout=60).stdout.strip()
        if not out or not os.path.isabs(out):
            raise RuntimeError(f"{compiler} has no {name}: the sanitizer mode needs GCC's or Clang's ASan runtime")
        return out

    supp = Path(os.environ.get("TMPDIR", "/tmp")) / "opgen-ubsan.supp"
    if not supp.is_file() or supp.read_text(encoding="utf-8") != UBSAN_SUPPRESSIONS:
        supp.write_text(UBSAN_SUPPRESSIONS, encoding="utf-8")
    env = dict(base)
    env["OPGEN_SANITIZE"] = "1"
    env["LD_PRELOAD"] = " ".join(filter(None, [lib("libasan.so"), lib("libstdc++.so"), base.get("LD_PRELOAD", "")]))
    env["ASAN_OPTIONS"] = "detect_leaks=0:abort_on_error=1"
    env["UBSAN_OPTIONS"] = f"print_stacktrace=1:halt_on_error=1:suppressions={supp}"
    return env


@dataclasses.dataclass
class _Child:
    proc: subprocess.Popen[bytes]
    events: IO[bytes]
    tail: collections.deque[str]
    reader: threading.Thread
    buffer: bytes = b""


def _start(pkg_dir: Path, specs: Sequence[str], pairs: Sequence[tuple[str, str]], seed: int,
           env: dict[str, str], echo: Callable[[str], None] | None) -> _Child:
    read_fd, write_fd = os.pipe()
    request = {"pkg_dir": str(pkg_dir), "specs": list(specs), "pairs": [list(p) for p in pairs], "seed": seed,
               "fd": write_fd}
    proc = subprocess.Popen(
        [sys.executable, "-m", "opgen.isolate"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, pass_fds=(write_fd,), env=env, start_new_session=True)
    os.close(write_fd)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(json.dumps(request).encode())
    proc.stdin.close()
    tail: collections.deque[str] = collections.deque(maxlen=TAIL_LINES)
    out = proc.stdout

    def pump() -> None:  # the child's own output: kept for a crash report, shown when asked
        for raw in iter(out.readline, b""):
            line = raw.decode("utf-8", "replace").rstrip("\n")
            tail.append(line)
            if echo is not None:
                echo(line)

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    return _Child(proc, os.fdopen(read_fd, "rb", buffering=0), tail, reader)


def _stop(child: _Child) -> None:
    """Kill the child's whole process group (it may have started threads or processes)."""
    if child.proc.poll() is None:
        try:
            os.killpg(child.proc.pid, signal.SIGKILL)
        except ProcessLookupError:  # pragma: no cover - it ended meanwhile
            pass
    child.proc.wait()
    child.reader.join(timeout=5)
    child.events.close()


def _next_event(child: _Child, deadline: float | None) -> dict[str, Any] | None:
    """The child's next event, or None at end of stream; raises TimeoutError past ``deadline``."""
    while b"\n" not in child.buffer:
        wait = None if deadline is None else max(0.0, deadline - time.monotonic())
        ready, _, _ = select.select([child.events], [], [], wait)
        if not ready:
            raise TimeoutError
        chunk = os.read(child.events.fileno(), 65536)
        if not chunk:
            return None
        child.buffer += chunk
    line, _, child.buffer = child.buffer.partition(b"\n")
    event: dict[str, Any] = json.loads(line)
    return event


def _death(child: _Child) -> str:
    """How the child ended, in words (``killed by SIGSEGV``, ``exited with status 3``)."""
    child.proc.wait()
    child.reader.join(timeout=5)
    code = child.proc.returncode
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:  # pragma: no cover - a signal Python does not name
            name = f"signal {-code}"
        return f"killed by {name}"
    return f"exited with status {code}"


class ChildError(RuntimeError):
    """The child could not start testing (the package does not import or its library does not
    build); the message is the child's."""


def run_isolated(pkg_dir: Path, specs: Sequence[str], ops: Sequence[Op], checks: Sequence[str], *,
                 seed: int = 0, timeout: float = DEFAULT_TIMEOUT, sanitize: bool = False,
                 progress: Callable[[Op, list[Result]], None] | None = None,
                 echo: Callable[[str], None] | None = None) -> list[Result]:
    """Run ``checks`` of every op in ``ops`` against the package in ``pkg_dir``, in child processes.

    Args:
        pkg_dir: the generated package (up to date with ``specs``).
        specs: the spec paths the ops were loaded from (the child loads them again).
        timeout: seconds each check may take; the child's start (imports, library builds) has no limit.
        sanitize: build and run the libraries with ASan/UBSan (:func:`sanitizer_env`).
        progress: called with each op and its results when its checks are done.
        echo: called with each line the child prints (build progress, MindSpore's log), if given.

    Returns:
        One :class:`~opgen.testing.Result` per op and check, in order; a check that crashed or
        hung is a ``fail`` naming the op, the check and what happened.

    Raises:
        ChildError: the package cannot be loaded for testing (a library does not build).
        KeyboardInterrupt: Ctrl-C; the child is killed first.
    """
    from .testing import Result

    env = sanitizer_env(dict(os.environ)) if sanitize else dict(os.environ)
    by_name = {op.name: op for op in ops}
    pending = [(op.name, c) for op in ops for c in checks]
    results: list[Result] = []
    per_op: dict[str, list[Result]] = collections.defaultdict(list)

    def record(r: Result) -> None:
        results.append(r)
        per_op[r.op].append(r)
        if len(per_op[r.op]) == len(checks) and progress is not None:
            progress(by_name[r.op], per_op[r.op])

    while pending:
        child = _start(pkg_dir, specs, pending, seed, env, echo)
        current: tuple[str, str] | None = None
        started = time.monotonic()
        received = 0
        try:
            while True:
                try:
                    event = _next_event(child, None if current is None else started + timeout)
                except TimeoutError:
                    assert current is not None
                    _stop(child)
                    failure = (f"timed out after {timeout:g} s: the check was still running (a body that never "
                               "returns?); the child process was killed. opgen test --timeout SECONDS sets the limit")
                    break
                if event is None:
                    how = _death(child)
                    if current is None and not received:
                        raise ChildError(f"the test process {how} before it started testing:\n"
                                         + crash_text(list(child.tail)))
                    if current is None:  # between two checks: the next one is charged with it
                        current = pending[0]
                    tail = crash_text(list(child.tail))
                    if current is not None and current[0] in by_name:
                        where = _body_of(by_name[current[0]], tail)
                        tail = f"{tail}\n{where}" if where else tail
                    hint = ("" if sanitize else "\nrun 'opgen test " + (current[0] if current else "") +
                            " --sanitize' to have AddressSanitizer/UBSan name the bad read or write and its YAML line")
                    failure = f"the test process {how} during this check; its last output:\n{tail}{hint}"
                    break
                if "fatal" in event:
                    _stop(child)
                    raise ChildError(str(event["fatal"]))
                if "start" in event:
                    current = (event["start"][0], event["start"][1])
                    started = time.monotonic()
                elif "result" in event:
                    record(Result(**event["result"]))
                    pending.pop(0)
                    received += 1
                    current = None
                elif "done" in event:
                    _stop(child)
                    return results
        except BaseException:
            _stop(child)
            raise
        # the check in `current` crashed or hung: it fails, the rest of its op is not run
        assert current is not None
        op_name = current[0]
        record(Result(op_name, current[1], "fail", messages=[failure], seconds=time.monotonic() - started))
        pending.pop(0)
        while pending and pending[0][0] == op_name:
            record(Result(op_name, pending.pop(0)[1], "fail",
                          messages=[f"not run: check {current[1]} of {op_name} crashed or hung before it"]))
    return results


def _child_main() -> int:
    """The child: load the specs and the package, run each requested check, report over the pipe."""
    request = json.loads(sys.stdin.read())
    events = os.fdopen(int(request["fd"]), "w", buffering=1, encoding="utf-8")

    def send(event: dict[str, Any]) -> None:
        events.write(json.dumps(event) + "\n")
        events.flush()

    from . import backends, testing
    from .build import BuildError
    from .pipeline import load_ops

    ops, diags = load_ops(request["specs"])
    if diags:
        send({"fatal": "\n".join(d.format() for d in diags)})
        return 1
    by_name = {op.name: op for op in ops}
    pkg_dir = Path(request["pkg_dir"])
    backend = backends.of_package(pkg_dir.resolve())
    if backend is not None:  # build first: a build is not part of any check's time
        paths = {check.partition("/")[2] for _, check in request["pairs"]}
        for kind in sorted({backend.test_libraries[p] for p in paths if p in backend.test_libraries}):
            try:
                backend.build(pkg_dir, kind, backends.BuildOptions())
            except BuildError:
                pass  # the checks of its paths report it, each
    try:
        pkg = testing.load_package(pkg_dir)
    except (BuildError, ImportError, FileNotFoundError) as exc:
        send({"fatal": str(exc)})
        return 1
    for name, check in request["pairs"]:
        send({"start": [name, check]})
        result = testing.run_check(pkg, by_name[name], check, seed=int(request["seed"]))
        send({"result": dataclasses.asdict(result)})
    send({"done": True})
    return 0


if __name__ == "__main__":
    sys.exit(_child_main())
