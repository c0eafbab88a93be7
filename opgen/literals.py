"""Literals of generated code that several stages write (one escaping rule each)."""

from __future__ import annotations

from .runtime import number_text as number_text  # one definition: the runtime's messages use it too


def cpp_string(text: str) -> str:
    """A C++ string literal for ``text`` (UTF-8, every special character escaped)."""
    out = ['"']
    for byte in text.encode("utf-8"):
        ch = chr(byte)
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "?":
            out.append("\\?")  # no trigraphs
        elif 0x20 <= byte < 0x7F:
            out.append(ch)
        else:
            out.append(f'\\{byte:03o}')
    out.append('"')
    return "".join(out)
