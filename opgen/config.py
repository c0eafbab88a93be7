"""A project's settings: the ``[tool.opgen]`` table of its ``pyproject.toml``.

```toml
[tool.opgen]
specs = "ops"            # spec files or directories (a string or a list); default "ops"
output = "generated"     # where 'opgen generate' writes; default "generated"
package = "my_ops"       # the generated package's name; default "opgen_ops"
backends = ["mindspore", "torch"]  # the frameworks to generate for; default ["mindspore"]
jobs = 2                 # any build option of 'opgen build', by its long name without '--'
```

The file is the first ``pyproject.toml`` found from the current directory upwards; paths in it
are relative to its directory. Run opgen from that directory: the generated files name their
specs by paths relative to the current directory. Options given on the command line win over the table, the table
over opgen's defaults; every command reads it, so that in a configured project ``opgen
validate``, ``opgen generate [--check]``, ``opgen build``, ``opgen test`` and ``opgen docs``
need no arguments.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import backends as _backends
from .diagnostics import Diagnostic, Location, did_you_mean, display_path
from .names import package_name_problem

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python < 3.11
    import tomli as tomllib

DEFAULT_SPECS = "ops"
DEFAULT_OUTPUT = "generated"
DEFAULT_PACKAGE = "opgen_ops"
PROJECT_KEYS = ("specs", "output", "package", "backends")


@dataclass(frozen=True)
class Config:
    """The settings in force: the table's values over the defaults (paths as given to commands)."""

    specs: tuple[str, ...] = (DEFAULT_SPECS,)
    output: str = DEFAULT_OUTPUT
    package: str = DEFAULT_PACKAGE
    backends: tuple[str, ...] = (_backends.DEFAULT,)
    """The backends ``opgen generate`` writes a package for (:mod:`opgen.backends`), in order."""
    build: dict[str, Any] = field(default_factory=dict)
    """Build options by their long name without ``--`` (``jobs``, ``build-dir``...)."""
    file: Path | None = None
    """The ``pyproject.toml`` holding a ``[tool.opgen]`` table, if any."""

    @property
    def package_dir(self) -> str:
        """``output/package``, as a path to show and to pass to commands."""
        return f"{self.output.rstrip('/')}/{self.package}"


class ConfigError(Exception):
    """The ``[tool.opgen]`` table is malformed; carries diagnostics at the file."""

    def __init__(self, diagnostics: list[Diagnostic]):
        self.diagnostics = diagnostics
        super().__init__("\n".join(d.format() for d in diagnostics))


def find_pyproject(start: Path | None = None) -> Path | None:
    """The nearest ``pyproject.toml`` in ``start`` (default: the cwd) or a directory above it."""
    here = (start or Path.cwd()).resolve()
    for d in (here, *here.parents):
        candidate = d / "pyproject.toml"
        if candidate.is_file():
            return candidate
    return None


def _line_of(text: str, key: str) -> int:
    """The line of ``key =`` in the ``[tool.opgen]`` table (0 when not found)."""
    inside = False
    for n, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if stripped.startswith("["):
            inside = stripped.replace(" ", "") == "[tool.opgen]"
        elif inside and stripped.split("=", 1)[0].strip().strip('"') == key:
            return n
    return 0


def _relative(root: Path, value: str) -> str:
    """``value`` (relative to the pyproject's directory) as a path from the cwd."""
    return display_path(root / value) if not os.path.isabs(value) else value


def load(build_options: frozenset[str] = frozenset(), start: Path | None = None) -> Config:
    """The project's settings (defaults when there is no ``[tool.opgen]`` table).

    ``build_options`` are the long option names (without ``--``) the table may also set.

    Raises:
        ConfigError: the file is not valid TOML or the table has an unknown key or a bad value.
    """
    path = find_pyproject(start)
    if path is None:
        return Config()
    shown = display_path(path)
    try:
        text = path.read_text(encoding="utf-8")
        data = tomllib.loads(text)
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError([Diagnostic(Location(shown), f"cannot read: {exc}")]) from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError([Diagnostic(Location(shown), f"invalid TOML: {exc}")]) from None
    table = data.get("tool", {}).get("opgen") if isinstance(data.get("tool"), dict) else None
    if table is None:
        return Config()
    if not isinstance(table, dict):
        raise ConfigError([Diagnostic(Location(shown), "[tool.opgen] must be a table")])
    diags: list[Diagnostic] = []

    def where(key: str) -> Location:
        return Location(shown, _line_of(text, key), 1 if _line_of(text, key) else 0)

    allowed = (*PROJECT_KEYS, *sorted(build_options))
    for key in table:
        if key not in allowed:
            diags.append(Diagnostic(where(key), f"unknown key '{key}' in [tool.opgen]; expected one of: "
                                    f"{', '.join(allowed)}", notes=did_you_mean(key, allowed)))
    root = path.parent
    specs = table.get("specs", DEFAULT_SPECS)
    if isinstance(specs, str):
        specs = [specs]
    if not (isinstance(specs, list) and specs and all(isinstance(s, str) and s for s in specs)):
        diags.append(Diagnostic(where("specs"), "[tool.opgen] specs must be a path or a list of paths"))
        specs = [DEFAULT_SPECS]
    values: dict[str, str] = {}
    for key, default in (("output", DEFAULT_OUTPUT), ("package", DEFAULT_PACKAGE)):
        value = table.get(key, default)
        if not isinstance(value, str) or not value:
            diags.append(Diagnostic(where(key), f"[tool.opgen] {key} must be a non-empty string, got {value!r}"))
            value = default
        values[key] = value
    if "package" in table and not diags:
        problem = package_name_problem(values["package"])  # the same rule as -p
        if problem:
            diags.append(Diagnostic(where("package"), f"[tool.opgen] package: {problem}"))
    backends: tuple[str, ...] = (_backends.DEFAULT,)
    if "backends" in table:
        raw = table["backends"]
        try:
            if not (isinstance(raw, str) or (isinstance(raw, list) and all(isinstance(b, str) for b in raw))):
                raise _backends.UnknownBackend(f"expected a name or a list of names, got {raw!r}")
            backends = _backends.parse_list(raw)
        except _backends.UnknownBackend as exc:
            diags.append(Diagnostic(where("backends"), f"[tool.opgen] backends: {exc}"))
    if diags:
        raise ConfigError(diags)
    build = {k: v for k, v in table.items() if k in build_options}
    if "build-dir" in build and isinstance(build["build-dir"], str):
        build["build-dir"] = _relative(root, build["build-dir"])
    return Config(specs=tuple(_relative(root, s) for s in specs), output=_relative(root, values["output"]),
                  package=values["package"], backends=backends, build=build, file=path)


def _build_actions(parser: argparse.ArgumentParser) -> dict[str, dict[str, argparse.Action]]:
    """Per subcommand, its build options by long name without ``--``."""
    out: dict[str, dict[str, argparse.Action]] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                out[name] = {}
                for group in sub._action_groups:
                    if group.title == "build options":
                        for a in group._group_actions:
                            longs = [o for o in a.option_strings if o.startswith("--")]
                            if longs:
                                out[name][longs[0][2:]] = a
    return out


def apply(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Load the project's settings into ``args.config``; fill the build options left unset from it.

    Raises:
        ConfigError: a malformed table, or a build option of the wrong type.
    """
    actions = _build_actions(parser)
    cfg = load(frozenset(name for per in actions.values() for name in per))
    args.config = cfg
    diags: list[Diagnostic] = []
    for name, action in actions.get(getattr(args, "command", ""), {}).items():
        if name not in cfg.build or getattr(args, action.dest, None) not in (None, False):
            continue  # not configured, or given on the command line (which wins)
        value = cfg.build[name]
        try:
            if isinstance(action, argparse._StoreTrueAction):
                if not isinstance(value, bool):
                    raise argparse.ArgumentTypeError(f"expected true or false, got {value!r}")
            elif isinstance(action, argparse._AppendAction):
                items = value if isinstance(value, list) else [value]
                value = [action.type(str(v)) if action.type else str(v) for v in items]  # type: ignore[operator]
            elif action.type is not None:
                value = action.type(str(value))  # type: ignore[operator]
            else:
                value = str(value)
            if action.choices is not None and value not in action.choices:
                raise argparse.ArgumentTypeError(f"expected one of {', '.join(map(str, action.choices))}")
        except (argparse.ArgumentTypeError, ValueError, TypeError) as exc:
            file = display_path(cfg.file) if cfg.file else "pyproject.toml"
            text = cfg.file.read_text(encoding="utf-8") if cfg.file else ""
            line = _line_of(text, name)
            diags.append(Diagnostic(Location(file, line, 1 if line else 0), f"[tool.opgen] {name}: {exc}"))
            continue
        setattr(args, action.dest, value)
    if diags:
        raise ConfigError(diags)
