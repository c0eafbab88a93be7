"""The public names of opgen's C++ headers (``opgen/include/opgen/*.h``), read from the headers.

Public: declared in namespace ``opgen`` or a namespace inside it other than ``detail``, not
starting with ``_``; for a struct or class, its public members too (``opgen::View::numel``);
the enumerators of a public enum; and the ``OPGEN_*`` macros a header leaves defined (include
guards aside). Operators, constructors and destructors are not names. Run this file to list the
names a header has that docs/kernel-api.md does not document (a name is documented when the
page writes its last two parts: ``opgen::map``, ``math::exp``, ``View::numel``):

    .venv/bin/python tests/header_names.py
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HEADERS = ROOT / "opgen" / "include" / "opgen"
PAGE = ROOT / "docs" / "kernel-api.md"


@dataclass(frozen=True)
class Name:
    """A public name: ``qualified`` (``opgen::math::exp``), the header and line it is declared at."""

    qualified: str
    header: str
    line: int


def _strip(text: str) -> str:
    """``text`` with comments, string and char literals blanked (newlines kept, for line numbers)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(c + " " * (j - i - 1) + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _macros(text: str) -> tuple[list[tuple[str, int]], str]:
    """The ``OPGEN_*`` macros a header leaves defined, and the code with directives blanked."""
    defined: dict[str, int] = {}
    undefined: set[str] = set()
    lines = text.split("\n")
    code = []
    cont = False
    for no, line in enumerate(lines, 1):
        directive = cont or line.lstrip().startswith("#")
        cont = directive and line.rstrip().endswith("\\")
        if directive:
            m = re.match(r"\s*#\s*define\s+(OPGEN_\w+)", line)
            if m and not m.group(1).endswith("_H_"):
                defined.setdefault(m.group(1), no)
            m = re.match(r"\s*#\s*undef\s+(OPGEN_\w+)", line)
            if m:
                undefined.add(m.group(1))
            code.append("")
        else:
            code.append(line)
    body = "\n".join(code)
    # invocations of the header's own function-like macros declare nothing we could name
    for name in set(defined) | undefined:
        body = _blank_calls(body, name)
    body = re.sub(r"\bOPGEN_\w+\b", lambda m: " " * len(m.group(0)), body)
    return sorted(((k, v) for k, v in defined.items() if k not in undefined), key=lambda kv: kv[1]), body


def _blank_calls(text: str, name: str) -> str:
    out = text
    for m in reversed(list(re.finditer(rf"\b{name}\s*\(", out))):
        depth, j = 0, m.end() - 1
        while j < len(out):
            depth += {"(": 1, ")": -1}.get(out[j], 0)
            if depth == 0:
                break
            j += 1
        out = out[:m.start()] + re.sub(r"[^\n]", " ", out[m.start():j + 1]) + out[j + 1:]
    return out


def _drop_angles(text: str) -> str:
    """``text`` without balanced ``<...>`` groups (template arguments)."""
    prev = None
    while prev != text:
        prev = text
        text = re.sub(r"<[^<>;{}()]*>", " ", text)
    return text


_KEYWORDS = frozenset({"true", "false", "nullptr", "this", "return", "const", "constexpr", "static", "inline",
                       "public", "private", "protected", "default", "delete", "noexcept", "void", "auto"})

_SKIP_HEAD = re.compile(r"^\s*(static_assert|friend|typedef\s+struct)\b")


def _declared(head: str, scope_name: str | None) -> list[str]:
    """The names one declaration (text before its ``;`` or ``{``) introduces."""
    head = re.sub(r"\[\[.*?\]\]", " ", head)
    head = re.sub(r"^\s*template\s*<", "<", head.strip())
    head = _drop_angles(head).strip()
    if not head or _SKIP_HEAD.match(head) or "operator" in head.split("(")[0]:
        return []
    m = re.match(r"^using\s+(\w+)\s*=", head)
    if m:
        return [m.group(1)]
    m = re.match(r"^using\s+(?:namespace\s+)?[\w:]*?(\w+)\s*$", head)
    if m:
        inherited = re.search(r"(\w+)::(\w+)\s*$", head)  # `using Base::Base;`: constructors
        if head.startswith("using namespace") or (inherited and inherited.group(1) == inherited.group(2)):
            return []
        return [m.group(1)]
    m = re.match(r"^(?:struct|class|union)\s+(\w+)", head)
    if m:
        return [m.group(1)]
    m = re.match(r"^enum\s+(?:class\s+|struct\s+)?(\w+)", head)
    if m:
        return [m.group(1)]
    before_paren = head.split("(")[0]
    if "(" in head and "=" not in before_paren:
        words = re.findall(r"~?\w+", before_paren)
        if not words:
            return []
        name = words[-1]
        if name.startswith("~") or name == scope_name or name in ("explicit",):
            return []
        return [name]
    m = re.search(r"(\w+)\s*(?:\[[^\]]*\]\s*)*(?:=|$)", head.split("=")[0] + ("=" if "=" in head else ""))
    if m and not re.fullmatch(r"(const|constexpr|static|inline|public|private|protected)", m.group(1)):
        # one declarator per statement in these headers; `int a = 1, b = 2;` would name only `a`
        return [m.group(1)]
    return []


def public_names(headers: list[Path] | None = None) -> list[Name]:
    """Every public name of the headers, sorted by header and line."""
    names: dict[str, Name] = {}
    for path in headers or sorted(HEADERS.glob("*.h")):
        _scan(path, names)
    return sorted(names.values(), key=lambda nm: (nm.header, nm.line, nm.qualified))


def _scan(path: Path, names: dict[str, Name]) -> None:
    """Add the public names of the header at ``path`` to ``names``."""
    raw = path.read_text(encoding="utf-8")
    macros, code = _macros(_strip(raw))
    for macro, line in macros:
        names.setdefault(macro, Name(macro, path.name, line))
    # scope stack: (kind, name, public)
    stack: list[tuple[str, str, bool]] = []
    start = 0  # where the current statement starts
    i = 0

    def public_scope() -> bool:
        parts = list(stack)
        if not parts or parts[0][:2] != ("namespace", "opgen"):
            return False
        return all(kind in ("namespace", "class") and nm != "detail" and pub for kind, nm, pub in parts)

    def qualified(name: str) -> str:
        return "::".join([nm for _, nm, _ in stack] + [name])

    def record(head: str, pos: int) -> None:
        if not public_scope() or (stack and stack[-1][0] not in ("namespace", "class")):
            return
        scope = stack[-1]
        if scope[0] == "class":
            label = re.match(r"^\s*(public|private|protected)\s*:(?!:)", head)
            while label:
                stack[-1] = (scope[0], scope[1], label.group(1) == "public")
                scope = stack[-1]
                head = head[label.end():]
                label = re.match(r"^\s*(public|private|protected)\s*:(?!:)", head)
            if not scope[2]:
                return
        pos += len(head) - len(head.lstrip())
        for nm in _declared(head, scope[1] if scope[0] == "class" else None):
            if re.fullmatch(r"[A-Za-z]\w*", nm) and nm not in _KEYWORDS and public_scope():
                names.setdefault(qualified(nm), Name(qualified(nm), path.name, code.count("\n", 0, pos) + 1))

    n = len(code)
    while i < n:
        c = code[i]
        if c == "{":
            head = code[start:i]
            flat = re.sub(r"\s+", " ", _drop_angles(re.sub(r"^\s*template\s*<", "<", head.strip()))).strip()
            ns = re.match(r"^(?:inline\s+)?namespace\s+(\w+)\s*$", flat)
            cls = re.match(r"^(?:\[\[.*?\]\]\s*)?(struct|class|union)\s+(\w+)[^=()]*$", flat)
            enum = re.match(r"^enum\s+(?:class\s+|struct\s+)?(\w+)", flat)
            if ns:
                stack.append(("namespace", ns.group(1), True))
            elif cls:
                record(head, start)
                stack.append(("class", cls.group(2), cls.group(1) != "class"))
            elif enum:
                record(head, start)
                j = code.index("}", i)
                if public_scope() and (not stack or stack[-1][0] != "class" or stack[-1][2]):
                    for item in code[i + 1:j].split(","):
                        m = re.match(r"\s*(\w+)", item)
                        if m:
                            q = qualified(m.group(1))
                            names.setdefault(q, Name(q, path.name, code.count("\n", 0, i) + 1))
                stack.append(("other", "", False))
                i = j
                continue
            else:
                if re.search(r"\)\s*(const\s*)?(noexcept\s*)?(->[^{]*)?(:[^{]*)?$", flat) or "=" not in flat:
                    record(head, start)
                else:
                    record(head, start)  # `T x = {...};` / `T x{...};`
                stack.append(("other", "", False))
            i += 1
            start = i
        elif c == "}":
            if stack:
                stack.pop()
            i += 1
            start = i
        elif c == ";":
            if not stack or stack[-1][0] != "other":
                record(code[start:i], start)
            i += 1
            start = i
        elif c == ":" and stack and stack[-1][0] == "class" and re.search(
                r"(?:^|\s)(public|private|protected)\s*$", code[start:i]) and code[i + 1:i + 2] != ":":
            label = re.search(r"(public|private|protected)\s*$", code[start:i])
            assert label
            stack[-1] = (stack[-1][0], stack[-1][1], label.group(1) == "public")
            i += 1
            start = i
        elif stack and stack[-1][0] == "other":
            # inside a body: skip to the matching brace
            depth = 1
            while i < n and depth:
                if code[i] == "{":
                    depth += 1
                elif code[i] == "}":
                    depth -= 1
                i += 1
            i -= 1  # let the loop see the closing brace
        else:
            i += 1

def documented(name: str, page: str) -> bool:
    """Whether ``page`` names ``name`` by its last two parts: ``opgen::map``, ``math::exp``, ``View::numel``."""
    tail = "::".join(name.split("::")[-2:])
    return re.search(rf"(?<!\w){re.escape(tail)}(?!\w)", page) is not None


def undocumented(page_text: str | None = None) -> list[Name]:
    """The public names docs/kernel-api.md does not document."""
    page = PAGE.read_text(encoding="utf-8") if page_text is None else page_text
    return [n for n in public_names() if not documented(n.qualified, page)]


if __name__ == "__main__":
    missing = undocumented() if PAGE.exists() else public_names()
    for n in missing:
        print(f"opgen/include/opgen/{n.header}:{n.line}: {n.qualified}")
    print(f"{len(missing)} of {len(public_names())} public names undocumented in docs/kernel-api.md", file=sys.stderr)
    sys.exit(1 if missing else 0)
