"""Docs — an op reference page per generated package (``opgen docs``).

For each op: its typed signature, its doc, its inputs, attrs and outputs with their docs, the
dtype table of every target (after type-variable expansion), each output's shape rule in words,
which inputs and outputs are differentiable, and the source YAML.  Everything comes from the
checked :class:`~opgen.model.Op`; the page is deterministic (ops sorted by name).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from . import shapes as lang
from . import signatures
from .api import py_literal
from .literals import number_text
from .model import Op


def _cell(text: str) -> str:
    """Text safe inside a Markdown table cell (one line, no bare '|')."""
    return " ".join(text.split()).replace("|", "\\|")


def _fence(text: str) -> str:
    """A code fence longer than any run of backticks in ``text``."""
    longest, run = 0, 0
    for ch in text:
        run = run + 1 if ch == "`" else 0
        longest = max(longest, run)
    return "`" * max(3, longest + 1)


def _gradient_inputs(op: Op) -> set[str]:
    """Inputs the spec gives a gradient for."""
    if op.elementwise is not None:
        return {g[0] for g in op.elementwise.grads}
    if op.kernel is None:
        return set()
    if op.kernel.backward is not None:
        return {x.name for x in op.differentiable_inputs}
    return {name for name, _ in op.kernel.backward_per_input}


def render_op(op: Op, package: str, source: str | None) -> str:
    """The section of one op; ``source`` is the text of its YAML file (or None to leave it out)."""
    lines = [f"## `{op.name}`", "", "```python", f"{package}.{signatures.signature(op)}",
             f"{package}.function.{signatures.signature(op)}", "```", "", op.doc.strip(), ""]
    grads = _gradient_inputs(op)
    lines += ["| input | kind | differentiable | doc |", "|---|---|---|---|"]
    for x in op.inputs:
        diff = "yes" if x.differentiable and x.name in grads else "no"
        lines.append(f"| `{x.name}` | {x.kind} | {diff} | {_cell(x.doc)} |")
    lines.append("")
    if op.attrs:
        lines += ["| attr | type | default | constraints | doc |", "|---|---|---|---|---|"]
        for a in op.attrs:
            default = f"`{py_literal(a, a.default)}`" if a.has_default else "(required)"
            cons = []
            if a.range:
                cons.append(f"in [{number_text(a.range[0])}, {number_text(a.range[1])}]")
            if a.choices:
                cons.append("one of " + ", ".join(f"`{c!r}`" for c in a.choices))
            lines.append(f"| `{a.name}` | `{a.type}` | {_cell(default)} | {_cell('; '.join(cons))} | {_cell(a.doc)} |")
        lines.append("")
    if op.has_effects:
        lines += ["Writes " + ", ".join(f"`{x.name}`" for x in op.written_inputs) + " in place"
                  + (" and returns nothing (None)." if not op.outputs else "."), ""]
    if op.outputs:
        lines += ["| output | shape | dtype | differentiable | doc |", "|---|---|---|---|---|"]
    for o in op.outputs:
        if o.aliases:
            lines.append(f"| `{o.name}` | the input `{o.aliases}` itself, updated in place | that of `{o.aliases}` "
                         f"| no | {_cell(o.doc)} |")
            continue
        dtype = f"that of `{o.dtype}`" if o.dtype in {x.name for x in op.inputs} else f"`{o.dtype}`"
        diff = "yes" if o.differentiable and op.has_backward else "no"
        words = signatures.shape_in_words(o.shape)
        if o.shape.same_as is None:
            words += f" (`{o.shape.text}`)"
        lines.append(f"| `{o.name}` | {_cell(words)} "
                     f"| {dtype} | {diff} | {_cell(o.doc)} |")
    lines.append("")
    if op.requires:
        lines += ["Requires (checked before any kernel runs; a violation raises `ValueError` naming the op): "
                  + ", ".join(f"`{c.text}`" for c in op.requires) + ".", ""]
    if op.has_effects:
        lines += ["No gradient: the op writes an input in place, and a call under `ms.grad` raises.", ""]
    elif not op.has_backward:
        lines += ["No gradient is defined: `ms.grad` through this op raises.", ""]
    if op.kernel is not None and op.kernel.grad_views:
        node = op.outputs[0].shape.node
        assert isinstance(node, lang.Call)  # checked: a shape function with a gradient view
        names_ = ", ".join(f"`{n}`" for n, _ in op.kernel.grad_views)
        lines += [f"Gradient of {names_} in PyNative: {node.fn.grad_view}, returned as a view (no copy, like "
                  "MindSpore's own bprop; `kernel.grad_views`; on the Custom path with static shapes); graphs "
                  "and dynamic shapes run the backward kernel.", ""]
    names = [x.name for x in op.inputs] + [o.name for o in op.outputs]
    for target in op.targets:
        rows = op.rows_for(target)
        lines += [f"Supported dtypes on {target} ({len(rows)} row{'s' if len(rows) != 1 else ''}; other "
                  "combinations raise `TypeError`):", ""]
        lines += ["| " + " | ".join(f"`{n}`" for n in names) + " |", "|" + "---|" * len(names)]
        for r in rows:
            lines.append("| " + " | ".join(r.dtype(i).name for i in range(len(names))) + " |")
        lines.append("")
    if source is not None:
        fence = _fence(source)
        lines += ["<details><summary>Source: <code>" + op.file + "</code></summary>", "", fence + "yaml",
                  source.rstrip("\n"), fence, "", "</details>", ""]
    else:
        lines += [f"Source: `{op.file}`", ""]
    return "\n".join(lines)


def render_package(ops: Sequence[Op], package: str, *, with_source: bool = True) -> str:
    """The reference page of a package: an index, then one section per op (sorted by name)."""
    ordered = sorted(ops, key=lambda o: o.name)
    files = sorted({o.file for o in ordered})
    lines = [f"<!-- @generated by opgen from {', '.join(files)} -- do not edit; run 'opgen docs' -->", "",
             f"# `{package}` op reference", "",
             f"{len(ordered)} op{'s' if len(ordered) != 1 else ''}. Each is callable as `{package}.<op>(...)` "
             "(the `ops.Custom` aot path: GRAPH_MODE, `ms.jit` and PyNative) and as "
             f"`{package}.function.<op>(...)` (the `Function<T>` path: PyNative). Tensor arguments come "
             "first, then attrs; an op with several outputs returns a tuple.", "",
             "| op | signature | doc |", "|---|---|---|"]
    for op in ordered:
        first = op.doc.strip().split("\n\n")[0]
        lines.append(f"| [`{op.name}`](#{op.name}) | `{_cell(signatures.signature(op))}` | {_cell(first)} |")
    lines.append("")
    for op in ordered:
        source = None
        if with_source:
            try:
                source = Path(op.file).read_text(encoding="utf-8")
            except OSError:
                source = None
        lines.append(render_op(op, package, source))
    return "\n".join(lines).rstrip("\n") + "\n"
