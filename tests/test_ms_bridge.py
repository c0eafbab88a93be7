"""opgen/ms.h, the Function<T> path's bridge to MindSpore tensors, on real MindSpore (PyNative).

``tests/cpp/ms_bridge`` is a small hand-written package (a Function<T> op and a probe of
``opgen::ms::empty``) built like a generated one by :func:`opgen.backends.build`, so it is
compiled once per change of its sources or of opgen's headers and cached afterwards.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from opgen import backends

PKG = Path(__file__).resolve().parent / "cpp" / "ms_bridge"


@pytest.fixture(scope="module")
def bridge(ms) -> ModuleType:  # type: ignore[no-untyped-def]
    """The compiled test extension."""
    ms.set_context(mode=ms.PYNATIVE_MODE)
    path = backends.build(PKG, "ext", quiet=True)
    spec = importlib.util.spec_from_file_location("ms_bridge_ext", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def bf16_round(a: np.ndarray) -> np.ndarray:
    """float32 values rounded to bfloat16 (nearest even), as float32."""
    u = a.astype(np.float32).view(np.uint32).astype(np.uint64)
    return (((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16).astype(np.uint32).view(np.float32)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
@pytest.mark.parametrize("shapes", [((3, 1, 5), (4, 1)), ((257, 1031), (257, 1031))])
def test_function_path_16_bit_types(bridge: ModuleType, ms, dtype: str, shapes) -> None:  # type: ignore[no-untyped-def]
    """type_id_v maps MindSpore's float16/bfloat16 to opgen::half/bfloat16; results are numpy's
    float32 arithmetic rounded once to the 16-bit type (small broadcast and large parallel)."""
    rng = np.random.default_rng(2)
    xs, ys = shapes
    ms_dtype = getattr(ms, dtype)
    x = ms.Tensor(rng.standard_normal(xs).astype(np.float32)).astype(ms_dtype)
    y = ms.Tensor(rng.standard_normal(ys).astype(np.float32)).astype(ms_dtype)
    out = bridge.mul_add1(x, y)
    assert out.dtype == ms_dtype and out.shape == np.broadcast_shapes(xs, ys)
    exact = x.astype(ms.float32).asnumpy() * y.astype(ms.float32).asnumpy() + np.float32(1)
    want = {"float16": lambda v: v.astype(np.float16).astype(np.float32), "bfloat16": bf16_round,
            "float32": lambda v: v}[dtype](exact)
    if dtype == "float32":  # the kernel's AVX2+FMA loop may fuse the multiply-add: 1 ulp
        np.testing.assert_allclose(out.asnumpy(), want, rtol=2.0**-23, atol=2.0**-24)
    else:
        np.testing.assert_array_equal(out.astype(ms.float32).asnumpy(), want)


def test_function_path_rejects_other_dtypes(bridge: ModuleType, ms) -> None:  # type: ignore[no-untyped-def]
    x = ms.Tensor(np.ones(3, np.int32))
    with pytest.raises(TypeError, match="unsupported dtype int32"):
        bridge.mul_add1(x, x)


def test_large_outputs_come_from_the_memory_pool(bridge: ModuleType, ms) -> None:  # type: ignore[no-untyped-def]
    """Outputs of 4 KB and more are MindSpore pool memory (no zero fill, no page faults), reused
    once freed; smaller ones are plain host tensors (zero-filled on first access)."""
    like = ms.Tensor(np.zeros(1, np.float32))
    has, pooled, addr, name = bridge.empty_info(like, [4096, 4096])
    assert has and pooled and addr != 0 and name == "float32"
    _, pooled_again, addr_again, _ = bridge.empty_info(like, [4096, 4096])
    assert pooled_again and addr_again == addr  # the first block went back to the pool
    assert bridge.empty_info(like, [1024])[1]  # 4 KB: pool
    assert not bridge.empty_info(like, [1023])[1]  # below 4 KB: host tensor, allocated on first access
    half = ms.Tensor(np.zeros(1, np.float16))
    has_half, pooled_half, _, half_name = bridge.empty_info(half, [2048])  # 4 KB of float16
    assert has_half and pooled_half and half_name == "float16"
    assert not bridge.empty_info(half, [0, 5])[1]  # no elements: no pool block


def test_pool_outputs_hold_the_written_values(bridge: ModuleType, ms) -> None:  # type: ignore[no-untyped-def]
    """Pool memory is not zeroed, so every element must be written: fill a pooled output, free
    it, and check that the next op's output (same block) holds exactly its own values."""
    rng = np.random.default_rng(4)
    a = rng.standard_normal((512, 600)).astype(np.float32)
    first = bridge.mul_add1(ms.Tensor(a), ms.Tensor(a)).asnumpy()
    np.testing.assert_allclose(first, a * a + 1, rtol=2.0**-23, atol=2.0**-24)  # a fused multiply-add: 1 ulp
    del first
    b = rng.standard_normal((512, 600)).astype(np.float32)
    second = bridge.mul_add1(ms.Tensor(b), ms.Tensor(np.float32(2) * np.ones_like(b)))
    np.testing.assert_allclose(second.asnumpy(), b * 2 + 1, rtol=2.0**-23, atol=2.0**-24)
