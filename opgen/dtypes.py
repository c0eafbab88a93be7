"""Element types: MindSpore ``DataType`` prefixes, dtype names, C++ types and aot dtype strings.

One table is the single source for every translation between them.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DType:
    """One element type.

    Attributes:
        prefix: MindSpore ``DataType`` prefix (``F32`` in ``F32_Default``).
        name: MindSpore / numpy dtype name (``float32``); also the aot ``dtypes[i]`` string.
        cpp: C++ element type used in kernels.
        ms_enum: the ``mindspore::TypeId`` enumerator, for dispatch in ``Function<T>``.
        is_float: whether gradients can flow through it.
    """

    prefix: str
    name: str
    cpp: str
    ms_enum: str
    is_float: bool


DTYPES: tuple[DType, ...] = (
    DType("F32", "float32", "float", "kNumberTypeFloat32", True),
    DType("F64", "float64", "double", "kNumberTypeFloat64", True),
    DType("F16", "float16", "opgen::half", "kNumberTypeFloat16", True),
    DType("BF16", "bfloat16", "opgen::bfloat16", "kNumberTypeBFloat16", True),
    DType("I8", "int8", "int8_t", "kNumberTypeInt8", False),
    DType("I16", "int16", "int16_t", "kNumberTypeInt16", False),
    DType("I32", "int32", "int32_t", "kNumberTypeInt32", False),
    DType("I64", "int64", "int64_t", "kNumberTypeInt64", False),
    DType("U8", "uint8", "uint8_t", "kNumberTypeUInt8", False),
    DType("BOOL", "bool", "bool", "kNumberTypeBool", False),
)

BY_PREFIX = {d.prefix: d for d in DTYPES}
BY_NAME = {d.name: d for d in DTYPES}

# DataType prefixes MindSpore knows but opgen kernels do not implement yet, with their dtype names.
UNSUPPORTED_NAMES = {
    "U16": "uint16",
    "U32": "uint32",
    "U64": "uint64",
    "C64": "complex64",
    "C128": "complex128",
}
KNOWN_UNSUPPORTED = tuple(UNSUPPORTED_NAMES)
FORMATS = ("Default",)
"""Formats a CPU kernel can take (CPU kernels see plain row-major memory)."""


def split_datatype(text: str) -> tuple[str, str]:
    """``'F32_Default'`` -> ``('F32', 'Default')``."""
    prefix, _, fmt = text.partition("_")
    return prefix, fmt


def all_datatype_names() -> list[str]:
    """Every DataType name opgen accepts in dtype_format rows (for suggestions)."""
    return [f"{d.prefix}_{f}" for d in DTYPES for f in FORMATS]


def datatype_of(value: str) -> str | None:
    """A type variable's value as a DataType name: ``'float32'`` -> ``'F32_Default'``.

    DataType names pass through unchanged; unknown dtype names give ``None``.
    """
    if "_" in value and value.split("_", 1)[0].upper() == value.split("_", 1)[0]:
        return value
    for prefix, name in [(d.prefix, d.name) for d in DTYPES] + list(UNSUPPORTED_NAMES.items()):
        if name == value:
            return f"{prefix}_Default"
    return None


def all_dtype_names() -> list[str]:
    """Every dtype name MindSpore knows (supported by opgen or not), for suggestions."""
    return [d.name for d in DTYPES] + list(UNSUPPORTED_NAMES.values())


def prefix_of(name: str) -> str:
    """DataType prefix of a dtype name, supported or not: ``'float16'`` -> ``'F16'``."""
    if name in BY_NAME:
        return BY_NAME[name].prefix
    return {v: k for k, v in UNSUPPORTED_NAMES.items()}[name]
