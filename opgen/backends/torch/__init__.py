"""The PyTorch backend: each op a real PyTorch operator, ``torch.ops.<package>_torch.<op>``.

Files (``templates/torch/``): per op ``csrc/<op>_torch.cc``, which registers the op's schema
(``TORCH_LIBRARY_FRAGMENT``, derived from the spec) and CPU kernel (``TORCH_LIBRARY_IMPL``:
contiguous inputs, dtype dispatch over the spec's CPU rows, contracts and output shapes over
``opgen::sym``, ``at::empty`` outputs, the kernel layer's ``forward``), and the backward operator
``<op>_backward`` (the kernel layer's ``backward``, only the gradients asked for; protocol in
:mod:`.context`); per package ``__init__.py`` (documented functions, fake kernels from the shape
language, autograd) and its stubs ``<package>_torch.pyi``, plus the neutral kernel layer and
``reference.py`` (:func:`opgen.render.core_files`). The kernel layer's namespace is the torch
package's name, so that both frameworks' libraries load into one process without clashing.

Library: ``torch`` (:mod:`.build`), loaded with ``torch.ops.load_library`` (:mod:`.runtime`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, assert_never

from ...devices import DeviceName
from ...model import BuildFlags, Op
from .. import Backend, BuildOptions, WheelFacts
from . import facts
from .facts import DEVICE_TEST_PATHS, FLOAT_ATTR, TARGET, TEST_PATHS

if TYPE_CHECKING:
    from ...testing import Package as TestPackage


def dispatch_key(device: DeviceName) -> str:
    """The dispatch key of ``device``'s kernels (:mod:`opgen.devices`), as torchgen's
    ``BackendIndex`` keys kernels inside one framework."""
    if device == "cpu":
        return "CPU"
    if device == "cuda":
        return "CUDA"
    assert_never(device)


class TorchBackend(Backend):
    """PyTorch (CPU): ``TORCH_LIBRARY`` operators, ``register_fake`` and C++ autograd (the Autograd key)."""

    name: ClassVar[str] = "torch"
    package_suffix: ClassVar[str] = "_torch"
    library_kinds: ClassVar[tuple[str, ...]] = ("torch",)
    runtime_modules: ClassVar[tuple[str, ...]] = ("torch",)
    shipped_runtime: ClassVar[tuple[str, ...]] = ("pytorch",)
    install_hint: ClassVar[str] = "pip install 'opgen[torch]'"
    target: ClassVar[str] = TARGET
    test_paths: ClassVar[Mapping[str, str]] = TEST_PATHS
    device_test_paths: ClassVar[Mapping[str, Mapping[str, str]]] = DEVICE_TEST_PATHS

    def render(self, ops: Sequence[Op], package: str, out_prefix: str,
               package_flags: BuildFlags | None = None) -> dict[str, str]:
        from ... import api, devices, signatures
        from ...render import GENERATED_BY, Emitter, core_files, runtime_files, sources_of
        from .context import torch_op

        namespace = package + self.package_suffix
        ordered = sorted(ops, key=lambda o: o.name)
        # float attrs as doubles in the kernel layer: the schema's `float` is a double, and a float64
        # row computes with the value the caller gave (the bodies convert it to the row's compute type)
        contexts = [api.op_context(op, namespace, self.target, FLOAT_ATTR) for op in ordered]
        sources = sources_of(ordered)
        em = Emitter(namespace, out_prefix)
        core_files(em, ordered, contexts)
        runtime_files(em, self.shipped_runtime)
        items = []
        cpu = devices.get("cpu")
        for op, ctx in zip(ordered, contexts):
            others = api.device_contexts(op, namespace, FLOAT_ATTR)
            t = torch_op(op, ctx, namespace, [(d.name, v) for d, v in others])
            items.append({"op": ctx, "t": t})
            header = GENERATED_BY.format(sources=ctx.file)
            em.emit("torch/op.cc.j2", f"csrc/{op.name}_torch.cc", header, op=ctx, t=t, device=cpu,
                    dispatch_key=dispatch_key(cpu.name), device_arg="", rows_cpp=ctx.rows_cpp, impl_ns="")
            for device, view in others:  # one unit per other device: its dispatch key's kernels
                em.emit("torch/op.cc.j2", f"csrc/{op.name}_{device.name}.cc", header, op=ctx, t=t, device=device,
                        dispatch_key=dispatch_key(device.name), device_arg=", opgen_device", rows_cpp=view.rows_cpp,
                        impl_ns=f"{device.namespace}_dispatch::")
        all_header = GENERATED_BY.format(sources=", ".join(sources))
        em.emit("torch/__init__.py.j2", "__init__.py", all_header, ops=items, sources=sources, namespace=namespace)
        stubs = [signatures.stub_context(op) for op in ordered]
        em.emit("torch/package.pyi.j2", "__init__.pyi", all_header, ops=stubs, namespace=namespace)
        flags = api.build_flags(ordered, out_prefix, package_flags)
        files = em.files
        if flags:
            files["csrc/build.json"] = flags
        return dict(sorted(files.items()))

    def owns(self, pkg_dir: Path) -> bool:
        return facts.owns(pkg_dir)

    def build(self, pkg_dir: Path, kind: str, options: BuildOptions) -> Path:
        from . import build

        if kind != build.KIND:
            raise ValueError(f"unknown library kind {kind!r} for the torch backend; expected {build.KIND!r}")
        return build.build(pkg_dir, options.quiet, build_dir=options.build_dir, jobs=options.jobs,
                           ops_per_unit=options.ops_per_unit)

    def wheel_facts(self, package: str) -> WheelFacts:
        from ...runtime.pytorch import torch_release
        from . import build

        version = build.torch_location()[2]
        # any build of the release (CPU or CUDA, any patch): the import checks the same release
        # (runtime.torch_release) and, for a library with CUDA kernels, the CUDA major version
        return WheelFacts(framework="torch", version=version, label="PyTorch",
                          libraries={build.KIND: f"lib/lib{package}.so"},
                          requires=(f"torch=={torch_release(version)}.*", "numpy"))

    def device_facts(self, pkg_dir: Path) -> Mapping[str, Mapping[str, object]]:
        from ...devices import cuda
        from . import build

        if build.cuda_unavailable(pkg_dir) is not None:
            return {}
        return {"cuda": {"version": build.torch_cuda_version(), "archs": list(cuda.archs())}}

    def test_package(self, pkg_dir: Path) -> TestPackage:
        from . import testing

        return testing.load(pkg_dir)


BACKEND = TorchBackend()
