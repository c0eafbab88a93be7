"""The Backend seam (opgen.backends): a backend is one package with its own templates, added
without editing a core module, and the core imports no framework. Unit tests: no compiler, no
MindSpore import in this process (~3 s)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import opgen.backends
from opgen import backends, pipeline, testing

ROOT = Path(__file__).resolve().parents[1]

TINY = '''
"""A test backend: the neutral kernel layer, plus one file of its own from its own templates."""

from pathlib import Path
from typing import ClassVar

from opgen.backends import Backend, BuildOptions
from opgen.render import GENERATED_BY, Emitter, core_files, sources_of
from opgen import api

HERE = Path(__file__).parent


class TinyBackend(Backend):
    name: ClassVar[str] = "tinyb"
    package_suffix: ClassVar[str] = "_tiny"
    library_kinds: ClassVar[tuple[str, ...]] = ()
    runtime_modules: ClassVar[tuple[str, ...]] = ()
    install_hint: ClassVar[str] = "nothing to install"
    target: ClassVar[str] = "CPU"
    test_paths = {"eager": "eag"}

    def render(self, ops, package, out_prefix, package_flags=None):
        ordered = sorted(ops, key=lambda o: o.name)
        views = [api.op_context(op, package, self.target) for op in ordered]
        em = Emitter(package, out_prefix, templates=[HERE / "templates"])
        core_files(em, ordered, views)
        em.emit("tinyb/ops.txt.j2", "ops.txt", GENERATED_BY.format(sources=", ".join(sources_of(ordered))),
                ops=views)
        return dict(sorted(em.files.items()))

    def owns(self, pkg_dir):
        return (pkg_dir / "ops.txt").is_file()

    def build(self, pkg_dir, kind, options: BuildOptions):
        raise NotImplementedError


BACKEND = TinyBackend()
'''

TEMPLATE = """# {{ header }}
{% for op in ops %}
{{ op.name }}: {{ op.in_names | join(', ') }} -> {{ op.out_names | join(', ') }}; rows {{ op.rows | length }}; \
saved {{ op.saved | map(attribute='name') | join(', ') or '-' }}
{% endfor %}
"""


@pytest.fixture
def tiny_backend(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A backend package ``tinyb`` outside opgen's tree, found through ``opgen.backends.__path__``."""
    pkg = tmp_path / "extra_backends" / "tinyb"
    (pkg / "templates" / "tinyb").mkdir(parents=True)
    (pkg / "__init__.py").write_text(textwrap.dedent(TINY), encoding="utf-8")
    (pkg / "templates" / "tinyb" / "ops.txt.j2").write_text(TEMPLATE, encoding="utf-8")
    monkeypatch.setattr(opgen.backends, "__path__", [*opgen.backends.__path__, str(pkg.parent)])
    yield pkg
    sys.modules.pop("opgen.backends.tinyb", None)


def test_a_backend_package_with_its_own_templates_needs_no_core_edit(tiny_backend: Path, tmp_path: Path) -> None:
    assert "tinyb" in backends.names() and backends.names()[0] == backends.DEFAULT
    res = pipeline.generate([str(ROOT / "ops" / "div.yaml"), str(ROOT / "ops" / "concat.yaml")], tmp_path / "out",
                            "mine", backend="tinyb")
    assert not res.diagnostics
    pkg = tmp_path / "out" / "mine_tiny"
    listing = (pkg / "ops.txt").read_text(encoding="utf-8").splitlines()
    assert listing[1:] == ["concat: xs -> out; rows 6; saved -",  # every gradient is a view: nothing saved
                           "div: x, y -> out; rows 4; saved y, out"]  # (float32, float64, float16, bfloat16)
    # the neutral kernel layer comes with every backend, from the same view
    assert {"csrc/div_kernel.h", "csrc/div_kernel_decl.h", "csrc/div_kernel.cc", "reference.py"} <= {
        p.relative_to(pkg).as_posix() for p in pkg.rglob("*") if p.is_file()}
    assert backends.of_package(pkg) is backends.get("tinyb")
    assert backends.of_package(ROOT / "generated" / "opgen_ops") is backends.get("mindspore")
    # a backend without an opgen test runner says so (the base class's answer)
    with pytest.raises(NotImplementedError, match="backend 'tinyb' has no test runner"):
        testing.load_package(pkg)


def test_an_unknown_backend_names_the_known_ones() -> None:
    with pytest.raises(backends.UnknownBackend, match="unknown backend 'nope'; expected one of: mindspore"):
        backends.get("nope")


def test_the_core_imports_no_framework() -> None:
    """The neutral modules, every backend's registry entry, and the MindSpore backend's generator
    side and runtime, import neither MindSpore nor torch; opgen.runtime still resolves the names that moved to the
    backend (packages and wheels generated before the move call them there)."""
    code = textwrap.dedent("""
        import sys
        import opgen.pipeline, opgen.check, opgen.shapes, opgen.render, opgen.testing, opgen.runtime
        import opgen.runtime.shapes
        import opgen.backends.mindspore.views, opgen.backends.mindspore.runtime
        from opgen import backends, runtime
        from opgen.backends.mindspore import runtime as ms_runtime
        for name in backends.names():  # every backend's registry entry, its generator side
            backends.get(name)
        assert runtime.aot_library is ms_runtime.aot_library and runtime.reg_info is ms_runtime.reg_info
        print(sorted(m for m in sys.modules if m.split(".")[0] in ("mindspore", "torch")))
    """)
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                         env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "[]"


def test_default_checks_are_the_mindspore_backends() -> None:
    paths = tuple(backends.get("mindspore").test_paths)
    assert testing.PATHS == paths == ("custom-graph", "custom-pynative", "function")
    assert testing.CHECKS == testing.checks_for(paths)
    assert testing.select_checks(["grad/*"], checks=testing.checks_for(("eager",))) == ["grad/eager"]
