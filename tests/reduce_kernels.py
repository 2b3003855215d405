"""Kernels for kernel reduction's tests (`tests/test_reduce.py`): planted bugs in kernels that carry code the
failing case does not need (flags, activations, a second output, a one-tile path), as library kernels do.
Importable, so tdiff's worker processes find the checks."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

import tdiff
from tdiff import strategies as tst

BLOCK = 16


@triton.jit
def _relu(x):
    return tl.where(x > 0, x, 0.0)


@triton.jit
def _gelu(x):
    inner = 0.7978845608028654 * (x + 0.044715 * x * x * x)
    t = 2.0 / (1.0 + tl.exp(-2.0 * inner)) - 1.0  # tanh
    return 0.5 * x * (1.0 + t)


def launch_rows(kernel, x, w):
    rows, cols = x.shape
    out = torch.empty_like(x)
    stats = torch.zeros(2 * rows, dtype=torch.float32, device=x.device)
    kernel[(rows,)](x, w, w, x, out, stats, x.stride(0), out.stride(0), cols, 1.0,
                    HAS_BIAS=False, HAS_RESIDUAL=False, ACTIVATION=0, STORE_STATS=False,
                    ONE_TILE=cols <= BLOCK, BLOCK=BLOCK)
    return out


#: the line with the planted bug (the test looks for it in the reduced kernel)
BUGGY_LINE = "w = tl.load(w_ptr + (cols - start), mask=mask, other=0.0).to(tl.float32)"


@tdiff.check(launch=launch_rows, reference=lambda x, w: (x.double() * w.double()).to(x.dtype),
             dims={"R": tst.sides(1, 3), "C": tst.sizes(block=BLOCK, max_blocks=3)},
             x=tst.tensors(shape=("R", "C"), dtype="float32", layouts=["contiguous"],
                           values=tst.values(-4, 4, nan=False)),
             w=tst.tensors(shape=("C",), dtype="float32", layouts=["contiguous"], values=tst.values(-4, 4, nan=False)))
@triton.jit
def fused_rows(x_ptr, w_ptr, b_ptr, res_ptr, out_ptr, stats_ptr, stride_x, stride_out, n_cols, scale,
               HAS_BIAS: tl.constexpr, HAS_RESIDUAL: tl.constexpr, ACTIVATION: tl.constexpr,
               STORE_STATS: tl.constexpr, ONE_TILE: tl.constexpr, BLOCK: tl.constexpr):
    """out = act(x * w * scale + b + residual), row by row; with STORE_STATS, each row's mean and variance."""
    row = tl.program_id(0)
    x_row = x_ptr + row * stride_x
    out_row = out_ptr + row * stride_out
    total = 0.0
    if ONE_TILE:
        cols = tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        y = x * w * scale
        if HAS_BIAS:
            b = tl.load(b_ptr + cols, mask=mask, other=0.0).to(tl.float32)
            y = y + b
        if HAS_RESIDUAL:
            r = tl.load(res_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
            y = y + r
        if ACTIVATION == 1:
            y = _relu(y)
        elif ACTIVATION == 2:
            y = _gelu(y)
        total += tl.sum(tl.where(mask, y, 0.0), axis=0)
        tl.store(out_row + cols, y.to(out_ptr.dtype.element_ty), mask=mask)
    else:
        for start in range(0, n_cols, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            mask = cols < n_cols
            x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
            w = tl.load(w_ptr + (cols - start), mask=mask, other=0.0).to(tl.float32)
            y = x * w * scale
            if HAS_BIAS:
                b = tl.load(b_ptr + cols, mask=mask, other=0.0).to(tl.float32)
                y = y + b
            if HAS_RESIDUAL:
                r = tl.load(res_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
                y = y + r
            if ACTIVATION == 1:
                y = _relu(y)
            elif ACTIVATION == 2:
                y = _gelu(y)
            total += tl.sum(tl.where(mask, y, 0.0), axis=0)
            tl.store(out_row + cols, y.to(out_ptr.dtype.element_ty), mask=mask)
    if STORE_STATS:
        mean = total / n_cols
        tl.store(stats_ptr + 2 * row, mean)
        acc = 0.0
        for start in range(0, n_cols, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            mask = cols < n_cols
            y = tl.load(out_row + cols, mask=mask, other=0.0).to(tl.float32)
            d = tl.where(mask, y - mean, 0.0)
            acc += tl.sum(d * d, axis=0)
        tl.store(stats_ptr + 2 * row + 1, acc / n_cols)


def launch_offset(kernel, x):
    out = torch.empty_like(x)
    kernel[(triton.cdiv(x.numel(), BLOCK),)](x, out, x.numel(), BLOCK=BLOCK)
    return out


@tdiff.check(launch=launch_offset, reference=lambda x: x * 2,
             x=tst.tensors(shape=(tst.sizes(block=BLOCK, max_blocks=2),), dtype="float32", layouts=["contiguous"]))
@triton.jit
def off_by_one(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """Every output one too large: deleting the mask (or the line making it) turns the bug into another."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x * 2 + 1, mask=mask)


def launch_two(kernel, x):
    out, sq = torch.empty_like(x), torch.empty_like(x)
    kernel[(triton.cdiv(x.numel(), BLOCK),)](x, out, sq, x.numel(), BLOCK=BLOCK)
    return out, sq


@tdiff.check(launch=launch_two, reference=lambda x: (x * 2, x * x),
             x=tst.tensors(shape=(tst.sizes(block=BLOCK, max_blocks=2),), dtype="float32", layouts=["contiguous"]))
@triton.jit
def two_outputs(x_ptr, out_ptr, sq_ptr, n, BLOCK: tl.constexpr):
    """Two outputs, the first one too large: the second's code is not what fails."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    sq = x * x
    tl.store(sq_ptr + offs, sq, mask=mask)
    tl.store(out_ptr + offs, x * 2 + 1, mask=mask)


def launch_zeros(kernel, x):
    out = torch.zeros_like(x)
    kernel[(triton.cdiv(x.numel(), BLOCK),)](x, out, x.numel(), BLOCK=BLOCK)
    return out


@tdiff.check(launch=launch_zeros, reference=lambda x: x - x,
             x=tst.tensors(shape=(tst.sizes(block=BLOCK, max_blocks=2),), dtype="float32", layouts=["contiguous"],
                           values=tst.values(-4, 4, nan=False)))
@triton.jit
def cancels(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """x - x: 0 in the interpreter, which is also what the output held before the kernel ran."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x - x, mask=mask)
