"""Reductions, scans, sort and histogram. Exact: `tl.max` and `tl.argmax` (order-free; NaN is kept out:
a NaN in a max reduction is unspecified), integer `tl.sum` (wraps), `tl.reduce` with an integer combine,
integer `tl.cumsum`, `tl.sort`, `tl.histogram`. Approximate: float `tl.sum` and `tl.cumsum` (the
`reduce` tolerance: the order of the additions is Triton's choice).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

import tdiff
from tdiff import strategies as tst

ROWS = tst.sides(1, 6)
COLS = tst.sides(1, 100)
FLOATS = tst.values(nan=False)
ROWWISE = ["contiguous", "padded", "offset"]  # rows of unit column stride (the kernels read them so)
TRITON_BEFORE_3_9 = tuple(int(p) for p in triton.__version__.split(".")[:2]) < (3, 9)


def _per_row(out_dtype=None, full=False):
    def launch(kernel, x):
        r, c = x.shape
        out = torch.empty((r, c) if full else (r,), dtype=out_dtype or x.dtype, device=x.device)
        kernel[(r,)](x, out, c, x.stride(0), BLOCK=triton.next_power_of_2(c))
        return out

    return launch


@tdiff.check(launch=_per_row(), reference=lambda x: x.amax(dim=1), tolerance="exact",
             x=tst.tensors(shape=(ROWS, COLS), dtype=["float32", "float16"], layouts=ROWWISE, values=FLOATS))
@triton.jit
def row_max(x_ptr, out_ptr, n, stride, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + tl.program_id(0) * stride + cols, mask=cols < n, other=-float("inf"))
    tl.store(out_ptr + tl.program_id(0), tl.max(x, axis=0))


@tdiff.check(launch=_per_row(torch.int32), reference=lambda x: x.argmax(dim=1).to(torch.int32), tolerance="exact",
             x=tst.tensors(shape=(ROWS, COLS), dtype=["float32", "int32"], layouts=ROWWISE, values=FLOATS))
@triton.jit
def row_argmax(x_ptr, out_ptr, n, stride, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + tl.program_id(0) * stride + cols, mask=cols < n)
    x = tl.where(cols < n, x, tl.min(x, axis=0))  # masked lanes never win (ties go to the first index)
    tl.store(out_ptr + tl.program_id(0), tl.argmax(x, axis=0, tie_break_left=True).to(tl.int32))


def _wrap_sum(x):
    return torch.from_numpy((x.numpy().astype(np.int64).sum(axis=1) & 0xFFFFFFFF).astype(np.uint32).view(np.int32))


@tdiff.check(launch=_per_row(), reference=_wrap_sum, tolerance="exact",
             x=tst.tensors(shape=(ROWS, COLS), dtype="int32", layouts=ROWWISE),
             marks=[pytest.mark.xfail(TRITON_BEFORE_3_9, strict=True,
                                      reason="FINDINGS triton 13: the interpreter's tl.sum of int32 raises "
                                             "OverflowError where the sum wraps (fixed in Triton 3.9.0)")])
@triton.jit
def int_sum(x_ptr, out_ptr, n, stride, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + tl.program_id(0) * stride + cols, mask=cols < n, other=0)
    tl.store(out_ptr + tl.program_id(0), tl.sum(x, axis=0))


@triton.jit
def _xor(a, b):
    return a ^ b


def _xor_ref(x):
    return torch.from_numpy(np.bitwise_xor.reduce(x.numpy(), axis=1).astype(np.int32))


@tdiff.check(launch=_per_row(), reference=_xor_ref, tolerance="exact",
             x=tst.tensors(shape=(ROWS, COLS), dtype="int32", layouts=ROWWISE))
@triton.jit
def reduce_combine(x_ptr, out_ptr, n, stride, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + tl.program_id(0) * stride + cols, mask=cols < n, other=0)
    tl.store(out_ptr + tl.program_id(0), tl.reduce(x, 0, _xor))


@tdiff.check(launch=_per_row(torch.float32), reference=lambda x: x.double().sum(dim=1).float(),
             x=tst.tensors(shape=(ROWS, COLS), dtype="float32", layouts=ROWWISE,
                           values=tst.values(-1e3, 1e3, nan=False, inf=False)))
@triton.jit
def float_sum(x_ptr, out_ptr, n, stride, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + tl.program_id(0) * stride + cols, mask=cols < n, other=0.0)
    tl.store(out_ptr + tl.program_id(0), tl.sum(x, axis=0))


def _cumsum_wrap(x):
    c = np.cumsum(x.numpy().astype(np.int64), axis=1) & 0xFFFFFFFF
    return torch.from_numpy(c.astype(np.uint32).view(np.int32))


@tdiff.check(launch=_per_row(full=True), reference=_cumsum_wrap, tolerance="exact",
             x=tst.tensors(shape=(ROWS, COLS), dtype="int32", layouts=ROWWISE))
@triton.jit
def int_cumsum(x_ptr, out_ptr, n, stride, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    row = tl.program_id(0)
    x = tl.load(x_ptr + row * stride + cols, mask=cols < n, other=0)
    tl.store(out_ptr + row * n + cols, tl.cumsum(x, axis=0), mask=cols < n)


@tdiff.check(launch=_per_row(full=True), reference=lambda x: x.double().cumsum(dim=1).float(),
             x=tst.tensors(shape=(ROWS, COLS), dtype="float32", layouts=ROWWISE,
                           values=tst.values(-1e3, 1e3, nan=False, inf=False)))
@triton.jit
def float_cumsum(x_ptr, out_ptr, n, stride, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    row = tl.program_id(0)
    x = tl.load(x_ptr + row * stride + cols, mask=cols < n, other=0.0)
    tl.store(out_ptr + row * n + cols, tl.cumsum(x, axis=0), mask=cols < n)


def _sorted(x):
    return x.sort(dim=1).values.contiguous()


@tdiff.check(launch=_per_row(full=True), reference=_sorted, tolerance="exact",
             x=tst.tensors(shape=(ROWS, COLS), dtype=["float32", "int32"], layouts=ROWWISE,
                           values=tst.values(nan=False, neg_zero=False)))  # (-0.0 and 0.0: equal keys, any order)
@triton.jit
def sort(x_ptr, out_ptr, n, stride, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    row = tl.program_id(0)
    x = tl.load(x_ptr + row * stride + cols, mask=cols < n, other=0)
    top = tl.max(tl.where(cols < n, x, x), axis=0)  # masked lanes sort last: the row's largest value
    tl.store(out_ptr + row * n + cols, tl.sort(tl.where(cols < n, x, top)), mask=cols < n)


def _histogram_launch(kernel, x):
    n = x.numel()
    out = torch.empty(32, dtype=torch.int32, device=x.device)
    kernel[(1,)](x, out, n, BLOCK=triton.next_power_of_2(n), BINS=32)
    return out


def _histogram_ref(x):
    v = x.numpy().astype(np.int64) & 31
    return torch.from_numpy(np.bincount(v, minlength=32).astype(np.int32))


@tdiff.check(launch=_histogram_launch, reference=_histogram_ref, tolerance="exact",
             x=tst.tensors(shape=(tst.sides(1, 200),), dtype="int32", layouts=["contiguous"]))
@triton.jit
def histogram(x_ptr, out_ptr, n, BLOCK: tl.constexpr, BINS: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0) & 31
    h = tl.histogram(x, BINS, mask=offs < n)
    tl.store(out_ptr + tl.arange(0, BINS), h)
