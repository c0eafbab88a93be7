"""The names a user picks that become file names, Python modules and C++ identifiers.

One rule per kind of name, shared by every entry point: the package name of ``opgen generate -p``,
``[tool.opgen] package`` and ``opgen.load(package=)``; the length of op names (checked with the
spec, at its ``name:`` line, so that ``generate`` never meets a file name the file system refuses).
"""

from __future__ import annotations

import keyword
import re

NAME_MAX = 255
"""Bytes in one file name (``NAME_MAX`` of Linux and macOS file systems)."""

PID_TEMP_SUFFIX = ".4194304.tmp"
"""The longest suffix of a temporary file beside what it becomes (``<file>.<pid>.tmp``; a Linux pid
has at most 7 digits)."""

LONGEST_OP_FILE = "{}_function.o" + PID_TEMP_SUFFIX
"""The longest file name opgen derives from an op name alone: an extension object while the
compiler writes it (``<op>_function.o.<pid>.tmp``; generated files such as ``<op>_kernel_decl.h``
are shorter). ``tests/test_names.py`` generates and builds an op whose name has
:data:`OP_NAME_MAX` bytes to hold this."""

OP_NAME_MAX = NAME_MAX - len(LONGEST_OP_FILE.format(""))
"""The longest op name, in bytes (232)."""

LONGEST_PACKAGE_FILE = ".lib{}_aot-0123456789abcdef.so.sha256" + PID_TEMP_SUFFIX
"""The longest file name opgen derives from a package name: the record of the aot library while it
is published (``.<lib>-<key16>.so.sha256.<pid>.tmp``, a pid of up to 7 digits)."""

BACKEND_SUFFIX_MAX = 8
"""Room for the suffix a backend adds to the package directory's name (``_torch``)."""

PACKAGE_NAME_MAX = NAME_MAX - len(LONGEST_PACKAGE_FILE.format("")) - BACKEND_SUFFIX_MAX
"""The longest package name, in bytes (200)."""

NOT_PACKAGE_NAMES = frozenset({"opgen", "mindspore", "numpy", "np", "ms", "std", "generated", "torch"})
"""Names a generated package may not take: modules it imports, or that opgen needs itself."""

CPP_KEYWORDS = frozenset(
    """alignas alignof and and_eq asm auto bitand bitor bool break case catch char char8_t char16_t
    char32_t class compl concept const consteval constexpr constinit const_cast continue co_await
    co_return co_yield decltype default delete do double dynamic_cast else enum explicit export
    extern false float for friend goto if inline int long mutable namespace new noexcept not not_eq
    nullptr operator or or_eq private protected public register reinterpret_cast requires return
    short signed sizeof static static_assert static_cast struct switch template this thread_local
    throw true try typedef typeid typename union unsigned using virtual void volatile wchar_t while
    xor xor_eq""".split()
)
"""The keywords of C++20 (alternative operator spellings too): no name that becomes a C++ identifier
(op, input, attr, package) may be one."""

_SNAKE = re.compile(r"[a-z][a-z0-9_]*")


def op_name_too_long(name: str) -> str | None:
    """Why op ``name`` is too long for the files generated from it, or None.

    The limit is :data:`OP_NAME_MAX` bytes of UTF-8 (op names are ASCII snake_case).
    """
    size = len(name.encode("utf-8", "surrogatepass"))
    if size <= OP_NAME_MAX:
        return None
    return (f"{size} bytes long; at most {OP_NAME_MAX}, so that the longest file named after it, "
            f"'{LONGEST_OP_FILE.format('<op>')}', fits the file system's {NAME_MAX}-byte limit on a file name")


def package_name_problem(text: str) -> str | None:
    """Why ``text`` cannot name a generated package (a Python package, a C++ namespace, a symbol
    prefix and part of file names), or None when it can.

    The one rule of ``opgen generate -p``, ``[tool.opgen] package`` and ``opgen.load(package=)``
    (which also refuses a module already imported in its process; :mod:`opgen.loading`).
    """
    if not _SNAKE.fullmatch(text):
        return f"{text!r} is not a package name: use snake_case (lower-case letters, digits, '_'), e.g. my_ops"
    if keyword.iskeyword(text) or keyword.issoftkeyword(text) or text in CPP_KEYWORDS:
        return f"{text!r} is a Python or C++ keyword; pick another package name"
    if text in NOT_PACKAGE_NAMES:
        return f"{text!r} would shadow a module the generated code imports; pick another package name"
    if len(text) > PACKAGE_NAME_MAX:
        return (f"package name is {len(text)} bytes long; at most {PACKAGE_NAME_MAX}, so that the files named "
                f"after it ('{LONGEST_PACKAGE_FILE.format('<package>')}') fit the file system's {NAME_MAX}-byte "
                "limit on a file name")
    return None
