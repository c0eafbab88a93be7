"""The pipeline end to end: spec paths -> checked ops -> rendered files -> written package.

``load_ops`` runs load, schema, model and check over every spec and returns all diagnostics
together; ``generate`` renders and writes only when there are none.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from . import check, loader, model, schema, writer
from .diagnostics import Diagnostic, Location, SpecError, display_path, sort_diagnostics

SPEC_SUFFIXES = (".yaml", ".yml")


def find_specs(paths: Iterable[str | Path]) -> tuple[list[Path], list[Diagnostic]]:
    """Expand files and directories (non-recursive, ``*.yaml``/``*.yml``) into sorted spec paths."""
    specs: list[Path] = []
    diags: list[Diagnostic] = []
    for raw in paths:
        p = Path(raw)
        try:
            mode = p.stat().st_mode
        except OSError:
            mode = 0
        if stat.S_ISDIR(mode):
            try:
                found = sorted(q for q in p.iterdir() if q.suffix in SPEC_SUFFIXES and q.is_file())
            except OSError as exc:
                diags.append(Diagnostic(Location(display_path(p)), f"cannot list directory: {exc.strerror or exc}"))
                continue
            if not found:
                diags.append(Diagnostic(Location(display_path(p)), "no *.yaml spec files in this directory"))
            specs.extend(found)
        elif stat.S_ISREG(mode):
            specs.append(p)
        else:
            diags.append(Diagnostic(Location(display_path(p)), _not_a_spec(p)))
    unique = sorted(set(specs), key=lambda q: display_path(q))
    return unique, diags


_FILE_KINDS = ((stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISCHR, "a character device"),
               (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def _not_a_spec(path: Path) -> str:
    """What ``path`` is, given that it is neither a directory nor a regular file."""
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        if exc.errno == errno.ENOENT and os.path.islink(path):
            return f"broken symbolic link (to {os.readlink(path)!r}): no such file or directory"
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            return "no such file or directory"
        if exc.errno == errno.ELOOP:
            return "symbolic link loop: the path never reaches a file"
        return f"cannot read: {exc.strerror or exc}"
    for test, what in _FILE_KINDS:
        if test(mode):
            return f"{what}, not a spec file; expected a .yaml file or a directory of them"
    return "not a regular file or a directory; expected a .yaml file or a directory of them"


def _unusable_name(file: str) -> str:
    """Why a spec path that is not printable text cannot go into generated code (as a comment,
    a string, a ``#line`` directive)."""
    if any(0xD800 <= ord(ch) <= 0xDFFF for ch in file):
        what = "bytes that are not UTF-8"
    else:
        what = "a control character or line separator"
    return (f"the spec's path holds {what}; generated files name their spec, so rename it "
            "(letters, digits, spaces and punctuation are fine)")


def load_ops(paths: Iterable[str | Path]) -> tuple[list[model.Op], list[Diagnostic]]:
    """Load, schema-check, model and semantically check every spec under ``paths``.

    Returns:
        (ops, diagnostics); ops holds only specs that passed every stage. Diagnostics are
        sorted by file and line.
    """
    specs, diags = find_specs(paths)
    ops: list[model.Op] = []
    for spec in specs:
        file = display_path(spec)
        if not file.isprintable():
            diags.append(Diagnostic(Location(file), _unusable_name(file)))
            continue
        try:
            tree = loader.load_file(spec)
        except SpecError as exc:
            diags.extend(exc.diagnostics)
            continue
        errors = schema.validate_tree(tree, file)
        if errors:
            diags.extend(errors)
            continue
        try:
            op = model.build_op(tree, file)
        except SpecError as exc:
            diags.extend(exc.diagnostics)
            continue
        problems = check.check_op(op)
        if problems:
            diags.extend(problems)
            continue
        ops.append(op)
    diags.extend(check.check_ops(ops))
    return ops, sort_diagnostics(diags)


@dataclass
class GenerateResult:
    """Outcome of :func:`generate`."""

    ops: list[model.Op]
    diagnostics: list[Diagnostic]
    package_dir: Path
    write: writer.WriteResult | None


def generate(
    paths: Sequence[str | Path], out_dir: Path, package: str, *, dry_run: bool = False, check_only: bool = False,
    flags: model.BuildFlags | None = None, backend: str | None = None,
) -> GenerateResult:
    """Validate every spec; when all are valid, render the package and write it.

    With ``dry_run`` or ``check_only`` nothing is written; the result says what would change.
    Any diagnostic means nothing is written at all.  ``flags``: compile/link settings for the
    whole package (written to ``csrc/build.json`` with the specs' own ``build:`` settings).
    ``backend``: the framework to generate for (:mod:`opgen.backends`; default MindSpore), which
    decides the package directory (``out_dir/<package><suffix>``).
    """
    from . import backends

    chosen = backends.get(backend or backends.DEFAULT)
    ops, diags = load_ops(paths)
    pkg_dir = chosen.package_dir(out_dir, package)
    if diags or not ops:
        return GenerateResult(ops, diags, pkg_dir, None)
    files = chosen.render(ops, package, display_path(pkg_dir), flags)
    if dry_run or check_only:
        return GenerateResult(ops, diags, pkg_dir, writer.plan(pkg_dir, files))
    with writer.locked(pkg_dir):
        result = writer.write_package(pkg_dir, files)
    return GenerateResult(ops, diags, pkg_dir, result)
