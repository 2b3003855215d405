"""Kernels for the operation-class tests: a conversion, an fma, an approximate division, an integer
division whose divisor may be 0 (unspecified)."""

from __future__ import annotations

import numpy as np
import torch
import triton
import triton.language as tl

import tdiff
from tdiff import strategies as tst


def _launch(kernel, x, y):
    out = torch.empty((x.numel(),), dtype=kernel_out_dtype(x), device=x.device)
    kernel[(triton.cdiv(x.numel(), 64),)](x, y, out, x.numel(), BLOCK=64)
    return out


def kernel_out_dtype(x):
    return torch.bfloat16 if x.dtype == torch.float32 else x.dtype


FLOAT = dict(shape=(tst.sides(1, 64),), dtype="float32", layouts=["contiguous"])


@tdiff.check(launch=_launch, reference=lambda x, y: x.to(torch.bfloat16),
             x=tst.tensors(**FLOAT, values=tst.values(-1e4, 1e4, nan=False, inf=False)),
             y=tst.tensors(**FLOAT))
@triton.jit
def to_bf16(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m).to(tl.bfloat16), mask=m)


@tdiff.check(launch=_launch, reference=lambda x, y: (x * 3.0 + 1.0).to(torch.bfloat16), tolerance="exact",
             x=tst.tensors(**FLOAT, values=tst.values(-1e4, 1e4, nan=False, inf=False)),
             y=tst.tensors(**FLOAT))
@triton.jit
def affine_to_bf16(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    tl.store(out_ptr + offs, (x * 3.0 + 1.0).to(tl.bfloat16), mask=m)


def _launch_same(kernel, x, y):
    out = torch.empty_like(x)
    kernel[(triton.cdiv(x.numel(), 64),)](x, y, out, x.numel(), BLOCK=64)
    return out


def fma_reference(x, y):
    from fractions import Fraction

    def one(a: float, b: float) -> float:
        exact = Fraction(a) * Fraction(b) + Fraction(b)
        return float(np.float32(float(exact))) if exact != 0 else a * b + b  # the sign of an exact 0: IEEE's rule

    out = [one(a, b) for a, b in zip(x.tolist(), y.tolist())]
    return torch.tensor(out, dtype=torch.float32)


@tdiff.check(launch=_launch_same, reference=fma_reference, tolerance="exact",
             x=tst.tensors(**FLOAT, values=tst.values(-1e3, 1e3, nan=False, inf=False, subnormal=False)),
             y=tst.tensors(like="x", layouts=["contiguous"],
                           values=tst.values(-1e3, 1e3, nan=False, inf=False, subnormal=False)))
@triton.jit
def fma_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    y = tl.load(y_ptr + offs, mask=m)
    tl.store(out_ptr + offs, tl.fma(x, y, y), mask=m)


@tdiff.check(launch=_launch_same, reference=lambda x, y: x / y,
             x=tst.tensors(**FLOAT, values=tst.values(-1e3, 1e3, nan=False, inf=False)),
             y=tst.tensors(like="x", layouts=["contiguous"],
                           values=tst.values(0.5, 1e3, nan=False, inf=False, subnormal=False)))
@triton.jit
def reciprocal_division(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    y = tl.load(y_ptr + offs, mask=m, other=1.0)
    tl.store(out_ptr + offs, x * (1.0 / y), mask=m)  # a fast division: within 2 ulp of x / y


def _int_reference(x, y):
    a, b = x.numpy().astype(np.int64), y.numpy().astype(np.int64)
    q = np.where(b == 0, -1, np.trunc(a / np.where(b == 0, 1, b)))  # for b == 0 anything goes: Triton says nothing
    return torch.from_numpy(q.astype(np.int32))


INT = dict(shape=(tst.sides(1, 64),), dtype="int32", layouts=["contiguous"])


def _division(kernel, mode):
    return tdiff.check(launch=_launch_same, reference=_int_reference, unspecified=mode,
                       x=tst.tensors(**INT, values=tst.values(-100, 100)),
                       y=tst.tensors(like="x", layouts=["contiguous"], values=tst.values(-3, 3)))(kernel)


@triton.jit
def _divide(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) // tl.load(y_ptr + offs, mask=m, other=1), mask=m)


@triton.jit
def divide_noted(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    _divide(x_ptr, y_ptr, out_ptr, n, BLOCK)


@triton.jit
def divide_failing(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    _divide(x_ptr, y_ptr, out_ptr, n, BLOCK)


_division(divide_noted, "note")
_division(divide_failing, "fail")


@tdiff.check(launch=lambda kernel, x, y: _launch_to(kernel, x, torch.int32),
             reference=lambda x, y: x.to(torch.int32),
             x=tst.tensors(**FLOAT, values=tst.values(-1e4, 1e4, nan=False, inf=False)),
             y=tst.tensors(**FLOAT))
@triton.jit
def masked_cast_to_int(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m).to(tl.int32), mask=m)  # no other=: lanes cast, unstored


def _launch_to(kernel, x, dtype):
    out = torch.empty((x.numel(),), dtype=dtype, device=x.device)
    kernel[(triton.cdiv(x.numel(), 64),)](x, x, out, x.numel(), BLOCK=64)
    return out
