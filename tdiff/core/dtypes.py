"""The dtypes tdiff can draw, store and compare, and how each is carried in numpy."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch


@dataclass(frozen=True)
class DType:
    """One element type: its torch dtype, numpy carrier and numeric limits."""

    name: str
    torch: torch.dtype
    kind: str  # "float", "int", "uint" or "bool"
    bits: int
    carrier: np.dtype  # numpy dtype holding the raw values (bf16 and fp8 as unsigned bits)

    @property
    def itemsize(self) -> int:
        return max(1, self.bits // 8)

    @property
    def is_float(self) -> bool:
        return self.kind == "float"

    @property
    def is_half(self) -> bool:
        return self.is_float and self.bits <= 16

    @property
    def eps(self) -> float:
        return float(torch.finfo(self.torch).eps) if self.is_float else 0.0

    @property
    def max(self) -> float | int:
        if self.kind == "bool":
            return 1
        info = torch.finfo(self.torch) if self.is_float else torch.iinfo(self.torch)
        return info.max

    @property
    def min(self) -> float | int:
        if self.kind == "bool":
            return 0
        info = torch.finfo(self.torch) if self.is_float else torch.iinfo(self.torch)
        return info.min

    @property
    def tiny(self) -> float:
        """Smallest positive normal number."""
        return float(torch.finfo(self.torch).tiny)

    @property
    def smallest_subnormal(self) -> float:
        if self.name == "float8_e4m3fn":
            return 2.0**-9
        if self.name == "float8_e5m2":
            return 2.0**-16
        return float(torch.finfo(self.torch).smallest_normal) * float(torch.finfo(self.torch).eps)

    @property
    def has_nan(self) -> bool:
        return self.is_float

    @property
    def has_inf(self) -> bool:
        return self.is_float and self.name != "float8_e4m3fn"


def _make_table() -> dict[str, DType]:
    rows = [
        ("float32", torch.float32, "float", 32, np.float32),
        ("float16", torch.float16, "float", 16, np.float16),
        ("bfloat16", torch.bfloat16, "float", 16, np.uint16),
        ("float64", torch.float64, "float", 64, np.float64),
        ("int8", torch.int8, "int", 8, np.int8),
        ("int16", torch.int16, "int", 16, np.int16),
        ("int32", torch.int32, "int", 32, np.int32),
        ("int64", torch.int64, "int", 64, np.int64),
        ("uint8", torch.uint8, "uint", 8, np.uint8),
        ("bool", torch.bool, "bool", 8, np.bool_),
    ]
    for name, kind in (("float8_e4m3fn", "float"), ("float8_e5m2", "float")):
        dt = getattr(torch, name, None)
        if dt is not None:
            rows.append((name, dt, kind, 8, np.uint8))
    return {name: DType(name, tdt, kind, bits, np.dtype(car)) for name, tdt, kind, bits, car in rows}


DTYPES: dict[str, DType] = _make_table()

ALIASES = {
    "fp32": "float32", "float": "float32", "f32": "float32",
    "fp16": "float16", "half": "float16", "f16": "float16",
    "bf16": "bfloat16",
    "fp64": "float64", "double": "float64", "f64": "float64",
    "fp8e4nv": "float8_e4m3fn", "fp8e5": "float8_e5m2",
    "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64", "u8": "uint8",
}


class UnsupportedDType(ValueError):
    """A dtype tdiff cannot draw or compare."""


#: how a launch record describes a Triton dtype argument it keeps only by its repr (`triton.language.float16`)
TRITON_REPR = "triton.language."


def triton_dtype_named(text: str) -> str | None:
    """The `triton.language` attribute a launch record's repr of a Triton dtype names (`float16`), else None."""
    return text[len(TRITON_REPR):] if text.startswith(TRITON_REPR) else None


def overflow_threshold(dt: DType) -> float:
    """The smallest magnitude that rounds to infinity in the floating dtype `dt` (round to nearest): its largest
    finite value plus half an ulp there."""
    top = float(dt.max)
    return top + dt.eps * 2.0 ** math.floor(math.log2(top)) / 2


def dtype(spec: str | torch.dtype | DType) -> DType:
    """Look up a dtype by name, alias or torch dtype."""
    if isinstance(spec, DType):
        return spec
    if isinstance(spec, torch.dtype):
        for d in DTYPES.values():
            if d.torch == spec:
                return d
        raise UnsupportedDType(f"unsupported dtype {spec}; tdiff supports {', '.join(DTYPES)}")
    if isinstance(spec, str):
        name = spec.removeprefix("torch.")
        name = ALIASES.get(name, name)
        if name in DTYPES:
            return DTYPES[name]
    raise UnsupportedDType(f"unsupported dtype {spec!r}; tdiff supports {', '.join(DTYPES)}")


def to_torch(raw: np.ndarray, dt: DType) -> torch.Tensor:
    """A CPU torch tensor over carrier values (shares memory where possible)."""
    t = torch.from_numpy(np.ascontiguousarray(raw))
    return t.view(dt.torch) if t.dtype != dt.torch else t


def from_torch(t: torch.Tensor) -> np.ndarray:
    """Carrier values of a torch tensor, copied to the host."""
    dt = dtype(t.dtype)
    t = t.detach().cpu().contiguous()
    out: np.ndarray  # (torch types Tensor.numpy() as Any)
    if dt.carrier == np.uint16:
        out = t.view(torch.int16).numpy().view(np.uint16).copy()
    elif dt.carrier == np.uint8 and dt.is_float:
        out = t.view(torch.uint8).numpy().copy()
    else:
        out = t.numpy().copy()
    return out


def as_float64(raw: np.ndarray, dt: DType) -> np.ndarray:
    """Carrier values converted to float64 (bool and ints included)."""
    if dt.is_float and dt.carrier.kind == "u":
        return to_torch(raw, dt).to(torch.float64).numpy()
    return raw.astype(np.float64)


def from_float64(values: np.ndarray, dt: DType) -> np.ndarray:
    """float64 values rounded to the dtype, as carrier values."""
    if dt.kind == "bool":
        out: np.ndarray = values != 0
        return out
    if not dt.is_float:
        return values.astype(dt.carrier)
    if dt.carrier.kind == "u":
        return from_torch(torch.from_numpy(np.ascontiguousarray(values, dtype=np.float64)).to(dt.torch))
    with np.errstate(over="ignore", invalid="ignore"):
        return values.astype(dt.carrier)
