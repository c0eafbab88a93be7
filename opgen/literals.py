"""Literals of generated code that several stages write (one escaping rule each)."""

from __future__ import annotations


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


def number_text(value: float) -> str:
    """A number as messages and docs print it: an integral value as an int (``1000000000``, not
    ``1e+09``: int attr ranges are stored as floats), any other float as its shortest round-trip
    text (``0.1``, ``inf``)."""
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return str(value)
    v = float(value)
    if v.is_integer() and abs(v) < 2**63:
        return str(int(v))
    return repr(v)
