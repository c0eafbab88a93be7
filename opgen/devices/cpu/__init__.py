"""The CPU device: kernel units compiled by the host C++ compiler (``$CXX``, default g++).

Its kernel layer is ``opgen/include/opgen/kernel.h`` and friends (vector loops in the AVX-512 /
AVX2 copies picked at run time, a thread pool, OpenBLAS); ``elementwise:`` expressions become
``[&]`` lambdas over compute-type scalars, run by ``opgen::map``. Always available.
"""

from __future__ import annotations

import os
import shlex
import shutil
from typing import ClassVar

from ... import env as _env
from .. import GCC_DIAGNOSTIC, Device, DeviceName, DeviceUnavailable, Toolchain

LAUNCHERS = frozenset({"ccache", "sccache", "distcc", "icecc", "buildcache"})
"""Programs recognised as compiler launchers at the front of ``$CXX`` (``CXX="ccache g++"``)."""


def compiler() -> str:
    """``$CXX``, else ``g++``."""
    return os.environ.get("CXX", "g++").strip() or "g++"


def launcher_and_compiler() -> tuple[list[str], list[str]]:
    """(launcher words, compiler words): ``$OPGEN_CXX_LAUNCHER`` plus any launcher leading ``$CXX``."""
    try:
        words = shlex.split(compiler())
    except ValueError:
        words = [compiler()]
    given = _env.command("OPGEN_CXX_LAUNCHER") or ""
    try:
        launcher = shlex.split(given)
    except ValueError:
        launcher = [given]
    while len(words) > 1 and os.path.basename(words[0]) in LAUNCHERS:
        launcher.append(words.pop(0))
    return launcher, words


def compiler_argv() -> list[str]:
    """The command that compiles: the launcher's words (if any), then ``$CXX`` as words."""
    launcher, words = launcher_and_compiler()
    return launcher + words


def program_identity(argv: list[str], what: str) -> str:
    """``argv`` and the path, size and mtime of each of its words that is a program.

    Raises:
        DeviceUnavailable: the first word is not a program on PATH (``what`` names it).
    """
    parts = []
    for i, word in enumerate(argv):
        path = shutil.which(word)
        if path is None:
            if i == 0:
                raise DeviceUnavailable(f"{what} '{word}' not found")
            parts.append(word)
            continue
        real = os.path.realpath(path)
        st = os.stat(real)
        parts.append(f"{real}:{st.st_size}:{int(st.st_mtime)}")
    return f"{' '.join(argv)} = {' '.join(parts)}"


def compiler_identity() -> str:
    """The compiler's path, size and mtime (of each word of ``$CXX`` that is a program).

    A launcher (ccache, sccache...) is not part of it: it does not change what is built.

    Raises:
        DeviceUnavailable: the launcher or the compiler is not found.
    """
    launcher, argv = launcher_and_compiler()
    for word in launcher[:1]:
        if shutil.which(word) is None:
            raise DeviceUnavailable(f"compiler launcher '{word}' not found (OPGEN_CXX_LAUNCHER / CXX)")
    try:
        return program_identity(argv, "C++ compiler")
    except DeviceUnavailable as exc:
        raise DeviceUnavailable(f"{exc} (set CXX or install g++)") from None


class CpuDevice(Device):
    """The host CPU (spec target ``CPU``; torch dispatch key ``CPU``; MindSpore target ``CPU``)."""

    name: ClassVar[DeviceName] = "cpu"
    target: ClassVar[str] = "CPU"
    suffix: ClassVar[str] = ""
    kernel_header: ClassVar[str] = "{op}_kernel.h"
    kernel_unit: ClassVar[str] = "{op}_kernel.cc"
    namespace: ClassVar[str] = ""

    def lambda_head(self) -> str:
        return "[&]"

    def lambda_tail(self, noexcept: str) -> str:
        return noexcept

    def unavailable(self) -> str | None:
        return None

    def toolchain(self) -> Toolchain:
        return Toolchain("compile", tuple(compiler_argv()), ("-MMD", "-MT", "$out", "-MF", "$out.d"), (),
                         compiler_identity(), GCC_DIAGNOSTIC)


DEVICE = CpuDevice()
