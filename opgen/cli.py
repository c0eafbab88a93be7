"""Stage 8 — cli: ``opgen validate | generate | build | test | wheel | new | docs | clean``.

Commands that make or use a framework's package take ``--backend torch|mindspore`` (default: the
``[tool.opgen] backends`` of the project, else mindspore; with ``--package-dir``/a package
directory, the backend that generated it), and their messages name it.

Exit codes: 0 success; 1 spec errors or build errors; 2 usage errors (argparse's own);
3 an internal fault of opgen (reported as such, with the op and file when known); ``opgen test``: 4
no check failed, but kernels rejected drawn cases with their own errors (spec problems).
Every subcommand takes ``-q/--quiet`` and ``-v/--verbose`` (repeatable, and together they
cancel out: the verbosity is the number of -v minus the number of -q) and ``--color``;
diagnostics are coloured on a terminal, never when ``NO_COLOR`` is set (https://no-color.org),
always when ``FORCE_COLOR`` is (https://force-color.org); ``--color=always|never`` wins over both.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import sys
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from . import __version__
from .config import DEFAULT_PACKAGE, Config
from .diagnostics import Diagnostic, display_path
from .isolate import DEFAULT_TIMEOUT

if TYPE_CHECKING:
    from .backends import Backend
    from .model import BuildFlags

EXIT_OK, EXIT_ERRORS, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3
_LABELS = {"torch": "PyTorch", "mindspore": "MindSpore"}
"""Each backend's framework, as messages name it."""
EXIT_SPEC = 4
"""``opgen test``: no check failed, but kernels rejected drawn cases with their own errors (checks
that belong in ``requires:``)."""


_LEVEL_COLORS = {"error": "1;31", "warning": "1;35", "note": "1;36"}
_LEVEL = re.compile(r"(?<=: )(error|warning|note)(?=:)")


_color_mode = "auto"
"""``--color`` of the running command: auto, always or never."""


def use_color(stream: object, mode: str | None = None) -> bool:
    """Whether to colour what goes to ``stream``: ``--color=always|never`` (``mode``) first, then
    ``FORCE_COLOR`` (set and not ``0``: yes), then ``NO_COLOR`` or ``TERM=dumb`` (no), else a terminal."""
    mode = mode or _color_mode
    if mode in ("always", "never"):
        return mode == "always"
    if os.environ.get("FORCE_COLOR", "") not in ("", "0"):
        return True
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def paint(line: str) -> str:
    """``line`` with its ``error:``/``warning:``/``note:`` level in ANSI colour."""
    return _LEVEL.sub(lambda m: f"\033[{_LEVEL_COLORS[m.group(1)]}m{m.group(1)}\033[0m", line, count=1)


def _print_diags(diags: Sequence[Diagnostic]) -> None:
    color = use_color(sys.stderr)
    for d in diags:
        text = d.format()
        print("\n".join(paint(ln) for ln in text.split("\n")) if color else text, file=sys.stderr)
    n = sum(1 for d in diags if d.level == "error")
    if n:
        print(f"{n} error{'s' if n != 1 else ''} generated.", file=sys.stderr)


def _cmd_validate(args: argparse.Namespace) -> int:
    from .pipeline import load_ops

    ops, diags = load_ops(args.paths or args.config.specs)
    _print_diags(diags)
    if diags:
        return EXIT_ERRORS
    if args.verbose:
        for o in sorted(ops, key=lambda o: o.file):
            print(f"  {o.file}: op '{o.name}' ok")
    if not args.quiet:
        print(f"opgen: {len(ops)} op(s) valid: {', '.join(sorted(o.name for o in ops))}")
    return EXIT_OK


def _one_backend(text: str) -> str:
    """Check ``--backend`` of build, wheel and test: one backend name."""
    names = _backend_list(text)
    if len(names) != 1:
        raise argparse.ArgumentTypeError(f"one backend, got {', '.join(names)}")
    return names[0]


def _backend_list(text: str) -> tuple[str, ...]:
    """Check ``--backend``: one backend name or several, comma-separated."""
    from . import backends

    try:
        return backends.parse_list(text)
    except backends.UnknownBackend as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _cmd_generate(args: argparse.Namespace) -> int:
    cfg: Config = args.config
    args.paths = args.paths or list(cfg.specs)
    args.out = args.out or cfg.output
    args.package = args.package or cfg.package
    status = EXIT_OK
    for backend in args.backend or cfg.backends:
        status = max(status, _generate_one(args, cfg, backend))
        if status != EXIT_OK and not args.check:
            break
    return status


def _generate_one(args: argparse.Namespace, cfg: Config, backend: str) -> int:
    from .pipeline import generate

    started = time.perf_counter()
    try:
        res = generate(args.paths, Path(args.out), args.package, dry_run=args.dry_run, check_only=args.check,
                       flags=_package_flags(args), backend=backend)
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
    command = _generate_command(args.paths, args.out, args.package, cfg, backend)
    if args.check:
        if not res.package_dir.is_dir():
            print(f"opgen: {pkg} does not exist; run '{command}' to write it.", file=sys.stderr)
            return EXIT_ERRORS
        if w.changed:
            print(f"opgen: {pkg} is out of date with its specs:", file=sys.stderr)
            for rel in w.written:
                print(f"  differs: {pkg}/{rel}", file=sys.stderr)
            for rel in w.removed:
                print(f"  stale:   {pkg}/{rel}", file=sys.stderr)
            print(f"run '{command}' to update it.", file=sys.stderr)
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
        if args.verbose:
            for rel in w.unchanged:
                print(f"  unchanged {pkg}/{rel}")
        print(
            f"opgen: {len(res.ops)} ops -> {pkg} ({_LABELS.get(backend, backend)}): {len(w.written)} {verb}, "
            f"{len(w.unchanged)} unchanged, "
            f"{len(w.removed)} removed ({time.perf_counter() - started:.2f}s)"
        )
    if args.build and not args.dry_run:
        from . import backends

        kinds, notes = backends.get(backend).buildable_kinds(res.package_dir)
        for note in notes:
            print(f"opgen build: {note}", file=sys.stderr)
        return _build(res.package_dir, args, kinds)
    return EXIT_OK


def _package_flags(args: argparse.Namespace) -> BuildFlags | None:
    """The package-wide compile/link settings given to ``opgen generate``, if any."""
    from .model import BuildFlags

    flags = BuildFlags(tuple(args.cflag or ()), tuple(args.include_dir or ()), tuple(args.ldflag or ()),
                       tuple(args.library or ()))
    return flags if flags != BuildFlags() else None


def _generate_command(paths: Sequence[str], out: str, package: str, cfg: Config, backend: str | None = None) -> str:
    """The ``opgen generate`` command line that writes ``out/package`` (for ``backend``) from
    ``paths``, as short as works."""
    parts = ["opgen", "generate"]
    if [display_path(p) for p in paths] != [display_path(p) for p in cfg.specs]:
        parts += [display_path(p) for p in paths]
    if display_path(out) != display_path(cfg.output):
        parts += ["-o", display_path(out)]
    if package != cfg.package:
        parts += ["-p", package]
    if backend is not None and cfg.backends != (backend,):
        parts += ["--backend", backend]
    return shlex.join(parts)


def _need_run_extra(command: str, modules: tuple[str, ...], backend: str) -> bool:
    """Print what to install (``backend``'s extra, or the other backend) and return True when
    ``modules`` are missing."""
    from . import extras

    absent = extras.missing(modules)
    if absent:
        print(extras.message(command, absent, backend), file=sys.stderr)
    return bool(absent)


def _package_backend(pkg_dir: Path) -> Backend:
    """The backend that generated ``pkg_dir`` (MindSpore when none claims it: its messages say
    what is missing)."""
    from . import backends

    return backends.of_package(pkg_dir) or backends.get(backends.DEFAULT)


def _build(pkg_dir: Path, args: argparse.Namespace, kinds: Sequence[str]) -> int:
    from .backends import BuildOptions
    from .build import BuildError

    backend = _package_backend(pkg_dir)
    needed = ("ninja", *backend.build_modules(kinds))
    if _need_run_extra("build", needed, backend.name):
        return EXIT_ERRORS
    if args.checked:
        os.environ["OPGEN_CHECK"] = "1"  # the build flags read it (a separate, cached variant)
    if args.sanitize:
        os.environ["OPGEN_SANITIZE"] = "1"  # likewise

    options = BuildOptions(build_dir=args.build_dir, jobs=args.jobs, ops_per_unit=args.ops_per_unit,
                           pch=True if args.pch else None, quiet=args.quiet)
    for kind in kinds:
        if kind not in backend.library_kinds:
            print(f"opgen build: {display_path(pkg_dir)} is a {backend.name} package, whose libraries are "
                  f"{', '.join(backend.library_kinds)}; --only {kind} is not one", file=sys.stderr)
            return EXIT_USAGE
        try:
            path = backend.build(pkg_dir, kind, options)
        except BuildError as exc:
            print(str(exc), file=sys.stderr)
            print(f"opgen: build of {display_path(pkg_dir)} ({kind}) failed; the previous library is kept.",
                  file=sys.stderr)
            return EXIT_ERRORS
        if not args.quiet:
            print(f"opgen: {kind}: {path}")
    return EXIT_OK


def _meant_backend(pkg_dir: Path, cfg: Config, backend: str | None) -> str:
    """The backend a command on the not yet generated ``pkg_dir`` is for: ``--backend``, else the
    one whose package suffix the directory's name ends with (``my_ops_torch``: torch), else the
    first configured one."""
    from . import backends

    if backend is not None:
        return backend
    for name in backends.names():
        suffix = backends.get(name).package_suffix
        if suffix and pkg_dir.name.endswith(suffix) and pkg_dir.name != suffix:
            return name
    return cfg.backends[0]


def _not_generated(pkg_dir: Path, cfg: Config, backend: str | None = None) -> bool:
    """Say how to generate ``pkg_dir`` for its backend (a command that works as printed) when it
    has no csrc/."""
    from . import backends

    if (pkg_dir / "csrc").is_dir():
        return False
    name = _meant_backend(pkg_dir, cfg, backend)
    suffix = backends.get(name).package_suffix
    package = pkg_dir.name[:-len(suffix)] if suffix and pkg_dir.name.endswith(suffix) else pkg_dir.name
    if all(Path(s).exists() for s in cfg.specs):
        hint = f"run '{_generate_command(cfg.specs, str(pkg_dir.parent), package, cfg, name)}' first"
    else:  # the specs are not where the defaults say: a template of the command
        cmd = _generate_command(["SPECS"], str(pkg_dir.parent), package, cfg, name)
        hint = f"generate it first: {cmd} (SPECS: your spec files or directories; or set [tool.opgen] specs)"
    print(f"opgen: {display_path(pkg_dir)} is not a generated package (no csrc/); {hint}", file=sys.stderr)
    return True


def _cmd_build(args: argparse.Namespace) -> int:
    cfg: Config = args.config
    pkg_dir = Path(args.package_dir or _backend_package_dir(cfg, args.backend))
    if _not_generated(pkg_dir, cfg, args.backend):
        return EXIT_ERRORS
    if args.only is not None:
        return _build(pkg_dir, args, (args.only,))
    kinds, notes = _package_backend(pkg_dir).buildable_kinds(pkg_dir)
    for note in notes:
        print(f"opgen build: {note}", file=sys.stderr)
    return _build(pkg_dir, args, kinds)


def _backend_package_dir(cfg: Config, backend: str | None) -> str:
    """The package directory of ``backend`` under ``[tool.opgen]`` output/package (no backend:
    the first configured one)."""
    from . import backends

    name = backend or cfg.backends[0]
    return str(backends.get(name).package_dir(Path(cfg.output), cfg.package))


def _cmd_wheel(args: argparse.Namespace) -> int:
    from .build import BuildError
    from .wheel import build_wheel

    cfg: Config = args.config
    pkg_dir = Path(args.package_dir or _backend_package_dir(cfg, args.backend))
    if _not_generated(pkg_dir, cfg, args.backend):
        return EXIT_ERRORS
    backend = _package_backend(pkg_dir)
    if _need_run_extra("wheel", ("ninja", *backend.runtime_modules), backend.name):
        return EXIT_ERRORS
    try:
        wheel = build_wheel(pkg_dir, Path(args.out), version=args.version, quiet=args.quiet,
                            build_dir=args.build_dir, jobs=args.jobs)
    except BuildError as exc:
        print(str(exc), file=sys.stderr)
        print(f"opgen: wheel of {display_path(pkg_dir)}: the build failed; no wheel written.", file=sys.stderr)
        return EXIT_ERRORS
    except FileNotFoundError as exc:  # a package an older opgen generated (no _runtime/)
        print(f"opgen wheel: {exc}", file=sys.stderr)
        return EXIT_ERRORS
    if not args.quiet:
        print(f"opgen: wrote {display_path(wheel)}")
    return EXIT_OK


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
                   "(default: $OPGEN_OPS_PER_UNIT, else at most 16 ops per unit)")
    g.add_argument("--pch", action="store_true",
                   help="precompile MindSpore's headers once for the extension units (also $OPGEN_PCH=1)")
    g.add_argument("--checked", action="store_true",
                   help="checked mode: kernels' views are bounds-checked, an out-of-bounds read is an error naming "
                   "the op, the view and the index (also $OPGEN_CHECK=1, which loads it; cached beside the "
                   "plain build)")
    g.add_argument("--sanitize", action="store_true",
                   help="AddressSanitizer + UndefinedBehaviorSanitizer builds (also $OPGEN_SANITIZE=1; cached beside "
                   "the plain build); loading them needs the ASan runtime preloaded: 'opgen test --sanitize' does that")


def _seconds(text: str) -> float:
    """Check ``--timeout``: a positive number of seconds."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0 or value != value or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    return value


def package_name(text: str) -> str:
    """Check ``--package``: it names a Python package, a C++ namespace and a symbol prefix
    (:func:`opgen.names.package_name_problem`)."""
    from .names import package_name_problem

    problem = package_name_problem(text)
    if problem:
        raise argparse.ArgumentTypeError(problem)
    return text


def _op_name(text: str) -> str:
    """Check the NAME of ``opgen new``: a snake_case op name that is no keyword."""
    from .skeleton import name_problem

    problem = name_problem(text)
    if problem:
        raise argparse.ArgumentTypeError(problem)
    return text


def _cmd_new(args: argparse.Namespace) -> int:
    from .skeleton import examples, write_skeleton

    cfg: Config = args.config
    if args.list_examples:
        print("\n".join(examples()))
        return EXIT_OK
    if args.name is None:
        print("opgen new: NAME is required (e.g. 'opgen new my_op'; 'opgen new --list-examples' lists the "
              "example ops --from takes)", file=sys.stderr)
        return EXIT_USAGE
    if args.example is not None and args.elementwise:
        print("opgen new: --from and --elementwise exclude each other (an example op has its own form)",
              file=sys.stderr)
        return EXIT_USAGE
    out = Path(args.out or next((s for s in cfg.specs if not s.endswith((".yaml", ".yml"))), "ops"))
    try:
        path = write_skeleton(args.name, out, elementwise=args.elementwise, example=args.example)
    except ValueError as exc:  # no such example op
        print(f"opgen new: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except FileExistsError:
        print(f"opgen new: {display_path(out / (args.name + '.yaml'))} exists already; "
              "not overwritten (pick another NAME or -o DIR)", file=sys.stderr)
        return EXIT_ERRORS
    except OSError as exc:
        print(f"opgen new: cannot write {display_path(out / (args.name + '.yaml'))}: {exc.strerror or exc}",
              file=sys.stderr)
        return EXIT_ERRORS
    shown = display_path(path)
    from .skeleton import refresh_schema_copy

    try:
        copied = refresh_schema_copy(out)
    except OSError as exc:
        print(f"opgen new: cannot write the schema copy: {exc.strerror or exc}", file=sys.stderr)
        copied = None
    if copied is not None and not args.quiet:
        print(f"opgen: wrote {display_path(copied)} (what the spec's $schema line points at; "
              "'opgen new' refreshes it)")
    if not args.quiet:
        form = (f"example op {args.example}" if args.example else
                f"{'elementwise' if args.elementwise else 'kernel'} form")
        for line in _next_steps(cfg, out, shown, args.name, args.backend or cfg.backends[0], form):
            print(line)
    return EXIT_OK


def _next_steps(cfg: Config, out: Path, shown: str, name: str, backend_name: str, form: str) -> list[str]:
    """What ``opgen new`` prints: the spec written, then the commands that validate, generate,
    build and test it for ``backend_name``, each working as printed (from this directory)."""
    from . import backends, extras

    backend = backends.get(backend_name)
    label = _LABELS.get(backend.name, backend.name)
    configured = display_path(out) in [display_path(s) for s in cfg.specs]
    flag = "" if cfg.backends[0] == backend.name else f" --backend {backend.name}"
    pkg_dir = display_path(backend.package_dir(Path(cfg.output), cfg.package))
    lines = [f"opgen: wrote {shown} ({form}). Next, for {label} (backend '{backend.name}'):",
             f"  opgen validate {shown}",
             f"  {'opgen generate' if configured else f'opgen generate {display_path(out)}/'}{flag}"
             f"   # writes {pkg_dir}",
             f"  opgen build{flag}   # compiles it (seconds; the first build on a machine: about a minute more)",
             f"  opgen test {name}" + ("" if configured else f" {display_path(out)}/") + flag
             + "   # forward, gradients and dtype checks on every path"]
    absent = extras.missing(backend.runtime_modules)
    if absent:
        lines.append(f"  (build and test need {', '.join(absent)}: {extras.install_command(backend.name)})")
    return lines


def _docs_command(args: argparse.Namespace) -> str:
    """The ``opgen docs`` command line that rewrites what ``args`` checked."""
    cfg: Config = args.config
    parts = ["opgen", "docs"]
    if args.spec_reference:
        parts.append("--spec-reference")
    elif [display_path(p) for p in args.paths] != [display_path(p) for p in cfg.specs]:
        parts += [display_path(p) for p in args.paths]
    if args.out:
        parts += ["-o", args.out]
    if not args.spec_reference and args.package != cfg.package:
        parts += ["-p", args.package]
    return shlex.join(parts)


def _write_or_check(path: Path, text: str, args: argparse.Namespace) -> int:
    """Write ``text`` to ``path`` when it differs; with ``--check``, only report a difference."""
    shown = display_path(path)
    try:
        old = path.read_text(encoding="utf-8")
    except OSError:
        old = None
    if args.check:
        if old != text:
            print(f"opgen docs: {shown} is out of date; run '{_docs_command(args)}' to update it", file=sys.stderr)
            return EXIT_ERRORS
        if not args.quiet:
            print(f"opgen: {shown} is up to date.")
        return EXIT_OK
    if old == text:
        if not args.quiet:
            print(f"opgen: {shown} unchanged.")
        return EXIT_OK
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        print(f"opgen docs: cannot write {shown}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_ERRORS
    if not args.quiet:
        print(f"opgen: wrote {shown}.")
    return EXIT_OK


def _cmd_docs(args: argparse.Namespace) -> int:
    if args.spec_reference:
        if args.paths:
            print("opgen docs: --spec-reference takes no spec paths", file=sys.stderr)
            return EXIT_USAGE
        from .specdoc import SPEC_REFERENCE, render

        return _write_or_check(Path(args.out or SPEC_REFERENCE), render(), args)
    from .opdoc import render_package
    from .pipeline import load_ops

    cfg: Config = args.config
    args.paths = args.paths or list(cfg.specs)
    args.package = args.package or cfg.package
    ops, diags = load_ops(args.paths)
    _print_diags(diags)
    if diags:
        return EXIT_ERRORS
    if not ops:
        print("opgen docs: no specs found", file=sys.stderr)
        return EXIT_ERRORS
    return _write_or_check(Path(args.out or "docs/ops") / f"{args.package}.md",
                           render_package(ops, args.package), args)


def _cmd_clean(args: argparse.Namespace) -> int:
    from .build import build_root
    from .clean import clean, human

    root = build_root(args.build_dir or args.config.build.get("build-dir"))  # [tool.opgen] build-dir too
    done = clean(root, dry_run=args.dry_run)
    verb = "would remove" if args.dry_run else "removed"
    if not args.quiet:
        for folder, pkg in done.folders:
            print(f"  {verb} {folder} (package {pkg} no longer exists)")
        for lib in done.libraries:
            print(f"  {verb} {lib}" + (" (an older build)" if args.verbose else ""))
        for folder in done.busy:
            print(f"  skipped {folder}: a build is running in it")
        for lib in done.in_use:
            print(f"  kept {lib}: a running process has loaded it")
        print(f"opgen: {verb} {len(done.folders)} build folder(s) and {len(done.libraries)} old "
              f"librar{'y' if len(done.libraries) == 1 else 'ies'} in {root} ({human(done.freed)})")
    return EXIT_OK


def _cmd_test(args: argparse.Namespace) -> int:
    from .pipeline import load_ops

    cfg: Config = args.config
    paths = [a for a in args.targets if Path(a).exists()]
    names = [a for a in args.targets if not Path(a).exists()]
    if not paths:
        if not all(Path(s).exists() for s in cfg.specs):
            print(f"opgen test: no spec path given and no {', '.join(cfg.specs)} here", file=sys.stderr)
            return EXIT_USAGE
        paths = list(cfg.specs)
    ops, diags = load_ops(paths)
    _print_diags(diags)
    if diags:
        return EXIT_ERRORS
    known = {o.name for o in ops}
    for name in names:
        if name not in known:
            from .diagnostics import nearest

            hint = nearest(name, known)
            print(f"opgen test: '{name}' is neither a spec path nor an op in {', '.join(paths)}"
                  + (f"; did you mean '{hint}'?" if hint else ""), file=sys.stderr)
            return EXIT_USAGE
    if names:
        ops = [o for o in ops if o.name in names]
    from . import backends

    given_dir = Path(args.package_dir) if args.package_dir else None
    if args.backend:
        backend = backends.get(args.backend)
    elif given_dir is not None:  # the backend that generated it
        backend = _package_backend(given_dir)
    else:
        backend = backends.get(cfg.backends[0])
    if _need_run_extra("test", (*backend.runtime_modules, "numpy", "ninja"), backend.name):
        return EXIT_ERRORS
    if args.unchecked:
        os.environ["OPGEN_CHECK"] = "0"
    else:  # checked mode by default (OPGEN_CHECK=0 in the environment turns it off too)
        os.environ.setdefault("OPGEN_CHECK", "1")
    if not args.verbose:
        # The dtype checks make MindSpore reject calls on purpose; in GRAPH_MODE it logs each
        # rejection at ERROR level with a Python stack (thousands of lines for ops/). opgen test
        # reports every outcome itself; -v, or GLOG_v set by the user, shows MindSpore's log.
        os.environ.setdefault("GLOG_v", "4")
    from . import testing

    if args.device == "cpu":
        paths_of_device = tuple(backend.test_paths)
    elif args.device in backend.device_test_paths:
        paths_of_device = tuple(backend.device_test_paths[args.device])
    else:
        print(f"opgen test: the {backend.name} backend has no {args.device} test paths"
              + (" (MindSpore's GPU aot entry points are checked through their C ABI: scripts/gpu_check.sh)"
                 if backend.name == "mindspore" else ""), file=sys.stderr)
        return EXIT_USAGE
    every = testing.checks_for(paths_of_device)
    checks = testing.select_checks(args.only or (), args.skip or (), checks=every)
    if not checks:
        print(f"opgen test: no check matches; {backend.name} checks are: {', '.join(every)}", file=sys.stderr)
        return EXIT_USAGE
    started = time.perf_counter()
    try:
        pkg_dir, note = testing.package_for(paths, given_dir, quiet=args.quiet, backend=backend.name,
                                            default_dir=Path(_backend_package_dir(cfg, backend.name)))
    except testing.StalePackage as exc:
        print(f"opgen test: {exc}", file=sys.stderr)
        return EXIT_ERRORS
    if not args.quiet:
        print(f"opgen test: {note}", file=sys.stderr)
    from .isolate import ChildError, run_isolated

    def progress(op: object, results: list[testing.Result]) -> None:
        if not args.quiet:
            bad = [r.check for r in results if r.status == "fail"]
            spec = [r.check for r in results if r.status == "spec"]
            took = sum(r.seconds for r in results)
            words = [w for w in ("FAIL " + ", ".join(bad) if bad else "", "SPEC " + ", ".join(spec) if spec else "")
                     if w]
            print(f"opgen test: {getattr(op, 'name', op)}: {'; '.join(words) or 'ok'} "
                  f"({took:.1f}s)", file=sys.stderr)

    def echo(line: str) -> None:  # the test process's own output: opgen's build progress, or all with -v
        if args.verbose or (not args.quiet and line.startswith("opgen:")):
            print(line, file=sys.stderr)

    try:
        results = run_isolated(pkg_dir, [str(p) for p in paths], ops, checks, seed=args.seed, timeout=args.timeout,
                               sanitize=args.sanitize, progress=progress, echo=echo)
    except ChildError as exc:
        print(str(exc), file=sys.stderr)
        print(f"opgen test: {display_path(pkg_dir)} cannot be loaded for testing", file=sys.stderr)
        return EXIT_ERRORS
    except KeyboardInterrupt:
        print("\nopgen test: interrupted; the test process was stopped", file=sys.stderr)
        return 130
    print(testing.format_table(results, checks))
    failures = testing.format_failures(results)
    if failures:
        print()
        print(failures)
    counts = {s: sum(1 for r in results if r.status == s) for s in ("pass", "fail", "spec", "n/a")}
    cases = sum(r.spec_problems for r in results)
    spec = (f", {counts['spec']} with spec problems only ({cases} drawn case(s) the kernel rejected with its own "
            "error; see SPEC above)") if counts["spec"] else ""
    print(f"\nopgen test: {len(ops)} op(s), {len(results)} checks: {counts['pass']} passed, "
          f"{counts['fail']} failed{spec}, {counts['n/a']} not applicable ({time.perf_counter() - started:.1f}s)")
    return EXIT_ERRORS if counts["fail"] else EXIT_SPEC if counts["spec"] else EXIT_OK


class _Formatter(argparse.HelpFormatter):
    """Wraps descriptions like argparse does, but keeps the example epilogs as written."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if text.startswith(("examples:", "exit codes:")):
            return "".join(indent + line for line in text.splitlines(keepends=True))
        return super()._fill_text(text, width, indent)


EXIT_CODES = "exit codes: 0 ok, 1 spec or build errors, 2 usage errors, 3 internal error (a bug in opgen)"

_EXAMPLES = {
    "opgen": """examples:
  opgen new my_op                      # write ops/my_op.yaml, a commented spec that works as written
  opgen validate ops/                  # check every spec; writes nothing
  opgen generate ops/ --backend torch  # PyTorch: generated/opgen_ops_torch (operators, fake kernels, autograd)
  opgen build --backend torch          # compile its operator library (cached)
  opgen test my_op --backend torch     # forward, gradients and dtype checks, eager and torch.compile
  opgen generate ops/                  # MindSpore (the default backend): generated/opgen_ops
  opgen build generated/opgen_ops      # compile its aot library and pybind11 extension (cached)
  opgen test my_op                     # forward, gradients and dtype checks on every MindSpore path
  opgen docs ops/                      # write docs/ops/opgen_ops.md, the op reference
  opgen clean                          # free the build cache of deleted packages and old libraries

--backend torch|mindspore picks the framework; backends = ["torch"] in the [tool.opgen]
table of pyproject.toml makes torch the default.
run 'opgen COMMAND --help' for the options of each command.""",
    "validate": """examples:
  opgen validate ops/                  # every ops/*.yaml
  opgen validate ops/mul.yaml -q       # one spec, print only errors""",
    "generate": """examples:
  opgen generate ops/ --backend torch  # write generated/opgen_ops_torch (PyTorch)
  opgen generate ops/                  # write generated/opgen_ops (MindSpore, unless [tool.opgen] says otherwise)
  opgen generate ops/ --check          # CI: exit 1 when generated/ differs from what ops/ generates
  opgen generate specs/ -o out -p my_ops --build""",
    "build": """examples:
  opgen build --backend torch          # generated/opgen_ops_torch: its operator library
  opgen build generated/my_ops_torch   # the backend is the package's: PyTorch here
  opgen build                          # generated/opgen_ops: aot library and extension (MindSpore)
  opgen build generated/my_ops --only aot -j 2""",
    "wheel": """examples:
  opgen wheel generated/my_ops         # dist/my_ops-0.1.0-cp311-cp311-linux_x86_64.whl
  opgen wheel --backend torch          # the PyTorch package, generated/opgen_ops_torch
  opgen wheel generated/my_ops -o wheels --version 1.2.0""",
    "test": """examples:
  opgen test                           # every spec in ops/, every check
  opgen test ops/ exp log              # only exp and log
  opgen test --backend torch exp       # on PyTorch: eager and torch.compile(fullgraph=True, dynamic=True)
  opgen test --skip '*function'        # MindSpore without the Function<T> path: no extension build needed
  opgen test my_specs/ --only 'grad/*' --seed 3""",
    "new": """examples:
  opgen new my_op                      # ops/my_op.yaml, kernel form (C++ forward/backward bodies)
  opgen new my_op --backend torch      # the same spec; the next steps printed are PyTorch's
  opgen new my_norm --from rms_norm    # a copy of opgen's example op rms_norm, renamed my_norm
  opgen new --list-examples            # the example ops --from takes
  opgen new my_add --elementwise -o specs/""",
    "clean": """examples:
  opgen clean                          # ~/.cache/opgen: folders of deleted packages, superseded libraries
  opgen clean --dry-run                # list what would go""",
    "docs": """examples:
  opgen docs                           # docs/ops/opgen_ops.md from ops/
  opgen docs specs/ -p my_ops -o docs/ops
  opgen docs --spec-reference          # docs/spec-reference.md from schemas/op.schema.json
  opgen docs --spec-reference --check  # exit 1 when the committed page is stale""",
}


def _epilog(command: str, codes: str = EXIT_CODES) -> str:
    return _EXAMPLES[command] + "\n\n" + codes


def make_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``opgen`` command."""
    from .resources import doc

    fmt = _Formatter
    parser = argparse.ArgumentParser(
        prog="opgen",
        description="One YAML file per custom operator, for PyTorch and MindSpore: validate specs, generate "
        "each framework's operator package from them (--backend torch: torch.ops operators with fake kernels "
        "and autograd; --backend mindspore: Custom (aot) wrappers, Function<T> classes and pybind11 "
        "bindings), build, test and document them.",
        epilog=_epilog("opgen"),
        formatter_class=fmt,
    )
    parser.add_argument("--version", action="version", version=f"opgen {__version__}")
    parser.add_argument("--color", choices=("auto", "always", "never"), dest="top_color",
                        help="colour diagnostics: auto, always or never (also after the command)")
    # -q/-v on every subcommand (after the subcommand's name, like its other options)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("-q", "--quiet", action="count", default=0,
                        help="print only errors (and results asked for); each -q cancels a -v")
    common.add_argument("-v", "--verbose", action="count", default=0, help="print more: every file and step")
    common.add_argument("--color", choices=("auto", "always", "never"),
                        help="colour diagnostics: auto (a terminal, unless NO_COLOR; always with FORCE_COLOR), "
                        "always or never (default: auto)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add(name: str, summary: str, description: str, codes: str = EXIT_CODES) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=summary, description=description, epilog=_epilog(name, codes),
                              formatter_class=fmt, parents=[common])

    p = add("validate", "check specs (schema + semantic rules); writes nothing",
            "Check specs: the JSON Schema, then every rule across fields and ops; all errors at once, "
            "each at its file:line:col.")
    p.add_argument("paths", nargs="*", help="spec files or directories of *.yaml (default: [tool.opgen] specs, "
                   "else ops/)")
    p.set_defaults(func=_cmd_validate)

    p = add("generate", "validate, then write the generated package",
            "Validate specs and write generated/<package>: only files whose bytes change are rewritten; "
            "nothing at all is written when a spec has an error.")
    p.add_argument("paths", nargs="*", help="spec files or directories of *.yaml (default: [tool.opgen] specs, "
                   "else ops/)")
    p.add_argument("-o", "--out", help="output directory (default: [tool.opgen] output, else generated)")
    p.add_argument("-p", "--package", type=package_name,
                   help=f"Python package name (default: [tool.opgen] package, else {DEFAULT_PACKAGE})")
    p.add_argument("--check", action="store_true", help="write nothing; exit 1 if the output differs")
    p.add_argument("--dry-run", action="store_true", help="write nothing; list what would change")
    p.add_argument("--build", action="store_true", help="also build the package's libraries")
    p.add_argument("--backend", type=_backend_list, metavar="NAME[,NAME]",
                   help="framework(s) to generate for: mindspore (writes OUT/PACKAGE), torch (OUT/PACKAGE_torch); "
                   "default: [tool.opgen] backends, else mindspore")
    g = p.add_argument_group("user flags (package-wide, kept in csrc/build.json, part of the build's cache key)")
    g.add_argument("--cflag", action="append", metavar="FLAG",
                   help="compile flag for every kernel unit (repeatable; write --cflag=-march=native)")
    g.add_argument("--include-dir", action="append", metavar="DIR", help="include directory for every kernel unit")
    g.add_argument("--ldflag", action="append", metavar="FLAG", help="link flag for both libraries (repeatable)")
    g.add_argument("--library", action="append", metavar="LIB",
                   help="library both libraries link: a name as for -l, or a file (repeatable)")
    _add_build_options(p)
    p.set_defaults(func=_cmd_generate)

    p = add("build", "compile a generated package's libraries (PyTorch: its operator library; MindSpore: "
            "aot library and extension)",
            "Build a generated package (cached by content hash: nothing runs when nothing changed). "
            "Builds live in --build-dir, else $OPGEN_BUILD_DIR, else ~/.cache/opgen.")
    p.add_argument("package_dir", nargs="?",
                   help="generated package directory (default: [tool.opgen] output/package, else "
                   f"generated/{DEFAULT_PACKAGE})")
    p.add_argument("--only", metavar="KIND",
                   help="build only one library: aot or ext (MindSpore), torch (PyTorch)")
    p.add_argument("--backend", type=_one_backend, metavar="NAME",
                   help="without package_dir: build this backend's package, torch (output/package_torch) or "
                   "mindspore (output/package); default: the first of [tool.opgen] backends, else mindspore")
    _add_build_options(p)
    p.set_defaults(func=_cmd_build)

    p = add("wheel", "build an installable wheel of a generated package, its libraries prebuilt",
            "Build the package's libraries (cached as for 'opgen build') and write a wheel holding the package "
            "and them, for this framework version (MindSpore or PyTorch: the package's backend), Python and "
            "platform: it installs and runs with no compiler; under another version its import names the "
            "version it was built for.")
    p.add_argument("package_dir", nargs="?",
                   help="generated package directory (default: [tool.opgen] output/package, else "
                   f"generated/{DEFAULT_PACKAGE})")
    p.add_argument("-o", "--out", default="dist", help="output directory (default: dist)")
    p.add_argument("--version", default="0.1.0", help="the wheel's version (default: 0.1.0)")
    p.add_argument("--backend", type=_one_backend, metavar="NAME",
                   help="without package_dir: the wheel of this backend's package (output/package + its suffix); "
                   "a torch wheel holds its operator library, prebuilt for this PyTorch")
    _add_build_options(p)
    p.set_defaults(func=_cmd_wheel)

    p = add("test", "check ops against their numpy reference, finite differences and dtype rows",
            "Check every op (forward vs numpy reference, gradients vs central differences, "
            "rejection of dtypes outside its rows) on every path of the backend: PyTorch eager and "
            "torch.compile; MindSpore's Custom path in GRAPH_MODE and PyNative and its Function<T> path. "
            f"See {doc('testing.md')}.",
            "exit codes: 0 every check passed, 1 a check failed or a spec/build error, 2 usage errors, 4 no check "
            "failed but a kernel rejected drawn cases with its own error (a spec problem: the check belongs in "
            "requires:)")
    p.add_argument("targets", nargs="*", metavar="PATH|OP",
                   help="spec files or directories (default: [tool.opgen] specs, else ops/), and op names to "
                   "restrict the run to")
    p.add_argument("--package-dir", metavar="DIR",
                   help="test this generated package (it must be up to date with the specs); default: "
                   "[tool.opgen] output/package (else generated/opgen_ops) when up to date, else a package "
                   "generated into the build cache")
    p.add_argument("--only", action="append", metavar="GLOB",
                   help="run only checks matching GLOB (repeatable), e.g. 'forward/*', '*custom*', reference")
    p.add_argument("--skip", action="append", metavar="GLOB", help="skip checks matching GLOB (repeatable)")
    p.add_argument("--backend", type=_one_backend, metavar="NAME",
                   help="the framework to test on: mindspore (paths custom-graph, custom-pynative, function) or "
                   "torch (eager, compiled: torch.compile(fullgraph=True, dynamic=True)); default: the backend "
                   "of --package-dir, else the first of [tool.opgen] backends, else mindspore")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                   help="the device whose kernels to test: cpu (the default), or cuda (torch: paths eager-cuda and "
                   "compiled-cuda, the GPU rows on the current GPU; docs/devices.md)")
    p.add_argument("--seed", type=int, default=0, help="seed of every random shape and value (default 0)")
    p.add_argument("--unchecked", action="store_true",
                   help="test the plain build: by default opgen test builds and loads the checked mode "
                   "(bounds-checked views; as OPGEN_CHECK=1), so that a kernel reading out of bounds fails")
    p.add_argument("--timeout", type=_seconds, default=DEFAULT_TIMEOUT, metavar="SECONDS",
                   help=f"a check still running after SECONDS fails as hung (default {DEFAULT_TIMEOUT:g}); the "
                   "checks run in a child process, so a crash or a hang fails one check and the run goes on")
    p.add_argument("--sanitize", action="store_true",
                   help="build the libraries with AddressSanitizer + UBSan and run the checks with the ASan runtime "
                   "preloaded: a raw-pointer overflow, use-after-free or signed overflow in a body fails its check "
                   "with the sanitizer's report (file:line in the YAML)")
    p.set_defaults(func=_cmd_test)

    p = add("new", "write a commented spec skeleton for a new op (or a copy of an example op)",
            "Write DIR/NAME.yaml: a commented spec that validates, generates and passes 'opgen test NAME' "
            "as written (kernel form with C++ forward/backward bodies, or --elementwise), or with --from a copy "
            "of one of opgen's example ops renamed NAME; then print the next commands for the backend. Specs "
            "serve every backend; --backend only picks the commands printed. Never overwrites.",
            "exit codes: 0 written, 1 the file exists or cannot be written, 2 usage errors (a bad NAME or example)")
    p.add_argument("name", type=_op_name, metavar="NAME", nargs="?", help="op name, snake_case (e.g. my_op)")
    p.add_argument("--elementwise", action="store_true",
                   help="use the elementwise shorthand (scalar expressions) instead of C++ bodies")
    p.add_argument("--from", dest="example", metavar="EXAMPLE",
                   help="copy opgen's example op EXAMPLE (e.g. rms_norm, gelu, softmax; see --list-examples), "
                   "renamed NAME")
    p.add_argument("--list-examples", action="store_true", help="list the example ops --from takes, and exit")
    p.add_argument("--backend", type=_one_backend, metavar="NAME",
                   help="the framework whose next commands are printed: torch or mindspore (default: the first "
                   "of [tool.opgen] backends, else mindspore)")
    p.add_argument("-o", "--out", metavar="DIR",
                   help="directory of the new spec (default: [tool.opgen] specs, else ops)")
    p.set_defaults(func=_cmd_new)

    p = add("docs", "write the Markdown op reference of a package (or the spec reference)",
            "Write DIR/<package>.md: per op its signature, doc, inputs/attrs/outputs, dtype table per target, "
            "shape rule in words, differentiability and source YAML. With --spec-reference, write the "
            "reference of every spec key from schemas/op.schema.json instead.",
            "exit codes: 0 ok, 1 spec errors (or, with --check, a stale page), 2 usage errors")
    p.add_argument("paths", nargs="*", metavar="PATH",
                   help="spec files or directories (default: [tool.opgen] specs, else ops/)")
    p.add_argument("-o", "--out", metavar="DIR",
                   help="output directory (default: docs/ops); with --spec-reference, the output file "
                   "(default: docs/spec-reference.md)")
    p.add_argument("-p", "--package", type=package_name,
                   help=f"package name the pages show (default: [tool.opgen] package, else {DEFAULT_PACKAGE})")
    p.add_argument("--spec-reference", action="store_true",
                   help="write the spec reference (from the schema) instead of an op reference")
    p.add_argument("--check", action="store_true", help="write nothing; exit 1 if the page differs")
    p.set_defaults(func=_cmd_docs)

    p = add("clean", "free the build cache: folders of deleted packages, superseded libraries",
            "Remove, under --build-dir (else $OPGEN_BUILD_DIR, else ~/.cache/opgen), the build folders of "
            "generated packages that no longer exist and every published library but the newest of each kind. "
            "A folder a running build holds is left alone.")
    p.add_argument("--dry-run", action="store_true", help="remove nothing; list what would go")
    p.add_argument("--build-dir", metavar="DIR",
                   help="root of the build folders (default: $OPGEN_BUILD_DIR, else ~/.cache/opgen)")
    p.set_defaults(func=_cmd_clean)
    return parser


def _suggest_command(parser: argparse.ArgumentParser, argv: list[str]) -> None:
    """A usage error naming the nearest command when the first word is not one (``opgen generat``)."""
    from .diagnostics import nearest

    words = [a for i, a in enumerate(argv) if not a.startswith("-") and (i == 0 or argv[i - 1] != "--color")]
    first = next(iter(words), None)
    if first is None:
        return
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    if first in sub.choices:
        return
    hint = nearest(first, sub.choices)
    parser.error(f"unknown command '{first}'" + (f"; did you mean '{hint}'?" if hint else "")
                 + f" (commands: {', '.join(sub.choices)})")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``opgen`` console script; returns the exit code."""
    global _color_mode
    parser = make_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    _suggest_command(parser, argv)
    args = parser.parse_args(argv)
    level = args.verbose - args.quiet  # -q -v together: they cancel out
    args.quiet, args.verbose = level < 0, level > 0
    _color_mode = args.color or args.top_color or "auto"
    from .config import ConfigError, apply

    try:
        apply(parser, args)
    except ConfigError as exc:
        _print_diags(exc.diagnostics)
        return EXIT_ERRORS
    from .env import EnvError, check_all

    bad_env = check_all()
    for problem in bad_env:
        print(f"opgen: error: {problem}", file=sys.stderr)
    if bad_env:
        return EXIT_USAGE
    try:
        return int(args.func(args))
    except EnvError as exc:  # set by a command itself (opgen test's OPGEN_CHECK)
        print(f"opgen: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("opgen: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # 'opgen new --list-examples | head': the reader is gone, not a bug
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # no second error when Python flushes stdout at exit
        return EXIT_OK
    except Exception:  # an opgen bug, not a user mistake: say so plainly
        print("opgen: internal error (this is a bug in opgen, not in your spec):", file=sys.stderr)
        traceback.print_exc()
        return EXIT_INTERNAL


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
