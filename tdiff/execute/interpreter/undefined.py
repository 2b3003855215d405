"""Masked-out lanes of a `tl.load` without `other=`: Triton leaves their value undefined.

The NVIDIA backend happens to fill them with 0, and so does stock TRITON_INTERPRET=1, so a kernel
whose result depends on them (a `tl.sum` or `tl.max` over a masked row, a `tl.dot` over a masked
tail) agrees with itself everywhere it is usually tested, and breaks on backends that leave
registers as they were (triton#9917 and the docs fix, triton#10119; FlagGems#3716). tdiff's
interpreter fills those lanes with a poison value instead (NaN for floats, a 0x5A byte pattern for
integers, True for booleans): any value is allowed there, so a correct kernel's results do not
change, and a kernel that reads them diverges. A verdict rerun with zero-filled lanes then names the
cause (`tdiff.judge.verdict`).

Standalone (numpy, triton and `tdiff.compat`): reproducers embed this module's source, and their
interpreter side poisons the lanes with the same code (`tdiff.execute.interpreter.stock`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import triton.language as tl

from ...compat import load_frontend

INT_BYTE = 0x5A


def poison(dtype: tl.dtype, np_dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
    """An array of `shape` holding the poison value of `dtype`, stored as the interpreter stores it."""
    if dtype == tl.bfloat16:  # stored as uint16: a quiet NaN's bits
        return np.full(shape, 0x7FDA, dtype=np_dtype)
    if dtype.is_fp8():  # stored as uint8; fp8e4b8 and fp8e5b16 have one NaN, 0x80
        return np.full(shape, 0x80 if dtype.name in ("fp8e4b8", "fp8e5b16") else 0x7F, dtype=np_dtype)
    if np_dtype.kind == "f":  # a quiet NaN with a payload of its own (see `is_poison_nan`)
        bits = {2: 0x7E5A, 4: 0x7FC5A5A5, 8: 0x7FF85A5A5A5A5A5A}[np_dtype.itemsize]
        return np.full(shape, bits, dtype=f"u{np_dtype.itemsize}").view(np_dtype)
    if np_dtype == np.bool_:
        return np.ones(shape, dtype=bool)
    return np.full(shape, np.frombuffer(bytes([INT_BYTE]) * np_dtype.itemsize, dtype=np_dtype)[0], dtype=np_dtype)


def is_poison(data: np.ndarray, dtype: tl.dtype) -> np.ndarray:
    """The lanes of a float array (bf16 as its bits) that still hold the poison value: a masked-out
    lane nothing computed with (a cast or an operation on it is not an observable result)."""
    data = np.asarray(data)
    if data.dtype.kind not in "fu" or data.dtype.itemsize not in (2, 4, 8) or not dtype.is_floating():
        return np.zeros(data.shape, bool)
    want = poison(dtype, data.dtype, ())
    return data.view(f"u{data.dtype.itemsize}") == want.view(f"u{data.dtype.itemsize}")


def is_poison_nan(data: np.ndarray, dtype: tl.dtype) -> np.ndarray:
    """The NaN lanes of a float array (bf16 as its bits) that carry a poison's payload: poison as
    loaded, or widened by a cast (fp16 or bf16 poison in float32, any of them in float64) and passed
    on by arithmetic that keeps a NaN operand's payload. A NaN of tdiff's drawn inputs or of an
    invalid operation does not match; a narrowing cast loses the mark."""
    data = np.asarray(data)
    if not dtype.is_floating() or dtype.is_fp8():
        return np.zeros(data.shape, bool)
    if dtype == tl.bfloat16 and data.dtype == np.uint16:
        bits, width, exp = data.astype(np.uint64), 7, 0xFF
    elif data.dtype.kind == "f" and data.dtype.itemsize in (2, 4, 8):
        width, exp = {2: (10, 0x1F), 4: (23, 0xFF), 8: (52, 0x7FF)}[data.dtype.itemsize]
        bits = data.view(f"u{data.dtype.itemsize}").astype(np.uint64)
    else:
        return np.zeros(data.shape, bool)
    mant = bits & np.uint64((1 << width) - 1)
    nan = (((bits >> np.uint64(width)) & np.uint64(exp)) == exp) & (mant != 0)
    out = np.zeros(nan.shape, bool)
    # (mantissa bits, the poison's mantissa) of each dtype `poison` fills: fp16, bf16, fp32, fp64
    for w, payload in ((10, 0x25A), (7, 0x5A), (23, 0x45A5A5), (52, 0x85A5A5A5A5A5A)):
        if w <= width:
            out |= nan & ((mant >> np.uint64(width - w)) == payload)
    return out


def describe(dtype: tl.dtype) -> str:
    """What the poison value of `dtype` is, for messages."""
    if dtype.is_floating():
        return "NaN"
    if dtype == tl.int1:
        return "True"
    return f"0x{INT_BYTE:02X} bytes"


# ------------------------------------------------------------------ the masked load

class OtherGiven:
    """Whether the masked load being built was given `other=`. Triton's frontend hands the builder
    `other.handle if other else None`, and under the interpreter a single-element `other` equal to 0
    is falsy, so the builder cannot tell `other=0.0` from no `other`: the frontend method is wrapped
    (`wrap`) to note it."""

    def __init__(self) -> None:
        self.now = False

    def wrap(self, frontend: Callable) -> Callable:
        """The frontend method (`compat.load_frontend()`), noting whether `other` was given."""
        flag = self

        def load(semantic: Any, ptr: Any, mask: Any, other: Any, *rest: Any, **kw: Any) -> Any:
            flag.now = other is not None
            try:
                return frontend(semantic, ptr, mask, other, *rest, **kw)
            finally:
                flag.now = False

        return load

    def install(self, put: Callable[[object, str, Any], None]) -> None:
        """Wrap the frontend method of this Triton with `put(object, name, value)`."""
        cls, name = load_frontend()
        put(cls, name, self.wrap(getattr(cls, name)))


def undefined_lanes(shape: tuple[int, ...], mask: np.ndarray | None, other: Any, given: bool) -> np.ndarray | None:
    """The lanes a masked load leaves undefined (None: none): masked out, with no `other=` given."""
    if other is not None or given or mask is None:
        return None
    keep = np.broadcast_to(np.asarray(mask, bool), shape)
    return None if keep.all() else ~keep


def poisoned_other(ptrs: Any, np_dtype_of: Callable[[Any], np.dtype], handle: Callable[[np.ndarray, Any], Any]) -> Any:
    """An `other` handle holding the poison value of the loaded type, shaped like `ptrs` (a handle of
    pointers); `np_dtype_of(tl dtype)` and `handle(array, tl dtype)` are the interpreter's."""
    dtype = ptrs.get_element_ty()
    return handle(poison(dtype, np_dtype_of(dtype), np.shape(ptrs.data)), dtype)
