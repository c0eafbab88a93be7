"""Stage 1 — load: YAML text to a plain tree that remembers ``file:line:col`` of every node.

The tree is made of :class:`MarkedDict`, :class:`MarkedList` and plain scalars (str, int,
float, bool, None).  Each container records the location of its own start and of each of its
values (and, for mappings, of each key), so later stages can point at any node.

Safety: only YAML's core schema tags are accepted (``!!python/object`` and friends are
errors, nothing is ever constructed or executed); duplicate keys are errors; anchors/aliases
are expanded with a budget (an alias bomb is an error, not a hang); nesting is bounded;
input must be UTF-8 without NUL bytes and at most :data:`MAX_FILE_BYTES` long.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import yaml

from .diagnostics import Diagnostic, Location, Note, SpecError, display_path

MAX_FILE_BYTES = 1_000_000
"""Specs larger than this are rejected (a real spec is a few KiB)."""
MAX_NODES = 20_000
"""Upper bound on nodes, counted while parsing and again after alias expansion; guards against
alias bombs and against huge documents (a spec has a few hundred nodes; parsing stops here, so a
1 MB list of numbers is rejected in well under a second instead of being parsed whole)."""
MAX_DEPTH = 64
"""Upper bound on nesting depth; a spec needs about 5."""

class MarkedDict(dict):  # type: ignore[type-arg]
    """A mapping from the YAML file with the location of itself, each key and each value."""

    location: Location
    key_locations: dict[str, Location]
    value_locations: dict[str, Location]
    comma_split: dict[str, str]
    """In a flow mapping ``{doc: a, b.}``: a valueless plain key (``b.``) -> the key before it
    (``doc``) whose plain value the comma most likely cut; set only where that happened."""
    bool_words: dict[str, str]
    """Values that YAML 1.1 read as booleans from a word other than true/false (``name: yes``):
    key -> the word, for the diagnostic that expected a string there."""

    def loc(self, key: str) -> Location:
        """Location of the value under ``key`` (of the mapping itself if absent)."""
        return self.value_locations.get(key, self.location)

    def key_loc(self, key: str) -> Location:
        """Location of ``key`` itself (of the mapping if absent)."""
        return self.key_locations.get(key, self.location)


class MarkedList(list):  # type: ignore[type-arg]
    """A sequence from the YAML file with the location of itself and of each item."""

    location: Location
    item_locations: list[Location]

    def loc(self, index: int) -> Location:
        """Location of item ``index`` (of the sequence itself if out of range)."""
        if 0 <= index < len(self.item_locations):
            return self.item_locations[index]
        return self.location


_CORE_TAGS = {
    "tag:yaml.org,2002:str",
    "tag:yaml.org,2002:int",
    "tag:yaml.org,2002:float",
    "tag:yaml.org,2002:bool",
    "tag:yaml.org,2002:null",
    "tag:yaml.org,2002:map",
    "tag:yaml.org,2002:seq",
}


class _Converter:
    """Turns a composed YAML node graph into Marked containers, collecting diagnostics."""

    def __init__(self, file: str):
        self.file = file
        self.nodes = 0
        self.diags: list[Diagnostic] = []
        self._constructor = yaml.SafeLoader("")  # only used for its scalar constructors

    def loc(self, node: yaml.Node) -> Location:
        """Where ``node`` starts; for a block scalar (``|`` or ``>``), where its text starts."""
        if isinstance(node, yaml.ScalarNode) and node.style in ("|", ">"):
            return Location(self.file, node.start_mark.line + 2, 1)
        return Location(self.file, node.start_mark.line + 1, node.start_mark.column + 1)

    def convert(self, node: yaml.Node, depth: int = 0) -> Any:
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise _Abort(
                Diagnostic(
                    self.loc(node),
                    f"the document expands to more than {MAX_NODES} nodes once aliases are expanded (alias bomb?)",
                    notes=(Note("a spec needs a few hundred nodes; avoid deeply repeated anchors/aliases"),),
                )
            )
        if depth > MAX_DEPTH:
            raise _Abort(Diagnostic(self.loc(node), f"nesting deeper than {MAX_DEPTH} levels"))
        if node.tag not in _CORE_TAGS:
            self.diags.append(
                Diagnostic(
                    self.loc(node),
                    f"tag '{node.tag}' is not allowed; specs use plain YAML (strings, numbers, "
                    "booleans, null, lists, mappings)",
                )
            )
            return None
        if isinstance(node, yaml.MappingNode):
            out = MarkedDict()
            out.location = self.loc(node)
            out.key_locations = {}
            out.value_locations = {}
            out.comma_split = {}
            out.bool_words = {}
            previous: tuple[yaml.Node, yaml.Node] | None = None
            for key_node, value_node in node.value:
                if (node.flow_style and previous is not None and _plain(key_node) and _plain(value_node)
                        and value_node.value == "" and _plain(previous[1]) and previous[1].value
                        and isinstance(previous[0], yaml.ScalarNode)):
                    out.comma_split[str(key_node.value)] = str(previous[0].value)
                previous = (key_node, value_node)
                before = len(self.diags)
                key = self.convert(key_node, depth + 1)
                if not isinstance(key, str) and len(self.diags) > before:
                    continue  # already reported (a bad tag, an unpaired surrogate...)
                if not isinstance(key, str):
                    self.diags.append(
                        Diagnostic(self.loc(key_node), f"mapping keys must be strings, got {key!r}")
                    )
                    continue
                if key in out:
                    self.diags.append(
                        Diagnostic(
                            self.loc(key_node),
                            f"duplicate key '{key}'",
                            notes=(Note("first defined here", out.key_locations[key]),),
                        )
                    )
                    continue
                out.key_locations[key] = self.loc(key_node)
                out.value_locations[key] = self.loc(value_node)
                out[key] = self.convert(value_node, depth + 1)
                if isinstance(out[key], bool) and value_node.value.lower() not in ("true", "false"):
                    out.bool_words[key] = value_node.value
            return out
        if isinstance(node, yaml.SequenceNode):
            seq = MarkedList()
            seq.location = self.loc(node)
            seq.item_locations = []
            for item in node.value:
                seq.item_locations.append(self.loc(item))
                seq.append(self.convert(item, depth + 1))
            return seq
        assert isinstance(node, yaml.ScalarNode)
        try:
            value = self._constructor.construct_object(node)
        except (ValueError, OverflowError):  # e.g. an int of more than 4300 digits
            self.diags.append(Diagnostic(self.loc(node), f"number {_shorten(node.value)} is too long "
                                         f"({len(node.value)} characters)"))
            return None
        if _overflowed(value, node.value):
            self.diags.append(Diagnostic(self.loc(node), f"number {_shorten(node.value)} is beyond float64 "
                                         "(at most about 1.8e308 in magnitude); write .inf for infinity"))
            return None
        if isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError as exc:
                self.diags.append(Diagnostic(
                    self.loc(node), f"string holds U+{ord(value[exc.start]):04X}, an unpaired surrogate, which "
                    "is not a Unicode character (from a \\u escape?)"))
                return None
        return value


def _overflowed(value: Any, text: str) -> bool:
    """Whether a YAML float became infinite by overflow (``1.0e+400``), not as ``.inf``."""
    return isinstance(value, float) and math.isinf(value) and "inf" not in text.lower()


def _plain(node: yaml.Node) -> bool:
    return isinstance(node, yaml.ScalarNode) and not node.style  # libyaml says '', PyYAML None


def _shorten(text: str, keep: int = 12) -> str:
    return text if len(text) <= 2 * keep else f"{text[:keep]}...{text[-keep:]}"


class _Abort(Exception):
    def __init__(self, diag: Diagnostic):
        self.diag = diag


def load_text(text: str, file: str) -> Any:
    """Parse YAML ``text`` (named ``file`` in diagnostics) into a marked tree.

    Raises:
        SpecError: on YAML syntax errors, disallowed tags, duplicate keys, alias bombs,
            excessive nesting or NUL bytes; each diagnostic carries ``file:line:col``.
    """
    if "\x00" in text:
        idx = text.index("\x00")
        line = text.count("\n", 0, idx) + 1
        col = idx - (text.rfind("\n", 0, idx) + 1) + 1
        raise SpecError([Diagnostic(Location(file, line, col), "NUL byte in spec file")])
    if _CLoader is not None:
        try:
            return _load_plain(text, file, _CLoader)
        except (_Unusual, yaml.YAMLError, ValueError, OverflowError):
            pass  # the general path below says what is wrong, exactly as it always did
    try:
        node = _compose(text)
    except _TooBig as big:
        raise SpecError([Diagnostic(
            Location(file, big.mark.line + 1, big.mark.column + 1),
            f"the document has more than {MAX_NODES} nodes; a spec needs a few hundred")]) from None
    except yaml.reader.ReaderError as exc:  # a character YAML does not allow (control characters...)
        pos = min(max(exc.position, 0), len(text))
        line = text.count("\n", 0, pos) + 1
        col = pos - (text.rfind("\n", 0, pos) + 1) + 1
        char = exc.character if isinstance(exc.character, int) else ord(str(exc.character)[:1] or "?")
        raise SpecError([Diagnostic(Location(file, line, col),
                                    f"invalid YAML: character U+{char:04X} is not allowed ({exc.reason})")]) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = Location(file, mark.line + 1, mark.column + 1) if mark else Location(file)
        problem = exc.problem or exc.context or "invalid YAML"
        raise SpecError([Diagnostic(where, f"invalid YAML: {problem}")]) from None
    except yaml.YAMLError as exc:
        raise SpecError([Diagnostic(Location(file), f"invalid YAML: {exc}")]) from None
    except RecursionError:
        raise SpecError([Diagnostic(Location(file, 1, 1), f"nesting deeper than {MAX_DEPTH} levels")]) from None
    if node is None:
        raise SpecError([Diagnostic(Location(file, 1, 1), "empty spec file: expected a mapping with 'name'")])
    conv = _Converter(file)
    try:
        tree = conv.convert(node)
    except _Abort as abort:
        raise SpecError([abort.diag]) from None
    except RecursionError:
        raise SpecError([Diagnostic(Location(file, 1, 1), f"nesting deeper than {MAX_DEPTH} levels")]) from None
    if conv.diags:
        raise SpecError(conv.diags)
    return tree


class _TooBig(Exception):
    def __init__(self, mark: yaml.Mark):
        self.mark = mark


class _Composer(yaml.composer.Composer):
    """PyYAML's composer (Python, recursive: absurd nesting ends in a RecursionError, never in a
    C stack overflow), stopping after :data:`MAX_NODES` nodes (aliases count once)."""

    composed = 0

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        self.composed += 1
        if self.composed > MAX_NODES:
            raise _TooBig(self.peek_event().start_mark)  # type: ignore[attr-defined]
        return super().compose_node(parent, index)


class _PyLoader(_Composer, yaml.SafeLoader):
    """Pure-Python reader, scanner and parser (used where PyYAML was built without libyaml)."""


_CParser: Any = getattr(getattr(yaml, "_yaml", None), "CParser", None) if yaml.__with_libyaml__ else None

if _CParser is not None:

    class _CNodeLoader(_Composer, _CParser, yaml.resolver.Resolver):  # type: ignore[misc]
        """Our composer over libyaml's reader, scanner and parser: about 8x faster than PyYAML's
        Python ones, and libyaml's parser keeps its own stack, so only the Python composer
        recurses.  The resolver supplies implicit tags exactly as ``SafeLoader`` does."""

        def __init__(self, stream: str):
            _CParser.__init__(self, stream)
            yaml.composer.Composer.__init__(self)
            yaml.resolver.Resolver.__init__(self)


def _make_loader(text: str) -> Any:
    """The general path's loader: libyaml's parser with our composer, or pure Python where
    PyYAML has no libyaml (or :data:`_CLoader` is switched off, as the path tests do)."""
    return _PyLoader(text) if _CParser is None or _CLoader is None else _CNodeLoader(text)


def _compose(text: str) -> yaml.Node | None:
    """The node graph of ``text``.  A syntax error found by libyaml is found again by PyYAML's
    own parser, so every diagnostic reads the same whichever parser PyYAML was built with."""
    try:
        return _compose_with(_make_loader(text))
    except yaml.MarkedYAMLError:
        if _CParser is None or _CLoader is None:
            raise
    return _compose_with(_PyLoader(text))


def _compose_with(loader: Any) -> yaml.Node | None:
    try:
        return loader.get_single_node()  # type: ignore[no-any-return]
    finally:
        dispose = getattr(loader, "dispose", None)
        if dispose is not None:
            dispose()


_CLoader: Any = getattr(yaml, "CSafeLoader", None)


class _Unusual(Exception):
    """The fast composer leaves this document to PyYAML's composer."""


_STR_TAG = "tag:yaml.org,2002:str"
_SCALAR_CONSTRUCTOR = yaml.constructor.SafeConstructor()


def _load_plain(text: str, file: str, loader_class: Any) -> Any:
    """The marked tree of a plain document, built straight from libyaml's events.

    Plain: one non-empty document of mappings with unique string keys, sequences and scalars
    of the core tags, no anchors or aliases, at most :data:`MAX_DEPTH` levels and
    :data:`MAX_NODES` nodes -- what a spec is.  It gives the tree (and locations) that
    composing and converting would; anything else raises :class:`_Unusual` and takes the
    general path, which phrases every diagnostic.
    """
    ev = yaml.events
    loader = loader_class(text)
    try:
        get = loader.get_event
        resolve = loader.resolve
        get()  # stream start
        if not isinstance(get(), ev.DocumentStartEvent):
            raise _Unusual
        # open containers: [container, pending mapping key or None]
        stack: list[list[Any]] = []
        root: Any = None
        nodes = 0
        while True:
            event = get()
            cls = type(event)
            if cls is ev.SequenceEndEvent or cls is ev.MappingEndEvent:
                stack.pop()
                continue
            if cls is ev.DocumentEndEvent:
                break
            if event.anchor is not None or cls is ev.AliasEvent:
                raise _Unusual
            nodes += 1
            if nodes > MAX_NODES:
                raise _Unusual
            mark = event.start_mark
            value: Any
            if cls is ev.ScalarEvent:
                if (event.value == "" and not event.style and stack and stack[-1][1] is not None
                        and isinstance(stack[-1][0], MarkedDict) and stack[-1][2]):
                    raise _Unusual  # {a: b, c}: the general path notes a comma-split value
                tag = event.tag
                if tag is None or tag == "!":
                    tag = resolve(yaml.ScalarNode, event.value, event.implicit)
                if tag == _STR_TAG:
                    value = event.value
                elif tag in _CORE_TAGS:
                    node = yaml.ScalarNode(tag, event.value, mark, event.end_mark, style=event.style)
                    value = _SCALAR_CONSTRUCTOR.construct_object(node)
                    if _overflowed(value, event.value):
                        raise _Unusual
                    if isinstance(value, bool) and event.value.lower() not in ("true", "false"):
                        raise _Unusual  # yes/no/on/off: the general path keeps the word (bool_words)
                else:
                    raise _Unusual
                if event.style in ("|", ">"):
                    where = Location(file, mark.line + 2, 1)
                else:
                    where = Location(file, mark.line + 1, mark.column + 1)
            elif cls is ev.MappingStartEvent or cls is ev.SequenceStartEvent:
                tag = event.tag
                if tag is not None and tag != "!" and tag not in _CORE_TAGS:
                    raise _Unusual
                where = Location(file, mark.line + 1, mark.column + 1)
                if cls is ev.MappingStartEvent:
                    value = MarkedDict()
                    value.location = where
                    value.key_locations = {}
                    value.value_locations = {}
                    value.comma_split = {}
                    value.bool_words = {}
                else:
                    value = MarkedList()
                    value.location = where
                    value.item_locations = []
            else:
                raise _Unusual
            if stack:
                top = stack[-1]
                parent = top[0]
                if isinstance(parent, MarkedDict):
                    if top[1] is None:
                        if not isinstance(value, str) or value in parent:
                            raise _Unusual  # a non-string or duplicate key
                        top[1] = (value, where)
                    else:
                        key, key_where = top[1]
                        parent.key_locations[key] = key_where
                        parent.value_locations[key] = where
                        parent[key] = value
                        top[1] = None
                else:
                    parent.item_locations.append(where)
                    parent.append(value)
            else:
                root = value
            if cls is ev.MappingStartEvent or cls is ev.SequenceStartEvent:
                stack.append([value, None, bool(getattr(event, "flow_style", False))])
                if len(stack) > MAX_DEPTH:
                    raise _Unusual
        if root is None or not isinstance(get(), ev.StreamEndEvent):
            raise _Unusual
        return root
    finally:
        loader.dispose()


def load_file(path: str | Path) -> Any:
    """Read and parse one spec file; see :func:`load_text`.

    Raises:
        SpecError: if the file is unreadable, over :data:`MAX_FILE_BYTES`, not UTF-8, starts with two
            byte-order marks, or is bad YAML.
    """
    file = display_path(path)
    p = Path(path)
    try:
        size = p.stat().st_size
        if size > MAX_FILE_BYTES:
            raise SpecError(
                [Diagnostic(Location(file, 1, 1), f"spec file is {size} bytes; the limit is {MAX_FILE_BYTES}")]
            )
        data = p.read_bytes()
    except OSError as exc:
        raise SpecError([Diagnostic(Location(file), f"cannot read spec: {exc.strerror}")]) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        col = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise SpecError(
            [Diagnostic(Location(file, line, col), f"spec is not valid UTF-8 (byte 0x{data[exc.start]:02x})")]
        ) from None
    if text.startswith("\ufeff"):
        text = text[1:]
    if text.startswith("\ufeff"):  # YAML would read the second as part of the first key
        raise SpecError([Diagnostic(Location(file, 1, 1), "spec starts with more than one byte-order mark "
                                    "(U+FEFF, bytes EF BB BF); keep at most one")])
    return load_text(text, file)
