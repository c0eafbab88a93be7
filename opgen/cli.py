"""Stage 8 — cli: ``opgen validate | generate | build``.

Exit codes: 0 success; 1 spec errors or build errors; 2 usage errors (argparse's own);
3 an internal fault of opgen (reported as such, with the op and file when known).
"""

from __future__ import annotations

import argparse
import sys
import time
import traceback
from collections.abc import Sequence
from pathlib import Path

from . import __version__
from .diagnostics import Diagnostic, display_path

EXIT_OK, EXIT_ERRORS, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3
DEFAULT_PACKAGE = "opgen_ops"


def _print_diags(diags: Sequence[Diagnostic]) -> None:
    for d in diags:
        print(d.format(), file=sys.stderr)
    n = sum(1 for d in diags if d.level == "error")
    if n:
        print(f"{n} error{'s' if n != 1 else ''} generated.", file=sys.stderr)


def _cmd_validate(args: argparse.Namespace) -> int:
    from .pipeline import load_ops

    ops, diags = load_ops(args.paths)
    _print_diags(diags)
    if diags:
        return EXIT_ERRORS
    if not args.quiet:
        print(f"opgen: {len(ops)} op(s) valid: {', '.join(sorted(o.name for o in ops))}")
    return EXIT_OK


def _cmd_generate(args: argparse.Namespace) -> int:
    from .pipeline import generate

    started = time.perf_counter()
    try:
        res = generate(args.paths, Path(args.out), args.package, dry_run=args.dry_run, check_only=args.check)
    except OSError as exc:  # the output directory cannot be written (a file, no space, a held lock...)
        where = display_path(exc.filename) if isinstance(exc.filename, str) else display_path(args.out)
        print(f"opgen: cannot write {where}: {exc.strerror or exc}", file=sys.stderr)
        print("opgen: nothing written.", file=sys.stderr)
        return EXIT_ERRORS
    _print_diags(res.diagnostics)
    if res.diagnostics:
        print("opgen: nothing written.", file=sys.stderr)
        return EXIT_ERRORS
    assert res.write is not None
    w = res.write
    pkg = display_path(res.package_dir)
    if args.check:
        if w.changed:
            print(f"opgen: {pkg} is out of date with its specs:", file=sys.stderr)
            for rel in w.written:
                print(f"  differs: {pkg}/{rel}", file=sys.stderr)
            for rel in w.removed:
                print(f"  stale:   {pkg}/{rel}", file=sys.stderr)
            print("run 'opgen generate' to update it.", file=sys.stderr)
            return EXIT_ERRORS
        if not args.quiet:
            print(f"opgen: {pkg} is up to date ({len(res.ops)} ops).")
        return EXIT_OK
    verb = "would write" if args.dry_run else "wrote"
    if not args.quiet:
        for rel in w.written:
            print(f"  {verb} {pkg}/{rel}")
        for rel in w.removed:
            print(f"  {'would remove' if args.dry_run else 'removed'} {pkg}/{rel}")
        print(
            f"opgen: {len(res.ops)} ops -> {pkg}: {len(w.written)} {verb}, {len(w.unchanged)} unchanged, "
            f"{len(w.removed)} removed ({time.perf_counter() - started:.2f}s)"
        )
    if args.build and not args.dry_run:
        return _build(res.package_dir, args, ("aot", "ext"))
    return EXIT_OK


def _build(pkg_dir: Path, args: argparse.Namespace, kinds: Sequence[str]) -> int:
    from .build import BuildError, build

    for kind in kinds:
        try:
            path = build(pkg_dir, kind, quiet=args.quiet, build_dir=args.build_dir, jobs=args.jobs,
                         ops_per_unit=args.ops_per_unit, pch=True if args.pch else None)
        except BuildError as exc:
            print(str(exc), file=sys.stderr)
            print(f"opgen: build of {display_path(pkg_dir)} ({kind}) failed; the previous library is kept.",
                  file=sys.stderr)
            return EXIT_ERRORS
        if not args.quiet:
            print(f"opgen: {kind}: {path}")
    return EXIT_OK


def _cmd_build(args: argparse.Namespace) -> int:
    pkg_dir = Path(args.package_dir)
    if not (pkg_dir / "csrc").is_dir():
        print(f"opgen: {display_path(pkg_dir)} is not a generated package (no csrc/); "
              "run 'opgen generate' first", file=sys.stderr)
        return EXIT_ERRORS
    kinds = ("aot", "ext") if args.only is None else (args.only,)
    return _build(pkg_dir, args, kinds)


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _add_build_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("build options")
    g.add_argument("--build-dir", metavar="DIR",
                   help="root of the build folders (default: $OPGEN_BUILD_DIR, else ~/.cache/opgen)")
    g.add_argument("-j", "--jobs", type=_positive, metavar="N",
                   help="parallel compile jobs (default: $OPGEN_JOBS, else the available CPUs)")
    g.add_argument("--ops-per-unit", type=_positive, metavar="N",
                   help="ops per extension translation unit; 1 = one unit per op "
                   "(default: $OPGEN_OPS_PER_UNIT, else 2 units, more past 16 ops each)")
    g.add_argument("--pch", action="store_true",
                   help="precompile MindSpore's headers once for the extension units (also $OPGEN_PCH=1)")


_NOT_PACKAGE_NAMES = frozenset({"opgen", "mindspore", "numpy", "np", "ms", "std", "generated"})


def package_name(text: str) -> str:
    """Check ``--package``: it names a Python package, a C++ namespace and a symbol prefix."""
    import keyword
    import re

    from .check import CPP_KEYWORDS

    if not re.fullmatch(r"[a-z][a-z0-9_]*", text):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a package name: use snake_case (lower-case letters, digits, '_'), e.g. my_ops")
    if keyword.iskeyword(text) or keyword.issoftkeyword(text) or text in CPP_KEYWORDS:
        raise argparse.ArgumentTypeError(f"{text!r} is a Python or C++ keyword; pick another package name")
    if text in _NOT_PACKAGE_NAMES:
        raise argparse.ArgumentTypeError(f"{text!r} would shadow a module the generated code imports")
    return text


def make_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``opgen`` command."""
    parser = argparse.ArgumentParser(
        prog="opgen",
        description="One YAML file per MindSpore custom op: validate specs, generate Custom (aot) wrappers, "
        "Function<T> classes and pybind11 bindings, and build them.",
        epilog="exit codes: 0 ok, 1 spec or build errors, 2 usage errors, 3 internal error",
    )
    parser.add_argument("--version", action="version", version=f"opgen {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("validate", help="check specs (schema + semantic rules); writes nothing",
                       description="Check specs; example: opgen validate ops/")
    p.add_argument("paths", nargs="+", help="spec files or directories of *.yaml")
    p.add_argument("-q", "--quiet", action="store_true", help="print only errors")
    p.set_defaults(func=_cmd_validate)

    p = sub.add_parser("generate", help="validate, then write the generated package",
                       description="Validate specs and write generated/<package>; example: opgen generate ops/")
    p.add_argument("paths", nargs="+", help="spec files or directories of *.yaml")
    p.add_argument("-o", "--out", default="generated", help="output directory (default: generated)")
    p.add_argument("-p", "--package", default=DEFAULT_PACKAGE, type=package_name,
                   help=f"Python package name (default: {DEFAULT_PACKAGE})")
    p.add_argument("--check", action="store_true", help="write nothing; exit 1 if the output differs")
    p.add_argument("--dry-run", action="store_true", help="write nothing; list what would change")
    p.add_argument("--build", action="store_true", help="also build the aot library and the extension")
    p.add_argument("-q", "--quiet", action="store_true", help="print only errors")
    _add_build_options(p)
    p.set_defaults(func=_cmd_generate)

    p = sub.add_parser("build", help="compile a generated package's aot library and extension",
                       description="Build (cached by content hash); example: opgen build generated/opgen_ops")
    p.add_argument("package_dir", nargs="?", default=f"generated/{DEFAULT_PACKAGE}",
                   help=f"generated package directory (default: generated/{DEFAULT_PACKAGE})")
    p.add_argument("--only", choices=("aot", "ext"), help="build only one of the two libraries")
    p.add_argument("-q", "--quiet", action="store_true", help="print only errors")
    _add_build_options(p)
    p.set_defaults(func=_cmd_build)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``opgen`` console script; returns the exit code."""
    args = make_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except KeyboardInterrupt:
        print("opgen: interrupted", file=sys.stderr)
        return 130
    except Exception:  # an opgen bug, not a user mistake: say so plainly
        print("opgen: internal error (this is a bug in opgen, not in your spec):", file=sys.stderr)
        traceback.print_exc()
        return EXIT_INTERNAL


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
