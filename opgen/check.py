"""Stage 4 — check: the semantic rules that tie an op's facts together, and rules across ops.

Every rule reports at the ``file:line:col`` of the offending node and names the op; all
problems are collected (one run shows them all).  The rules are those MindSpore checks late
or never: one dtype_format column per input and output, dtype rules that agree with every
row, a gradient for each differentiable input and none for the others, names that are valid
in both Python and C++ and do not collide with each other or with generated helpers.
"""

from __future__ import annotations

import ast
import keyword
import re
from collections.abc import Callable, Iterable, Sequence

from . import devices, dtypes
from . import shapes as lang
from .diagnostics import Diagnostic, Location, Note, did_you_mean, shorten
from .literals import number_text
from .model import Body, Kernel, Op, inside
from .names import CPP_KEYWORDS, op_name_too_long

RESERVED = frozenset(
    {
        # generated helpers and namespaces visible in generated Python and C++
        "ctx", "attrs", "grad_outputs", "saved", "row", "C", "T", "np", "ms", "ops", "opgen",
        "std", "mindspore", "self", "cls", "out_shape", "out_dtype", "bprop", "extra", "params",
        "ndims", "shapes", "dtypes", "nparam", "stream", "numel", "main", "Tensor", "TensorPtr",
        "TensorPtrList", "py", "pybind11", "cur", "grads", "layout", "flat", "impl", "backward", "forward",
    }
)
"""Names a spec may not use for tensors or attrs: they are taken by generated code."""


GENERATED_MODULES = ("custom", "function", "reference", "meta")
"""Submodules of a generated package; ``__init__.py`` imports the op functions next to them."""

MODULE_LEVEL_NAMES = frozenset({"int", "float", "len", "list", "range", "sum", "tuple", "zip", "builtins", "math",
                                "typing"})
"""Builtins and modules the generated modules use at module level or in every op's code; an op of
that name (a module-level function) would replace them."""

GENERATED_SUFFIXES = ("_primitive", "_grad", "_backward")
"""What generated code appends to an op name: ``<op>_primitive()`` (custom.py), ``<op>_grad()``
(reference.py), ``<package>_<op>_backward`` (the aot symbol and registered name)."""

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
FLOAT32_MAX = 3.4028234663852886e38


def _bad_op_name(name: str) -> str | None:
    why = _bad_name(name)
    if why is None and name in GENERATED_MODULES:
        why = f"the name of a generated submodule ({', '.join(GENERATED_MODULES)})"
    if why is None and name in MODULE_LEVEL_NAMES:
        why = "a Python builtin or module that the generated modules use"
    if why is None:
        why = op_name_too_long(name)
    return why


def indent_python(text: str, prefix: str = "    ") -> str:
    """A Python body from the spec re-indented under a ``def`` (blank lines kept empty)."""
    return "\n".join(prefix + ln if ln.strip() else "" for ln in text.rstrip().splitlines())


def _reference_problem(body: Body, params: Sequence[str], returns_outputs: bool = True) -> tuple[Location, str] | None:
    """Where and why the reference body does not compile as the generated function would hold it
    (``returns_outputs``: the op has outputs, which the body must return)."""
    source = f"def reference({', '.join(params)}):\n{indent_python(body.text) or '    pass'}\n"
    try:
        compile(source, body.location.file, "exec", dont_inherit=True)  # compiled, never run
    except SyntaxError as exc:
        line = max((exc.lineno or 2) - 2, 0)  # 0-based line of the body
        col = max((exc.offset or 1) - 4, 1)
        block = body.location.col == 1  # a block scalar: its lines are the YAML lines, less indentation
        loc = Location(body.location.file, body.location.line + line, col if block or line else body.location.col
                       + col - 1)
        return loc, f"reference body does not compile: {exc.msg} (line {line + 1} of the body)"
    except (RecursionError, MemoryError, ValueError):
        return body.location, "reference body is nested too deeply to compile"
    func = ast.parse(source).body[0]
    if not isinstance(func, ast.FunctionDef):  # pragma: no cover - the source is one def
        return None
    returns = False
    stack: list[ast.AST] = list(func.body)
    while stack:  # the function's own statements, not those of functions or lambdas it defines
        node = stack.pop()
        if isinstance(node, (ast.Yield, ast.YieldFrom)):
            word = "yield from" if isinstance(node, ast.YieldFrom) else "yield"
            line = getattr(node, "lineno", 2) - 2
            loc = Location(body.location.file, body.location.line + line, body.location.col if line == 0 else 1)
            return loc, (f"reference body uses '{word}', which makes it a generator; it must return the "
                         "output(s)")
        if isinstance(node, ast.Return) and node.value is not None:
            returns = True
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            stack.extend(ast.iter_child_nodes(node))
    if returns_outputs and not returns and not any(isinstance(n, ast.Raise) for n in ast.walk(func)):
        return body.location, "reference body never returns a value; it must return the output(s)"
    return None


def _bad_name(name: str) -> str | None:
    if keyword.iskeyword(name) or keyword.issoftkeyword(name):
        return "a Python keyword"
    if name in CPP_KEYWORDS:
        return "a C++ keyword"
    if name in RESERVED:
        return "reserved for generated code"
    if name.startswith("_") or "__" in name:
        return "reserved (leading or double underscore)"
    if name.startswith("opgen"):
        return "reserved (names starting with 'opgen' belong to generated code)"
    if name.endswith("_t"):
        return "reserved (names ending in '_t' are the element types of tensors)"
    return None


_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def identifiers(text: str) -> set[str]:
    """Identifiers occurring in C++ text (comments and strings included; a superset is fine)."""
    return set(_IDENT.findall(text))


def check_op(op: Op) -> list[Diagnostic]:
    """All semantic problems of one op (and the shape-expression errors the model found)."""
    diags: list[Diagnostic] = list(op.late_diagnostics)

    def err(loc: Location, msg: str, notes: Sequence[Note] = ()) -> None:
        diags.append(Diagnostic(loc, msg, op.name, notes=tuple(notes)))

    # --- names -------------------------------------------------------------------------
    why = _bad_op_name(op.name)
    if why:
        err(op.location, f"op name '{shorten(op.name)}' is {why}")
    seen: dict[str, tuple[str, Location]] = {}

    def claim(name: str, what: str, loc: Location) -> None:
        reason = _bad_name(name)
        if reason:
            err(loc, f"{what} name '{name}' is {reason}")
        if name in seen:
            other_what, other_loc = seen[name]
            subject = f"'{name}', the name of {what}," if what.startswith("the ") else f"{what} name '{name}'"
            err(loc, f"{subject} is already used by {other_what}", [Note("first used here", other_loc)])
        else:
            seen[name] = (what if what.startswith("the ") else f"{what} '{name}'", loc)

    for x in op.inputs:
        claim(x.name, "input", x.location)
    for o in op.outputs:
        claim(o.name, "output", o.location)
    for o in op.outputs:
        claim(o.grad_name, f"the gradient of output '{o.name}'", o.location)
    for x in op.differentiable_inputs:
        claim("d" + x.name, f"the gradient of input '{x.name}'", x.location)
    for a in op.attrs:
        claim(a.name, "attr", a.location)

    input_names = [x.name for x in op.inputs]
    attr_by_name = {a.name: a for a in op.attrs}

    # --- input kinds ----------------------------------------------------------------------
    dynamic = [x for x in op.inputs if x.kind == "dynamic"]
    for x in dynamic[1:]:
        err(x.location, f"input '{x.name}' is a second dynamic input; an op takes at most one",
            [Note(f"'{dynamic[0].name}' is dynamic", dynamic[0].location)])
    for i, x in enumerate(op.inputs):
        if x.kind != "optional":
            continue
        later = [(y.name, f"move optional input '{x.name}' after input '{y.name}'")
                 for y in op.inputs[i + 1:] if y.kind != "optional"]
        later += [(a.name, f"give attr '{a.name}' a default") for a in op.attrs if not a.has_default]
        if later:
            err(x.location, f"optional input '{x.name}' is followed by '{later[0][0]}', which has no default; "
                "optional inputs default to None, so everything after them needs a default", [Note(later[0][1])])
    if op.elementwise is not None:
        for x in op.inputs:
            if x.kind != "required":
                err(x.location, f"input '{x.name}' is {x.kind}; elementwise ops take required inputs only "
                    "(use 'kernel' bodies)")

    # --- in-place writes (outputs[].aliases, inputs[].writes) ---------------------------------
    _check_effects(op, err)

    # --- targets and dtype_format -------------------------------------------------------
    used_vars = {c for r in op.rows if r.template for c in r.template}
    for tv in op.type_vars:
        if tv.name not in used_vars:
            err(tv.location, f"type variable '{tv.name}' is declared but no dtype_format row uses it")
    n_cols = len(op.inputs) + len(op.outputs)
    row_targets = {r.target for r in op.rows}
    for t in op.targets:
        if t not in row_targets:
            err(op.targets_location, f"target '{t}' is listed but dtype_format has no rows for it")
    for t in sorted(row_targets - set(op.targets)):
        loc = next(r.location for r in op.rows if r.target == t)
        err(loc, f"dtype_format has rows for target '{t}', which is not in targets {list(op.targets)}")
    if op.kernel is not None:
        _check_target_bodies(op.kernel, row_targets, err)
    for t in sorted(row_targets | set(op.targets)):
        if devices.for_target(t) is None:  # never a silently dropped row
            loc = next((r.location for r in op.rows if r.target == t), op.targets_location)
            err(loc, f"target '{t}': {devices.UNBUILT_TARGETS.get(t, 'no device builds it')}; "
                f"opgen builds {', '.join(devices.targets())}")
    col_names = [x.name for x in op.inputs] + [o.name for o in op.outputs]
    seen_rows: dict[tuple[str, tuple[str, ...]], Location] = {}
    valid_rows = []
    wrong_length: set[Location] = set()  # a row of type variables expands to several: report it once
    for row in op.rows:
        if len(row.columns) != n_cols:
            if row.location in wrong_length:
                continue
            wrong_length.add(row.location)
            err(
                row.location,
                f"dtype_format row has {len(row.columns)} column(s); expected {n_cols}, "
                f"one per input then per output: {', '.join(col_names)}",
            )
            continue
        ok = True
        for idx, col in enumerate(row.columns):
            prefix, fmt = dtypes.split_datatype(col)
            if prefix not in dtypes.BY_PREFIX:
                ok = False
                if prefix in dtypes.KNOWN_UNSUPPORTED:
                    err(row.location, f"DataType '{col}' (column '{col_names[idx]}'): {prefix} kernels are not "
                        f"supported by opgen yet; supported: {', '.join(d.prefix for d in dtypes.DTYPES)}")
                else:
                    err(row.location, f"unknown DataType '{col}' in column '{col_names[idx]}'",
                        did_you_mean(col, dtypes.all_datatype_names()))
            elif fmt not in dtypes.FORMATS:
                ok = False
                err(row.location, f"DataType '{col}' (column '{col_names[idx]}'): format '{fmt}' cannot be "
                    f"taken by target {row.target}; use '{prefix}_Default'")
        key = (row.target, row.columns)
        if key in seen_rows:
            what = "duplicate dtype_format row"
            if row.template:
                what = f"dtype_format row {list(row.template)} expands to {list(row.columns)}, a duplicate row"
            err(row.location, what, [Note("first given here", seen_rows[key])])
            ok = False
        else:
            seen_rows[key] = row.location
        if ok:
            valid_rows.append(row)

    # --- outputs: shape and dtype rules; contracts ------------------------------------------
    # (names, types and forms of shape expressions were checked when they were parsed)
    for oi, o in enumerate(op.outputs):
        _check_shape_literals(o.shape.node, o.shape.location, f"output '{o.name}'", err)
        if isinstance(o.shape.node, lang.ListOf):
            for d in o.shape.node.items:
                if isinstance(d, lang.Const) and isinstance(d.value, int) and d.value < 0:
                    err(o.shape.location, f"output '{o.name}': shape dim {d.value} is negative; a dim is a size, "
                        "0 or more")
        for sub in lang.walk(o.shape.node):
            if isinstance(sub, lang.Call) and sub.fn.name == "gather":
                idx_node = sub.args[1]
                name = idx_node.tensor.name if isinstance(idx_node, lang.ShapeOf) else None
                if name in input_names:
                    ii = input_names.index(name)
                    for row in valid_rows:
                        if row.dtype(ii).is_float or row.dtype(ii).prefix == "BOOL":
                            err(row.location, f"output '{o.name}': gather() takes integer indices, but this row "
                                f"gives {row.columns[ii]} for '{name}'")
        out_col = len(op.inputs) + oi
        if o.aliases is not None:
            src = input_names.index(o.aliases)
            for row in valid_rows:
                if row.columns[out_col] != row.columns[src]:
                    err(row.location, f"output '{o.name}' aliases input '{o.aliases}' (it is that tensor), but this "
                        f"row gives {row.columns[src]} for '{o.aliases}' and {row.columns[out_col]} for '{o.name}'",
                        [Note("an aliased output's column repeats its input's")])
        elif o.dtype in input_names:
            src = input_names.index(o.dtype)
            for row in valid_rows:
                if dtypes.split_datatype(row.columns[out_col])[0] != dtypes.split_datatype(row.columns[src])[0]:
                    err(row.location, f"output '{o.name}' has dtype rule '{o.dtype}' (same as input '{o.dtype}'), "
                        f"but this row gives {row.columns[src]} for '{o.dtype}' and {row.columns[out_col]} for "
                        f"'{o.name}'")
        elif o.dtype in dtypes.BY_NAME or o.dtype in dtypes.UNSUPPORTED_NAMES.values():
            prefix = dtypes.BY_NAME[o.dtype].prefix if o.dtype in dtypes.BY_NAME else dtypes.prefix_of(o.dtype)
            for row in valid_rows:
                if dtypes.split_datatype(row.columns[out_col])[0] != prefix:
                    err(row.location, f"output '{o.name}' has fixed dtype '{o.dtype}', but this row gives "
                        f"{row.columns[out_col]}")
        else:
            err(o.location, f"output '{o.name}': dtype rule '{o.dtype}' is neither an input name nor a dtype",
                did_you_mean(o.dtype, input_names + [d.name for d in dtypes.DTYPES]))

    for c in op.requires:
        _check_shape_literals(c.node, c.location, "requires", err)
        if not lang.tensors_used(c.node) and not lang.attrs_used(c.node):
            try:
                value = lang.evaluate(c.node, {})
            except ValueError as exc:
                err(c.location, f"contract '{c.text}' cannot be evaluated: {exc}")
            else:
                if not value:
                    err(c.location, f"contract '{c.text}' never holds: it reads no input or attr and is false")

    # --- differentiability ---------------------------------------------------------------
    for idx, x in enumerate(op.inputs):
        if x.differentiable and valid_rows and not any(row.dtype(idx).is_float for row in valid_rows):
            err(x.location, f"input '{x.name}' is differentiable, but every dtype_format row gives it an integer "
                "or bool type; such inputs are never differentiable",
                [Note("add 'differentiable: false' to the input")])

    # --- attrs ----------------------------------------------------------------------------
    for a in op.attrs:
        empty_range = a.range is not None and a.range[0] > a.range[1]
        if a.has_default and not empty_range:
            problem = _attr_value_problem(a.type, a.default, a.range, a.choices)
            if problem:
                err(a.default_location or a.location, f"attr '{a.name}': default {_show(a.default)} {problem}",
                    list(_number_note(a.default, a.type)))
        if a.range is not None and a.type not in ("int", "float", "list[int]", "list[float]", "list[list[int]]",
                                                  "list[list[float]]"):
            err(a.location, f"attr '{a.name}': 'range' applies to int and float attrs, not {a.type}")
        if a.range is not None and empty_range:
            err(a.location, f"attr '{a.name}': range [{number_text(a.range[0])}, {number_text(a.range[1])}] is empty; "
                "write [low, high]")
        for c in a.choices or ():
            problem = _attr_value_problem(a.type, c, None, None)
            if problem:
                err(a.location, f"attr '{a.name}': choice {c!r} {problem}")

    # --- bodies and gradients -------------------------------------------------------------
    diff_names = [x.name for x in op.differentiable_inputs]
    if op.elementwise is not None:
        exprs = [("elementwise.forward", op.elementwise.forward, op.elementwise.forward_location)]
        exprs += [(f"elementwise.grad.{g}", e, loc) for g, e, loc in op.elementwise.grads]
        for where, expr, loc in exprs:
            for n in expr.names:
                bad = attr_by_name.get(n)
                if bad is not None and bad.type not in ("int", "float", "bool"):
                    m = re.search(rf"\b{n}\b", expr.text)
                    at = Location(loc.file, loc.line, loc.col + (m.start() if m else 0)) if loc.line else loc
                    err(at, f"{where}: attr '{n}' is {_a(bad.type)}; expressions take int, float and bool attrs "
                        "only", [Note(f"attr '{n}' is declared here", bad.location),
                         Note("use a 'kernel' body to compute with it")])
        if len(op.outputs) != 1:
            err(op.location, f"'elementwise' ops have exactly one output; this one has {len(op.outputs)}")
        elif not _elementwise_shape(op.outputs[0].shape.node):
            o = op.outputs[0]
            what = f"{o.shape.call}()" if o.shape.call else f"'{o.shape.text}'"
            err(o.location, f"output '{o.name}': an 'elementwise' op's output takes a shape its inputs broadcast "
                f"to ('x', 'broadcast(x, y)' or a dims list), not {what}",
                [Note(f"use a 'kernel' body for a {o.shape.call or 'general shape'} op")])
        given = [g[0] for g in op.elementwise.grads]
        for gname, _expr, gloc in op.elementwise.grads:
            if gname not in input_names:
                err(gloc, f"elementwise.grad names unknown input '{gname}'", did_you_mean(gname, input_names))
            elif gname not in diff_names and not op.has_effects:  # _check_effects says why
                err(gloc, f"elementwise.grad gives a gradient for input '{gname}', which is not differentiable")
        for x in op.differentiable_inputs:
            if x.name not in given:
                err(x.location, f"differentiable input '{x.name}' has no gradient in elementwise.grad",
                    [Note("add 'grad: {" + x.name + ": ...}' or mark the input 'differentiable: false'")])
    elif op.kernel is not None:
        k = op.kernel
        known = set(input_names) | {o.name for o in op.outputs} | {o.grad_name for o in op.outputs}
        if k.backward_per_input:
            given = [n for n, _ in k.backward_per_input]
            for gname, body in k.backward_per_input:
                if gname not in input_names:
                    err(body.location, f"kernel.backward names unknown input '{gname}'",
                        did_you_mean(gname, input_names))
                elif gname not in diff_names and not op.has_effects:  # _check_effects says why
                    err(body.location, f"kernel.backward gives a gradient for input '{gname}', which is not "
                        "differentiable")
            for x in op.differentiable_inputs:
                if x.name not in given:
                    err(x.location, f"differentiable input '{x.name}' has no body in kernel.backward")
        elif k.backward is not None:
            used = identifiers(k.backward.text)
            for x in op.differentiable_inputs:
                if "d" + x.name not in used:
                    err(k.backward.location, f"kernel.backward never writes 'd{x.name}', the gradient of "
                        f"differentiable input '{x.name}'")
            for x in op.inputs:
                if op.has_effects:  # _check_effects says why
                    break
                if not x.differentiable and "d" + x.name in used and "d" + x.name not in known:
                    err(k.backward.location, f"kernel.backward uses 'd{x.name}', but input '{x.name}' is not "
                        "differentiable")
        if k.save is not None and k.save_location is not None:
            for n in k.save:
                if n not in input_names and n not in {o.name for o in op.outputs}:
                    err(k.save_location, f"kernel.save names '{n}', which is not an input or output",
                        did_you_mean(n, input_names + [o.name for o in op.outputs]))
        for gname, gloc in () if op.has_effects else k.grad_views:  # _check_effects says why
            view_problem = _grad_view_problem(op, gname)
            if view_problem is not None:
                err(gloc, f"kernel.grad_views: {view_problem[0]}", view_problem[1])
        if k.backward is None and not k.backward_per_input and op.differentiable_inputs:
            err(op.location, f"differentiable input(s) {', '.join(diff_names)} but no kernel.backward",
                [Note("add kernel.backward or mark the inputs 'differentiable: false'")])
    if op.reference is not None:
        ref_problem = _reference_problem(op.reference, input_names + list(attr_by_name), bool(op.outputs))
        if ref_problem:
            err(*ref_problem)
    if op.test.shapes and not diags:
        for name, message in _unusable_test_shapes(op):
            err(op.test.shape_locations.get(name, op.location), message,
                [Note("opgen test gives every input in test.shapes exactly that shape; change or remove the "
                      "entry, or the contract or rule that rejects it")])
    return diags


def _check_effects(op: Op, err: Callable[..., None]) -> None:
    """The rules of ops that write an input in place: an output aliases at most one input, each
    input at most once, an aliased input takes no ``writes: true``, a written input is a
    required one, an op with no outputs writes an input, and such ops have no gradient."""
    first_alias: dict[str, str] = {}
    for o in op.outputs:
        if o.aliases is None:
            continue
        if o.aliases in first_alias:
            err(o.location, f"outputs '{first_alias[o.aliases]}' and '{o.name}' both alias input '{o.aliases}'; an "
                "input is updated in place by one output at most")
        else:
            first_alias[o.aliases] = o.name
    for x in op.inputs:
        if not x.writes:
            continue
        if x.name in first_alias:
            err(x.location, f"input '{x.name}' is written through output '{first_alias[x.name]}' (aliases: {x.name}), "
                "so it takes no 'writes: true'", [Note("remove 'writes: true': 'aliases' already says it is written")])
        if x.kind != "required":
            err(x.location, f"input '{x.name}' is {x.kind} and 'writes: true'; only a required input (one tensor) can "
                "be written in place")
        if op.elementwise is not None:
            err(x.location, f"input '{x.name}' has 'writes: true', but an 'elementwise' op writes its one output "
                "only", [Note("use an output with 'aliases: " + x.name + "', or a 'kernel' body")])
    if not op.outputs and not any(x.writes for x in op.inputs):
        err(op.location, f"op '{op.name}' has no outputs and writes no input, so a call would do nothing",
            [Note("an op without outputs writes an input in place: mark it 'writes: true'")])
    written = [x.name for x in op.written_inputs]
    if not written:
        return
    why = f"op '{op.name}' writes {', '.join(repr(n) for n in written)} in place, and such an op has no gradient"
    for x in op.inputs:
        if x.differentiable:
            err(x.location, f"input '{x.name}' is marked differentiable, but {why}",
                [Note("remove 'differentiable: true'")])
    for o in op.outputs:
        if o.differentiable:
            err(o.location, f"output '{o.name}' is marked differentiable, but {why}",
                [Note("remove 'differentiable: true'")])
    if op.elementwise is not None:
        for gname, _expr, gloc in op.elementwise.grads:
            err(gloc, f"elementwise.grad.{gname}: {why}", [Note("remove elementwise.grad")])
    elif op.kernel is not None:
        k = op.kernel
        for body in [k.backward, *(b for _, b in k.backward_per_input)]:
            if body is not None:
                err(body.location, f"kernel.backward: {why}", [Note("remove kernel.backward")])
        for _gname, gloc in k.grad_views:
            err(gloc, f"kernel.grad_views: {why}", [Note("remove kernel.grad_views")])


def _check_target_bodies(k: Kernel, row_targets: set[str], err: Callable[..., None]) -> None:
    """``kernel.<target>``: a target with rows, a backward of the default's form (and inputs)."""
    default_form = "one body" if k.backward else "one body per input" if k.backward_per_input else ""
    for own in k.targets:
        if own.target not in row_targets:
            err(own.location, f"kernel.{own.target} gives bodies for target '{own.target}', which has no "
                "dtype_format rows", [Note(f"add rows under 'dtype_format.{own.target}' or remove it")])
        own_form = "one body" if own.backward else "one body per input" if own.backward_per_input else ""
        if own_form and own_form != default_form:
            err(own.location, f"kernel.{own.target}.backward is {own_form}, kernel.backward "
                f"{default_form or 'is not given'}: a target's backward takes the default's form")
        elif own_form == "one body per input" and {n for n, _ in own.backward_per_input} != \
                {n for n, _ in k.backward_per_input}:
            err(own.location, f"kernel.{own.target}.backward gives bodies for "
                f"{sorted(n for n, _ in own.backward_per_input)}, kernel.backward for "
                f"{sorted(n for n, _ in k.backward_per_input)}: give the same inputs")


def _unusable_test_shapes(op: Op) -> list[tuple[str, str]]:
    """:func:`opgen.sampling.unusable_test_shapes`, or nothing where numpy is not installed (a core
    install: the sampler needs it, and ``opgen test``, which needs it too, reports them)."""
    try:
        from .sampling import unusable_test_shapes
    except ImportError:
        return []
    return unusable_test_shapes(op)


def _grad_view_problem(op: Op, name: str) -> tuple[str, Sequence[Note]] | None:
    """Why the gradient of input ``name`` cannot be a view of the output gradient
    (``kernel.grad_views``), with notes; None when it can."""
    names = [x.name for x in op.inputs]
    if name not in names:
        return f"names unknown input '{name}'", did_you_mean(name, names)
    if not next(x for x in op.inputs if x.name == name).differentiable:
        return f"input '{name}' is not differentiable", ()
    if len(op.outputs) != 1:
        return (f"the gradient of '{name}' can be a view of the output gradient only for an op with one "
                f"output; '{op.name}' has {len(op.outputs)}", ())
    out = op.outputs[0]
    node = out.shape.node
    viewable = sorted(f.signature for f in lang.FUNCTIONS.values() if f.grad_view)
    first = node.args[0] if isinstance(node, lang.Call) and node.args else None
    first_name = (first.name if isinstance(first, lang.TensorRef)
                  else first.tensor.name if isinstance(first, lang.ShapeOf) else None)
    if not (isinstance(node, lang.Call) and node.fn.grad_view and first_name == name):
        return (f"the gradient of '{name}' is a view of '{out.grad_name}' only when output '{out.name}''s shape "
                f"rule is one of {', '.join(viewable)} with '{name}' as its first argument; it is "
                f"'{out.shape.text}'", (Note("remove the input from kernel.grad_views: kernel.backward computes its "
                                            "gradient"),))
    if out.dtype != name:
        return (f"a view of '{out.grad_name}' has the output's dtype, so output '{out.name}''s dtype rule must be "
                f"'{name}', not '{out.dtype}'", ())
    return None


def _elementwise_shape(node: lang.Node) -> bool:
    """Whether an elementwise op's inputs can broadcast onto this output shape form."""
    if isinstance(node, (lang.ShapeOf, lang.ListOf)):
        return True
    if isinstance(node, lang.AttrRef) and node.type is lang.Type.LIST:
        return True
    return isinstance(node, lang.Call) and node.fn.name == "broadcast"


def _check_shape_literals(node: lang.Node, loc: Location, where: str, err: Callable[..., None]) -> None:
    """Literal indices of shapes past any rank a tensor can have (``x.shape[100]``)."""
    for sub in lang.walk(node):
        if isinstance(sub, lang.Index) and isinstance(sub.base, lang.ShapeOf) and isinstance(sub.index, lang.Const):
            i = int(sub.index.value)
            if not -64 <= i < 64:
                err(inside(loc, sub.col), f"{where}: '{lang.to_source(sub)}' indexes past any rank a tensor can have")


def _attr_value_problem(
    typ: str, value: object, rng: tuple[float, float] | None, choices: tuple[object, ...] | None
) -> str | None:
    def scalar_ok(t: str, v: object) -> bool:
        if t == "int":
            return isinstance(v, int) and not isinstance(v, bool)
        if t == "float":
            return isinstance(v, (int, float)) and not isinstance(v, bool)
        if t == "bool":
            return isinstance(v, bool)
        return isinstance(v, str)

    if typ.startswith("list[list["):
        inner = typ[5:-1]
        if not isinstance(value, (list, tuple)):
            return f"is not a {typ}"
        vals: list[object] = []
        for i, r in enumerate(value):
            if not isinstance(r, (list, tuple)):
                return f"is not {_a(typ)}: row {i} is {r!r}, not {_a(inner)}"
            for j, v in enumerate(r):
                if not scalar_ok(inner[5:-1], v):
                    return f"is not {_a(typ)}: item [{i}][{j}] is {v!r}, not {_a(inner[5:-1])}"
                if _too_big(inner[5:-1], v):
                    return f"item [{i}][{j}]: {v!r} {_too_big(inner[5:-1], v)}"
            vals += list(r)
    elif typ.startswith("list["):
        inner = typ[5:-1]
        if not isinstance(value, (list, tuple)):
            return f"is not a {typ}"
        items: Iterable[object] = value
        for i, v in enumerate(items):
            if not scalar_ok(inner, v):
                return f"is not {_a(typ)}: item {i} is {v!r}, not {_a(inner)}"
            if _too_big(inner, v):
                return f"item {i}: {v!r} {_too_big(inner, v)}"
        vals = list(value)
    else:
        if not scalar_ok(typ, value):
            return f"is not {_a(typ)}"
        if _too_big(typ, value):
            return _too_big(typ, value)
        vals = [value]
    if rng is not None:
        for v in vals:
            if isinstance(v, (int, float)) and not rng[0] <= v <= rng[1]:
                return f"is outside the range [{number_text(rng[0])}, {number_text(rng[1])}]"
    if choices is not None and value not in choices:
        return f"is not one of the choices {list(choices)}"
    return None


def _number_note(value: object, typ: str) -> tuple[Note, ...]:
    """For a float attr whose default YAML 1.1 read as a string (``1e6``): how to write it."""
    from .schema import number_note as note

    if typ not in ("float", "list[float]", "list[list[float]]"):
        return ()
    items = value if isinstance(value, (list, tuple)) else [value]
    if typ == "list[list[float]]":
        items = [v for r in items for v in (r if isinstance(r, (list, tuple)) else [r])]
    for item in items:
        if note(item, "number"):
            return note(item, "number")
    return ()


def _a(typ: str) -> str:
    return ("an " if typ[0] in "aeiou" else "a ") + typ


def _too_big(typ: str, value: object) -> str | None:
    """Why a number of the right type still does not fit the attr's C++ type (int64_t / float)."""
    if typ == "int" and isinstance(value, int) and not INT64_MIN <= value <= INT64_MAX:
        return "does not fit an int attr (int64: -2**63 to 2**63-1)"
    if typ == "float" and isinstance(value, (int, float)) and FLOAT32_MAX < abs(value) < float("inf"):
        return "does not fit a float attr (float32: at most 3.4028235e+38 in magnitude, or .inf)"
    return None


def check_ops(ops: Iterable[Op]) -> list[Diagnostic]:
    """Rules across ops: an op name is defined once, and is not another op's name plus a suffix
    generated code appends to it (``mul`` and ``mul_primitive``)."""
    ops = list(ops)
    diags: list[Diagnostic] = []
    by_name = {op.name: op for op in ops}
    for op in ops:
        for suffix in GENERATED_SUFFIXES:
            stem = op.name[: -len(suffix)]
            if op.name.endswith(suffix) and stem in by_name and by_name[stem] is not op:
                diags.append(Diagnostic(op.location, f"op name '{op.name}' collides with the generated "
                                        f"'{op.name}' of op '{stem}'", op.name,
                                        notes=(Note(f"op '{stem}' is defined here", by_name[stem].location),
                                               Note("rename one of them; opgen appends "
                                                    f"{', '.join(GENERATED_SUFFIXES)} to op names"))))
    first: dict[str, Op] = {}
    for op in ops:
        if op.name in first:
            diags.append(
                Diagnostic(op.location, f"op '{op.name}' is defined twice", op.name,
                           notes=(Note("first defined here", first[op.name].location),))
            )
        else:
            first[op.name] = op
    return diags


def _show(value: object) -> str:
    """A spec value as the user wrote it in YAML terms (lists as ``[...]``, not tuples)."""
    if isinstance(value, tuple):
        return "[" + ", ".join(_show(v) for v in value) + "]"
    return repr(value)
