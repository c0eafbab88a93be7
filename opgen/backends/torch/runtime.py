"""Runtime helpers of generated PyTorch packages (imported by them as ``_rt``; not by the generator).

- :func:`load_library` builds the package's operator library when missing or stale (like the
  MindSpore package's import-time build, :mod:`opgen.runtime`) and loads it with
  ``torch.ops.load_library`` (no pybind11 module).
- The shape language's Python emission (:func:`opgen.shapes.to_python`) calls ``_rt.<name>``;
  here those names work on ``torch.SymInt`` as well as ints, so the fake kernels that
  ``torch.library.register_fake`` runs under ``torch.compile(dynamic=True)`` never turn a
  symbolic size into a constant (no ``int()`` of a dim; comparisons become guards over the
  symbols). Rules and messages are :mod:`opgen.runtime`'s, which are ``opgen/sym.h``'s.
- :func:`row_of` and :func:`backward_fake`: the fake kernels' dtype row and the backward op's
  fake gradients (the autograd itself is C++, ``opgen/torch_autograd.h``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence, Sized
from pathlib import Path
from typing import Any

import torch

from ... import runtime as _base
from ...runtime import ShapeError, check_attrs, check_attrs_once, list_key
from ...runtime import normalize_axes as _normalize_int

__all__ = ["ShapeError", "check_attrs", "check_attrs_once", "list_key"]

_loaded: dict[str, str] = {}
_namespaces: dict[str, str] = {}
"""Each operator namespace (``<package>_torch``) loaded in this process -> the library that registered it."""


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
            it was first loaded here).
    """
    from ... import build as _build
    from . import build as _torch_build

    _base._require_sanitizer_runtime()
    pkg_dir = Path(module_file).parent.resolve()
    path = _base.prebuilt_library(pkg_dir, _torch_build.KIND, "torch", str(torch.__version__), "PyTorch")
    if path is None:
        for _ in range(3):
            built = _torch_build.build(pkg_dir, _base._quiet(), build_dir=_base._build_dirs.get(pkg_dir))
            if _build.hold_library(built):
                path = str(built)
                break
        else:
            raise ImportError(f"the torch library of {pkg_dir} was removed each time it was built")
    if path not in _loaded:
        claim_namespace(pkg_dir.name, path)
        torch.ops.load_library(path)  # type: ignore[no-untyped-call]
        _loaded[path] = str(pkg_dir)
    return path


def _i(d: Any) -> Any:
    """A dim as an int, or the SymInt itself (never specialised)."""
    return d if isinstance(d, torch.SymInt) else int(d)


def _shape_text(shape: Sequence[Any]) -> str:
    return "(" + ", ".join(str(int(d)) for d in shape) + ("," if len(shape) == 1 else "") + ")"


def _fail(op: str, message: str) -> ValueError:
    return ValueError(f"{op}(): {message}" if op else message)


def ints(values: Sequence[Any]) -> list[Any]:
    """A shape or list[int] attr as a list (ints or SymInts)."""
    return [_i(v) for v in values]


def int_rows(values: Sequence[Sequence[Any]]) -> list[list[Any]]:
    """A list[list[int]] attr as a list of lists (ints or SymInts)."""
    return [[_i(v) for v in r] for r in values]


def row(rows: Sequence[Sequence[Any]], i: Any) -> list[Any]:
    """``rows[i]`` of a list[list[int]] attr, negative ``i`` counting from the end.

    Raises:
        ShapeError: an index out of range.
    """
    n = len(rows)
    if not -n <= i < n:
        raise ShapeError(f"index {int(i)} is out of range for {_base._fact_value(rows)}, which has {n} entries")
    return [_i(v) for v in rows[int(i)]]


def all_of(conditions: Iterable[Any]) -> bool:
    """``all(cond for v in s)`` (a symbolic condition becomes a guard)."""
    return all(bool(c) for c in conditions)


def any_of(conditions: Iterable[Any]) -> bool:
    """``any(cond for v in s)`` (a symbolic condition becomes a guard)."""
    return any(bool(c) for c in conditions)


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


def length(values: Sized) -> int:
    """``len``: a rank, a list's length, or the number of tensors of a dynamic input."""
    return len(values)


def at(values: Sequence[Any], i: Any) -> Any:
    """``values[i]``, negative ``i`` counting from the end.

    Raises:
        ShapeError: an index out of range.
    """
    n = len(values)
    if not -n <= i < n:
        raise ShapeError(f"index {int(i)} is out of range for {_shape_text(values)}, which has {n} entries")
    return _i(values[int(i)])


def add(a: Any, b: Any) -> Any:
    """``a + b``."""
    return a + b


def sub(a: Any, b: Any) -> Any:
    """``a - b``."""
    return a - b


def mul(a: Any, b: Any) -> Any:
    """``a * b``."""
    return a * b


def floordiv(a: Any, b: Any) -> Any:
    """``a // b``, rounding toward -infinity.

    Raises:
        ShapeError: ``b == 0``.
    """
    if b == 0:
        raise ShapeError("division by zero in a shape expression")
    return a // b


def mod(a: Any, b: Any) -> Any:
    """``a % b`` with the sign of ``b``.

    Raises:
        ShapeError: ``b == 0``.
    """
    if b == 0:
        raise ShapeError("division by zero in a shape expression")
    return a % b


def neg(a: Any) -> Any:
    """``-a``."""
    return -a


def imin(*xs: Any) -> Any:
    """``min(a, b, ...)`` (``torch.sym_min`` for symbols)."""
    out = xs[0]
    for x in xs[1:]:
        out = torch.sym_min(out, x)  # type: ignore[no-untyped-call]
    return out


def imax(*xs: Any) -> Any:
    """``max(a, b, ...)`` (``torch.sym_max`` for symbols)."""
    out = xs[0]
    for x in xs[1:]:
        out = torch.sym_max(out, x)  # type: ignore[no-untyped-call]
    return out


def repeat(values: Sequence[Any], n: Any) -> list[Any]:
    """``values * n``.

    Raises:
        ShapeError: a result longer than any shape.
    """
    return _base.repeat(list(values), int(n))


def check_output(shape: Sequence[Any], output: str) -> list[Any]:
    """An output shape, checked: every dim >= 0.

    Raises:
        ShapeError: a negative dim.
    """
    dims = [_i(d) for d in shape]
    for d in dims:
        if d < 0:
            raise ShapeError(f"output '{output}' would have shape {_shape_text(dims)}, with a negative dim")
    return dims


def holds(condition: Callable[[], Any]) -> bool:
    """Whether a contract holds (an error while evaluating it means it does not)."""
    try:
        return bool(condition())
    except ValueError:
        return False


def violation(text: str, inputs: Sequence[tuple[str, Any]], attrs: Sequence[tuple[str, Any]]) -> ShapeError:
    """The error of contract ``text`` not holding (:func:`opgen.runtime.violation`'s message)."""

    def concrete(v: Any) -> Any:
        if isinstance(v, (list, tuple, torch.Size)):
            return [concrete(x) for x in v]
        return int(v) if isinstance(v, torch.SymInt) else v

    return _base.violation(text, [(n, concrete(s)) for n, s in inputs], [(n, concrete(v)) for n, v in attrs])


def broadcast_shape(*shapes: Sequence[Any], op: str = "") -> list[Any]:
    """NumPy broadcast of several shapes (:func:`opgen.runtime.broadcast_shape`).

    Raises:
        ValueError: when the shapes cannot be broadcast together.
    """
    nd = max((len(s) for s in shapes), default=0)
    out: list[Any] = [1] * nd
    for s in shapes:
        for i, d in enumerate(s):
            j = nd - len(s) + i
            if d == 1 or d == out[j]:
                continue
            if out[j] == 1:
                out[j] = _i(d)
                continue
            prefix = f"{op}(): " if op else ""
            raise ValueError(f"{prefix}shapes cannot be broadcast together: "
                             f"{' '.join(str(tuple(int(v) for v in x)) for x in shapes)}")
    return out


def normalize_axes(axis: Any, rank: int, op: str = "") -> list[int]:
    """:func:`opgen.runtime.normalize_axes` (axes are attrs: made concrete)."""
    if isinstance(axis, (int, torch.SymInt)):  # an int axis, not a list: 0 and -1 are axes of a 0-d tensor
        return _normalize_int(int(axis), rank, op)
    return _normalize_int([int(a) for a in axis], rank, op)


def dim_of(shape: Sequence[Any], axis: int, name: str, op: str = "") -> Any:
    """Dimension ``axis`` of input ``name``'s shape (:func:`opgen.runtime.dim_of`)."""
    rank = len(shape)
    if not -rank <= axis < rank:
        raise _fail(op, f"input '{name}' has shape {_shape_text(shape)}, which has no dimension {int(axis)}")
    return _i(shape[int(axis)])


def reduce_shape(x: Sequence[Any], axis: Any, keep_dims: bool, op: str = "") -> list[Any]:
    """Shape of ``x`` reduced over ``axis`` (:func:`opgen.runtime.reduce_shape`)."""
    axes = normalize_axes(axis, len(x), op)
    if keep_dims:
        return [1 if i in axes else _i(d) for i, d in enumerate(x)]
    return [_i(d) for i, d in enumerate(x) if i not in axes]


def matmul_shape(a: Sequence[Any], b: Sequence[Any], transpose_a: bool = False, transpose_b: bool = False,
                 op: str = "") -> list[Any]:
    """Shape of ``op(a) @ op(b)`` for 2-D ``a`` and ``b`` (:func:`opgen.runtime.matmul_shape`)."""
    if len(a) != 2 or len(b) != 2:
        raise _fail(op, f"matmul needs 2-D inputs, got shapes {_shape_text(a)} and {_shape_text(b)}")
    m, k = (a[1], a[0]) if transpose_a else (a[0], a[1])
    k2, n = (b[1], b[0]) if transpose_b else (b[0], b[1])
    if k != k2:
        raise _fail(op, f"matmul inner dimensions differ: {_shape_text(a)}{'^T' if transpose_a else ''} x "
                        f"{_shape_text(b)}{'^T' if transpose_b else ''} ({int(k)} != {int(k2)})")
    return [_i(m), _i(n)]


def concat_shape(xs: Sequence[Sequence[Any]], axis: Any, op: str = "") -> list[Any]:
    """Shape of the tensors ``xs`` joined along ``axis`` (:func:`opgen.runtime.concat_shape`)."""
    if not xs:
        raise _fail(op, "concat needs at least one tensor")
    rank = len(xs[0])
    if rank == 0:
        raise _fail(op, "concat cannot join 0-d tensors")
    (ax,) = normalize_axes(axis, rank, op)
    out = [_i(d) for d in xs[0]]
    for i, s in enumerate(xs[1:], start=1):
        if len(s) != rank:
            raise _fail(op, f"concat: tensor {i} has rank {len(s)}, tensor 0 has rank {rank}")
        for d in range(rank):
            if d != ax and s[d] != out[d]:
                raise _fail(op, f"concat: tensor {i} has shape {_shape_text(s)}, which differs from "
                                f"{_shape_text(xs[0])} outside axis {ax}")
        out[ax] = out[ax] + _i(s[ax])
    return out


def gather_shape(x: Sequence[Any], indices: Sequence[Any], axis: Any, op: str = "") -> list[Any]:
    """Shape of ``x`` gathered along ``axis`` at ``indices`` (:func:`opgen.runtime.gather_shape`)."""
    rank = len(x)
    if rank == 0:
        raise _fail(op, "gather cannot index a 0-d tensor")
    (ax,) = normalize_axes(axis, rank, op)
    return [_i(d) for d in x[:ax]] + [_i(d) for d in indices] + [_i(d) for d in x[ax + 1:]]


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


# ----------------------------------------------------------------------------- autograd helpers


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
