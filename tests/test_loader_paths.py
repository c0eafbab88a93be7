"""The libyaml fast paths of the loader (events straight to a tree; composing nodes) build exactly
what the pure-Python path builds: the same trees with the same locations, and the same
diagnostics for every kind of bad input."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from opgen import loader
from opgen.diagnostics import SpecError

ROOT = Path(__file__).resolve().parents[1]

CASES = {
    "anchors": "a: &x {b: 1, c: [1, 2]}\nd: *x\ne: &y hello\nf: *y\n",
    "merge_key": "base: &b {x: 1}\nderived:\n  <<: *b\n  y: 2\n",
    "undefined_alias": "a: *nope\n",
    "duplicate_anchor": "a: &x 1\nb: &x 2\n",
    "two_documents": "a: 1\n---\nb: 2\n",
    "empty": "",
    "only_comment": "# nothing\n",
    "tags": "a: !!str 1\nb: !custom x\nc: !!python/object:os.system {}\nd: !!binary aGVsbG8=\n",
    "block_scalars": "a: |\n  line1\n   line2\n\nb: >-\n  folded\n  text\nc: |+\n  keep\n\n",
    "quoted": "a: 'single ''q'''\nb: \"double \\u00e9 \\t\"\nc: plain: colon\n",
    "unicode": "name: \u00e9t\u00e9\ndoc: \u4e2d\u6587 text\nx: [\u00e9, b]\n",
    "flow": "{a: [1, {b: c}], d: e}\n",
    "bad_indent": "a:\n  b: 1\n c: 2\n",
    "tab_indent": "a:\n\tb: 1\n",
    "unclosed_flow": "a: [1, 2\n",
    "nulls": "a: ~\nb: null\nc:\nd: [~, null, ]\n",
    "numbers": "a: 0x1f\nb: 1_000\nc: 1e3\nd: .inf\ne: -.nan\nf: 0o17\ng: 017\nh: 1:20\n",
    "bools": "a: yes\nb: No\nc: on\nd: TRUE\n",
    "complex_key": "? [a, b]\n: 1\n",
    "self_reference": "a: &x [1, *x]\n",
    "document_markers": "---\na: 1\n...\n",
    "directive": "%YAML 1.1\n---\na: 1\n",
    "nested_sequences": "- a: 1\n  b: 2\n- [3, 4]\n- - 5\n  - 6\n",
    "deep_80": "a: " + "[" * 80 + "]" * 80 + "\n",
    "deep_60": "a: " + "[" * 60 + "]" * 60 + "\n",
    "duplicate_key": "a: 1\na: 2\n",
    "crlf": "a: 1\r\nb: |\r\n  x\r\n  y\r\n",
    "non_string_keys": "1: a\ntrue: b\n",
    "empty_collections": "a: []\nb: {}\n",
    "anchored_sequence": "a: &s\n  - 1\n  - 2\nb: *s\n",
    "reserved_indicator": "a: @foo\n",
    "trailing_mapping": "a: 1\n  b: 2\n",
    "explicit_tags_on_collections": "a: !!str [1]\nb: !!seq {x: 1}\nc: !!map foo\n",
    "block_scalar_key": "? |\n  key\n: value\n",
    "empty_document": "---\n",
    "null_key": "~: 1\n",
    "spec_like": "name: x\ndoc: |\n  text\ninputs:\n  - {name: x, doc: d}\n  - name: y\n    doc: >\n      folded\n",
    "alias_bomb": "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
    + "".join(f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 10)}]\n" for i in range(6)),
}


def dump(tree: Any) -> Any:
    """A comparable form of a marked tree, locations included."""
    if isinstance(tree, loader.MarkedDict):
        return ("map", str(tree.location), [(k, str(tree.key_locations[k]), str(tree.value_locations[k]), dump(v))
                                            for k, v in tree.items()])
    if isinstance(tree, loader.MarkedList):
        return ("seq", str(tree.location), [(str(loc), dump(v)) for loc, v in zip(tree.item_locations, tree)])
    return (type(tree).__name__, repr(tree))


def no_plain(text: str, file: str, loader_class: Any) -> Any:
    raise loader._Unusual


def load_both(text: str, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Results of the three paths: libyaml events to tree, libyaml compose + convert, pure Python."""
    results = []
    for path in ("plain", "compose", "python"):
        with monkeypatch.context() as m:
            if path == "compose":
                m.setattr(loader, "_load_plain", no_plain)
            if path == "python":
                m.setattr(loader, "_CLoader", None)
            try:
                results.append(("ok", dump(loader.load_text(text, "spec.yaml"))))
            except SpecError as exc:
                results.append(("error", [d.format() for d in exc.diagnostics]))
    return results


def test_libyaml_is_available() -> None:
    assert loader._CLoader is not None, "PyYAML without libyaml: the fast path is not exercised"


@pytest.mark.parametrize("name", sorted(CASES))
def test_fast_and_pure_python_paths_agree(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    plain, composed, pure = load_both(CASES[name], monkeypatch)
    assert plain == pure
    assert composed == pure


def test_agree_on_the_repository_specs(monkeypatch: pytest.MonkeyPatch) -> None:
    specs = sorted((ROOT / "ops").glob("*.yaml"))
    assert specs
    for spec in specs:
        plain, composed, pure = load_both(spec.read_text(encoding="utf-8"), monkeypatch)
        assert plain == composed == pure and plain[0] == "ok", spec
