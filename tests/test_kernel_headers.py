"""opgen's framework-free C++ headers, compiled with g++ and checked against numpy.

Two drivers in ``tests/cpp`` are built at -O2 (the Function<T> path's level) and -O3 (the aot
path's), with ``-Wall -Wextra -Werror``: ``parallel_test.cc`` checks opgen::parallel_for and its
thread pool itself; ``half_test.cc`` converts and computes on arrays written here, and numpy is
the reference: ``float16`` for opgen::half, and for opgen::bfloat16 the top 16 bits of a
float32 rounded to nearest even (computed below with integer operations).
"""

from __future__ import annotations

import math
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from opgen.resources import include_dir

CPP = Path(__file__).resolve().parent / "cpp"
CXX = os.environ.get("CXX", "g++")
FLAGS = ["-std=c++17", "-Wall", "-Wextra", "-Werror", "-pthread", "-D_GLIBCXX_USE_CXX11_ABI=0", f"-I{include_dir()}"]

pytestmark = pytest.mark.skipif(shutil.which(CXX) is None, reason=f"C++ compiler {CXX} not found")


@pytest.fixture(scope="module", params=["-O2", "-O3"])
def opt(request: pytest.FixtureRequest) -> str:
    """Optimisation level the drivers are compiled at."""
    return str(request.param)


def compile_driver(name: str, opt: str, out_dir: Path) -> Path:
    """Compile ``tests/cpp/<name>.cc`` into ``out_dir``."""
    out = out_dir / f"{name}{opt}"
    if not out.exists():
        subprocess.run([CXX, opt, *FLAGS, str(CPP / f"{name}.cc"), "-o", str(out), "-ldl"], check=True)
    return out


@pytest.fixture(scope="module")
def drivers(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Directory the compiled drivers live in (shared by the module's tests)."""
    return tmp_path_factory.mktemp("kernel_headers")


Runner = Callable[..., str]


@pytest.fixture
def run(opt: str, drivers: Path, tmp_path: Path) -> Runner:
    """Run a driver (``half_test`` or ``parallel_test``) in one mode; returns its stdout.

    Arguments default to ``tmp_path``, where the array modes read and write.
    """

    def _run(driver: str, mode: str, *args: str, env: dict[str, str] | None = None) -> str:
        exe = compile_driver(driver, opt, drivers)
        proc = subprocess.run([str(exe), mode, *(args or (str(tmp_path),))], capture_output=True, text=True,
                              env={**os.environ, **(env or {})}, timeout=300)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return proc.stdout

    return _run


# ------------------------------------------------------------------------------ references


def bf16_bits(a: np.ndarray) -> np.ndarray:
    """float32 -> bfloat16 bit patterns: round to nearest even; NaN quiet, sign kept."""
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    out = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    nan = (u & 0x7FFFFFFF) > 0x7F800000
    out[nan] = ((u[nan] >> 16) | 0x40).astype(np.uint16)
    return out


def bf16_values(bits: np.ndarray) -> np.ndarray:
    """bfloat16 bit patterns -> float32 values (exact)."""
    return (bits.astype(np.uint32) << 16).view(np.float32)


def bf16_bits_from_f64(d: np.ndarray) -> np.ndarray:
    """float64 -> bfloat16, correctly rounded (nearest, ties to even), without float32 rounding.

    The three bfloat16 neighbours of float32(d) truncated are compared with d in float64, where
    every bfloat16 value and each distance used here is exact.
    """
    with np.errstate(over="ignore"):
        f = d.astype(np.float32)
    mag = (f.view(np.uint32) & 0x7FFFFFFF) >> 16
    sign = (f.view(np.uint32) >> 16) & 0x8000
    best = np.zeros(d.shape, np.int64)
    best_err = np.full(d.shape, np.inf)
    for k in (-1, 0, 1):
        cand = np.clip(mag.astype(np.int64) + k, 0, 0x7F80)
        val = np.abs(bf16_values((cand | sign).astype(np.uint16)).astype(np.float64))
        with np.errstate(invalid="ignore"):
            err = np.abs(val - np.abs(d))
        better = (err < best_err) | ((err == best_err) & (cand % 2 == 0))
        best = np.where(better, cand, best)
        best_err = np.where(better, err, best_err)
    out = (best | sign).astype(np.uint16)
    max_bf16 = float(bf16_values(np.array([0x7F7F], np.uint16))[0])
    to_inf = np.abs(d) >= (max_bf16 + 2.0**128) / 2  # ties go to the even neighbour: inf
    out[to_inf] = (sign[to_inf] | 0x7F80).astype(np.uint16)
    nan = np.isnan(d)
    out[nan] = (sign[nan] | 0x7FC0).astype(np.uint16)
    return out


def f16_bits(a: np.ndarray) -> np.ndarray:
    """Any float array -> float16 bit patterns (numpy rounds correctly from float32 and float64)."""
    with np.errstate(over="ignore"):
        return a.astype(np.float16).view(np.uint16)


def same_bits(got: np.ndarray, want: np.ndarray, nan_exponent: int) -> None:
    """Bit-exact equality, except that any NaN matches any NaN of the same sign."""
    exp_mask = {0x7C00: 0x03FF, 0x7F80: 0x007F}[nan_exponent]
    got_nan = ((got & nan_exponent) == nan_exponent) & ((got & exp_mask) != 0)
    want_nan = ((want & nan_exponent) == nan_exponent) & ((want & exp_mask) != 0)
    np.testing.assert_array_equal(got_nan, want_nan)
    np.testing.assert_array_equal(got[got_nan] & 0x8000, want[want_nan] & 0x8000)
    bad = np.nonzero((got != want) & ~got_nan)[0]
    assert bad.size == 0, f"{bad.size} mismatches, first at {bad[:5]}: got {got[bad[:5]]} want {want[bad[:5]]}"


def read(d: Path, name: str, dtype: type) -> np.ndarray:
    """One array the driver wrote."""
    return np.fromfile(d / name, dtype=dtype)


# ----------------------------------------------------------------------------- conversions


def conversion_inputs() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """float32 and float64 inputs: specials, boundaries, every tie, double-rounding traps, random bits."""
    rng = np.random.default_rng(7)
    specials = [0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 1.0, -1.0, 65504.0, 65519.99, 65520.0, -65520.0,
                2.0**-14, 2.0**-24, 2.0**-25, 2.0**-25 * 1.0000001, 1.5 * 2.0**-25, 3.0e38, 3.4e38, 1e-40, -1e-45,
                0.1, 1.0 / 3.0, np.pi]
    halves = np.arange(0, 0x7C00, dtype=np.uint16).view(np.float16).astype(np.float64)  # all finite >= 0
    half_ties = (halves[:-1] + halves[1:]) / 2  # exactly between two halves
    bf = bf16_values(np.arange(0, 0x7F80, dtype=np.uint16)).astype(np.float64)
    bf_ties = (bf[:-1] + bf[1:]) / 2
    f32 = np.concatenate([
        np.array(specials, np.float32),
        half_ties.astype(np.float32), -half_ties.astype(np.float32),
        np.nextafter(half_ties.astype(np.float32), np.float32(np.inf)),
        np.nextafter(half_ties.astype(np.float32), np.float32(0)),
        bf_ties.astype(np.float32), -bf_ties.astype(np.float32),
        rng.integers(0, 2**32, 200_000, dtype=np.uint64).astype(np.uint32).view(np.float32),
    ])
    # Doubles just off a tie: rounding them to float32 first lands on the tie (double rounding).
    traps = np.concatenate([half_ties * (1 + 2.0**-40), half_ties * (1 - 2.0**-40),
                            bf_ties[::7] * (1 + 2.0**-40), bf_ties[::7] * (1 - 2.0**-40)])
    f64 = np.concatenate([np.array(specials, np.float64), traps, -traps, half_ties, bf_ties[::3],
                          rng.standard_normal(50_000) * 10.0 ** rng.integers(-12, 12, 50_000)])
    i64 = np.concatenate([np.arange(-70000, 70000, 37, dtype=np.int64),
                          np.array([2**24 + 1, 2**24 + 3, -(2**31), 2**40 + 2**32 + 1, 2**62], np.int64),
                          # integers near bfloat16 ties above 2^24: float32 rounding would move them
                          (np.arange(1, 2000, dtype=np.int64) * 2**17 + 2**16 + 1) + 2**25])
    return f32, f64, i64


def test_conversions_round_to_nearest_even(run: Runner, tmp_path: Path) -> None:
    f32, f64, i64 = conversion_inputs()
    f32.tofile(tmp_path / "f32.bin")
    f64.tofile(tmp_path / "f64.bin")
    i64.tofile(tmp_path / "i64.bin")
    np.arange(65536, dtype=np.uint16).tofile(tmp_path / "u16.bin")
    run("half_test", "convert")

    same_bits(read(tmp_path, "f16_from_f32.bin", np.uint16), f16_bits(f32), 0x7C00)
    same_bits(read(tmp_path, "f16_from_f64.bin", np.uint16), f16_bits(f64), 0x7C00)
    same_bits(read(tmp_path, "f16_from_i64.bin", np.uint16), f16_bits(i64.astype(np.float64)), 0x7C00)
    same_bits(read(tmp_path, "bf16_from_f32.bin", np.uint16), bf16_bits(f32), 0x7F80)
    same_bits(read(tmp_path, "bf16_from_f64.bin", np.uint16), bf16_bits_from_f64(f64), 0x7F80)
    same_bits(read(tmp_path, "bf16_from_i64.bin", np.uint16), bf16_bits_from_f64(i64.astype(np.float64)), 0x7F80)

    # Every 16-bit pattern back to float32: exact (NaNs stay NaN with their sign).
    all16 = np.arange(65536, dtype=np.uint16)
    as_f16 = all16.view(np.float16)
    np.testing.assert_array_equal(read(tmp_path, "f32_from_f16.bin", np.float32), as_f16.astype(np.float32))
    np.testing.assert_array_equal(read(tmp_path, "f32_from_bf16.bin", np.float32), bf16_values(all16))
    np.testing.assert_array_equal(read(tmp_path, "isnan_f16.bin", np.uint8), np.isnan(all16.view(np.float16)))
    np.testing.assert_array_equal(read(tmp_path, "isinf_f16.bin", np.uint8), np.isinf(all16.view(np.float16)))
    same_bits(read(tmp_path, "bf16_from_f16.bin", np.uint16), bf16_bits(all16.view(np.float16).astype(np.float32)),
              0x7F80)


def test_conversion_landmarks(run: Runner) -> None:
    """A few values worth reading in the failure message: limits, inf, NaN, subnormals."""
    names, limits = run("half_test", "names", ".").splitlines()
    assert names.split() == ["float16", "bfloat16", "float32", "int64", "bool"]
    hmax, heps, hden, bmax, beps = (float(v) for v in limits.split())
    assert hmax == float(np.finfo(np.float16).max) and heps == float(np.finfo(np.float16).eps)
    assert hden == 2.0**-24 and beps == 2.0**-7
    assert bmax == float(bf16_values(np.array([0x7F7F], np.uint16))[0])


# ------------------------------------------------------------------------------ arithmetic


def random_bits(rng: np.random.Generator, n: int, nan_exponent: int) -> np.ndarray:
    """Random finite 16-bit float patterns (either format)."""
    bits = rng.integers(0, 65536, n * 2, dtype=np.uint32).astype(np.uint16)
    finite = (bits & nan_exponent) != nan_exponent
    return bits[finite][:n]


@pytest.mark.parametrize("tag", ["f16", "bf16"])
def test_arithmetic_in_float_rounded_once(run: Runner, tmp_path: Path, tag: str) -> None:
    rng = np.random.default_rng(11)
    exp_bits = 0x7C00 if tag == "f16" else 0x7F80
    for name in ("a", "b"):
        for t, e in (("f16", 0x7C00), ("bf16", 0x7F80)):
            random_bits(rng, 20_000, e).tofile(tmp_path / f"{name}_{t}.bin")
    run("half_test", "arith")

    a_bits = read(tmp_path, f"a_{tag}.bin", np.uint16)
    b_bits = read(tmp_path, f"b_{tag}.bin", np.uint16)
    if tag == "f16":
        a, b = a_bits.view(np.float16).astype(np.float32), b_bits.view(np.float16).astype(np.float32)
        to_bits = f16_bits
    else:
        a, b = bf16_values(a_bits), bf16_values(b_bits)
        to_bits = bf16_bits
    with np.errstate(all="ignore"):
        expected = {
            "add": to_bits(a + b), "sub": to_bits(a - b), "mul": to_bits(a * b), "div": to_bits(a / b),
            "fma": to_bits(a * b + a), "cadd": to_bits(a + b), "cmul": to_bits(a * b),
            "mixi": to_bits(a + np.float32(1)), "neg": (a_bits ^ 0x8000).astype(np.uint16),
        }
        mixd = a.astype(np.float64) * 3.0
    for name, want in expected.items():
        same_bits(read(tmp_path, f"{name}_{tag}.bin", np.uint16), want, exp_bits)
    same_bits(read(tmp_path, f"mixd_{tag}.bin", np.uint16),
              f16_bits(mixd) if tag == "f16" else bf16_bits_from_f64(mixd), exp_bits)
    with np.errstate(over="ignore"):
        product = a * b
    np.testing.assert_array_equal(read(tmp_path, f"mulf_{tag}.bin", np.float32), product)  # not rounded to 16 bits
    np.testing.assert_array_equal(read(tmp_path, f"lt_{tag}.bin", np.uint8), a < b)
    np.testing.assert_array_equal(read(tmp_path, f"eq_{tag}.bin", np.uint8), a == b)
    np.testing.assert_array_equal(read(tmp_path, f"ge_{tag}.bin", np.uint8), a >= b)


@pytest.mark.parametrize("tag", ["f16", "bf16"])
def test_math_functions(run: Runner, tmp_path: Path, tag: str) -> None:
    """opgen::math on 16-bit floats: computed in float, within one unit in the last place."""
    rng = np.random.default_rng(5)
    xs = np.concatenate([np.array([0.0, -0.0, 0.5, -0.5, 1.0, 2.0, -3.0, 10.0, np.inf, -np.inf], np.float32),
                         rng.standard_normal(4000).astype(np.float32) * 4])
    for t, conv in (("f16", f16_bits), ("bf16", bf16_bits)):
        conv(xs).tofile(tmp_path / f"x_{t}.bin")
    run("half_test", "math")

    x_bits = read(tmp_path, f"x_{tag}.bin", np.uint16)
    if tag == "f16":
        x = x_bits.view(np.float16).astype(np.float32)

        def values(bits: np.ndarray) -> np.ndarray:
            return bits.view(np.float16).astype(np.float32)

        to_bits, ulp = f16_bits, np.float32(2.0**-10)
    else:
        x = bf16_values(x_bits)
        values, to_bits, ulp = bf16_values, bf16_bits, np.float32(2.0**-7)
    with np.errstate(all="ignore"):
        ref = {
            "exp": np.exp(x), "log": np.log(x), "sqrt": np.sqrt(x), "rsqrt": 1 / np.sqrt(x), "tanh": np.tanh(x),
            "sigmoid": 1 / (1 + np.exp(-x)), "abs": np.abs(x), "sign": np.sign(x),
            "maximum": np.where(x > 0.5, x, np.float32(0.5)), "minimum": np.where(x < 0.5, x, np.float32(0.5)),
            "pow": x * x, "maxf": np.where(x > 0.25, x, np.float32(0.25)),
        }
        ref["erf"] = np.array([math.erf(v) for v in x.astype(np.float64)], np.float32)
        for name, want32 in ref.items():
            got = values(read(tmp_path, f"{name}_{tag}.bin", np.uint16))
            want = values(to_bits(want32.astype(np.float32)))
            np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=name)
            ok = ~np.isnan(want)
            tol = ulp * np.maximum(np.abs(want[ok]), np.float32(2.0**-14))
            close = (got[ok] == want[ok]) | (np.abs(got[ok] - want[ok]) <= tol)
            assert close.all(), f"{name}: {np.count_nonzero(~close)} values off by more than 1 ulp"


@pytest.mark.parametrize("tag", ["f16", "bf16"])
def test_map_and_reduce_with_16_bit_types(run: Runner, tmp_path: Path, tag: str) -> None:
    """opgen::map broadcasting and map_reduce_to on 16-bit tensors, and a large parallel map."""
    rng = np.random.default_rng(3)
    big_n = 5 * 32768 + 11  # several parallel chunks and a tail
    for t, conv in (("f16", f16_bits), ("bf16", bf16_bits)):
        conv(rng.standard_normal(15).astype(np.float32)).tofile(tmp_path / f"mx_{t}.bin")
        conv(rng.standard_normal(4).astype(np.float32)).tofile(tmp_path / f"my_{t}.bin")
        conv(rng.standard_normal(big_n).astype(np.float32)).tofile(tmp_path / f"big_{t}.bin")
    run("half_test", "map")

    def values(name: str) -> np.ndarray:
        bits = read(tmp_path, f"{name}_{tag}.bin", np.uint16)
        return bits.view(np.float16).astype(np.float32) if tag == "f16" else bf16_values(bits)

    to_bits = f16_bits if tag == "f16" else bf16_bits
    x, y = values("mx").reshape(3, 1, 5), values("my").reshape(4, 1)
    np.testing.assert_array_equal(read(tmp_path, f"map_{tag}.bin", np.uint16), to_bits(x * y + 1).ravel())
    # the reduction accumulates in float and rounds once: within one 16-bit ulp of the exact sum
    exact = np.broadcast_to(x.astype(np.float64) * 2, (3, 4, 5)).sum(axis=(0, 2))
    ulp = 2.0**-10 if tag == "f16" else 2.0**-7
    np.testing.assert_allclose(values("reduce"), exact, rtol=ulp, atol=2.0**-24)
    big = values("big")
    np.testing.assert_array_equal(read(tmp_path, f"bigsq_{tag}.bin", np.uint16), to_bits(big * big))


# -------------------------------------------------------------------------------- parallel


def test_parallel_for(run: Runner) -> None:
    """Coverage, chunk sizes, threads used, exceptions, nesting, concurrent callers, fork."""
    out = run("parallel_test", "parallel", ".")
    assert "FAIL" not in out
    assert out.count("ok ") == 20, out


def test_parallel_for_single_thread(run: Runner) -> None:
    """OPGEN_NUM_THREADS=1: no pool, every loop on the calling thread, same results."""
    out = run("parallel_test", "parallel", ".", env={"OPGEN_NUM_THREADS": "1"})
    assert out.startswith("threads 1\n") and "FAIL" not in out
    assert "ok threads used 1" in out


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs Linux CPU affinity")
def test_parallel_for_respects_cpu_affinity(opt: str, drivers: Path) -> None:
    """A process restricted to one CPU (taskset, cgroups) gets no pool; loops stay correct."""
    exe = compile_driver("parallel_test", opt, drivers)
    one_cpu = min(os.sched_getaffinity(0))
    proc = subprocess.run([str(exe), "parallel"], capture_output=True, text=True, timeout=300,
                          preexec_fn=lambda: os.sched_setaffinity(0, {one_cpu}))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith("threads 1\n") and "FAIL" not in proc.stdout


def test_library_with_pool_survives_dlclose(run: Runner, tmp_path: Path) -> None:
    """MindSpore may dlclose an aot library; one whose pool threads exist stays mapped."""
    lib = tmp_path / "libparallel.so"
    subprocess.run([CXX, "-O2", "-fPIC", "-shared", *FLAGS, str(CPP / "parallel_lib.cc"), "-o", str(lib)], check=True)
    out = run("parallel_test", "dlclose", str(lib))
    assert "ok library pinned after dlclose" in out


def test_flat_loop_vectorises_at_O2(tmp_path: Path) -> None:
    """The flat map loop is vectorised at -O2 (CustomOpBuilder's level), not only at -O3."""
    src = tmp_path / "vec.cc"
    src.write_text('#include "opgen/kernel.h"\n'
                   "void mul(opgen::Out<float> o, opgen::In<float> a, opgen::In<float> b) {\n"
                   "  opgen::map(o, [](float x, float y) { return x * y; }, a, b);\n}\n")
    proc = subprocess.run([CXX, "-O2", *FLAGS, "-c", str(src), "-o", str(tmp_path / "vec.o"),
                           "-fopt-info-vec-optimized"], capture_output=True, text=True, check=True)
    kernel_lines = [ln for ln in proc.stderr.splitlines() if "kernel.h" in ln and "loop vectorized" in ln]
    assert kernel_lines, proc.stderr


@pytest.mark.parametrize("elem", ["opgen::half", "opgen::bfloat16"])
def test_16_bit_loops_vectorise(tmp_path: Path, elem: str) -> None:
    """A map over 16-bit floats, and an OPGEN_SIMD loop that assigns float values to them (in an
    AVX2 copy, as the dispatched loops are), are vectorised: the conversions are branch-free and the
    stores assign the bits (a branchy conversion, or `o[i] = half(v)` copying a temporary in an omp
    simd loop, kept them scalar)."""
    src = tmp_path / "vec16.cc"
    src.write_text('#include "opgen/kernel.h"\n'
                   f"using H = {elem};\n"
                   "void add(opgen::Out<H> o, opgen::In<H> a, opgen::In<H> b) {\n"
                   "  opgen::map(o, [](float x, float y) { return x + y; }, a, b);\n}\n"
                   "__attribute__((target(\"avx2,fma\")))  // as parallel_rows' copies of a body\n"
                   "void scale(H *o, const H *a, float s, long n) {\n"
                   "  OPGEN_SIMD\n"
                   "  for (long i = 0; i < n; ++i) o[i] = float(a[i]) * s;\n}\n")
    line = next(i for i, t in enumerate(src.read_text().splitlines(), 1) if t.startswith("  for (long i"))
    from opgen.build import kernel_flags

    # the libraries' flags: -fno-trapping-math lets GCC if-convert the conversions' float adds
    proc = subprocess.run([CXX, "-O2", *FLAGS, *kernel_flags()[0], "-c", str(src), "-o", str(tmp_path / "vec16.o"),
                           "-fopt-info-vec-optimized"], capture_output=True, text=True, check=True)
    assert any("kernel.h" in ln and "loop vectorized" in ln for ln in proc.stderr.splitlines()), proc.stderr
    assert any(f"vec16.cc:{line}:" in ln and "loop vectorized" in ln for ln in proc.stderr.splitlines()), proc.stderr


# ------------------------------------------------------------------ 16-bit floats in MindSpore


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
def test_aot_kernel_on_mindspore_16_bit_tensors(ms, tmp_path: Path, dtype: str) -> None:  # type: ignore[no-untyped-def]
    """A kernel using opgen::half / opgen::bfloat16 through ops.Custom(func_type="aot") on real
    MindSpore tensors: the dtype strings match and the numbers equal numpy's (computed in float32,
    rounded once), for a broadcast and a large (parallel) shape."""
    from mindspore import ops
    from mindspore.ops import CustomRegOp, DataType

    lib = tmp_path / "libaot_half.so"
    subprocess.run([CXX, "-O3", "-fPIC", "-shared", *FLAGS, str(CPP / "aot_half_kernel.cc"), "-o", str(lib)],
                   check=True)
    ms.set_context(mode=ms.PYNATIVE_MODE)
    prefix = {"float16": "F16", "bfloat16": "BF16", "float32": "F32"}[dtype]
    col = getattr(DataType, f"{prefix}_Default")
    reg = (CustomRegOp(f"opgen_test_mul_add1_{prefix}").input(0, "x").input(1, "y").output(0, "out")
           .dtype_format(col, col, col).target("CPU").get_op_info())
    op = ops.Custom(f"{lib}:opgen_test_mul_add1", out_shape=lambda x, y: list(np.broadcast_shapes(x, y)),
                    out_dtype=lambda x, y: x, func_type="aot", reg_info=reg)
    ms_dtype = getattr(ms, dtype)
    rng = np.random.default_rng(9)
    for xs, ys in (((3, 1, 5), (4, 1)), ((300_000,), (300_000,))):
        x32 = rng.standard_normal(xs).astype(np.float32)
        y32 = rng.standard_normal(ys).astype(np.float32)
        x = ms.Tensor(x32).astype(ms_dtype)
        y = ms.Tensor(y32).astype(ms_dtype)
        out = op(x, y)
        assert out.dtype == ms_dtype and out.shape == np.broadcast_shapes(xs, ys)
        # MindSpore's own casts give the 16-bit inputs; compute in float32 and round once
        xv = x.astype(ms.float32).asnumpy()
        yv = y.astype(ms.float32).asnumpy()
        got = out.astype(ms.float32).asnumpy()
        want32 = xv * yv + np.float32(1)
        if dtype == "float16":
            want = want32.astype(np.float16).astype(np.float32)
        elif dtype == "bfloat16":
            want = bf16_values(bf16_bits(want32)).reshape(want32.shape)
        else:
            want = want32
        if dtype == "float32":  # x * y + 1 may be one fused multiply-add (AVX2+FMA copy): 1 ulp
            np.testing.assert_allclose(got, want, rtol=2.0**-23, atol=2.0**-24)
        else:
            np.testing.assert_array_equal(got, want)


# ------------------------------------------------------------------------ building blocks


@pytest.mark.parametrize("kernel_flags", [False, True], ids=["plain", "kernel-flags"])
def test_building_blocks_match_double_loops(opt: str, drivers: Path, kernel_flags: bool) -> None:
    """map (contiguous, row-broadcast, strided), map_reduce_to, reduce_sum/max over rows, columns,
    everything and split axes, softmax/log_softmax forward and backward, and gemm agree with
    plain double loops, with and without opgen's kernel flags (vector loops, libmvec, OpenBLAS),
    on one thread and on the pool."""
    from opgen.build import kernel_flags as flags

    cflags, ldflags = flags() if kernel_flags else ((), ())
    exe = drivers / f"blocks_test{opt}{'-k' if kernel_flags else ''}"
    subprocess.run([CXX, opt, *FLAGS, *cflags, str(CPP / "blocks_test.cc"), "-o", str(exe), *ldflags, "-ldl"],
                   check=True)
    # each vector copy of the loops (OPGEN_ISA caps the one this CPU would pick), on one thread
    # and on the pool
    for isa, threads in (("avx512", "1"), ("avx512", "2"), ("avx2", "2"), ("baseline", "2")):
        proc = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120,
                              env={**os.environ, "OPGEN_NUM_THREADS": threads, "OPGEN_ISA": isa})
        assert proc.returncode == 0 and proc.stdout.strip() == "ok", f"OPGEN_ISA={isa}: {proc.stdout}{proc.stderr}"

