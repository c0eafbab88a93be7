"""Runtime helpers of the MindSpore backend, which generated ``custom.py`` and ``function.py``
import (as ``_ms``, from their copy ``<pkg>/_runtime/mindspore.py``) beside the neutral
:mod:`opgen.runtime` (as ``_rt``).

The aot library and the pybind11 extension of a package (built at import when missing or
stale, or a wheel's prebuilt ones), ``CustomRegOp`` op info and the attr encoding ``AotExtra``
reads, and the dtype check of the Custom path. MindSpore itself is imported only inside the
functions that need it.
"""

from __future__ import annotations

import importlib
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from types import FunctionType, ModuleType
from typing import Any, assert_never

from . import base as _rt
from . import env as _env

TARGET = "CPU"
"""The one target of the MindSpore backend: ``CustomRegOp(...).target``, the spec's dtype_format
rows it builds, ``CustomOpBuilder(backend=...)`` (:mod:`opgen.backends.mindspore.facts` reads it here)."""

CALL_LOCK: threading.RLock = _rt.shared("mindspore_call_lock", threading.RLock)
"""Serializes PyNative calls of every package's Custom-path ops in this process.

MindSpore 2.10's PyNative is not thread-safe: four threads calling one ``ops.Custom`` primitive
gave wrong products (a (13,4)@(4,4) matmul off by up to 7) and ``RuntimeError: The
pointer[runtime_info] is null`` (11 wrong and 14 errors in 1,200 calls); with this lock held
around each call, 0 of 2,400 (tests/test_threads.py). Graphs never take it: they compile
``_<op>_full``. Reentrant, so that an op called while another is being called (a hook) cannot
deadlock. Uncontended, it costs about 0.1 us per call. One per process, whichever package's copy
of this module holds it (:func:`opgen.runtime.base.shared`).
"""

MAX_CALL_TENSORS = 16
"""The most tensors one call of an op takes, on either path: on the Custom path every tensor
input flattened (``graph`` has one bprop adapter per count, ``graph.MAX_CUSTOM_TENSORS``), on the
Function<T> path the items of its list input (``run_<op>`` instantiates ``apply_n`` for 1 to this
many: ``MsOpView.list_sizes``). A list with more raises ``ValueError: <op>(): '<input>' takes 1 to
<n> tensors, got <m>``."""
FRAMEWORK = ("mindspore", "MindSpore")
"""The key of MindSpore's version in a wheel's ``_prebuilt.json``, and its name in messages."""


def version() -> str:
    """MindSpore's version (from its metadata when it is not imported yet), or ``none``."""
    module = sys.modules.get("mindspore")
    if module is not None:
        return str(getattr(module, "__version__", "unknown"))
    import importlib.metadata

    try:
        return importlib.metadata.version("mindspore")
    except importlib.metadata.PackageNotFoundError:
        return "none"


def prebuilt_library(pkg_dir: Path, kind: str) -> str | None:
    """The library of a wheel-installed package (``opgen wheel``), checked against its recorded
    sha256, or None for a generated one (:func:`opgen.runtime.base.prebuilt_library`).

    Raises:
        ImportError: when the wheel was built for another MindSpore version, Python or platform
            (the message names both), or a library or ``_prebuilt.json`` is damaged (naming it).
    """
    return _rt.prebuilt_library(pkg_dir, kind, FRAMEWORK[0], version(), FRAMEWORK[1])


def device_target() -> str:
    """MindSpore's device target now (``ms.get_context("device_target")``): ``CPU`` or ``GPU``, the
    spec target whose rows and aot library a package's ``ops.Custom`` primitives use (read when the
    package is imported: set the device target first)."""
    import mindspore as ms

    return str(ms.get_context("device_target"))


def aot_library(module_file: str, target: str = TARGET) -> str:
    """Absolute path of the aot library of the package containing ``module_file`` for MindSpore's
    device target ``target``: ``CPU`` (g++), ``GPU`` (nvcc: the ops with ``GPU`` rows).

    Builds it first when missing or stale (a few seconds; says so on stderr).

    Raises:
        opgen.build.BuildError: when the kernels do not compile, or nvcc is missing for ``GPU``.
        ImportError: for an ``OPGEN_SANITIZE=1`` build without the ASan runtime preloaded, or a
            device target no library is built for (``Ascend``: docs/devices.md).
    """
    kinds = {"CPU": "aot", "GPU": "aot_gpu"}
    if target not in kinds:
        raise ImportError(f"opgen builds MindSpore aot libraries for device targets CPU and GPU, not {target!r} "
                          "(docs/devices.md)")
    return _rt.package_library(Path(module_file).parent, kinds[target], FRAMEWORK[0], version(), FRAMEWORK[1])


def load_extension(module_file: str) -> ModuleType:
    """Import the pybind11 extension of the package containing ``module_file``.

    Builds it first when missing or stale (MindSpore's headers make this about a minute on 2
    cores for a few ops; says so on stderr, see docs/build.md). A process loads each built
    library once; after an edit (a new library) the new one is loaded beside the old.

    Raises:
        opgen.build.BuildError: when the Function<T> sources do not compile.
        ImportError: for an ``OPGEN_SANITIZE=1`` build without the ASan runtime preloaded.
    """
    pkg_dir = Path(module_file).parent.resolve()
    path = _rt.package_library(pkg_dir, "ext", FRAMEWORK[0], version(), FRAMEWORK[1])
    return _rt.load_library_module(f"{pkg_dir.name}_ext", path)


def pynative_function_module(package: str, module_file: str) -> ModuleType | None:
    """The ``function`` module of ``package`` (the Function<T> path) when the public ops of its
    ``custom`` module (``module_file``) take that path in PyNative, else None (they take the
    ``ops.Custom`` path there too). Graphs compile the Custom path either way.

    ``OPGEN_PYNATIVE_PATH`` decides, when the package is imported: ``auto`` (the default) takes
    the Function<T> path when its extension is ready without a build -- a wheel's prebuilt one,
    or one ``opgen build`` (or an import of ``<package>.function``) built from these sources --
    and falls back to the Custom path when it is not built or does not load; ``custom`` never
    takes it; ``function`` always does (building the extension when missing, and raising what
    the build or the import raises).

    Raises:
        opgen.env.EnvError: ``OPGEN_PYNATIVE_PATH`` is not auto, custom or function.
        opgen.build.BuildError, ImportError: with ``OPGEN_PYNATIVE_PATH=function`` only.
    """
    choice = _env.choice("OPGEN_PYNATIVE_PATH") or "auto"
    if choice == "custom" or device_target() != TARGET:  # the Function<T> path is CPU only (GPU: later)
        return None
    if choice == "function":
        return importlib.import_module(".function", package)
    if choice == "auto":
        try:
            if not _extension_ready(Path(module_file).parent.resolve()):
                return None
            return importlib.import_module(".function", package)
        except Exception:  # an extension that does not load: the Custom path serves PyNative too
            return None
    assert_never(choice)  # type: ignore[arg-type]


def _extension_ready(pkg_dir: Path) -> bool:
    """Whether the extension of the package in ``pkg_dir`` loads without a build."""
    if prebuilt_library(pkg_dir, "ext") is not None:
        return True
    return bool(_rt.generator(pkg_dir).library_built(pkg_dir, "ext"))


def pynative_entry(public: FunctionType, impl: FunctionType) -> FunctionType:
    """The public op function of a ``custom`` module: the code of ``impl`` (the Function<T>
    path's ``function.<op>``, or the Custom path's PyNative wrapper ``_<op>_custom``) under
    ``public``'s name, docstring, module and annotations.

    A copy of the function, not a call through it: a PyNative call runs exactly the code of the
    path it takes, so the public op costs what that path costs (bench/bench_dispatch.py). Its
    globals are ``impl``'s (the names its code reads). What a graph compiles instead comes
    from ``substitute_in_graphs``, applied to the copy by the generated module.
    """
    code = impl.__code__.replace(co_name=public.__name__, co_qualname=public.__qualname__)
    entry = FunctionType(code, impl.__globals__, public.__name__, impl.__defaults__, impl.__closure__)
    entry.__kwdefaults__ = impl.__kwdefaults__
    entry.__qualname__ = public.__qualname__
    entry.__doc__ = public.__doc__
    entry.__module__ = public.__module__
    entry.__annotations__ = public.__annotations__
    return entry


# Optional and dynamic inputs reach an aot kernel flattened: one Custom primitive per *layout*
# (how many tensors each input contributes: 1 for required, 0/1 for optional, N for dynamic),
# with the layout passed to the kernel as the attr ``opgen_layout``. MindSpore 2.10's CPU aot
# kernels take neither None nor native "dynamic" inputs (verified: kernel select fails).

def encode_attr(typ: str, value: Any) -> tuple[str, Any]:
    """An attr value as (CustomRegOp value_type, value) for AotExtra, which reads only int,
    float, bool and vectors of int/float.

    Lists are length-prefixed (so an empty list is never an empty attr); ``str`` and
    ``list[str]`` become UTF-8 bytes, ``list[bool]`` 0/1 ints. ``opgen::aot::get_attr`` in
    ``aot.h`` decodes the same format.

    A list of lists goes as it is: MindSpore 2.10's AotExtra reads nested lists
    (``GetAttrInt2DVec``/``GetAttrFloat2DVec``), empty ones and rows of different lengths
    included, in PyNative and GRAPH_MODE alike (verified on this machine), provided every item
    has the Python type of the getter: an int among floats makes ``GetAttrFloat2DVec`` throw,
    so each item is converted here.
    """
    if typ == "int":
        return "int", int(value)
    if typ == "float":
        return "float", float(value)
    if typ == "bool":
        return "bool", bool(value)
    if typ == "list[list[int]]":
        return "listListInt", [[int(v) for v in r] for r in value]
    if typ == "list[list[float]]":
        return "listListFloat", [[float(v) for v in r] for r in value]
    if typ == "list[float]":
        return "listFloat", [float(len(value))] + [float(v) for v in value]
    if typ == "list[int]":
        return "listInt", [len(value)] + [int(v) for v in value]
    if typ == "list[bool]":
        return "listInt", [len(value)] + [1 if v else 0 for v in value]
    if typ == "str":
        data = value.encode("utf-8")
        return "listInt", [len(data)] + list(data)
    if typ == "list[str]":
        out = [len(value)]
        for s in value:
            data = s.encode("utf-8")
            out += [len(data)] + list(data)
        return "listInt", out
    raise ValueError(f"unknown attr type {typ!r}")


_WRITING_CLASSES: dict[tuple[int, tuple[int, ...]], type] = {}


def writing_custom(n: int, written: Sequence[int]) -> type:
    """The ``ops.Custom`` subclass for an op of ``n`` flat inputs that writes those at positions
    ``written`` in place: its ``__mindspore_signature__`` marks them ``RW_WRITE``, as MindSpore's
    own Assign and ScatterAdd do. Generated code also gives the primitive ``side_effect_mem``.

    Verified on MindSpore 2.10 (GRAPH_MODE Cells and ``ms.jit``): without ``side_effect_mem`` the
    graph prunes the call (its output unused); without ``RW_WRITE`` it reorders a read of the
    written tensor that comes before the call (``a = x * 2; add_(x, y)`` gave the new x). The
    signatures carry no dtype group: PyNative keeps the dtype groups of the first ``Custom``
    primitive with signatures for every later one (they share the name), and a second op of
    another arity then failed ("Check input args failed").
    """
    key = (n, tuple(written))
    cls = _WRITING_CLASSES.get(key)
    if cls is None:
        from mindspore import ops
        from mindspore.ops import signature as sig

        sigs = tuple(sig.make_sig(f"x{i}", sig.sig_rw.RW_WRITE if i in written else sig.sig_rw.RW_READ)
                     for i in range(n))
        cls = type("Custom", (ops.Custom,), {"__mindspore_signature__": sigs, "__module__": __name__})
        _WRITING_CLASSES[key] = cls
    return cls


def effect_sink(name: str) -> Any:
    """The Parameter a graph assigns the placeholder output of an op that writes an input to, so
    that it keeps the call (``graph.keep``): one float, not trainable, one per op and module."""
    import numpy as np
    from mindspore import Parameter, Tensor

    return Parameter(Tensor(np.zeros(1, np.float32)), name=f"opgen_sink_{name}", requires_grad=False)


def layout_suffix(kinds: Sequence[str], layout: Sequence[int]) -> str:
    """Suffix that makes a CustomRegOp name unique per layout (empty when every input is required).

    MindSpore keys registered op info by name: two layouts under one name would share the first.
    """
    if all(k == "required" for k in kinds):
        return ""
    return "_" + "_".join(str(n) for n in layout)


def _tensor_names(groups: Sequence[tuple[str, str, int]]) -> list[str]:
    """One name per tensor of ``(name, kind, count)`` groups: ``xs0``, ``xs1``... for a dynamic one."""
    return [f"{gname}{j}" if kind == "dynamic" else gname for gname, kind, n in groups for j in range(n)]


def reg_info(
    name: str,
    inputs: Sequence[tuple[str, str, int]],
    outputs: Sequence[tuple[str, str, int]],
    attrs: Sequence[tuple[str, str, Any]],
    rows: Sequence[Sequence[str]],
    target: str = TARGET,
) -> Any:
    """``CustomRegOp(name).input(...).output(...).attr(...).dtype_format(...).target(...).get_op_info()``.

    ``inputs``/``outputs`` are ``(name, kind, count)`` groups: a group appears ``count`` times
    (named ``xs0``, ``xs1``... for a dynamic one), and each row's column for it is repeated
    likewise. ``rows`` hold DataType names, one per group, as the spec states them.
    """
    from mindspore.ops import CustomRegOp, DataType

    reg = CustomRegOp(name)
    for index, tname in enumerate(_tensor_names(inputs)):
        reg = reg.input(index, tname, "required")
    for index, tname in enumerate(_tensor_names(outputs)):
        reg = reg.output(index, tname, "required")
    for aname, value_type, value in attrs:
        reg = reg.attr(aname, "required", value_type, value=value)
    counts = [n for _, _, n in inputs] + [n for _, _, n in outputs]
    for row in rows:
        reg = reg.dtype_format(*[getattr(DataType, c) for c, n in zip(row, counts) for _ in range(n)])
    return reg.target(target).get_op_info()


def check_dtypes(
    op: str,
    dtypes: Sequence[Any],
    inputs: Sequence[str],
    kinds: Sequence[str],
    layout: Sequence[int],
    rows: Sequence[Sequence[str]],
    outputs: Sequence[str] = (),
) -> bool:
    """Raise TypeError unless the flattened input dtypes match one dtype_format row.

    Called on the Custom path before the primitive, in PyNative and (through ``ops.constexpr``)
    while a GRAPH_MODE network compiles: MindSpore itself would silently cast to some row.
    ``rows`` give per-input dtype names, then per-output ones (named by ``outputs``), which
    the message shows like the Function path's ("supported dtype_format rows: (x=float32,
    out=float32), ...").

    Raises:
        TypeError: naming the op, the dtypes given and the supported rows.
    """
    return _rt.check_dtype_names(op, [_dtype_name(d) for d in dtypes], inputs, kinds, layout, rows, outputs)


def _dtype_name(dtype: Any) -> str:
    text = str(dtype).replace("mindspore.", "").lower()
    return {"bool_": "bool"}.get(text, text)
