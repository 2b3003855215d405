"""Integer and bit operations: exact (two's complement wrap-around; `//` and `%` truncate toward zero as in
C, `triton/language/semantic.py: floordiv/mod` -> LLVM `sdiv`/`srem`; `>>` is arithmetic on signed
operands; `tl.umulhi` is the high half of the unsigned product). Unspecified: division or remainder by
zero, INT_MIN // -1, shifts by the bit width or more: kept out of the exact checks, drawn by
`divide_unspecified` (unspecified="note").
"""

from __future__ import annotations

import numpy as np
import torch
import triton
import triton.language as tl

import tdiff
from tdiff import strategies as tst

from ._common import SIZE, same

INTS = ["int32", "int8", "int16", "int64"]


def _np(t):
    return t.numpy().astype(np.int64)


def _wrap(v: np.ndarray, like: torch.Tensor) -> torch.Tensor:
    bits = like.element_size() * 8
    v = v.astype(object) if bits == 64 else v
    out = np.array([((int(a) + (1 << (bits - 1))) % (1 << bits)) - (1 << (bits - 1)) for a in v.reshape(-1)],
                   dtype=np.int64) if bits == 64 else ((v + (1 << (bits - 1))) % (1 << bits)) - (1 << (bits - 1))
    return torch.from_numpy(np.asarray(out).astype(like.numpy().dtype))


def _arith_ref(x, y):
    a, b = x.numpy().astype(object), y.numpy().astype(object)
    return _wrap(np.array([p + q - 3 * q + p * q for p, q in zip(a.reshape(-1), b.reshape(-1))], dtype=object), x)


@tdiff.check(launch=same, reference=_arith_ref, tolerance="exact",
             x=tst.tensors(shape=(SIZE,), dtype=INTS, layouts=["contiguous"]),
             y=tst.tensors(like="x", layouts=["contiguous"]))
@triton.jit
def wrapping_arith(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    y = tl.load(y_ptr + offs, mask=m)
    tl.store(out_ptr + offs, x + y - 3 * y + x * y, mask=m)


def _divisor(y: torch.Tensor) -> torch.Tensor:
    return torch.where(y == 0, torch.ones_like(y), y)


def _trunc_div(x, y):
    a, b = _np(x), _np(_divisor(y))
    q = np.sign(a) * np.sign(b) * (np.abs(a) // np.abs(b))
    r = a - q * b
    return torch.from_numpy(((q + r) & 0x7FFFFFFF).astype(np.int32))


def _launch_div(kernel, x, y):
    return same(kernel, x, _divisor(y))


@tdiff.check(launch=_launch_div, reference=_trunc_div, tolerance="exact",
             x=tst.tensors(shape=(SIZE,), dtype="int32", layouts=["contiguous"],
                           values=tst.values(-(2**31) + 1, 2**31 - 1)),
             y=tst.tensors(like="x", layouts=["contiguous"], values=tst.values(-1000, 1000)))
@triton.jit
def trunc_division(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    y = tl.load(y_ptr + offs, mask=m, other=1)
    q = x // y
    r = x % y
    tl.store(out_ptr + offs, (q + r) & 0x7FFFFFFF, mask=m)


def _bits_ref(x, y):
    a = x.numpy().astype(np.int64)
    s = (y.numpy().astype(np.int64) & 31)
    u = a & 0xFFFFFFFF
    out = ((a << s) ^ (a >> s) ^ (u >> s) ^ (a & 0x0F0F0F0F) ^ (~a | 7)) & 0xFFFFFFFF
    return torch.from_numpy(out.astype(np.uint32).view(np.int32))


@tdiff.check(launch=same, reference=_bits_ref, tolerance="exact",
             x=tst.tensors(shape=(SIZE,), dtype="int32", layouts=["contiguous"]),
             y=tst.tensors(like="x", layouts=["contiguous"]))
@triton.jit
def bit_ops(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    s = tl.load(y_ptr + offs, mask=m) & 31  # shifts below the width: defined
    u = x.to(tl.uint32, bitcast=True)
    logical = (u >> s.to(tl.uint32)).to(tl.int32, bitcast=True)
    tl.store(out_ptr + offs, (x << s) ^ (x >> s) ^ logical ^ (x & 0x0F0F0F0F) ^ (~x | 7), mask=m)


def _umulhi_ref(x, y):
    a = x.numpy().view(np.uint32).astype(np.uint64)
    b = y.numpy().view(np.uint32).astype(np.uint64)
    return torch.from_numpy(((a * b) >> np.uint64(32)).astype(np.uint32).view(np.int32))


@tdiff.check(launch=same, reference=_umulhi_ref, tolerance="exact",
             x=tst.tensors(shape=(SIZE,), dtype="int32", layouts=["contiguous"]),
             y=tst.tensors(like="x", layouts=["contiguous"]))
@triton.jit
def umulhi(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m).to(tl.uint32, bitcast=True)
    y = tl.load(y_ptr + offs, mask=m).to(tl.uint32, bitcast=True)
    tl.store(out_ptr + offs, tl.umulhi(x, y).to(tl.int32, bitcast=True), mask=m)


def _div_any(x, y):
    a, b = _np(x), _np(y)
    q = np.where(b == 0, 0, np.sign(a) * np.sign(b) * (np.abs(a) // np.where(b == 0, 1, np.abs(b))))
    return torch.from_numpy(q.astype(np.int32))


@tdiff.check(launch=same, reference=_div_any, tolerance="exact", unspecified="note",
             x=tst.tensors(shape=(SIZE,), dtype="int32", layouts=["contiguous"], values=tst.values(-1000, 1000)),
             y=tst.tensors(like="x", layouts=["contiguous"], values=tst.values(-2, 2)))
@triton.jit
def divide_unspecified(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) // tl.load(y_ptr + offs, mask=m, other=1), mask=m)
