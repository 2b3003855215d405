"""Masked-out lanes of a `tl.load` without `other=`: Triton leaves their value undefined.

The NVIDIA backend happens to fill them with 0, and so does stock TRITON_INTERPRET=1, so a kernel
whose result depends on them (a `tl.sum` or `tl.max` over a masked row, a `tl.dot` over a masked
tail) agrees with itself everywhere it is usually tested, and breaks on backends that leave
registers as they were (triton#9917 and the docs fix, triton#10119; FlagGems#3716). tdiff's
interpreter fills those lanes with a poison value instead (NaN for floats, a 0x5A byte pattern for
integers, True for booleans): any value is allowed there, so a correct kernel's results do not
change, and a kernel that reads them diverges. A verdict rerun with zero-filled lanes then names the
cause (`tdiff.judge.verdict`).
"""

from __future__ import annotations

import numpy as np
import triton.language as tl

INT_BYTE = 0x5A


def poison(dtype: "tl.dtype", np_dtype: "np.dtype", shape: "tuple[int, ...]") -> "np.ndarray":  # noqa: UP037
    """An array of `shape` holding the poison value of `dtype`, stored as the interpreter stores it
    (self-contained: reproducers embed its source)."""
    import numpy as np
    import triton.language as tl

    if dtype == tl.bfloat16:  # stored as uint16: a quiet NaN's bits
        return np.full(shape, 0x7FDA, dtype=np_dtype)
    if dtype.is_fp8():  # stored as uint8; fp8e4b8 and fp8e5b16 have one NaN, 0x80
        return np.full(shape, 0x80 if dtype.name in ("fp8e4b8", "fp8e5b16") else 0x7F, dtype=np_dtype)
    if np_dtype.kind == "f":  # a quiet NaN with a payload of its own (see `is_poison`)
        bits = {2: 0x7E5A, 4: 0x7FC5A5A5, 8: 0x7FF85A5A5A5A5A5A}[np_dtype.itemsize]
        return np.full(shape, bits, dtype=f"u{np_dtype.itemsize}").view(np_dtype)
    if np_dtype == np.bool_:
        return np.ones(shape, dtype=bool)
    return np.full(shape, np.frombuffer(b"\x5a" * np_dtype.itemsize, dtype=np_dtype)[0], dtype=np_dtype)


def is_poison(data: np.ndarray, dtype: tl.dtype) -> np.ndarray:
    """The lanes of a float array (bf16 as its bits) that still hold the poison value: a masked-out
    lane nothing computed with (a cast or an operation on it is not an observable result)."""
    data = np.asarray(data)
    if data.dtype.kind not in "fu" or data.dtype.itemsize not in (2, 4, 8) or not dtype.is_floating():
        return np.zeros(data.shape, bool)
    want = poison(dtype, data.dtype, ())
    return data.view(f"u{data.dtype.itemsize}") == want.view(f"u{data.dtype.itemsize}")


def is_poison_nan(data: np.ndarray, dtype: "tl.dtype") -> np.ndarray:  # noqa: UP037
    """The NaN lanes of a float array (bf16 as its bits) that carry a poison's payload: poison as
    loaded, or widened by a cast (fp16 or bf16 poison in float32, any of them in float64) and passed
    on by arithmetic that keeps a NaN operand's payload. A NaN of tdiff's drawn inputs or of an
    invalid operation does not match; a narrowing cast loses the mark. (Self-contained: reproducers
    embed its source.)"""
    import numpy as np
    import triton.language as tl

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
