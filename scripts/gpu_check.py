"""The checks of scripts/gpu_check.sh that ``opgen test`` does not make, on CUDA tensors.

Run by scripts/gpu_check.sh (which builds the packages first); each subcommand prints one line per
case and ends with ``RESULT <name> ok|FAILED <counts>``, exit status 0 only when all passed:

- ``ms-abi GEN``: MindSpore's GPU aot entry points (``lib<pkg>_aot_gpu.so``) through the C ABI
  MindSpore itself calls (``int f(int nparam, void **params, int *ndims, int64_t **shapes, const
  char **dtypes, void *stream, void *extra)``), with CUDA buffers, shapes, dtype strings and the
  stream from torch, against the CPU aot library's results for the same inputs (MindSpore is not
  installed on the GPU machine; its GPU wheels need CUDA 11). ``--device cpu`` runs the same
  harness on the CPU library alone (what CI can run: tests/test_cuda_build.py).
- ``torch-extra PKG``: on CUDA tensors, for a sample of ops: ``torch.library.opcheck``,
  ``torch.compile(fullgraph=True, dynamic=True)`` and ``torch.export`` against eager, capture in a
  CUDA graph (``torch.cuda.graph``) and replay, mixed devices refused with the op's error, and the
  backward on the forward's device.
- ``sanitize PKG``: a few ops forward and backward on CUDA, meant to run under
  ``compute-sanitizer --tool memcheck``.
"""

from __future__ import annotations

import argparse
import ctypes
import importlib
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

# (op, inputs, attr-less forward in torch): ops of ops/ whose aot entry takes no attrs
ABI_OPS: dict[str, tuple[int, Callable[..., Any]]] = {
    "add": (2, lambda t, x, y: x + y),
    "sub": (2, lambda t, x, y: x - y),
    "mul": (2, lambda t, x, y: x * y),
    "maximum": (2, lambda t, x, y: t.maximum(x, y)),
    "relu": (1, lambda t, x: t.relu(x)),
    "exp": (1, lambda t, x: t.exp(x)),
    "tanh": (1, lambda t, x: t.tanh(x)),
    "sigmoid": (1, lambda t, x: t.sigmoid(x)),
    "square": (1, lambda t, x: x * x),
}


class _Tally:
    def __init__(self, name: str):
        self.name, self.ok, self.failed = name, 0, 0

    def case(self, what: str, fn: Callable[[], str | None]) -> None:
        try:
            problem = fn()
        except Exception as exc:  # a check that raised: its failure, with where
            problem = f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=3)}"
        if problem == "SKIP":
            print(f"n/a  {what}", flush=True)
        elif problem:
            self.failed += 1
            print(f"FAIL {what}: {problem}", flush=True)
        else:
            self.ok += 1
            print(f"ok   {what}", flush=True)

    def result(self) -> int:
        status = "ok" if self.failed == 0 and self.ok else "FAILED"
        print(f"RESULT {self.name} {status} ({self.ok} passed, {self.failed} failed)", flush=True)
        return 0 if status == "ok" else 1


def _lib(gen: Path, kind: str) -> ctypes.CDLL:
    from opgen import backends

    return ctypes.CDLL(str(backends.build(gen / "opgen_ops", kind, quiet=True)))


def _built(gen: Path, kind: str) -> ctypes.CDLL | None:
    """Library ``kind`` of the MindSpore package when it is built already (no build), else None."""
    from opgen.backends.mindspore.build import built_library

    path = built_library(gen / "opgen_ops", kind)
    return ctypes.CDLL(str(path)) if path is not None else None


def _call(lib: ctypes.CDLL, symbol: str, tensors: list[Any], dtype: str, stream: int) -> int:
    """One call through MindSpore's aot ABI: params = the tensors' data pointers, their shapes."""
    n = len(tensors)
    params = (ctypes.c_void_p * n)(*[t.data_ptr() for t in tensors])
    ndims = (ctypes.c_int * n)(*[t.dim() for t in tensors])
    shape_arrays = [(ctypes.c_int64 * max(1, t.dim()))(*t.shape) for t in tensors]
    shapes = (ctypes.POINTER(ctypes.c_int64) * n)(*[ctypes.cast(a, ctypes.POINTER(ctypes.c_int64))
                                                    for a in shape_arrays])
    dtypes = (ctypes.c_char_p * n)(*[dtype.encode()] * n)
    fn = getattr(lib, symbol)
    fn.restype = ctypes.c_int
    fn.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                   ctypes.c_void_p, ctypes.c_void_p]
    return int(fn(n, params, ndims, shapes, dtypes, ctypes.c_void_p(stream), None))


def ms_abi(gen: Path, device: str) -> int:
    """MindSpore's aot entry points of ``device`` (``cuda``: the GPU library, against the CPU one)."""
    import torch

    tally = _Tally(f"ms-abi-{device}")
    lib = _lib(gen, "aot_gpu" if device == "cuda" else "aot")
    # the CPU path's results for the same inputs, where its library is built (gpu_check.sh builds
    # only the GPU one, to save device time: then the exact results alone are the bar)
    cpu = lib if device == "cpu" else _built(gen, "aot")
    dev = torch.device(device)
    stream = torch.cuda.current_stream().cuda_stream if device == "cuda" else 0
    gen_ = torch.Generator().manual_seed(0)
    for op, (n_in, ref) in ABI_OPS.items():
        for dtype in ("float32", "float16"):
            tdtype = getattr(torch, dtype)
            shape = (37, 129)  # not a multiple of any vector width: the tails run too

            def check(op: str = op, n_in: int = n_in, ref: Callable[..., Any] = ref, dtype: str = dtype,
                      tdtype: Any = tdtype, shape: tuple[int, ...] = shape) -> str | None:
                ins = [(torch.rand(shape, generator=gen_) * 2 - 1).to(tdtype) for _ in range(n_in)]
                got = torch.empty(shape, dtype=tdtype, device=dev)
                rc = _call(lib, f"opgen_ops_{op}_forward", [*[x.to(dev) for x in ins], got], dtype, stream)
                if device == "cuda":
                    torch.cuda.synchronize()
                if rc == 2:
                    return "SKIP"  # no such dtype row for this device
                if rc != 0:
                    return f"the {device} library returned {rc}"
                want = ref(torch, *[x.double() for x in ins])
                rel = lambda a: ((a.double() - want).abs() / (1 + want.abs())).max().item()  # noqa: E731
                tol = 2e-3 if dtype == "float16" else 2e-6
                problems = [] if rel(got.cpu()) <= tol else [f"max rel |{device} - exact| {rel(got.cpu()):.3g} > {tol}"]
                if device == "cuda" and cpu is not None:  # the CPU path's result for the same inputs
                    on_cpu = torch.empty(shape, dtype=tdtype)
                    if _call(cpu, f"opgen_ops_{op}_forward", [*ins, on_cpu], dtype, 0) == 0 and \
                            rel(got.cpu()) > rel(on_cpu) + tol:
                        problems.append(f"further from exact than the CPU path ({rel(on_cpu):.3g})")
                return "; ".join(problems) or None

            tally.case(f"{op} {dtype} forward", check)
    # bad calls come back as codes, never a crash
    x = torch.ones(4, device=dev)
    tally.case("a wrong parameter count is kBadParamCount (1)",
               lambda: None if _call(lib, "opgen_ops_add_forward", [x, x], "float32", stream) == 1 else "not 1")
    tally.case("an unsupported dtype is kUnsupportedDtype (2)",
               lambda: None if _call(lib, "opgen_ops_relu_forward", [x, x], "int8", stream) == 2 else "not 2")
    return tally.result()


def _package(pkg_dir: Path) -> Any:
    sys.path.insert(0, str(pkg_dir.parent))
    return importlib.import_module(pkg_dir.name)


def torch_extra(pkg_dir: Path) -> int:
    """opcheck, compile, export, CUDA graphs, mixed devices, backward device: on CUDA tensors."""
    import torch

    ops = _package(pkg_dir)
    ns = getattr(torch.ops, pkg_dir.name)
    tally = _Tally("torch-extra")
    dev = torch.device("cuda")
    g = torch.Generator(device="cpu").manual_seed(1)

    def rnd(*shape: int, dtype: Any = torch.float32) -> Any:
        return (torch.rand(shape, generator=g) * 2 - 1).to(dtype).to(dev)

    samples: dict[str, Callable[[], tuple[Any, ...]]] = {
        "add": lambda: (rnd(64, 33), rnd(33)),
        "mul": lambda: (rnd(8, 16), rnd(8, 16)),
        "relu": lambda: (rnd(1000),),
        "gelu": lambda: (rnd(7, 9),),
        "sigmoid": lambda: (rnd(3, 5, dtype=torch.float16),),
        "tanh": lambda: (rnd(3, 5, dtype=torch.bfloat16),),
    }
    for name, make in samples.items():
        if not hasattr(ops, name):
            continue
        fn = getattr(ops, name)

        def opcheck(name: str = name, make: Callable[[], tuple[Any, ...]] = make) -> str | None:
            args = [a.requires_grad_(a.is_floating_point()) for a in make()]
            torch.library.opcheck(getattr(ns, name).default, tuple(args))
            return None

        def compiled(fn: Any = fn, make: Callable[[], tuple[Any, ...]] = make) -> str | None:
            args = make()
            want = fn(*args)
            got = torch.compile(fn, fullgraph=True, dynamic=True)(*args)
            return None if torch.equal(want, got) else "compiled differs from eager"

        def exported(fn: Any = fn, make: Callable[[], tuple[Any, ...]] = make) -> str | None:
            args = make()

            class M(torch.nn.Module):
                def forward(self, *xs: Any) -> Any:
                    return fn(*xs)

            ep = torch.export.export(M(), args)
            return None if torch.equal(ep.module()(*args), fn(*args)) else "exported differs from eager"

        def graph(fn: Any = fn, make: Callable[[], tuple[Any, ...]] = make) -> str | None:
            args = make()
            fn(*args)  # warm up (library loaded, allocator primed) outside the capture
            torch.cuda.synchronize()
            cg = torch.cuda.CUDAGraph()
            with torch.cuda.graph(cg):
                out = fn(*args)
            for a in args:
                a.copy_(torch.rand_like(a.float()).to(a.dtype))
            cg.replay()
            torch.cuda.synchronize()
            return None if torch.equal(out, fn(*args)) else "the replayed graph differs from eager"

        def backward(fn: Any = fn, make: Callable[[], tuple[Any, ...]] = make) -> str | None:
            args = [a.requires_grad_(a.is_floating_point()) for a in make()]
            out = fn(*args)
            out.backward(torch.ones_like(out))
            bad = [a.grad.device for a in args if a.grad is not None and a.grad.device != dev]
            return f"gradients on {bad}" if bad else None

        for what, check in (("opcheck", opcheck), ("compile", compiled), ("export", exported),
                            ("cuda graph", graph), ("backward device", backward)):
            tally.case(f"{name} {what}", check)

    def mixed() -> str | None:
        try:
            ops.add(rnd(4), torch.ones(4))
        except (ValueError, TypeError) as exc:
            return None if "add()" in str(exc) else f"the error names no op: {exc}"
        return "a CUDA and a CPU tensor were accepted"

    tally.case("mixed devices are the op's error", mixed)
    return tally.result()


def sanitize(pkg_dir: Path) -> int:
    """A few ops forward and backward on CUDA (for compute-sanitizer memcheck)."""
    import torch

    ops = _package(pkg_dir)
    tally = _Tally("sanitize")
    cases = (("add", ((5, 7), (7,))), ("relu", ((1001,),)), ("gelu", ((3, 4, 5),)), ("mul", ((2, 3), (2, 3))))
    for name, args in cases:
        if not hasattr(ops, name):
            continue

        def run(name: str = name, args: tuple[tuple[int, ...], ...] = args) -> str | None:
            xs = [torch.randn(s, device="cuda", requires_grad=True) for s in args]
            out = getattr(ops, name)(*xs)
            out.sum().backward()
            torch.cuda.synchronize()
            return None

        tally.case(f"{name} forward+backward", run)
    return tally.result()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("ms-abi")
    a.add_argument("gen", type=Path, help="the output folder of 'opgen generate' (holds opgen_ops/)")
    a.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    for name in ("torch-extra", "sanitize"):
        s = sub.add_parser(name)
        s.add_argument("pkg", type=Path, help="the generated PyTorch package (…/opgen_ops_torch)")
    args = p.parse_args(argv)
    if args.cmd == "ms-abi":
        return ms_abi(args.gen.resolve(), args.device)
    if args.cmd == "torch-extra":
        return torch_extra(args.pkg.resolve())
    return sanitize(args.pkg.resolve())


if __name__ == "__main__":
    sys.exit(main())
