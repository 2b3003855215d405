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
