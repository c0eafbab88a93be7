"""The MindSpore 2.10 backend: the ``ops.Custom`` (aot) path and the ``Function<T>`` path.

Files (``templates/mindspore/``): per op the aot C ABI entry points with ``InferShape``
(``csrc/<op>_aot.cc``) and a ``Function<T>`` subclass (``csrc/<op>_function.cc``); per package
the pybind11 bindings, ``custom.py`` (CustomRegOp info, ``ops.Custom`` and bprop), ``function.py``,
``meta.py``, the package ``__init__`` and the stubs. Libraries: ``aot`` (framework-free, loaded by
``ops.Custom``) and ``ext`` (the extension, built with ``CustomOpBuilder``'s CPU flags).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from ...model import BuildFlags, Op
from .. import Backend, BuildOptions, WheelFacts
from .facts import TARGET, TEST_PATHS

if TYPE_CHECKING:
    from ...build import BuildResult
    from ...testing import Package as TestPackage


class MindSporeBackend(Backend):
    """MindSpore 2.10 (CPU): ``ops.Custom`` with aot kernels, and ``Function<T>`` with pybind11."""

    name: ClassVar[str] = "mindspore"
    package_suffix: ClassVar[str] = ""
    library_kinds: ClassVar[tuple[str, ...]] = ("aot", "ext", "aot_gpu")
    device_kinds: ClassVar[Mapping[str, str]] = {"aot_gpu": "cuda"}
    runtime_modules: ClassVar[tuple[str, ...]] = ("mindspore",)
    shipped_runtime: ClassVar[tuple[str, ...]] = ("mindspore", "mindspore_graph")
    install_hint: ClassVar[str] = "pip install 'opgen[run]'"
    target: ClassVar[str] = TARGET
    test_paths: ClassVar[Mapping[str, str]] = TEST_PATHS
    test_libraries: ClassVar[Mapping[str, str]] = {"custom-graph": "aot", "custom-pynative": "aot", "function": "ext"}

    def build_modules(self, kinds: Sequence[str]) -> tuple[str, ...]:
        """MindSpore only for the extension (its flags come from MindSpore); the aot library
        compiles without it."""
        return ("mindspore",) if "ext" in kinds else ()

    def render(self, ops: Sequence[Op], package: str, out_prefix: str,
               package_flags: BuildFlags | None = None) -> dict[str, str]:
        from ... import api, devices, signatures
        from ...render import GENERATED_BY, Emitter, core_files, runtime_files, sources_of
        from .views import ms_view

        ordered = sorted(ops, key=lambda o: o.name)
        ms_views = [ms_view(op, package) for op in ordered]
        contexts = [m.op for m in ms_views]
        sources = sources_of(ordered)
        em = Emitter(package, out_prefix)
        core_files(em, ordered, contexts)
        runtime_files(em, self.shipped_runtime)
        cpu, gpu = devices.get("cpu"), devices.get("cuda")
        gpu_views = {}
        for op, m in zip(ordered, ms_views):
            header = GENERATED_BY.format(sources=m.op.file)
            em.emit("mindspore/aot.cc.j2", f"csrc/{m.op.name}_aot.cc", header, op=m.op, ms=m, device=cpu)
            if op.rows_for(gpu.target):  # the GPU aot library's entry points (host code; the seed's stream ABI)
                g = gpu_views[op.name] = ms_view(op, package, gpu.target)
                em.emit("mindspore/aot.cc.j2", f"csrc/{m.op.name}_aot_gpu.cc", header, op=g.op, ms=g, device=gpu)
            em.emit("mindspore/function.cc.j2", f"csrc/{m.op.name}_function.cc", header, op=m.op, ms=m)
        all_header = GENERATED_BY.format(sources=", ".join(sources))
        em.emit("mindspore/bindings.cc.j2", "csrc/bindings.cc", all_header, ops=ms_views)
        needs_builtins = any(ctx.shadows_builtins for ctx in contexts)
        em.emit("mindspore/custom.py.j2", "custom.py", all_header, ops=ms_views, needs_builtins=needs_builtins,
                gpu=gpu_views)
        em.emit("mindspore/function.py.j2", "function.py", all_header, ops=ms_views, needs_builtins=needs_builtins)
        em.emit("mindspore/meta.py.j2", "meta.py", all_header, ops=contexts,
                gpu_rows={c.name: gpu_views[c.name].op.rows if c.name in gpu_views else () for c in contexts})
        em.emit("mindspore/__init__.py.j2", "__init__.py", all_header, ops=contexts, sources=sources)
        flags = api.build_flags(ordered, out_prefix, package_flags)
        files = em.files
        if flags:
            files["csrc/build.json"] = flags
        stubs = [signatures.stub_context(op) for op in ordered]
        em.emit("mindspore/custom.pyi.j2", "custom.pyi", all_header, ops=stubs)
        em.emit("mindspore/function.pyi.j2", "function.pyi", all_header, ops=stubs)
        em.emit("mindspore/ext.pyi.j2", f"{package}_ext.pyi", all_header, ops=stubs)
        return dict(sorted(files.items()))

    def owns(self, pkg_dir: Path) -> bool:
        return (pkg_dir / "custom.py").is_file() and (pkg_dir / "csrc").is_dir()

    def build(self, pkg_dir: Path, kind: str, options: BuildOptions) -> Path:
        return self.build_library(pkg_dir, kind, options).path

    def build_library(self, pkg_dir: Path, kind: str, options: BuildOptions) -> BuildResult:
        from . import build

        return build.build_library(pkg_dir, kind, options)

    def wheel_facts(self, package: str) -> WheelFacts:
        from . import build

        version = build.version()
        return WheelFacts(framework="mindspore", version=version, label="MindSpore",
                          libraries={"aot": f"lib/lib{package}_aot.so", "ext": f"lib/{package}_ext.so",
                                     "aot_gpu": f"lib/lib{package}_aot_gpu.so"},
                          requires=(f"mindspore=={version}", "numpy"))

    def test_package(self, pkg_dir: Path) -> TestPackage:
        from . import testing

        return testing.load(pkg_dir)


BACKEND = MindSporeBackend()
