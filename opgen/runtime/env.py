"""Every ``OPGEN_*`` environment variable opgen reads, each with its one parser.

A value that does not parse is an :class:`EnvError` naming the variable, what it holds and what it
takes (``OPGEN_JOBS='abc'`` was silently the CPU count; ``OPGEN_CHECK=2`` silently off). Unset and
empty are the same: the default. The command line checks them all before any command runs
(:func:`check_all`); the library functions that read one raise the same error.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, assert_never

Kind = Literal["flag", "count", "seconds", "path", "command", "choice"]

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


@dataclass(frozen=True)
class Variable:
    """One ``OPGEN_*`` variable: its name, the kind of value it takes and what it does."""

    name: str
    kind: Kind
    doc: str
    choices: tuple[str, ...] = ()
    """The values a ``choice`` takes."""
    kernel: bool = False
    """Read by the compiled kernels (``opgen/include``), not by Python: :func:`check_kernel_variables`."""


VARIABLES = {v.name: v for v in (
    Variable("OPGEN_BUILD_DIR", "path", "root of the build folders (default ~/.cache/opgen)"),
    Variable("OPGEN_SUPPORT_DIR", "path", "where per-toolchain support objects live (default <build root>/support)"),
    Variable("OPGEN_JOBS", "count", "parallel compile jobs (default: the available CPUs)"),
    Variable("OPGEN_OPS_PER_UNIT", "count", "ops per extension translation unit (default: automatic)"),
    Variable("OPGEN_LOCK_TIMEOUT", "seconds", "how long a build waits for another build's lock"),
    Variable("OPGEN_CXX_LAUNCHER", "command", "a compiler launcher such as ccache"),
    Variable("OPGEN_CHECK", "flag", "build and load the checked mode (bounds-checked views)"),
    Variable("OPGEN_SANITIZE", "flag", "build and load AddressSanitizer/UBSan libraries"),
    Variable("OPGEN_PCH", "flag", "precompile MindSpore's headers for the extension units"),
    Variable("OPGEN_QUIET", "flag", "generated packages build without progress output"),
    Variable("OPGEN_NO_TEMPLATE_CACHE", "flag", "do not cache compiled Jinja2 templates"),
    Variable("OPGEN_PYNATIVE_PATH", "choice", "the path a MindSpore package's ops take in PyNative: auto (the "
             "Function<T> path when its extension is built, else ops.Custom), custom or function",
             choices=("auto", "custom", "function")),
    Variable("OPGEN_NUM_THREADS", "count", "threads of the kernels' parallel loops (default: the available CPUs)",
             kernel=True),
    Variable("OPGEN_CUDA_ARCH", "command", "the GPU compute capabilities CUDA units are built for: '80;90', "
             "'sm_90', 'native' (default: the visible GPUs, else 80 and 90 with PTX)"),
    Variable("OPGEN_CUDA_OPT", "choice", "nvcc's optimisation level for CUDA units, host and device code "
             "(default 3; 0 compiles about twice as fast: for a compile check)", choices=("0", "1", "2", "3")),
    Variable("OPGEN_ISA", "choice", "caps the vector instruction set the kernels pick at run time",
             choices=("baseline", "avx2", "avx512"), kernel=True),
)}
"""Every variable opgen reads (``tests/test_env.py`` checks that ``opgen/`` reads no other)."""

_EXPECTED: dict[Kind, str] = {
    "flag": "1 or 0 (also true/false, yes/no, on/off)",
    "count": "a positive whole number",
    "seconds": "a number of seconds, 0 or more",
    "path": "a path",
    "command": "a command",
    "choice": "one of",
}


class EnvError(ValueError):
    """An ``OPGEN_*`` variable holds a value it does not take; the message names it."""


def _raw(name: str, kind: Kind) -> str | None:
    var = VARIABLES.get(name)
    if var is None or var.kind != kind:  # pragma: no cover - a typo in opgen, caught by tests
        raise KeyError(f"{name} is not an opgen {kind} variable")
    value = os.environ.get(name, "").strip()
    return value or None


def _bad(name: str, value: str) -> EnvError:
    var = VARIABLES[name]
    expected = _EXPECTED[var.kind] + (f" {', '.join(var.choices)}" if var.choices else "")
    return EnvError(f"{name}={value!r} is not {expected} ({name}: {var.doc}); fix it or unset it")


def flag(name: str) -> bool:
    """``name`` as a switch: unset, empty or 0/false/no/off is False; 1/true/yes/on is True.

    Raises:
        EnvError: any other value.
    """
    value = _raw(name, "flag")
    if value is None or value.lower() in _FALSE:
        return False
    if value.lower() in _TRUE:
        return True
    raise _bad(name, value)


def count(name: str) -> int | None:
    """``name`` as a positive whole number, or None when unset or empty.

    Raises:
        EnvError: anything else (``abc``, ``0``, ``-1``, ``1.5``).
    """
    value = _raw(name, "count")
    if value is None:
        return None
    if value.isascii() and value.isdigit() and int(value) > 0:
        return int(value)
    raise _bad(name, value)


def seconds(name: str) -> float | None:
    """``name`` as a finite number of seconds, 0 or more, or None when unset or empty.

    Raises:
        EnvError: anything else (``abc``, ``-1``, ``nan``, ``inf``).
    """
    value = _raw(name, "seconds")
    if value is None:
        return None
    try:
        number = float(value)
    except ValueError:
        raise _bad(name, value) from None
    if not math.isfinite(number) or number < 0:
        raise _bad(name, value)
    return number


def path(name: str) -> Path | None:
    """``name`` as a path (``~`` expanded, made absolute), or None when unset or empty."""
    value = _raw(name, "path")
    return Path(value).expanduser().resolve() if value else None


def command(name: str) -> str | None:
    """``name`` as a command line (split by the caller), or None when unset or empty."""
    return _raw(name, "command")


def choice(name: str) -> str | None:
    """``name`` as one of its choices, or None when unset or empty.

    Raises:
        EnvError: a value that is not one of the choices.
    """
    value = _raw(name, "choice")
    if value is None or value in VARIABLES[name].choices:
        return value
    raise _bad(name, value)


def _read(var: Variable) -> object:
    if var.kind == "flag":
        return flag(var.name)
    if var.kind == "count":
        return count(var.name)
    if var.kind == "seconds":
        return seconds(var.name)
    if var.kind == "path":
        return path(var.name)
    if var.kind == "command":
        return command(var.name)
    if var.kind == "choice":
        return choice(var.name)
    assert_never(var.kind)


def check_all() -> list[str]:
    """The message of every ``OPGEN_*`` variable in the environment whose value does not parse
    (empty when all do)."""
    problems = []
    for var in VARIABLES.values():
        try:
            _read(var)
        except EnvError as exc:
            problems.append(str(exc))
    return problems


def check_kernel_variables() -> None:
    """Check the variables the compiled kernels read themselves (they would ignore a bad value);
    called before a library is loaded.

    Raises:
        EnvError: the first that does not parse.
    """
    for var in VARIABLES.values():
        if var.kernel:
            _read(var)
