"""The compiled yes/no schema test agrees with jsonschema on the repository specs and on
thousands of mutations of them (every node replaced by values of every JSON type, keys removed
and added), so skipping jsonschema for valid specs never lets an invalid one through."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from opgen import loader, schema

ROOT = Path(__file__).resolve().parents[1]

PALETTE: list[Any] = [None, True, False, 0, 1, -1, 2.0, 1.5, "", "x", "snake_case", "Bad Name", "F32_Default",
                      "float32", "broadcast(x, y)", [], ["x"], [1, 1], {}, {"name": "x"}]


def plain(tree: Any) -> Any:
    if isinstance(tree, dict):
        return {k: plain(v) for k, v in tree.items()}
    if isinstance(tree, list):
        return [plain(v) for v in tree]
    return tree


def paths(tree: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield prefix
    if isinstance(tree, dict):
        for k, v in tree.items():
            yield from paths(v, prefix + (k,))
    elif isinstance(tree, list):
        for i, v in enumerate(tree):
            yield from paths(v, prefix + (i,))


def mutations(tree: Any) -> Iterator[Any]:
    for path in paths(tree):
        for value in PALETTE:
            if not path:
                continue
            t = copy.deepcopy(tree)
            node = t
            for part in path[:-1]:
                node = node[part]
            node[path[-1]] = copy.deepcopy(value)
            yield t
        t = copy.deepcopy(tree)
        node = t
        for part in path:
            node = node[part]
        if isinstance(node, dict):
            for k in list(node):
                smaller = copy.deepcopy(tree)
                target = smaller
                for part in path:
                    target = target[part]
                del target[k]
                yield smaller
            node["bogus"] = 1
            yield t
        elif isinstance(node, list):
            node.append(copy.deepcopy(node[0]) if node else 1)
            yield t
            if node:
                shorter = copy.deepcopy(tree)
                target = shorter
                for part in path:
                    target = target[part]
                target.clear()
                yield shorter


def test_the_check_is_compiled_for_the_op_schema() -> None:
    assert schema._fast_check() is not None


@pytest.mark.parametrize("spec", sorted((ROOT / "ops").glob("*.yaml")), ids=lambda p: p.stem)
def test_agrees_with_jsonschema_on_mutations(spec: Path) -> None:
    check = schema._fast_check()
    assert check is not None
    validator = schema._validator()
    tree = plain(loader.load_file(spec))
    assert check(tree) and not list(validator.iter_errors(tree))
    seen = valid = 0
    for variant in mutations(tree):
        expected = not any(True for _ in validator.iter_errors(variant))
        assert check(variant) == expected, variant
        seen += 1
        valid += expected
    assert seen > 300 and 0 < valid < seen  # both answers were exercised


def test_unknown_keywords_give_no_check() -> None:
    assert schema.compile_check({"type": "object", "patternProperties": {"^x": {}}}) is None
    assert schema.compile_check({"properties": {"a": {"format": "email"}}}) is None
    assert schema.compile_check({"type": "integer", "description": "fine"}) is not None
