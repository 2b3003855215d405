"""Kernels for the kernel-coverage tests: a branch the check's sizes never reach, a device function."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

import tdiff
from tdiff import strategies as tst


def _launch(kernel, x):
    out = torch.empty_like(x)
    kernel[(triton.cdiv(x.numel(), 16),)](x, out, x.numel(), BLOCK=16)
    return out


@triton.jit
def _twice(x):
    return x * 2


@tdiff.check(launch=_launch, reference=lambda x: x * 2,
             x=tst.tensors(shape=(tst.sizes(block=16, max_blocks=3),), dtype=["float32"], layouts=["contiguous"]))
@triton.jit
def long_path_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    if n > 1000:  # a long-input path: the check's sizes stop at 49
        y = x + x
        y = y + 0.0
    else:
        y = _twice(x)
    tl.store(out_ptr + offs, y, mask=mask)


@tdiff.check(launch=_launch, reference=lambda x: x * 2,
             x=tst.tensors(shape=(tst.sizes(block=16, max_blocks=3),), dtype=["float32"], layouts=["contiguous"]))
@triton.jit
def long_path_bug(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    if n > 1000:
        y = x * 3  # the planted bug, on the path no case reaches
    else:
        y = x * 2
    tl.store(out_ptr + offs, y, mask=mask)


@tdiff.check(launch=_launch, reference=lambda x: x * 2,
             x=tst.tensors(shape=(tst.sizes(block=16, max_value=1050),), dtype=["float32"], layouts=["contiguous"]))
@triton.jit
def threshold_bug(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    if n % 100 == 0:  # a fast path for multiples of 100, with the planted bug
        y = x * 3
    else:
        y = x * 2
    tl.store(out_ptr + offs, y, mask=mask)


LIMIT = 600


def _launch_limit(kernel, x):
    out = torch.empty_like(x)
    n = x.numel()
    if n <= LIMIT:  # one block up to the limit (the planted bug: the block holds 512, not 600)
        kernel[(1,)](x, out, n, BLOCK=512)
    else:
        kernel[(triton.cdiv(n, 16),)](x, out, n, BLOCK=16)
    return out


@tdiff.check(launch=_launch_limit, reference=lambda x: x * 2,
             x=tst.tensors(shape=(tst.sides(1, 2000),), dtype=["float32"], layouts=["contiguous"]))
@triton.jit
def launch_threshold_bug(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask, other=0.0) * 2, mask=mask)


def _launch_1d(kernel, x):
    out = torch.empty_like(x)
    kernel[(triton.cdiv(x.numel(), 64),)](x, out, x.numel(), BLOCK=64)
    return out


@tdiff.check(launch=_launch_1d, reference=lambda x: x * 2,
             x=tst.tensors(shape=(tst.sides(1, 200),), dtype=tst.FLOATS, layouts=["contiguous"]))
@triton.jit
def dtype_threshold_bug(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    y = x * 2
    if x.dtype == tl.bfloat16:  # noqa: SIM102 (a constexpr test, then a runtime one)
        if n > 150:  # a long bfloat16 path, with the planted bug
            y = x * 3
    tl.store(out_ptr + offs, y, mask=mask)
