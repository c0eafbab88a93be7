"""The device axis: where a kernel runs, beside the framework axis (:mod:`opgen.backends`).

A framework (MindSpore, PyTorch) and a device (CPU, CUDA) are two axes, as in torchgen, where
kernels are keyed by dispatch key inside one framework, and in ATen, where ``cpu_kernel`` and
``gpu_kernel`` run the same functor. Each device is a package here, ``opgen.devices.<name>``,
whose module-level ``DEVICE`` is a :class:`Device`. A device owns:

- the spec target whose ``dtype_format`` rows it builds (:attr:`Device.target`: ``CPU``, ``GPU``);
- its toolchain (:meth:`Device.toolchain`): compiler command, flags, depfiles, the pattern of its
  diagnostics (mapped back to the YAML line of a kernel body), its identity in the build cache key;
- its part of the kernel layer (``opgen/include/opgen/``: the CPU loops, the CUDA launches) and how
  it lowers ``elementwise:`` expressions (:meth:`Device.lambda_head`);
- the file names of its kernel units (:attr:`Device.suffix`) and its C++ namespace;
- its test tolerances (:meth:`Device.tolerance_scale`) and how it tells that it can run
  (:meth:`Device.unavailable`).

A backend maps devices to its own words (torch: ``CPU``/``CUDA`` dispatch keys; MindSpore:
``CPU``/``GPU`` reg_info targets) and renders op x device. Adding a device (Ascend) means adding a
package here and its kernel-layer headers; :data:`UNBUILT_TARGETS` says why a target has none
yet. (Design: docs/devices.md.)
"""

from __future__ import annotations

import abc
import importlib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import ClassVar, Literal

DeviceName = Literal["cpu", "cuda"]
"""The devices opgen builds for; a dispatch over them ends in ``assert_never``."""

NAMES: tuple[DeviceName, ...] = ("cpu", "cuda")
"""Every device, the default first (the order kernel files and dispatch rows are rendered in)."""

UNBUILT_TARGETS = {
    "Ascend": "no device builds target 'Ascend' yet: an Ascend kernel is an AscendC aot kernel (MindSpore "
              "ops.Custom func_type='aot' with target 'Ascend') or a Function<T> calling aclnn, and neither "
              "compiles nor runs without CANN and an Ascend NPU (docs/devices.md)",
}
"""Spec targets the schema knows that no device builds, with the reason (``opgen validate`` reports
their rows as errors: a row is never dropped silently)."""


@dataclass(frozen=True)
class Toolchain:
    """How a device compiles its units (one ninja rule per toolchain).

    Attributes:
        rule: the ninja rule's name (``compile``, ``compile_cuda``).
        argv: the compiler command (launcher words first).
        depfile: the flags that write a make-style depfile for ``$out`` into ``$out.d``.
        language: flags that make the compiler read a unit as this device's source (``-x cu``).
        identity: the compiler's path, size and mtime (part of the build cache key).
        diagnostic: a regular expression for the compiler's diagnostics at a YAML line, with groups
            ``file``, ``line``, ``level``, ``msg`` and optionally ``col``.
    """

    rule: str
    argv: tuple[str, ...]
    depfile: tuple[str, ...]
    language: tuple[str, ...]
    identity: str
    diagnostic: re.Pattern[str]


GCC_DIAGNOSTIC = re.compile(
    r"^(?P<file>[^\s:][^:]*\.ya?ml):(?P<line>\d+):(?P<col>\d+): (?P<level>error|warning|note): (?P<msg>.*)$")
"""gcc and clang: ``ops/relu.yaml:7:12: error: ...``."""

NVCC_DIAGNOSTIC = re.compile(
    r"^(?P<file>[^\s(][^(]*\.ya?ml)\((?P<line>\d+)\): (?P<level>error|warning|note|remark)"
    r"(?: #[\w-]+(?:-D)?)?: (?P<msg>.*)$")
"""nvcc (EDG front end): ``ops/relu.yaml(7): error: calling a __host__ function ...`` (no column),
``ops/relu.yaml(7): warning #177-D: ...``."""

DIAGNOSTICS: tuple[re.Pattern[str], ...] = (GCC_DIAGNOSTIC, NVCC_DIAGNOSTIC)
"""Every device compiler's pattern (host-side units of every device are compiled by g++)."""


class DeviceUnavailable(RuntimeError):
    """A device's toolchain or hardware is missing; the message says what and how to get it."""


@dataclass(frozen=True)
class TolerancePolicy:
    """How a device's results are compared with the CPU's: a factor on the per-dtype tolerances of
    :mod:`opgen.testing` (the GPU's fused multiply-adds and fast math functions round otherwise)."""

    scale: float = 1.0
    notes: tuple[str, ...] = field(default_factory=tuple)


class Device(abc.ABC):
    """One device's half of the kernel layer and its build (one instance per package, ``DEVICE``)."""

    name: ClassVar[DeviceName]
    """The device's name (``cpu``, ``cuda``): file suffixes, ``opgen build``, docs."""
    target: ClassVar[str]
    """The spec's ``dtype_format`` target whose rows this device builds (``CPU``, ``GPU``)."""
    suffix: ClassVar[str]
    """Appended to an op's kernel-layer file stem (``relu_kernel`` + ``""``/``.cu``...)."""
    kernel_header: ClassVar[str]
    """The op's kernel-layer body file, with ``{op}`` for the op's name (``{op}_kernel.h``)."""
    kernel_unit: ClassVar[str]
    """The op's kernel-layer unit: one instantiation per row (``{op}_kernel.cc``)."""
    namespace: ClassVar[str]
    """The C++ namespace, inside ``<package>::<op>``, of this device's ``forward``/``backward``
    (``""``: the op's namespace itself)."""
    host_header: ClassVar[str] = ""
    """What a framework's glue, host code compiled by the host compiler, includes for this device's
    streams (``opgen/cuda.h``: ``StreamScope``); ``""``: nothing beyond the kernel layer."""
    tolerance: ClassVar[TolerancePolicy] = TolerancePolicy()

    @abc.abstractmethod
    def lambda_head(self) -> str:
        """How an ``elementwise:`` expression's functor opens, before its parameter list: the CPU's
        ``[&]``, CUDA's ``[=] __host__ __device__`` (a device functor captures by value)."""

    @abc.abstractmethod
    def lambda_tail(self, noexcept: str) -> str:
        """What follows the functor's parameter list, before ``-> C``, given the expression's
        ``noexcept`` specifier (``"noexcept "``; the CPU's SIMD loops run only non-throwing
        functors, device code cannot throw at all)."""

    @abc.abstractmethod
    def unavailable(self) -> str | None:
        """Why this machine cannot build for the device (None when it can)."""

    @abc.abstractmethod
    def toolchain(self) -> Toolchain:
        """The toolchain of this device's kernel units.

        Raises:
            DeviceUnavailable: its compiler is missing.
        """

    def qualify(self, function: str) -> str:
        """``forward`` as this device's code names it from the op's namespace (``cuda::forward``)."""
        return f"{self.namespace}::{function}" if self.namespace else function


def get(name: str) -> Device:
    """The device called ``name``.

    Raises:
        KeyError: no such device (the message lists them).
    """
    if name not in NAMES:
        raise KeyError(f"unknown device {name!r}; expected one of: {', '.join(NAMES)}")
    module = importlib.import_module(f"{__name__}.{name}")
    device = module.DEVICE
    assert isinstance(device, Device)
    return device


def for_target(target: str) -> Device | None:
    """The device that builds the spec target ``target`` (``CPU`` -> cpu, ``GPU`` -> cuda), or None
    (``Ascend``: :data:`UNBUILT_TARGETS`)."""
    for name in NAMES:
        device = get(name)
        if device.target == target:
            return device
    return None


def targets() -> tuple[str, ...]:
    """The spec targets some device builds, in device order."""
    return tuple(get(n).target for n in NAMES)


def of_rows(targets_with_rows: Sequence[str]) -> tuple[Device, ...]:
    """The devices that build some of ``targets_with_rows``, in device order."""
    wanted = set(targets_with_rows)
    return tuple(d for d in (get(n) for n in NAMES) if d.target in wanted)
