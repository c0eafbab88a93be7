"""``opgen new``: a commented spec skeleton that validates, generates and passes ``opgen test``.

The text comes from ``templates/op.yaml.j2`` (kernel form, or the elementwise shorthand). Its
``yaml-language-server`` line points at a path that survives a commit: relative to the new file,
at opgen's own ``schemas/op.schema.json`` inside an opgen checkout, else at a copy of the schema
in the project's ``schemas/`` (beside its pyproject.toml, else beside the spec directory), which
``opgen new`` writes and refreshes -- never at a path inside a virtual environment.

``opgen new NAME --from EXAMPLE`` copies one of opgen's example ops (``ops/`` of the checkout,
shipped as ``opgen/_examples``) renamed NAME, its ``$schema`` line pointed as above.
"""

from __future__ import annotations

import keyword
import os
import re
from pathlib import Path

from .diagnostics import display_path
from .names import CPP_KEYWORDS, op_name_too_long
from .render import environment
from .resources import examples_dir, schemas_dir
from .schema import SCHEMA_FILE

_NAME = re.compile(r"[a-z][a-z0-9_]*")
_SCHEMA_LINE = re.compile(r"\A# yaml-language-server: \$schema=\S*\n")
_NAME_LINE = re.compile(r"^name: *(\S+) *$", re.M)


def name_problem(name: str) -> str | None:
    """Why ``name`` cannot name an op (it becomes a Python function, a C++ class and symbols), or None."""
    if not _NAME.fullmatch(name):
        return f"{name!r} is not an op name: use snake_case (lower-case letters, digits, '_'), e.g. my_op"
    if keyword.iskeyword(name) or keyword.issoftkeyword(name) or name in CPP_KEYWORDS:
        return f"{name!r} is a Python or C++ keyword; pick another op name"
    too_long = op_name_too_long(name)
    if too_long:
        return f"op name is {too_long}"
    return None


def schema_path(spec_dir: Path) -> Path:
    """The schema a spec in ``spec_dir`` refers to: opgen's own in its checkout, else the project's copy."""
    from .config import find_pyproject

    schema = (schemas_dir() / SCHEMA_FILE).resolve()
    here = spec_dir.resolve()
    root = schema.parent.parent
    if (here == root or root in here.parents) and schema.parent.name == "schemas":
        return schema
    pyproject = find_pyproject(here if here.is_dir() else here.parent)
    project = pyproject.parent if pyproject is not None else here.parent
    return project / "schemas" / SCHEMA_FILE


def schema_ref(spec_dir: Path) -> str:
    """The ``$schema`` reference to write into a spec living in ``spec_dir``: a relative path."""
    return os.path.relpath(schema_path(spec_dir), spec_dir.resolve()).replace(os.sep, "/")


def refresh_schema_copy(spec_dir: Path) -> Path | None:
    """Write the project's copy of the schema when it is missing or differs; the path written, or None."""
    target = schema_path(spec_dir)
    source = schemas_dir() / SCHEMA_FILE
    if target.resolve() == source.resolve():
        return None
    data = source.read_bytes()
    try:
        if target.read_bytes() == data:
            return None
    except OSError:
        pass
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, target)
    return target


def render_skeleton(name: str, spec_path: Path, *, elementwise: bool = False) -> str:
    """The text of a new spec for op ``name`` that will be written to ``spec_path``."""
    return environment().get_template("op.yaml.j2").render(
        name=name, elementwise=elementwise, schema=schema_ref(spec_path.parent), path=display_path(spec_path))


def examples() -> list[str]:
    """The names of opgen's example ops (``opgen new NAME --from EXAMPLE``), sorted."""
    return sorted(p.stem for p in examples_dir().glob("*.yaml"))


def render_example(example: str, name: str, spec_path: Path) -> str:
    """The text of example op ``example`` renamed ``name``, to be written to ``spec_path``: its
    ``name:`` line and ``$schema`` line rewritten, everything else as shipped.

    Raises:
        ValueError: no example op is called ``example`` (the message names the nearest one).
    """
    source = examples_dir() / f"{example}.yaml"
    if not source.is_file():
        from .diagnostics import nearest

        hint = nearest(example, examples())
        raise ValueError(f"no example op {example!r}" + (f"; did you mean {hint!r}?" if hint else "")
                       + " ('opgen new --list-examples' lists them)")
    text = source.read_text(encoding="utf-8")
    text = _SCHEMA_LINE.sub("", text, count=1)
    text = _NAME_LINE.sub(f"name: {name}", text, count=1)
    header = (f"# yaml-language-server: $schema={schema_ref(spec_path.parent)}\n"
              f"# Written by 'opgen new {name} --from {example}': opgen's example op {example}, renamed.\n")
    return header + text


def write_skeleton(name: str, out_dir: Path, *, elementwise: bool = False, example: str | None = None) -> Path:
    """Write ``out_dir/<name>.yaml`` (creating ``out_dir``): the skeleton, or with ``example`` a
    copy of that example op renamed ``name``; never overwrites.

    Raises:
        FileExistsError: the file exists already.
        ValueError: ``example`` is no example op.
        OSError: it cannot be written.
    """
    path = out_dir / f"{name}.yaml"
    if example is not None:
        text = render_example(example, name, path)
    else:
        text = render_skeleton(name, path, elementwise=elementwise)
    out_dir.mkdir(parents=True, exist_ok=True)
    with open(path, "x", encoding="utf-8") as fh:  # "x": refuse to overwrite, atomically
        fh.write(text)
    return path
