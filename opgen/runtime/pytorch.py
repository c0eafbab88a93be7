"""Runtime helpers of generated PyTorch packages (imported by them as ``_rt`` from their copy,
``<pkg>/_runtime/pytorch.py``; not by the generator).

- :func:`load_library` builds the package's operator library when missing or stale (like the
  MindSpore package's import-time build, :mod:`opgen.runtime`) and loads it with
  ``torch.ops.load_library`` (no pybind11 module).
- The shape language's Python emission (:func:`opgen.shapes.to_python`) calls ``_rt.<name>``;
  here those names are :mod:`opgen.runtime.shapes`'s one definition of each rule bound to
  :data:`SYM_DIMS`: they work on ``torch.SymInt`` as well as ints, so the fake kernels that
  ``torch.library.register_fake`` runs under ``torch.compile(dynamic=True)`` never turn a
  symbolic size into a constant (no ``int()`` of a dim except in an error message; comparisons
  become guards over the symbols). Rules and messages are ``opgen/sym.h``'s.
- :func:`row_of` and :func:`backward_fake`: the fake kernels' dtype row and the backward op's
  fake gradients (the autograd itself is C++, ``opgen/torch_autograd.h``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from . import ShapeError, check_attrs, check_attrs_once, list_key
from . import base as _base
from . import shapes as _shapes

__all__ = ["ShapeError", "check_attrs", "check_attrs_once", "list_key"]

_loaded: dict[str, str] = _base.shared("torch_libraries", dict)
"""Each operator library loaded in this process -> its package directory."""
_namespaces: dict[str, str] = _base.shared("torch_namespaces", dict)
"""Each operator namespace (``<package>_torch``) loaded in this process -> the library that
registered it (one per process for every package's copy of this module: :func:`base.shared`)."""


def claim_namespace(namespace: str, path: str) -> None:
    """Record that ``path`` registers the operators ``torch.ops.<namespace>.*``, before loading it.

    PyTorch cannot unregister operators, and a second library defining the same schemas makes
    ``TORCH_LIBRARY_FRAGMENT`` throw while the library is being loaded, which ends the process
    (``std::terminate``: 'Tried to register an operator ... multiple times'); measured with
    ``opgen.load`` of a spec edited after its first load in the same process.

    Raises:
        ImportError: another library already registered ``namespace`` in this process (a rebuild
            of the same package after a change, or another package of the same name).
    """
    other = _namespaces.get(namespace)
    if other is not None and other != path:
        raise ImportError(
            f"the PyTorch operators torch.ops.{namespace}.* are already registered in this process by {other}; "
            f"PyTorch cannot unregister operators, so {path} (a rebuild after a change, or another package named "
            f"{namespace}) cannot be loaded into it: start a new Python process to use it")
    _namespaces[namespace] = path


def torch_release(version: str) -> str:
    """The torch release whose builds share one C++ ABI: ``2.13`` of ``2.13.0+cpu``, ``2.13.1+cu128``
    or ``2.13.0a0+git1234``. A library built against one of them loads under each (it links only
    libtorch_cpu and c10, which every build of the release carries); its CUDA kernels, if any, are
    checked apart (:func:`opgen.runtime.base.prebuilt_library`'s ``devices``)."""
    return ".".join(version.split("+", 1)[0].split(".")[:2])


def load_library(module_file: str) -> str:
    """Build (when missing or stale) and load the operator library of the package containing
    ``module_file``, held for the life of the process (``opgen clean`` leaves it in place); a
    wheel's prebuilt library is checked against the torch version and its sha256 instead. A
    process loads each library once, and one library per package name (:func:`claim_namespace`).
    Returns its path.

    Raises:
        opgen.build.BuildError: when the kernels do not compile.
        ImportError: a wheel built for another torch, Python or platform, or a damaged one; an
            ``OPGEN_SANITIZE=1`` build without the ASan runtime preloaded; a package whose
            operators another library already registered in this process (its C++ changed since
            it was first loaded here); a package with no prebuilt library where opgen is not
            installed.
    """
    _base.require_sanitizer_runtime()
    pkg_dir = Path(module_file).parent.resolve()
    path = _base.prebuilt_library(pkg_dir, "torch", "torch", str(torch.__version__), "PyTorch",
                                  {"cuda": getattr(torch.version, "cuda", None) or None}, release=torch_release)
    if path is None:  # a package opgen generate wrote: opgen builds it
        path = str(_base.generator(pkg_dir).build_library(pkg_dir, "torch"))
    if path not in _loaded:
        claim_namespace(pkg_dir.name, path)
        torch.ops.load_library(path)  # type: ignore[no-untyped-call]
        _loaded[path] = str(pkg_dir)
    return path


def _keep(d: Any) -> Any:
    """A dim as an int, or the SymInt itself (never specialised)."""
    return d if isinstance(d, torch.SymInt) else int(d)


def _sym_min(*xs: Any) -> Any:
    """``min(a, b, ...)``: ``torch.sym_min`` (a symbolic min, no guard) for symbols."""
    out = xs[0]
    for x in xs[1:]:
        out = torch.sym_min(out, x)  # type: ignore[no-untyped-call]
    return out


def _sym_max(*xs: Any) -> Any:
    """``max(a, b, ...)``: ``torch.sym_max`` (a symbolic max, no guard) for symbols."""
    out = xs[0]
    for x in xs[1:]:
        out = torch.sym_max(out, x)  # type: ignore[no-untyped-call]
    return out


def _fit(v: Any) -> Any:
    """Shape arithmetic's result: a SymInt as it is, an int checked to fit int64 (a meta or fake
    tensor's sizes: the CPU kernel's error, not torch's "Overflow when unpacking long long")."""
    return v if isinstance(v, torch.SymInt) else _shapes.fit_int64(v)


def _concrete(v: Any) -> Any:
    """A shape or attr value with its SymInts as ints (for an error message only)."""
    if isinstance(v, (list, tuple, torch.Size)):
        return [_concrete(x) for x in v]
    return int(v) if isinstance(v, torch.SymInt) else v


SYM_DIMS = _shapes.Dims(keep=_keep, scalars=(int, torch.SymInt), imin=_sym_min, imax=_sym_max, fit=_fit,
                        int64_checks=False, concrete=_concrete)
"""Ints or ``torch.SymInt``: dims kept symbolic, ``torch.sym_min``/``sym_max``, int64 checks on
plain ints only (the rules and messages are :mod:`opgen.runtime.shapes`'s)."""

_SYM = _shapes.helpers(SYM_DIMS)
broadcast_shape = _SYM.broadcast_shape
normalize_axes = _SYM.normalize_axes
dim_of = _SYM.dim_of
reduce_shape = _SYM.reduce_shape
matmul_shape = _SYM.matmul_shape
concat_shape = _SYM.concat_shape
gather_shape = _SYM.gather_shape
ints = _SYM.ints
int_rows = _SYM.int_rows
row = _SYM.row
all_of = _SYM.all_of
any_of = _SYM.any_of
length = _SYM.length
at = _SYM.at
add = _SYM.add
sub = _SYM.sub
mul = _SYM.mul
floordiv = _SYM.floordiv
mod = _SYM.mod
neg = _SYM.neg
imin = _SYM.imin
imax = _SYM.imax
repeat = _SYM.repeat
check_output = _SYM.check_output
holds = _SYM.holds
violation = _SYM.violation


def encode_rows(rows: Sequence[Sequence[Any]]) -> list[Any]:
    """A list[list[int]] or list[list[float]] attr as the flat list the operator's schema takes
    (``int[]`` / ``float[]``: a schema has no nested lists): the row count, then each row's
    length and items, ``[[1, 2], [3]]`` -> ``[2, 2, 1, 2, 1, 3]``. ``opgen::pt::rows`` in
    ``opgen/torch.h`` and :func:`decode_rows` read it back."""
    out: list[Any] = [len(rows)]
    for r in rows:
        out.append(len(r))
        out.extend(r)
    return out


def decode_rows(flat: Sequence[Any]) -> list[list[Any]]:
    """The rows :func:`encode_rows` wrote (what the fake kernel gets from the dispatcher)."""
    out, p = [], 1
    for _ in range(int(flat[0])):
        n = int(flat[p])
        out.append(list(flat[p + 1:p + 1 + n]))
        p += 1 + n
    return out


# ----------------------------------------------------------------------------- errors while tracing


_TRACED: dict[type[Exception], type[Exception]] = {}


def traced(exc: ValueError | TypeError) -> Exception:
    """The op's own error ``exc``, raised by its fake kernel while ``torch.compile`` or
    ``torch.export`` traces the op, as an exception that reaches the caller unchanged.

    Dynamo turns any other exception from a fake kernel into its own ``TorchRuntimeError``; it
    passes ``torch._dynamo.exc.Unsupported`` on (a graph break: under ``fullgraph=True`` and in
    ``torch.export`` the caller gets it, otherwise Dynamo runs the call eagerly, where the kernel
    raises the same error). The returned exception is an instance of both ``type(exc)`` and
    ``Unsupported`` (class ``OpValueError`` or ``OpTypeError``), with the same message: ``except
    ValueError`` catches it, eager or compiled. Dynamo appends where in the user's code the op
    was called; ``op_message`` keeps the op's message alone. Outside a trace
    (``torch.library.opcheck``'s fake tensors) the error is the same.
    """
    base = ValueError if isinstance(exc, ValueError) else TypeError
    cls = _TRACED.get(base)
    if cls is None:
        from torch._dynamo.exc import Unsupported

        def __init__(self: Any, message: str) -> None:
            Unsupported.__init__(self, message, gb_type=f"opgen op {base.__name__}")

        cls = type(f"Op{base.__name__}", (base, Unsupported), {
            "__init__": __init__, "__module__": __name__,
            "__doc__": f"An op's {base.__name__} raised while torch.compile traces it (see traced()).",
        })
        _TRACED[base] = cls
    error = cls(str(exc))
    error.op_message = str(exc)  # type: ignore[attr-defined]  # Dynamo appends to the message itself
    return error


_SYMBOLIC_ATTRS: dict[str, tuple[type, ...]] = {"int": (torch.SymInt,), "float": (torch.SymFloat, torch.SymInt)}
"""The symbolic values an int or float attr may be while ``torch.compile(dynamic=True)`` traces."""


def check_attrs_traced(op: str, values: dict[str, Any], spec: dict[str, dict[str, Any]]) -> None:
    """:func:`opgen.runtime.check_attrs` while ``torch.compile`` traces the op (the generated wrapper
    calls it through a function given to ``torch.compiler.allow_in_graph``, which Dynamo runs on the
    traced values instead of tracing its bytecode): an int attr may be a ``torch.SymInt`` (``k``
    from a shape), kept symbolic (its range becomes a guard) and shown as an int in a message.

    Dynamo cannot trace the check itself: formatting a SymInt failed ("Failed to trace builtin
    operator str", "repr_impl not implemented"), and any exception raised in traced code reaches
    the caller as Dynamo's "Observed exception" under ``fullgraph=True``. Raised from here, the
    op's error passes as it is (:func:`traced`).

    Raises:
        TypeError: (class ``OpTypeError``) an attr of the wrong type.
        ValueError: (class ``OpValueError``) an attr outside its range or choices.
    """
    try:
        check_attrs(op, values, spec, symbolic=_SYMBOLIC_ATTRS, concrete=_concrete)
    except (TypeError, ValueError) as exc:
        raise traced(exc) from None


# ----------------------------------------------------------------------------- autograd helpers


def fake_output(op: str, name: str, shape: Sequence[Any], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """An output of a fake kernel (``torch.empty`` of ``shape``), where a shape of plain ints (a
    meta or fake tensor's sizes) whose bytes overflow int64 raises the C++ kernel's error
    (``opgen::pt::output``), not torch's "Storage size calculation overflowed".

    Raises:
        ValueError: (passed on by torch.compile, :func:`traced`) too many bytes for int64.
    """
    dims = list(shape)
    if all(type(d) is int for d in dims):
        numel = 1
        for d in dims:
            numel *= d
        item = dtype.itemsize
        if numel * item > _shapes.INT64_MAX:
            text = "(" + ", ".join(map(str, dims)) + ("," if len(dims) == 1 else "") + ")"
            raise traced(ValueError(f"{op}(): output '{name}' would have shape {text}, more bytes ({item} per "
                                    "element) than int64 can count"))
    return torch.empty(dims, dtype=dtype, device=device)


def refused(op: str, inputs: Sequence[tuple[str, Any, str]]) -> None:
    """Called when the operator refused a call (torch's dispatcher raised ``RuntimeError`` or
    ``NotImplementedError``): raises the op's own error when an input is not what the spec takes,
    with the MindSpore backend's messages (opgen.backends.mindspore.graph.tensor_input); returns
    otherwise, and the caller re-raises torch's error.

    ``inputs``: (name, value, kind) per input of the spec, kind ``required``, ``optional`` or
    ``dynamic`` (a list of tensors).

    Raises:
        TypeError: ``<op>(): input 'x' must be a Tensor, got ndarray`` (a numpy array, a list, None
            or a number where a tensor goes; the dispatcher's own message did not say which op
            function refused it, and for None it said "There were no tensor arguments"), an item
            of a list input that is not a Tensor, a sparse, quantized or nested tensor, or one on a device
            its library has no kernels for (CUDA without GPU rows or a CUDA build; any other).
        ValueError: an empty list for a list input (``concat([])``).
    """
    for name, value, kind in inputs:
        if kind == "dynamic":
            if isinstance(value, torch.Tensor) or not isinstance(value, (list, tuple)):
                got = type(value).__name__
                raise TypeError(f"{op}(): input '{name}' must be a list of Tensors, got {got}") from None
            if not value:
                raise ValueError(f"{op}(): input '{name}' is an empty list; it takes at least one Tensor") from None
            items = [(f"item {i} of input '{name}'", v) for i, v in enumerate(value)]
        elif kind == "optional" and value is None:
            continue
        else:
            items = [(f"input '{name}'", value)]
        for label, v in items:
            if not isinstance(v, torch.Tensor):
                what = "a Tensor or None" if kind == "optional" else "a Tensor"
                raise TypeError(f"{op}(): {label} must be {what}, got {type(v).__name__}") from None
            if v.layout != torch.strided or v.is_quantized or v.is_nested:
                kind_of = "quantized" if v.is_quantized else "nested" if v.is_nested else str(v.layout)
                raise TypeError(f"{op}(): {label} must be a dense (strided) tensor, got a {kind_of} tensor") from None
            if v.device.type not in ("cpu", "meta"):
                # the dispatcher found no kernel for its device: none is generated or built for it
                why = ("its library has no CUDA kernels (the op has no GPU dtype_format rows, or the library was "
                       "built by a CPU build of torch or without nvcc: see 'opgen build')"
                       if v.device.type == "cuda" else "opgen builds torch kernels for the CPU and CUDA only")
                raise TypeError(f"{op}(): {label} is on {v.device}; {why}") from None


def row_of(op: str, rows: Sequence[Sequence[torch.dtype]], names: Sequence[str], tensors: Sequence[Any],
           rows_text: str) -> int:
    """The dtype_format row the input dtypes select (an absent optional input matches any row;
    a list input's tensors must all match).

    Raises:
        TypeError: no row takes these dtypes (the C++ kernel's message).
    """
    for r, row in enumerate(rows):
        if all(_dtype_is(t, want) for t, want in zip(tensors, row)):
            return r
    got = []
    for name, t in zip(names, tensors):
        if isinstance(t, (list, tuple)):
            got += [f"{name}[{i}]={_dtype_name(x.dtype)}" for i, x in enumerate(t)]
        elif t is not None:
            got.append(f"{name}={_dtype_name(t.dtype)}")
    raise TypeError(f"{op}(): unsupported dtypes ({', '.join(got)}); supported dtype_format rows: {rows_text}")


def check_written(op: str, written: Sequence[tuple[str, Any]]) -> None:
    """In the fake kernel of an op that writes inputs in place (``torch.compile``, ``torch.export``):
    refuse a written input of which more than one element is at one memory location (an expanded
    or zero-stride tensor), with the C++ kernel's message (``opgen::pt::WriteCheck``), while the
    graph is traced, so that nothing of the call is written. (Inductor would refuse it too, while
    compiling, but without the op's name.)

    Raises:
        ValueError: such a written input (names the op and the input).
    """
    for name, t in written:
        if torch._debug_has_internal_overlap(t) == 1:  # MemOverlap::Yes
            raise ValueError(f"{op}(): '{name}' is written in place, but more than one of its elements refers to a "
                             "single memory location (an expanded or zero-stride tensor); pass a tensor of its own "
                             "(clone() it)")


def _dtype_is(t: Any, want: torch.dtype) -> bool:
    if t is None:
        return True
    if isinstance(t, (list, tuple)):
        return all(x.dtype == want for x in t)
    return bool(t.dtype == want)


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


def backward_fake(shapes: Sequence[Any], ranks: Sequence[int], needs: Sequence[bool], dtypes: Sequence[torch.dtype],
                  kinds: Sequence[str], n_outputs: int, douts: Sequence[Any]) -> list[torch.Tensor]:
    """The fake kernel of a backward op: an empty gradient per wanted input slot, of the slot's
    shape and its input's dtype in the row (see :mod:`opgen.backends.torch.context`)."""
    n_dyn = len(ranks) - (len(kinds) - (1 if "dynamic" in kinds else 0)) - n_outputs
    device = next((g.device for g in douts if g is not None), torch.device("cpu"))
    grads, slot, pos = [], 0, 0
    for index, kind in enumerate(kinds):
        for _ in range(n_dyn if kind == "dynamic" else 1):
            rank = ranks[slot]
            if rank >= 0 and needs[slot]:
                grads.append(torch.empty(list(shapes[pos:pos + rank]), dtype=dtypes[index], device=device))
            pos += max(rank, 0)
            slot += 1
    return grads
