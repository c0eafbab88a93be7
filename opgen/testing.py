"""``opgen test``: check every op of a generated package against its numpy reference, by
central finite differences and by its dtype claims, on every path it is generated for.

Checks, per op and per attr set (the spec's optional ``test.attrs``; default: the defaults):

- ``reference``: the package has a numpy reference for the op, giving the output shapes the
  shape rules say; where it also has reference gradients (elementwise ops), they match central
  differences of the reference forward.
- ``forward/<path>``: every dtype_format row of the backend's target, on random shapes of every *style* the
  op's shape rules allow (plain, broadcasting, 0-d, empty): output count, dtype, shape, and
  values against the numpy reference (computed in float64 from the same values).
- ``grad/<path>``: for ``loss = sum_k sum(out_k * w_k)`` (random ``w``, every differentiable
  output), the gradient of every differentiable input against central differences of the
  same path's forward (float64 row, step 1e-6; the widest float row when there is no
  float64 one), then every other float row against those float64 gradients.
- ``dtypes/<path>``: inputs of a dtype combination outside the rows (one dtype for all
  inputs; for ops with several inputs also a mix of two declared rows) raise ``TypeError``
  naming the op.
- ``contracts/<path>``: for each contract (``requires``) that reads a shape, a call with
  shapes that break it raises ``ValueError`` naming the op and the contract.

Paths are the backend's (:attr:`opgen.backends.Backend.test_paths`; its
:meth:`~opgen.backends.Backend.test_package` runs them through an :class:`OpRunner`). MindSpore's
(:data:`PATHS`, :mod:`opgen.backends.mindspore.testing`): ``custom-graph`` (the ``ops.Custom``
aot path in GRAPH_MODE, through ``<op>_primitive``), ``custom-pynative`` (the same in PyNative,
through ``<op>(...)``) and ``function`` (the ``Function<T>`` path, PyNative only; importing it
builds the extension). This module imports no framework.

Errors are measured as ``max |got - want| / max(1, |want|)`` over the elements (absolute for
small values, relative for large ones; NaN where both are NaN and equal infinities count as
equal); :data:`TOLERANCES` gives the bound per dtype. Everything random comes from
``numpy.random.default_rng`` seeded from ``seed``, the op name, the check and the attr set,
so a run is reproducible and one check's cases do not depend on which others ran.

Shapes are drawn from the op's shape expressions and contracts (:func:`shape_cases`): each
shape function of :mod:`opgen.shapes.functions` knows how to draw its own inputs. The sampler
(shapes and values) is :mod:`opgen.sampling`; its names used here are re-exported.
"""

from __future__ import annotations

import abc
import fnmatch
import functools
import hashlib
import importlib
import importlib.util
import math
import re
import shlex
import sys
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, ClassVar

import numpy as np

from . import backends, runtime
from .diagnostics import Diagnostic, SpecError
from .model import DEFAULT_DOMAIN, Op, TestSettings
from .sampling import BFLOAT16 as BFLOAT16
from .sampling import Array as Array
from .sampling import Case as Case
from .sampling import CheckError as CheckError
from .sampling import NotApplicable as NotApplicable
from .sampling import as_dtype as as_dtype
from .sampling import attrs_text, seed_sequence
from .sampling import draw_values as draw_values
from .sampling import dtype_name as dtype_name
from .sampling import is_float as is_float
from .sampling import precision as precision
from .sampling import round_bfloat16 as round_bfloat16
from .sampling import shape_cases as shape_cases
from .sampling import violating_cases as violating_cases

KINDS: tuple[str, ...] = ("forward", "grad", "dtypes", "contracts")
"""The checks that run on each path of a backend (``reference`` runs once)."""


def checks_for(paths: Sequence[str]) -> tuple[str, ...]:
    """Every check over ``paths``, in table order: ``reference``, then ``<kind>/<path>``."""
    return ("reference",) + tuple(f"{kind}/{path}" for kind in KINDS for path in paths)


PATHS: tuple[str, ...] = tuple(backends.get(backends.DEFAULT).test_paths)
"""The default backend's paths (MindSpore: ``custom-graph``, ``custom-pynative``, ``function``)."""

CHECKS: tuple[str, ...] = checks_for(PATHS)
"""The default backend's checks, in table order: ``reference``, then ``<kind>/<path>``."""

_SHORT = {
    "reference": "ref",
    "forward": "fwd",
    "grad": "grad",
    "dtypes": "dtype",
    "contracts": "req",
}


# ----------------------------------------------------------------------------- tolerances


@dataclass(frozen=True)
class Tolerance:
    """Error bounds for one dtype (errors as in the module docstring).

    Attributes:
        forward: output against the float64 numpy reference.
        grad: gradient in this dtype against the float64 gradient of the same path.
        fd_step: central-difference step when this is the widest float row of an op.
        fd: gradient against central differences taken in this dtype.
    """

    forward: float
    grad: float = 0.0
    fd_step: float = 0.0
    fd: float = 0.0


TOLERANCES: dict[str, Tolerance] = {
    "float64": Tolerance(forward=1e-10, grad=1e-10, fd_step=1e-6, fd=1e-6),
    "float32": Tolerance(forward=1e-5, grad=1e-4, fd_step=1e-3, fd=1e-2),
    "float16": Tolerance(forward=2e-3, grad=1e-2, fd_step=1e-2, fd=1e-1),
    # bfloat16's eps is 2^-8 = 3.9e-3, four times float16's (2^-10): the same multiples of it
    "bfloat16": Tolerance(forward=8e-3, grad=4e-2, fd_step=4e-2, fd=4e-1),
}
"""Per float dtype; integer and bool outputs must match exactly."""

_EXACT = Tolerance(forward=0.0)


def tolerance(dtype: str) -> Tolerance:
    """The :class:`Tolerance` of a dtype name (exact for integer and bool dtypes)."""
    return TOLERANCES.get(dtype, _EXACT)


def _loosest(row: Sequence[str], columns: Sequence[int]) -> Tolerance:
    """The :class:`Tolerance` of the least precise float dtype among ``row``'s ``columns`` (inputs
    then outputs): a gradient through f32 inputs and an f16 output is as exact as f16."""
    floats = [row[c] for c in columns if row[c] in TOLERANCES]
    if not floats:
        return _EXACT
    return tolerance(min(floats, key=precision))


# ----------------------------------------------------------------------------- test settings

OpTestSettings = TestSettings
"""The spec's ``test`` section, parsed and checked with the rest of the spec (:class:`opgen.model.TestSettings`)."""


def read_settings(op: Op) -> OpTestSettings:
    """The ``test`` section of ``op``'s spec, as the model holds it (``opgen validate`` checked it).

    Raises:
        SpecError: an attr without a default and no ``test.attrs`` to give its value.
    """
    missing = [a.name for a in op.attrs if any(a.name not in s for s in op.test.attr_sets)]
    if missing:
        raise SpecError([Diagnostic(op.location, f"attr(s) {', '.join(repr(n) for n in missing)} have no default; "
                                    "give their values in every entry of test.attrs", op.name)])
    return op.test


# ----------------------------------------------------------------------------- cases


def group(op: Op, flat: Sequence[Any], layout: Sequence[int]) -> list[Any]:
    """Flat per-tensor values back to one argument per input: the value, ``None`` for an
    optional input left out, a list for a dynamic input."""
    return runtime.regroup(flat, [x.kind for x in op.inputs], layout)


# ----------------------------------------------------------------------------- packages


class OpRunner(abc.ABC):
    """Runs one op on one path of a backend with fixed attr values, through its functional API
    (as a user calls it: dtype and attr checks included): forward and gradients, numpy in and
    out. Tensors are passed flat, one per slot of ``layout`` (see :class:`Case`). A backend's
    :meth:`Package.runner` makes them; the checks here only call these methods."""

    grad_api: ClassVar[str] = "grad"
    """How failure messages name the framework's gradient call (``ms.grad``)."""

    def __init__(self, op: Op, path: str, attrs: Mapping[str, Any]):
        self.op = op
        self.path = path
        self.attrs = dict(attrs)
        self.kinds = tuple(x.kind for x in op.inputs)
        self.diff_in = tuple(i for i, x in enumerate(op.inputs) if x.differentiable)
        self.diff_out = tuple(k for k, o in enumerate(op.outputs) if o.differentiable)

    def diff_slots(self, case: Case) -> tuple[int, ...]:
        """The slots of ``case`` that belong to differentiable inputs."""
        return tuple(j for j, i in enumerate(case.slots) if i in self.diff_in)

    @abc.abstractmethod
    def forward(self, arrays: Sequence[Array], layout: Sequence[int]) -> list[Array]:
        """The op's outputs (numpy) for the flat ``arrays``.

        Raises:
            Exception: whatever the op raises (the checks report it; ``TypeError`` and
                ``ValueError`` naming the op are what ``dtypes`` and ``contracts`` expect).
        """

    @abc.abstractmethod
    def grads(self, arrays: Sequence[Array], weights: Sequence[Array], layout: Sequence[int],
              positions: Sequence[int]) -> list[Array]:
        """Gradients (numpy) of ``sum_k sum(out_k * weights[k])`` over :attr:`diff_out` for the
        flat slots ``positions``, one per position, through the framework's autograd."""

    def finite_differences_runner(self) -> OpRunner:
        """The runner whose forward the gradient check differentiates numerically (itself; a
        graph path may answer its eager twin, which computes the same numbers faster)."""
        return self


class Package(abc.ABC):
    """A generated package under test, as its backend runs it: its numpy references and one
    :class:`OpRunner` per op and path. :func:`load_package` asks the package's backend
    (:meth:`opgen.backends.Backend.test_package`) for it."""

    paths: tuple[str, ...]
    """The backend's paths, in table order (each check but ``reference`` runs on each)."""
    device_paths: tuple[str, ...] = ()
    """The paths of its other devices' kernels (``opgen test --device``: torch's ``eager-cuda``...)."""
    target: str
    """The dtype_format target whose rows the package's kernels have."""
    float_attr: str = "float"
    """The C++ type its kernels hold a float attr in (:attr:`opgen.views.OpView.float_attr_cpp`):
    the references get the attr at that precision."""

    def __init__(self, module: str, directory: Path):
        self.module = module
        self.directory = directory
        self.reference: ModuleType = importlib.import_module(f"{module}.reference")

    @property
    def checks(self) -> tuple[str, ...]:
        """Every check of this package, in table order (:func:`checks_for` its paths)."""
        return checks_for(self.paths)

    def target_of(self, path: str) -> str:
        """The dtype_format target whose rows ``path`` runs: :attr:`target`, unless the path runs
        another device's kernels (torch's ``eager-cuda``: ``GPU``)."""
        return self.target

    @abc.abstractmethod
    def runner(self, op: Op, path: str, attrs: Mapping[str, Any]) -> OpRunner:
        """The runner of ``op`` on ``path`` (one of :attr:`paths`) with these attr values.

        Raises:
            CheckError: an unknown path, or a path that cannot run here (its library does not
                build or import: the message says why).
        """


def import_package(pkg_dir: Path) -> str:
    """Import the generated package in ``pkg_dir`` (reusing it when already imported under any
    name, e.g. ``generated.opgen_ops``) and return its module name; its modules' imports may build
    its libraries.

    Raises:
        opgen.build.BuildError: a library does not compile.
        FileNotFoundError: ``pkg_dir`` has no ``__init__.py``.
    """
    pkg_dir = pkg_dir.resolve()
    init = pkg_dir / "__init__.py"
    if not init.is_file():
        raise FileNotFoundError(f"{pkg_dir} is not a generated package (no __init__.py)")
    for name, mod in list(sys.modules.items()):
        f = getattr(mod, "__file__", None)
        if f and Path(f).resolve() == init:
            return name
    name = pkg_dir.name
    if name in sys.modules:
        name = f"_opgen_test_{hashlib.sha256(str(pkg_dir).encode()).hexdigest()[:10]}"
    spec = importlib.util.spec_from_file_location(name, init, submodule_search_locations=[str(pkg_dir)])
    if spec is None or spec.loader is None:  # pragma: no cover - importlib contract
        raise ImportError(f"cannot import {init}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return name


def load_package(pkg_dir: Path) -> Package:
    """The generated package in ``pkg_dir``, imported, as its backend tests it (importing builds
    its libraries when stale).

    Raises:
        opgen.build.BuildError: the kernels do not compile.
        FileNotFoundError: ``pkg_dir`` holds no generated package.
    """
    backend = backends.of_package(pkg_dir.resolve())
    if backend is None:
        raise FileNotFoundError(f"{pkg_dir.resolve()} is not a generated package (not one of "
                                f"{', '.join(backends.names())})")
    return backend.test_package(pkg_dir)


class StalePackage(Exception):
    """An explicitly named package that is not what its specs generate today."""


DEFAULT_PACKAGE_DIR = Path("generated") / "opgen_ops"


_GENERATED_FROM = re.compile(r"// @generated by opgen from (.*) -- do not edit")


def package_ops(pkg_dir: Path) -> dict[str, str | None]:
    """The ops of the generated package ``pkg_dir`` and the spec each was generated from, as
    its kernel header records it (relative to where ``opgen generate`` ran; None if unreadable)."""
    found: dict[str, str | None] = {}
    for header in sorted((pkg_dir / "csrc").glob("*_kernel.h")):
        try:
            with header.open(encoding="utf-8") as f:
                first = f.readline().rstrip("\n")
        except (OSError, UnicodeDecodeError):
            first = ""
        match = _GENERATED_FROM.fullmatch(first)
        found[header.name[: -len("_kernel.h")]] = match.group(1) if match else None
    return found


def package_for(paths: Sequence[str | Path], package_dir: Path | None = None, *,
                quiet: bool = False, default_dir: Path = DEFAULT_PACKAGE_DIR,
                backend: str | None = None) -> tuple[Path, str]:
    """The generated package to test the specs under ``paths`` with, and a note saying which.

    - ``package_dir`` given: it, when it holds exactly what the specs generate today.
    - else ``default_dir`` (``generated/opgen_ops`` relative to the cwd, or the package
      ``[tool.opgen]`` names) when it does;
    - else a package generated now into ``<build root>/test/opgen_test_<hash><suffix>`` (the hash is
      of the spec paths, so a later run reuses it and its build incrementally).

    ``backend``: the framework the package is for (default MindSpore); a package directory's
    name is the package name plus the backend's suffix (``opgen_ops_torch``).

    Raises:
        StalePackage: ``package_dir`` differs from what the specs generate.
        SpecError: a spec has errors (callers validate first; this is a safety net).
    """
    from . import build, pipeline

    chosen = backends.get(backend or backends.DEFAULT)
    suffix = chosen.package_suffix

    def package_name(d: Path) -> str:
        return d.name[: len(d.name) - len(suffix)] if suffix and d.name.endswith(suffix) else d.name

    def target_args(d: Path) -> list[str]:  # opgen generate's options that write d
        chosen_arg = [] if chosen.name == backends.DEFAULT else ["--backend", chosen.name]
        return ["-o", str(d.parent), "-p", package_name(d), *chosen_arg]

    def up_to_date(d: Path, specs: Sequence[str | Path] = paths) -> bool:
        name = package_name(d)
        if chosen.package_dir(d.parent, name) != d:
            return False  # not a directory this backend writes (opgen_ops for torch)
        res = pipeline.generate(list(specs), d.parent, name, check_only=True, backend=chosen.name)
        if res.diagnostics:
            raise SpecError(res.diagnostics)
        return res.write is not None and not res.write.changed

    if package_dir is not None:
        if up_to_date(package_dir):
            return package_dir, f"testing {package_dir}"
        given = {op.name for op in pipeline.load_ops(paths)[0]}
        others = {op: spec for op, spec in package_ops(package_dir).items() if op not in given}
        lost = sorted(op for op, spec in others.items() if spec is None or not Path(spec).is_file())
        every = list(paths) + sorted({spec for spec in others.values() if spec is not None} - set(map(str, paths)))
        if others and not lost and up_to_date(package_dir, every):
            return package_dir, f"testing {package_dir} (up to date with the specs of all its ops)"
        command = shlex.join(["opgen", "generate", *map(str, every), *target_args(package_dir)])
        if not lost:  # the command regenerates every op the package holds: nothing is lost
            whose = f"the specs of all its ops ({', '.join(map(str, every))})" if others else ", ".join(map(str, every))
            raise StalePackage(f"{package_dir} is not what {whose} generate today; run '{command}' first")
        raise StalePackage(
            f"{package_dir} is not what {', '.join(map(str, paths))} generate today, and it also holds "
            f"op(s) {', '.join(lost)} whose spec is not found from here ("
            + ", ".join(f"{op}: {others[op] or 'not recorded'}" for op in lost)
            + "); regenerating it from these specs alone would delete them. Regenerate it from the specs of "
            f"all its ops ('opgen generate SPECS... {shlex.join(target_args(package_dir))}', run where "
            "they were generated), or test without --package-dir (a package is generated for the test)")
    if default_dir.is_dir() and up_to_date(default_dir):
        return default_dir, f"testing {default_dir} (up to date with the specs)"
    specs = sorted(str(Path(p).resolve()) for p in paths)
    tag = hashlib.sha256("\0".join(specs).encode()).hexdigest()[:10]
    name = f"opgen_test_{tag}"
    out = build.build_root() / "test"
    res = pipeline.generate(list(paths), out, name, backend=chosen.name)
    if res.diagnostics:
        raise SpecError(res.diagnostics)
    return res.package_dir, f"testing a package generated into {res.package_dir}"


# ----------------------------------------------------------------------------- running ops


def _central_differences(forward: Callable[[Sequence[Array]], list[Array]], arrays: Sequence[Array],
                         weights: Sequence[Array], positions: Sequence[int], diff_out: Sequence[int],
                         step: float) -> list[Array]:
    """Central differences of ``sum_k sum(forward(arrays)[diff_out[k]] * weights[k])`` with
    respect to each array in ``positions``, in the arrays' own dtype (float64 results)."""

    def loss(arrs: Sequence[Array]) -> float:
        outs = forward(arrs)
        return math.fsum(float(np.sum(outs[k].astype(np.float64) * w.astype(np.float64)))
                         for k, w in zip(diff_out, weights))

    grads = []
    for p in positions:
        base = arrays[p]
        g = np.zeros(base.shape, np.float64)
        for j in range(base.size):
            plus, minus = base.copy(), base.copy()
            plus.flat[j] = base.flat[j] + step
            minus.flat[j] = base.flat[j] - step
            if dtype_name(base) == "bfloat16":  # float32 storage: round the step as the dtype does
                plus, minus = round_bfloat16(plus), round_bfloat16(minus)
            h = float(plus.flat[j]) - float(minus.flat[j])  # the step the dtype really took
            arrs = list(arrays)
            arrs[p] = plus
            up = loss(arrs)
            arrs[p] = minus
            g.flat[j] = (up - loss(arrs)) / h
        grads.append(g)
    return grads


# ----------------------------------------------------------------------------- results


@dataclass
class Result:
    """Outcome of one check of one op.

    Attributes:
        status: ``pass``, ``fail``, ``spec`` (no check failed, but the kernel rejected drawn
            cases with its own error: a problem of the spec, see :func:`kernel_rejection`) or
            ``n/a`` (nothing to check, e.g. no gradient).
        worst: the worst error seen over every comparison (``None`` when none was numeric).
        comparisons: how many arrays were compared (or calls checked).
        messages: why it failed (the first few problems, then the spec problems) or why it is ``n/a``.
        seconds: wall time of the check.
        spec_problems: how many drawn cases the kernel rejected with its own error.
    """

    op: str
    check: str
    status: str
    worst: float | None = None
    comparisons: int = 0
    messages: list[str] = field(default_factory=list)
    seconds: float = 0.0
    spec_problems: int = 0

    @property
    def cell(self) -> str:
        """The table cell: ``ok 3e-07``, ``FAIL 2e-02``, ``FAIL``, ``SPEC`` or ``-``."""
        if self.status == "n/a":
            return "-"
        if self.status == "spec":
            return "SPEC"
        word = "ok" if self.status == "pass" else "FAIL"
        return f"{word} {self.worst:.0e}" if self.worst is not None else word


MAX_MESSAGES = 5
"""Problems kept per check (the count of the rest is reported)."""


class _Tally:
    def __init__(self) -> None:
        self.worst: float | None = None
        self.problems: list[str] = []
        self.n_problems = 0
        self.spec: list[str] = []
        self.n_spec = 0
        self.comparisons = 0
        self.context = ""

    def fail(self, message: str) -> None:
        self.n_problems += 1
        if len(self.problems) < MAX_MESSAGES:
            self.problems.append(f"{self.context}: {message}" if self.context else message)

    def raised(self, op: Op, exc: BaseException, what: str = "") -> None:
        """A call of the op raised ``exc`` on a drawn case: a spec problem when the kernel rejected
        the case with its own error (:func:`kernel_rejection`), else a failure."""
        rejected = kernel_rejection(exc, op.name)
        if rejected is None:
            self.fail(f"{what}raised {_first_line(exc)}")
            return
        self.n_spec += 1
        if len(self.spec) < MAX_MESSAGES:
            self.spec.append(f"spec problem: {self.context}: the kernel rejected this case: {rejected!r}")

    def compare(self, what: str, got: Array, want: Array, tol: float) -> None:
        """Compare arrays; records the error, and a problem when shapes differ or it is > tol."""
        self.comparisons += 1
        got, want = np.asarray(got), np.asarray(want)
        if got.shape != want.shape:
            self.fail(f"{what}: shape {got.shape}, expected {want.shape}")
            return
        if got.size == 0:
            self.worst = max(self.worst or 0.0, 0.0)
            return
        g, w = got.astype(np.float64), want.astype(np.float64)
        with np.errstate(all="ignore"):
            same = (g == w) | (np.isnan(g) & np.isnan(w))
            err = np.where(same, 0.0, np.abs(g - w) / np.maximum(1.0, np.abs(w)))
        err = np.nan_to_num(err, nan=np.inf)
        idx = int(np.argmax(err))
        worst = float(err.flat[idx])
        self.worst = max(self.worst or 0.0, worst)
        if worst > tol:
            where = np.unravel_index(idx, err.shape) if err.ndim else ()
            self.fail(f"{what}: error {worst:.2e} > {tol:.0e} at {tuple(int(i) for i in where)}: "
                      f"got {g.flat[idx]!r}, expected {w.flat[idx]!r}")

    def result(self, op: str, check: str, seconds: float) -> Result:
        msgs = list(self.problems)
        if self.n_problems > len(msgs):
            msgs.append(f"... and {self.n_problems - len(msgs)} more")
        msgs += self.spec
        if self.n_spec > len(self.spec):
            msgs.append(f"... and {self.n_spec - len(self.spec)} more case(s) the kernel rejected")
        if self.n_spec:
            msgs.append(SPEC_ADVICE)
        status = "fail" if self.n_problems else "spec" if self.n_spec else "pass"
        return Result(op, check, status, self.worst, self.comparisons, msgs, seconds, self.n_spec)


SPEC_ADVICE = ("the spec says the op takes these cases, its kernel does not: a check of shapes or attrs belongs in "
               "the spec's requires: (then opgen test draws only cases that meet it, and every path raises before "
               "any kernel runs); a check of values, in a narrower test.domain")
"""What the messages of a check with spec problems end with."""


def kernel_rejection(exc: BaseException, op: str) -> str | None:
    """The message of a kernel that rejected its inputs with its own error (a body's
    ``throw opgen::Error(...)``: ``ValueError: <op>(): <message>``, in GRAPH_MODE MindSpore's
    ``RuntimeError`` ending with that text), or None for any other error: a contract's
    ``ValueError`` (``contract '...' does not hold``), checked mode's out-of-bounds error (a bug of
    the kernel, not of the spec), a ``TypeError``, or an error that does not come from the op."""
    if not isinstance(exc, (ValueError, RuntimeError)):
        return None
    text = str(exc)
    m = re.search(rf"(?<![A-Za-z0-9_]){re.escape(op)}\(\): (.*)", text)
    if m is None:
        return None
    message = m.group(1).strip()
    if (message.startswith(("contract '", "checked mode:", "attr '", "out of memory"))
            or message == "" or "is out of bounds for view" in message):
        return None
    return message


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"


# ----------------------------------------------------------------------------- checks


def _row_dtypes(op: Op, target: str) -> list[list[str]]:
    """The element type names of each dtype_format row of ``target``, inputs then outputs."""
    return [[r.dtype(i).name for i in range(len(r.columns))] for r in op.rows_for(target)]


def _path_rows(pkg: Package, op: Op, path: str) -> list[list[str]]:
    """The element type names of each row ``path`` runs (:func:`_row_dtypes` of its target).

    Raises:
        NotApplicable: the op has no rows for that target (a CPU-only op on a CUDA path).
    """
    rows = _row_dtypes(op, pkg.target_of(path))
    if not rows:
        raise NotApplicable(f"no {pkg.target_of(path)} rows in dtype_format")
    return rows


def _ref_attrs(op: Op, attrs: Mapping[str, Any], float_attr: str = "float") -> dict[str, Any]:
    """Attr values as the kernels see them: float attrs are float32 in MindSpore's C++ (AotExtra),
    doubles in PyTorch's (``float_attr``: :attr:`Package.float_attr`)."""
    out = dict(attrs)
    if float_attr == "double":
        return out
    for a in op.attrs:
        if a.type == "float":
            out[a.name] = float(np.float32(attrs[a.name]))
        elif a.type == "list[float]":
            out[a.name] = [float(np.float32(v)) for v in attrs[a.name]]
        elif a.type == "list[list[float]]":
            out[a.name] = [[float(np.float32(v)) for v in r] for r in attrs[a.name]]
    return out


def _as_outputs(result: Any, n: int) -> list[Array]:
    if n == 0:
        return []
    if n == 1:
        return [np.asarray(result)]
    return [np.asarray(r) for r in result]


def written_slots(op: Op, layout: Sequence[int]) -> list[tuple[int, int]]:
    """The inputs the op writes in place and returns not (``writes: true``), as (input index,
    flat slot): what a forward check compares after a call, beside the outputs, in input order
    (such an input is a required one: one slot)."""
    return [(i, sum(layout[:i])) for i, x in enumerate(op.inputs) if x.writes]


def compared(op: Op) -> list[tuple[str, int]]:
    """What a forward check compares: each output, then each ``writes: true`` input after the
    call, as (name, dtype_format column)."""
    n_in = len(op.inputs)
    return ([(o.name, n_in + k) for k, o in enumerate(op.outputs)]
            + [(f"{x.name} (written in place)", i) for i, x in enumerate(op.inputs) if x.writes])


def _reference_forward(pkg: Package, op: Op, attrs: Mapping[str, Any],
                       layout: Sequence[int]) -> Callable[[Sequence[Array]], list[Array]]:
    """The numpy reference on flat arrays of ``layout`` (float arrays computed in float64)."""
    ref = getattr(pkg.reference, op.name, None)
    if ref is None:
        raise CheckError(f"no numpy reference for '{op.name}' in {pkg.module}.reference; "
                         "give the spec a 'reference' body")
    kw = _ref_attrs(op, attrs, pkg.float_attr)

    def run(arrays: Sequence[Array]) -> list[Array]:
        # copies: a reference writes an input the op writes in place ('writes: true') in place
        args = [a.astype(np.float64) if a.dtype.kind == "f" else a.copy() for a in arrays]
        with np.errstate(all="ignore"):
            outs = _as_outputs(ref(*group(op, args, layout), **kw), len(op.outputs))
        return outs + [args[slot] for _, slot in written_slots(op, layout)]

    return run


def _draw(rng: np.random.Generator, op: Op, case: Case, dtypes: Sequence[str],
          settings: OpTestSettings) -> list[Array]:
    """Random values for every slot of ``case``; ``dtypes`` is per input."""
    return [draw_values(rng, shape, dtypes[i], case.domain(op.inputs[i].name, settings))
            for i, shape in zip(case.slots, case.slot_shapes)]


def _grad_rows(op: Op, target: str) -> tuple[list[str] | None, list[list[str]]]:
    """The row gradients are checked by finite differences in (float64, else the widest float
    row) and the other rows whose differentiable inputs are all float."""
    diff = [i for i, x in enumerate(op.inputs) if x.differentiable]
    rows = [r for r in _row_dtypes(op, target) if diff and all(is_float(r[i]) for i in diff)]
    if not rows:
        return None, []
    main = max(rows, key=lambda r: max(precision(r[i]) for i in diff))
    return main, [r for r in rows if r != main]


def _check_reference(pkg: Package, op: Op, attrs: Mapping[str, Any], settings: OpTestSettings,
                     rng: np.random.Generator, tally: _Tally) -> None:
    f64 = ["float64" if is_float(d) else d for d in _row_dtypes(op, pkg.target)[0]]
    for case in shape_cases(op, attrs, rng, settings):  # the reference follows the shape rules
        tally.context = f"reference forward, {case.describe()}"
        tally.comparisons += 1
        arrays = _draw(rng, op, case, f64, settings)
        try:
            outs = _reference_forward(pkg, op, attrs, case.layout)(arrays)
        except CheckError:
            raise
        except Exception as exc:
            tally.fail(f"raised {_first_line(exc)}")
            continue
        for o, got, want in zip(op.outputs, outs, case.out_shapes):
            if got.shape != want:
                tally.fail(f"{o.name}: shape {got.shape}, expected {want} (shape rule {o.shape.text})")
    ref_grad = getattr(pkg.reference, f"{op.name}_grad", None)
    if ref_grad is None:
        return
    diff_in = [i for i, x in enumerate(op.inputs) if x.differentiable]
    diff_out = [k for k, o in enumerate(op.outputs) if o.differentiable]
    kw = _ref_attrs(op, attrs, pkg.float_attr)
    for case in shape_cases(op, attrs, rng, settings):
        tally.context = f"reference grads, {case.describe()}"
        arrays = _draw(rng, op, case, f64, settings)
        weights = [rng.uniform(-1, 1, case.out_shapes[k]) for k in diff_out]
        forward = _reference_forward(pkg, op, attrs, case.layout)
        outs = forward(arrays)
        args: dict[str, Any] = {x.name: a for x, a in zip(op.inputs, group(op, arrays, case.layout))}
        args.update({o.name: v for o, v in zip(op.outputs, outs)})
        args.update({o.grad_name: (weights[diff_out.index(k)] if k in diff_out else np.zeros_like(outs[k]))
                     for k, o in enumerate(op.outputs)})
        args.update(kw)
        with np.errstate(all="ignore"):
            got = list(ref_grad(**args))
        slots = [j for j, i in enumerate(case.slots) if i in diff_in]
        fd = _central_differences(forward, arrays, weights, slots, diff_out, TOLERANCES["float64"].fd_step)
        for j, g in zip(slots, fd):
            tally.compare(f"d{op.inputs[case.slots[j]].name}", got[case.slots[j]], g, TOLERANCES["float64"].fd)


REDRAWS = 8
"""How many times :func:`_telling_values` draws a forward case's values at most."""


def _telling_values(rng: np.random.Generator, op: Op, case: Case, row: Sequence[str], settings: OpTestSettings,
                    reference: Callable[[Sequence[Array]], list[Array]]) -> tuple[list[Array], list[Array] | None]:
    """Values for a forward case, and the reference's outputs for them (None when the reference
    raised: the check calls it again after the op, as for any case). Values are drawn again (up to
    :data:`REDRAWS` times) while an output the check compares, not empty, would be all zeros: an
    integer row draws few distinct values (-2..2 by default), and a kernel that writes zeros then
    passed every case of a check whose draws happened to want zeros (issue 32: an int32 row the body
    did not handle passed ``forward/compiled`` and failed ``forward/eager``, whose cases differ)."""
    for _ in range(REDRAWS):
        arrays = _draw(rng, op, case, row, settings)
        try:
            want = reference(arrays)
        except Exception:
            return arrays, None
        if not any(w.size and not np.any(w) for w in want):
            break
    return arrays, want


def _check_forward(pkg: Package, op: Op, path: str, attrs: Mapping[str, Any], settings: OpTestSettings,
                   rng: np.random.Generator, tally: _Tally) -> None:
    rows = _path_rows(pkg, op, path)
    runner = pkg.runner(op, path, attrs)
    names = [x.name for x in op.inputs] + [o.name for o in op.outputs]
    checked = compared(op)
    for row in rows:
        row_text = ", ".join(f"{n}={d}" for n, d in zip(names, row))
        for case in shape_cases(op, attrs, rng, settings):
            tally.context = f"({row_text}) {case.describe()}{attrs_text(attrs)}"
            reference = _reference_forward(pkg, op, attrs, case.layout)
            arrays, want = _telling_values(rng, op, case, row, settings, reference)
            try:
                outs = runner.forward(arrays, case.layout)
            except Exception as exc:
                tally.comparisons += 1
                tally.raised(op, exc)
                continue
            if want is None:
                want = reference(arrays)
            if len(outs) != len(checked):
                tally.fail(f"returned {len(outs)} outputs, expected {len(op.outputs)}")
                continue
            for k, (name, column) in enumerate(checked):
                dtype = row[column]
                if dtype_name(outs[k]) != dtype:
                    tally.fail(f"{name}: dtype {dtype_name(outs[k])}, expected {dtype}")
                if k < len(op.outputs) and outs[k].shape != case.out_shapes[k]:
                    tally.fail(f"{name}: shape {outs[k].shape}, expected {case.out_shapes[k]} "
                               f"(shape rule {op.outputs[k].shape.text})")
                    continue
                tally.compare(name, outs[k], want[k], tolerance(dtype).forward)


def _check_grad(pkg: Package, op: Op, path: str, attrs: Mapping[str, Any], settings: OpTestSettings,
                rng: np.random.Generator, tally: _Tally) -> None:
    if op.has_effects:
        raise NotApplicable(f"writes {', '.join(x.name for x in op.written_inputs)} in place: no gradient (a "
                            "gradient through it is refused)")
    _path_rows(pkg, op, path)
    main, others = _grad_rows(op, pkg.target_of(path))
    runner = pkg.runner(op, path, attrs)
    if not runner.diff_in or not runner.diff_out:
        _check_no_grad(op, runner, _row_dtypes(op, pkg.target_of(path)), attrs, settings, rng, tally)
        return
    if main is None:
        raise NotApplicable("no differentiable input and output with a float row")
    fd_runner = runner.finite_differences_runner()
    n_in = len(op.inputs)
    # values representable in the narrowest float row, so every row sees the same numbers
    narrow = min((r[i] for r in [main, *others] for i in runner.diff_in), key=precision)
    # central differences see the rounding of every differentiable input and output: an f16 output of
    # f32 inputs is exact to f16's precision only, so the step and bound are f16's (issue 24)
    main_tol = _loosest(main, [*runner.diff_in, *(n_in + k for k in runner.diff_out)])
    for case in shape_cases(op, attrs, rng, settings):
        positions = runner.diff_slots(case)
        if not positions:
            continue  # e.g. every differentiable input is an optional one left out
        tally.context = f"{case.describe()}{attrs_text(attrs)}"
        draw_dtypes = [narrow if i in runner.diff_in else main[i] for i in range(n_in)]
        arrays = [as_dtype(a, main[i]) for a, i in zip(_draw(rng, op, case, draw_dtypes, settings), case.slots)]
        weights = [as_dtype(as_dtype(rng.uniform(-1, 1, case.out_shapes[k]), narrow), main[n_in + k])
                   for k in runner.diff_out]
        try:
            got = runner.grads(arrays, weights, case.layout, positions)
        except Exception as exc:
            tally.comparisons += 1
            tally.raised(op, exc, f"{runner.grad_api} ")
            continue
        fd = _central_differences(functools.partial(fd_runner.forward, layout=case.layout), arrays, weights,
                                  positions,
                                  runner.diff_out, main_tol.fd_step)
        for j, slot in enumerate(positions):
            i = case.slots[slot]
            name = op.inputs[i].name + (f"[{slot - case.slots.index(i)}]" if op.inputs[i].kind == "dynamic" else "")
            g = got[j] if j < len(got) else None
            if g is None:
                tally.fail(f"d{name}: missing")
                continue
            if dtype_name(g) != main[i]:
                tally.fail(f"d{name}: dtype {dtype_name(g)}, expected {main[i]}")
            tally.compare(f"d{name} ({main[i]}) vs central differences", g, fd[j], main_tol.fd)
        for row in others:
            arrs = [as_dtype(a, row[i]) for a, i in zip(arrays, case.slots)]
            ws = [as_dtype(w, row[n_in + k]) for w, k in zip(weights, runner.diff_out)]
            try:
                got_r = runner.grads(arrs, ws, case.layout, positions)
            except Exception as exc:
                tally.comparisons += 1
                tally.raised(op, exc, f"{runner.grad_api} ({', '.join(row[:n_in])}) ")
                continue
            for j, slot in enumerate(positions):
                i = case.slots[slot]
                if dtype_name(got_r[j]) != row[i]:
                    tally.fail(f"d{op.inputs[i].name}: dtype {dtype_name(got_r[j])}, expected {row[i]}")
                tally.compare(f"d{op.inputs[i].name} ({row[i]}) vs {main[i]}", got_r[j], got[j],
                              _loosest(row, [i, *(n_in + k for k in runner.diff_out)]).grad)


def _check_no_grad(op: Op, runner: OpRunner, rows: Sequence[Sequence[str]], attrs: Mapping[str, Any],
                   settings: OpTestSettings, rng: np.random.Generator, tally: _Tally) -> None:
    """An op no gradient flows through (no differentiable output or input): the framework's
    gradient (``ms.grad``) through it must work and give zeros for its float inputs, on every
    path (MindSpore's Custom path once had no bprop for it, then passed its output gradient on)."""
    n_in = len(op.inputs)
    row = next((r for r in rows if any(is_float(d) for d in r)), None)
    if row is None:
        raise NotApplicable("no float input or output")
    float_in = [i for i in range(n_in) if is_float(row[i])]
    runner.diff_out = tuple(k for k in range(len(op.outputs)) if is_float(row[n_in + k]))
    if not float_in or not runner.diff_out:
        raise NotApplicable("no float input and output")
    for case in shape_cases(op, attrs, rng, settings):
        positions = tuple(j for j, i in enumerate(case.slots) if i in float_in)
        if not positions:
            continue
        tally.context = f"{case.describe()}{attrs_text(attrs)} (no gradient flows through the op)"
        arrays = [as_dtype(a, row[i]) for a, i in zip(_draw(rng, op, case, list(row[:n_in]), settings), case.slots)]
        weights = [as_dtype(rng.uniform(-1, 1, case.out_shapes[k]), row[n_in + k]) for k in runner.diff_out]
        try:
            got = runner.grads(arrays, weights, case.layout, positions)
        except Exception as exc:
            tally.comparisons += 1
            tally.raised(op, exc, f"{runner.grad_api} ")
            continue
        for j, slot in enumerate(positions):
            i = case.slots[slot]
            tally.compare(f"d{op.inputs[i].name}, expected zeros", got[j], np.zeros(arrays[slot].shape),
                          tolerance(row[i]).grad)


_REJECT_CANDIDATES = ("float16", "int8", "uint8", "int16", "int32", "int64", "float32", "float64", "bool")


def bad_dtype_combinations(op: Op, target: str | None = None) -> list[tuple[str, ...]]:
    """Input dtype combinations outside the op's rows for ``target`` (default: the default
    backend's) that ``dtypes/*`` checks: every
    input of the first dtype of :data:`_REJECT_CANDIDATES` no row has, and, for ops with two
    or more inputs and rows, the first row with its first input's dtype taken from another
    row, when no row has that mix."""
    n = len(op.inputs)
    rows = [tuple(r[:n]) for r in _row_dtypes(op, target or backends.get(backends.DEFAULT).target)]
    out: list[tuple[str, ...]] = []
    for d in _REJECT_CANDIDATES:
        if (d,) * n not in rows:
            out.append((d,) * n)
            break
    if n >= 2:
        for other in rows[1:]:
            mix = (other[0],) + rows[0][1:]
            if mix not in rows:
                out.append(mix)
                break
    return out


def _check_dtypes(pkg: Package, op: Op, path: str, attrs: Mapping[str, Any], settings: OpTestSettings,
                  rng: np.random.Generator, tally: _Tally) -> None:
    _path_rows(pkg, op, path)
    runner = pkg.runner(op, path, attrs)
    cases = [c for c in shape_cases(op, attrs, rng, settings) if c.style == "plain"]
    if not cases:
        raise NotApplicable("no plain shape case")
    for combo in bad_dtype_combinations(op, pkg.target_of(path)):
        text = ", ".join(f"{x.name}={d}" for x, d in zip(op.inputs, combo))
        tally.context = f"({text}){attrs_text(attrs)}"
        tally.comparisons += 1
        arrays = []
        for i, shape in zip(cases[0].slots, cases[0].slot_shapes):
            x, d = op.inputs[i], combo[i]
            try:
                arrays.append(draw_values(rng, shape, d, cases[0].domain(x.name, settings)))
            except CheckError:  # e.g. no integer in a float domain: any value will do here
                arrays.append(draw_values(rng, shape, d, DEFAULT_DOMAIN))
        try:
            outs = runner.forward(arrays, cases[0].layout)
        except TypeError as exc:
            msg = str(exc)
            if not _names_op(msg, op.name):
                tally.fail(f"TypeError does not name the op '{op.name}': {_first_line(exc)}")
            continue
        except Exception as exc:
            tally.fail(f"raised {_first_line(exc)}; expected a TypeError naming '{op.name}'")
            continue
        got = ", ".join(str(o.dtype) for o in outs)
        tally.fail(f"accepted (returned {got}); expected a TypeError naming '{op.name}'")


def _check_contracts(pkg: Package, op: Op, path: str, attrs: Mapping[str, Any], settings: OpTestSettings,
                     rng: np.random.Generator, tally: _Tally) -> None:
    if not op.requires:
        raise NotApplicable("no contracts (requires)")
    bad = violating_cases(op, attrs, rng, settings)
    if not bad:
        return  # with these attrs; run_check says n/a when no attr set gives a case
    runner = pkg.runner(op, path, attrs)
    row = _path_rows(pkg, op, path)[0]
    for text, case in bad:
        tally.context = f"requires '{text}': {case.describe()}{attrs_text(attrs)}"
        tally.comparisons += 1
        arrays = _draw(rng, op, case, row, settings)
        try:
            outs = runner.forward(arrays, case.layout)
        except ValueError as exc:
            if not _names_op(str(exc), op.name) or "does not hold" not in str(exc):
                tally.fail(f"ValueError does not name the op and a contract: {_first_line(exc)}")
            continue
        except Exception as exc:
            tally.fail(f"raised {type(exc).__name__}: {_first_line(exc)}; expected a ValueError naming '{op.name}'")
            continue
        tally.fail(f"accepted shapes that break the contract (returned shapes {[o.shape for o in outs]})")


def _names_op(message: str, name: str) -> bool:
    import re

    return re.search(rf"(?<![A-Za-z0-9_]){re.escape(name)}(?![A-Za-z0-9_])", message) is not None


_CHECKERS = {"forward": _check_forward, "grad": _check_grad, "dtypes": _check_dtypes,
             "contracts": _check_contracts}


def run_check(pkg: Package, op: Op, check: str, *, seed: int = 0) -> Result:
    """Run one check (a name from ``pkg.checks``) of ``op`` against package ``pkg``.

    Every attr set of the spec's ``test.attrs`` runs. Never raises for a problem of the op,
    the spec or the package: those make a ``fail`` result whose messages say what and where.

    Raises:
        ValueError: ``check`` is not one of ``pkg.checks``.
    """
    known = pkg.checks + checks_for(pkg.device_paths)[1:]
    if check not in known:
        raise ValueError(f"unknown check '{check}'; expected one of: {', '.join(known)}")
    started = time.perf_counter()
    tally = _Tally()
    kind, _, path = check.partition("/")
    try:
        settings = read_settings(op)
        for index, attrs in enumerate(settings.attr_sets):
            rng = np.random.default_rng(seed_sequence(seed, op.name, check, index))
            if kind == "reference":
                _check_reference(pkg, op, attrs, settings, rng, tally)
            else:
                _CHECKERS[kind](pkg, op, path, attrs, settings, rng, tally)
        if kind == "contracts" and not tally.comparisons and not tally.n_problems:
            raise NotApplicable("no contract that a change of shapes breaks")
    except NotApplicable as exc:
        return Result(op.name, check, "n/a", messages=[str(exc)], seconds=time.perf_counter() - started)
    except SpecError as exc:
        tally.context = ""
        for d in exc.diagnostics:
            tally.fail(d.format())
    except CheckError as exc:
        tally.context = ""
        tally.fail(str(exc))
    except Exception as exc:  # a bug in the harness or an unexpected failure: show where
        tally.context = ""
        tally.fail(f"{_first_line(exc)}\n{traceback.format_exc()}")
    return tally.result(op.name, check, time.perf_counter() - started)


def select_checks(only: Sequence[str] = (), skip: Sequence[str] = (), checks: Sequence[str] = CHECKS) -> list[str]:
    """The ``checks`` (default: the default backend's, :data:`CHECKS`; a package's are
    ``pkg.checks``) matching any ``only`` pattern (all when empty) and no ``skip`` pattern;
    patterns are shell globs (``forward/*``, ``*function``)."""
    chosen = [c for c in checks if not only or any(fnmatch.fnmatchcase(c, p) for p in only)]
    return [c for c in chosen if not any(fnmatch.fnmatchcase(c, p) for p in skip)]


def run_all(pkg: Package, ops: Sequence[Op], checks: Sequence[str], *, seed: int = 0,
            progress: Callable[[Op, list[Result]], None] | None = None) -> list[Result]:
    """Run ``checks`` for every op; ``progress(op, results)`` is called after each op."""
    results: list[Result] = []
    for op in ops:
        mine = [run_check(pkg, op, c, seed=seed) for c in checks]
        results.extend(mine)
        if progress is not None:
            progress(op, mine)
    return results


def format_table(results: Sequence[Result], checks: Sequence[str]) -> str:
    """The op x check table: ``ok <worst error>``, ``FAIL <worst error>`` or ``-`` (n/a)."""
    ops = list(dict.fromkeys(r.op for r in results))
    by = {(r.op, r.check): r for r in results}
    short = {**_SHORT, **{p: s for name in backends.names() for b in [backends.get(name)]
                          for paths in (b.test_paths, *b.device_test_paths.values()) for p, s in paths.items()}}
    heads = [" ".join(short.get(p, p) for p in c.split("/")) for c in checks]
    width0 = max([2] + [len(o) for o in ops])
    widths = [max(len(h), 10) for h in heads]
    lines = ["  ".join([f"{'op':<{width0}}"] + [f"{h:<{w}}" for h, w in zip(heads, widths)]).rstrip()]
    lines.append("  ".join(["-" * width0] + ["-" * w for w in widths]))
    for o in ops:
        cells = [by[(o, c)].cell if (o, c) in by else "" for c in checks]
        lines.append("  ".join([f"{o:<{width0}}"] + [f"{s:<{w}}" for s, w in zip(cells, widths)]).rstrip())
    return "\n".join(lines)


def format_failures(results: Sequence[Result]) -> str:
    """Every failed check with its messages, then every check with spec problems only (cases the
    kernel rejected: ``SPEC``), with theirs (empty when all passed)."""
    out = []
    for status, word in (("fail", "FAIL"), ("spec", "SPEC")):
        for r in results:
            if r.status == status:
                out.append(f"{word} {r.op} {r.check}:")
                out.extend("  " + m.replace("\n", "\n    ") for m in r.messages)
    return "\n".join(out)
