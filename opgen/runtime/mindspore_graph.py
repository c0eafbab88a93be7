"""Helpers that generated Custom-path code runs *inside* MindSpore graphs (bprops).

GRAPH_MODE compiles these functions from their source, so they import MindSpore at module
level (no imports inside functions) and use only graph-safe Python. Kept apart from
:mod:`opgen.runtime` and :mod:`opgen.runtime.mindspore`, which import without MindSpore.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import FunctionType
from typing import Any

from mindspore import Tensor, ops
from mindspore.common import dtype as mstype
from mindspore.graph._parse.resources import convert_object_map as _convert_object_map
from mindspore.graph.api import _pynative_executor

from .mindspore import MAX_CALL_TENSORS


def _marker() -> int:
    return 0


@ops.constexpr(check=False)  # type: ignore[untyped-decorator]
def _is_none(value: Any) -> bool:
    return value is None


def in_graph() -> bool:
    """True while MindSpore compiles a graph (a GRAPH_MODE Cell, ``ms.jit``), False when the
    caller runs as plain Python (PyNative).  A constexpr sees a function object as None only at
    graph compile time (MindSpore's own ``_run_in_jit`` idiom); about 1 us per call in PyNative."""
    return bool(_is_none(_marker))


def pynative_only(op: str, package: str, inputs: Any = ()) -> None:
    """Refuse to compile the Function<T> path of ``op`` into a graph.

    Inside a GRAPH_MODE Cell or ``ms.jit`` MindSpore runs the pybind11 call through PyExecute:
    the forward is right but every gradient through it is silently zero (MindSpore only logs a
    WARNING).  Raises RuntimeError at graph compile time instead, pointing to the Custom path
    (``<package>.<op>``), which compiles into graphs with its bprop.  ``inputs`` (the checked
    inputs, unused) only make a graph evaluate the input checks first."""
    if in_graph():
        raise RuntimeError(f"{op}(): the Function<T> path ({package}.function) runs only in PyNative; inside a "
                           f"GRAPH_MODE Cell or ms.jit its gradients would be zero. Call {package}.{op} (the "
                           "Custom path) there")


def substitute_in_graphs(substitutes: Mapping[Any, Any]) -> None:
    """Make MindSpore's graph compiler compile ``substitutes[f]`` wherever a graph reaches ``f``.

    A graph reaches a function in two ways, and each has its own seam in MindSpore 2.10:

    - **by name** (a global, a closure variable, ``module.f``): the parser looks the name up
      (``resolve_symbol``) and then consults ``convert_object_map`` of
      ``mindspore.graph._parse.resources``, the table where MindSpore maps Python builtins to
      graph implementations: ``f`` is entered there, which also covers objects that cannot carry
      attributes (a pybind11 function, a constexpr);
    - **as a value** (an item of a list, tuple or dict held by a Cell, a ``functools.partial``...):
      no name is resolved, the converter parses the function object itself. The parser unwraps
      every function it parses (``inspect.unwrap`` in ``Parser.__init__``), so a Python function
      ``f`` gets ``f.__wrapped__ = substitutes[f]`` when that is a Python function too.

    A function entered both ways is compiled as its substitute however the graph reaches it (the
    misuse cases ``graph_mul_*_from_*``: a Cell reaching the op through a list, a tuple, a dict,
    a ``functools.partial``, a module alias). Only the map was used once: an op reached through
    a list had its PyNative wrapper compiled, whose ``with CALL_LOCK:`` MindSpore rejects
    (``TypeError: Only support jit_class instance, but got PythonObject(type: <class
    '_thread.RLock'>...``). ``inspect.signature`` follows ``__wrapped__`` too: a substitute keeps
    its function's parameters.

    Generated code uses it so that PyNative calls pay nothing for what only a graph needs:

    - the Function<T> path registers each op's wrapper and its pybind11 function with
      ``_<op>_checked``, which checks the inputs and then calls :func:`pynative_only`: a
      GRAPH_MODE Cell or ``ms.jit`` that calls the op, however it reaches it, gets the
      RuntimeError while it compiles (a per-call :func:`in_graph` test cost about 0.2 us);
    - the Custom path registers each op's public function with ``_<op>_full`` (the checks and
      the primitive, without the PyNative lock and last-call test), and each ``_<op>_checked``
      (the plain function that picks the primitive) with its ``ops.constexpr`` twin, which a
      graph needs to resolve it while compiling, and a PyNative call need not go through (about
      1.5 us per call).
    """
    _convert_object_map.update(substitutes)
    for f, substitute in substitutes.items():
        if isinstance(f, FunctionType) and isinstance(substitute, FunctionType):
            f.__wrapped__ = substitute  # type: ignore[attr-defined]


def launch_blocking(op: str, out: Any) -> Any:
    """``out`` once the kernels launched so far have run (PyNative), so that a kernel error of
    ``op`` (an index out of range...) is raised by the call that caused it, as ``ValueError`` with
    the kernel's own message, like the Function<T> path; not at some later, unrelated call.
    A graph sees :func:`_launch_blocking_in_graph` instead (registered below), which returns
    ``out`` as is: MindSpore raises the error from the graph run, with the kernel's message in
    it."""
    _sync()
    return out


def _launch_blocking_in_graph(op: str, out: Any) -> Any:
    """:func:`launch_blocking` inside a graph: ``out`` (graphs run their kernels in order)."""
    return out


def _sync() -> None:
    """Wait for the kernels launched so far (PyNative); a kernel error becomes ValueError(its
    message).  Not graph-mode safe (``try``): only :func:`launch_blocking` calls it, which graphs
    do not see."""
    try:
        _pynative_executor.sync()
    except RuntimeError as exc:
        message = kernel_message(str(exc))
        if message is None:
            raise
        raise ValueError(message) from None


_KERNEL_MESSAGE = "Error message is "


def kernel_message(text: str) -> str | None:
    """The ``<op>(): <message>`` an aot kernel threw, from MindSpore's RuntimeError text
    ("For 'Custom' on CPU, operator failed when executing user defined file ...! Error message
    is <op>(): <message>" followed by MindSpore's C++ stack), or None."""
    start = text.find(_KERNEL_MESSAGE)
    if start < 0:
        return None
    return text[start + len(_KERNEL_MESSAGE):].split("\n", 1)[0].strip() or None


def tensor_input(op: str, name: str, value: Any) -> Any:
    """Raise TypeError naming ``op`` unless ``value`` is a Tensor (or a Parameter).

    Called first by every generated op function (before the Function<T> path refuses a graph),
    on both paths and in every mode: MindSpore itself would abort the process on a numpy array
    in a GRAPH_MODE Cell, and give messages that do not name the op for a Python number, None
    or a list.  Graph-mode safe (``isinstance`` and ``raise`` with an f-string compile in
    GRAPH_MODE).  Returns ``value``: the caller uses what this returns, so that in a graph the
    check comes before anything computed from it."""
    if not isinstance(value, Tensor):
        raise TypeError(f"{op}(): input '{name}' must be a Tensor, got {type(value).__name__}")
    return value


def tensor_list_input(op: str, name: str, value: Any, others: int = -1) -> Any:
    """Raise TypeError naming ``op`` unless ``value`` is a non-empty list or tuple of Tensors
    (ValueError when empty).  Graph-mode safe (the loop is over the items, not indices: an
    indexed loop is folded away in GRAPH_MODE).

    ``others``: how many other tensors the call takes (0 on the Function<T> path); a list that
    makes more than :data:`MAX_CUSTOM_TENSORS` in all is a ValueError before the loop (a
    GRAPH_MODE Cell unrolled a 1,000-tensor loop into "Exceed function call depth limit 1000")."""
    if isinstance(value, Tensor):  # tested first and alone: GRAPH_MODE lets a Tensor through the test below
        raise TypeError(f"{op}(): input '{name}' must be a list of Tensors, got {type(value).__name__}")
    if not isinstance(value, (list, tuple)):
        raise TypeError(f"{op}(): input '{name}' must be a list of Tensors, got {type(value).__name__}")
    if not value:
        raise ValueError(f"{op}(): input '{name}' is an empty list; it takes at least one Tensor")
    if others >= 0 and others + len(value) > MAX_CUSTOM_TENSORS:
        raise ValueError(f"{op}(): '{name}' takes 1 to {MAX_CUSTOM_TENSORS - others} tensors, got {len(value)}")
    i = 0
    for item in value:
        if not isinstance(item, Tensor):
            raise TypeError(f"{op}(): item {i} of input '{name}' must be a Tensor, got {type(item).__name__}")
        i = i + 1
    return value


def scatter_grads(flat: Sequence[Any], grads: Sequence[Any], pick: Sequence[int]) -> tuple[Any, ...]:
    """One gradient per flattened input: ``grads[pick[i]]``, or zeros where ``pick[i] < 0``
    (inputs that are not differentiable). Graph-mode safe (used inside generated bprops)."""
    out: tuple[Any, ...] = ()
    for i in range(len(pick)):
        if pick[i] >= 0:
            out = out + (grads[pick[i]],)
        else:
            out = out + (ops.zeros_like(flat[i]),)
    return out


def pick(flat: Sequence[Any], positions: Sequence[int]) -> tuple[Any, ...]:
    """The tensors of ``flat`` at ``positions`` (``runtime.flat_positions``). Graph-mode safe."""
    out: tuple[Any, ...] = ()
    for p in positions:
        out = out + (flat[p],)
    return out


def split_view(dout: Any, xs: Sequence[Any], axis: int) -> tuple[Any, ...]:
    """The gradients of a concatenation's inputs ``xs`` as views of its output gradient ``dout``:
    ``dout`` narrowed along ``axis`` (negative counts from the end; checked by the forward) to
    each input's extent there, in order -- what MindSpore's own concat bprop returns, with no
    kernel and no copy in PyNative. What a spec's ``kernel.grad_views`` generates for an output
    ``concat(xs, axis)`` in the Custom path's bprop (PyNative, static shapes); the Function<T>
    twin is ``opgen::ms::split_view``. Graph-mode safe (a graph parses it, and runs the kernel)."""
    ax = axis + len(dout.shape) if axis < 0 else axis
    views: tuple[Any, ...] = ()
    start = 0
    for x in xs:
        if x.shape[ax] == 0:  # narrow refuses a length of 0
            views = views + (ops.zeros_like(x),)
        else:
            views = views + (ops.narrow(dout, ax, start, x.shape[ax]),)
        start = start + x.shape[ax]
    return views


def unreduce_view(dout: Any, x: Any, axis: Any, keep_dims: bool) -> Any:
    """The gradient of a sum's input ``x`` as a view of its output gradient ``dout``: ``dout``
    with the reduced axes (``axis``: an int or a list, [] for all; checked by the forward)
    restored as 1s, broadcast to ``x``'s shape with stride 0 -- what MindSpore's own ReduceSum
    bprop returns, no kernel and no copy in PyNative. What a spec's ``kernel.grad_views``
    generates for an output ``reduce(x, axis, keep_dims)`` in the Custom path's bprop (PyNative,
    static shapes); the Function<T> twin is ``opgen::ms::unreduce_view``. ``keep_dims`` does not
    change the result. Graph-mode safe (a graph parses it, and runs the kernel)."""
    shape = x.shape
    rank = len(shape)
    axes = axis if isinstance(axis, (list, tuple)) else (axis,)
    kept: tuple[int, ...] = ()
    for i in range(rank):
        reduced = len(axes) == 0
        for a in axes:
            if a == i or a + rank == i:
                reduced = True
        kept = kept + ((1 if reduced else shape[i]),)
    d = dout if keep_dims or dout.shape == kept else ops.reshape(dout, kept)
    return d if kept == shape else ops.broadcast_to(d, shape)


def keep(sink: Any, done: Any) -> Any:
    """Keep and order an op that writes an input in place, through ``done``, its placeholder
    output. In PyNative (here) nothing is needed: the op has run. A graph sees
    :func:`_keep_in_graph` instead (registered below), which assigns ``done`` to ``sink``, the
    op's module-level Parameter: verified on MindSpore 2.10, a graph (``ms.jit`` over a global
    Parameter) pruned a writing ``ops.Custom`` primitive whose output nobody used, although it has
    ``side_effect_mem``, when the primitive comes from a constexpr as opgen's do; the assignment,
    itself a side effect, keeps it."""
    return done


def _keep_in_graph(sink: Any, done: Any) -> Any:
    """:func:`keep` inside a graph: ``done`` assigned to ``sink`` (a side effect the graph keeps)."""
    return ops.assign(sink, done)


def after(value: Any, done: Any) -> Any:
    """``value`` (an input an op wrote in place) as the op's result. In PyNative, ``value`` itself;
    in a graph (:func:`_after_in_graph`), ``value`` once the op has run (``ops.depend``)."""
    return value


def _after_in_graph(value: Any, done: Any) -> Any:
    """:func:`after` inside a graph: ``value`` depending on ``done``."""
    return ops.depend(value, done)


def refuse_grad(message: str) -> None:
    """Raise RuntimeError(``message``) when PyNative records a gradient (inside ``ms.grad`` or
    ``ms.value_and_grad``): called first by an op that writes an input in place, on both paths,
    since MindSpore's autograd never sees the write (verified on MindSpore 2.10: the Custom path
    gave a silently zero gradient). Not graph-mode safe: a graph reaches it only through the
    constexpr that resolves the op's primitive (``_<op>_checked``), which runs as Python while the
    graph compiles, so that ``ms.grad`` of an ``ms.jit`` function is refused then (PyNative records
    the gradient during that compile); a GRAPH_MODE graph's gradient shows no such flag, and
    :func:`refusing_bprop` refuses a gradient through the op's result instead.

    The grad state is cleared first (``clear_res``, as MindSpore's own jit does when a compile
    fails): MindSpore 2.10 leaves ``requires_grad()`` set after any exception escapes ``ms.grad``,
    and every later call, outside any gradient, would be refused too."""
    if _pynative_executor.requires_grad():
        _pynative_executor.clear_res()
        raise RuntimeError(message)


def written_input(op: str, name: str, value: Any) -> None:
    """Raise ValueError naming ``op`` and input ``name`` when ``value``, an input the op writes in
    place, is a view of another tensor (not contiguous, or starting inside another tensor's
    memory), in PyNative, on both paths. Verified on MindSpore 2.10: the Custom path hands the
    kernel a copy of such a view, so the write was silently lost (a transpose, and a contiguous
    slice ``s[1:3]``), and ``Tensor.copy_`` into the view did not reach its base either. Not
    graph-mode safe (graphs compile the Custom path, which does not call it)."""
    if isinstance(value, Tensor) and (not value.is_contiguous() or value.storage_offset() != 0):
        raise ValueError(f"{op}(): input '{name}' is written in place, so it must be a tensor of its own, not a view "
                         "of another one (a slice, a transpose), whose write MindSpore would drop; pass a tensor of "
                         "its own, e.g. a copy, and use that copy afterwards")


def refusing_bprop(message: str) -> Any:
    """The bprop of an op that writes an input in place: raises RuntimeError(``message``) when a
    graph differentiates through it (while it compiles). Graph-mode safe."""
    def impl(flat: Sequence[Any], out: Any, dout: Any) -> Any:
        raise RuntimeError(message)
    return impl


def zero_grads(flat: Sequence[Any], out: Any, dout: Any) -> tuple[Any, ...]:
    """The bprop of an op with nothing differentiable (no differentiable output, or input): a
    zero gradient per flattened input.  Without a bprop MindSpore rejects any network that
    takes a gradient through the op ("Illegal primitive Custom's bprop not defined"), while the
    right answer is that the op contributes nothing.  Graph-mode safe."""
    res: tuple[Any, ...] = ()
    for t in flat:
        res = res + (ops.zeros_like(t),)
    return res


def output_grads(outs: Sequence[Any], douts: Sequence[Any], differentiable: Sequence[bool]) -> tuple[Any, ...]:
    """The incoming gradients the backward kernel takes, one tensor per output: ``douts[i]``, or
    zeros like ``outs[i]`` for an output that is not differentiable (its gradient is never
    read) or whose gradient is ``None``. MindSpore hands such outputs odd gradients: ``None``
    in PyNative and an int64 scalar in GRAPH_MODE for a 0-d bool mask. Graph-mode safe."""
    res: tuple[Any, ...] = ()
    for i in range(len(outs)):
        if differentiable[i] and douts[i] is not None:
            res = res + (douts[i],)
        elif isinstance(outs[i], Tensor):
            res = res + (ops.zeros_like(outs[i]),)
        elif isinstance(outs[i], bool):  # GRAPH_MODE folds a 0-d bool output into a Python bool
            res = res + (ops.scalar_to_tensor(False, mstype.bool_),)
        else:
            res = res + (ops.zeros_like(ops.scalar_to_tensor(outs[i])),)
    return res


def bprop_for(n: int, impl: Any, op: str = "") -> Any:
    """A bprop with ``n`` explicit input parameters (+ ``out``, ``dout``) calling
    ``impl(inputs_tuple, out, dout)``.

    MindSpore's GRAPH_MODE needs a bprop's parameters spelled out (``*args`` is rejected), and a
    flattened dynamic input makes their number vary by call site, hence one adapter per arity.

    Raises:
        ValueError: for more than :data:`MAX_CUSTOM_TENSORS` flattened tensor inputs.
    """
    if not 1 <= n <= MAX_CUSTOM_TENSORS:
        raise ValueError(f"{op}(): the Custom path takes 1 to {MAX_CUSTOM_TENSORS} tensors per call, got {n}")
    return _BPROPS[n - 1](impl)


def _b1(f: Any) -> Any:
    def bprop(a, out, dout):  # type: ignore[no-untyped-def]
        return f((a,), out, dout)
    return bprop


def _b2(f: Any) -> Any:
    def bprop(a, b, out, dout):  # type: ignore[no-untyped-def]
        return f((a, b), out, dout)
    return bprop


def _b3(f: Any) -> Any:
    def bprop(a, b, c, out, dout):  # type: ignore[no-untyped-def]
        return f((a, b, c), out, dout)
    return bprop


def _b4(f: Any) -> Any:
    def bprop(a, b, c, d, out, dout):  # type: ignore[no-untyped-def]
        return f((a, b, c, d), out, dout)
    return bprop


def _b5(f: Any) -> Any:
    def bprop(a, b, c, d, e, out, dout):  # type: ignore[no-untyped-def]
        return f((a, b, c, d, e), out, dout)
    return bprop


def _b6(f: Any) -> Any:
    def bprop(a, b, c, d, e, g, out, dout):  # type: ignore[no-untyped-def]
        return f((a, b, c, d, e, g), out, dout)
    return bprop


def _b7(f: Any) -> Any:
    def bprop(a, b, c, d, e, g, h, out, dout):  # type: ignore[no-untyped-def]
        return f((a, b, c, d, e, g, h), out, dout)
    return bprop


def _b8(f: Any) -> Any:
    def bprop(a, b, c, d, e, g, h, i, out, dout):  # type: ignore[no-untyped-def]
        return f((a, b, c, d, e, g, h, i), out, dout)
    return bprop


def _b9(f: Any) -> Any:
    def bprop(a, b, c, d, e, g, h, i, j, out, dout):  # type: ignore[no-untyped-def]
        return f((a, b, c, d, e, g, h, i, j), out, dout)
    return bprop


def _b10(f: Any) -> Any:
    def bprop(a, b, c, d, e, g, h, i, j, k, out, dout):  # type: ignore[no-untyped-def]
        return f((a, b, c, d, e, g, h, i, j, k), out, dout)
    return bprop


def _b11(f: Any) -> Any:
    def bprop(a, b, c, d, e, g, h, i, j, k, m, out, dout):  # type: ignore[no-untyped-def]
        return f((a, b, c, d, e, g, h, i, j, k, m), out, dout)
    return bprop


def _b12(f: Any) -> Any:
    def bprop(a, b, c, d, e, g, h, i, j, k, m, n, out, dout):  # type: ignore[no-untyped-def]
        return f((a, b, c, d, e, g, h, i, j, k, m, n), out, dout)
    return bprop


def _b13(f: Any) -> Any:
    def bprop(a, b, c, d, e, g, h, i, j, k, m, n, o, out, dout):  # type: ignore[no-untyped-def]
        return f((a, b, c, d, e, g, h, i, j, k, m, n, o), out, dout)
    return bprop


def _b14(f: Any) -> Any:
    def bprop(a, b, c, d, e, g, h, i, j, k, m, n, o, p, out, dout):  # type: ignore[no-untyped-def]
        return f((a, b, c, d, e, g, h, i, j, k, m, n, o, p), out, dout)
    return bprop


def _b15(f: Any) -> Any:
    def bprop(a, b, c, d, e, g, h, i, j, k, m, n, o, p, q, out, dout):  # type: ignore[no-untyped-def]
        return f((a, b, c, d, e, g, h, i, j, k, m, n, o, p, q), out, dout)
    return bprop


def _b16(f: Any) -> Any:
    def bprop(a, b, c, d, e, g, h, i, j, k, m, n, o, p, q, r, out, dout):  # type: ignore[no-untyped-def]
        return f((a, b, c, d, e, g, h, i, j, k, m, n, o, p, q, r), out, dout)
    return bprop


_BPROPS = (_b1, _b2, _b3, _b4, _b5, _b6, _b7, _b8, _b9, _b10, _b11, _b12, _b13, _b14, _b15, _b16)
MAX_CUSTOM_TENSORS = MAX_CALL_TENSORS
"""The most tensors one Custom-path call takes (all inputs flattened): one bprop adapter per count
(:data:`opgen.backends.mindspore.runtime.MAX_CALL_TENSORS`, which also bounds the Function<T> path's lists)."""
if len(_BPROPS) != MAX_CUSTOM_TENSORS:  # pragma: no cover - an edit of one without the other
    raise ImportError(f"opgen: {len(_BPROPS)} bprop adapters for MAX_CALL_TENSORS = {MAX_CALL_TENSORS}")


substitute_in_graphs({launch_blocking: _launch_blocking_in_graph, keep: _keep_in_graph, after: _after_in_graph})
