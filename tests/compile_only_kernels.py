"""Kernels Triton's interpreter runs and its compiler rejects (and a correct one), for the compile-only opinion
(tests/test_compile_only.py). An importable module: tdiff's worker processes find them here."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

import tdiff
from tdiff import strategies as tst

BLOCK = 64
X = tst.tensors(shape=(tst.sizes(block=BLOCK),), dtype=["float32"])


def launch(kernel, x):
    out = torch.empty_like(x)
    kernel[(triton.cdiv(x.numel(), BLOCK),)](x, out, x.numel(), x.stride(0), BLOCK=BLOCK)
    return out


@tdiff.check(launch=launch, reference=lambda x: x * 2, x=X)
@triton.jit
def if_on_tensor(x_ptr, out_ptr, n, stride, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs * stride, mask=mask)
    if x > 0:  # a Python `if` on a block tensor: the compiler rejects it, the interpreter takes the branch
        x = x * 2
    tl.store(out_ptr + offs, x, mask=mask)


@tdiff.check(launch=launch, reference=lambda x: x * 2, x=X)
@triton.jit
def static_range_on_a_runtime_value(x_ptr, out_ptr, n, stride, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs * stride, mask=mask)
    for _ in tl.static_range(stride):  # tl.static_range needs a tl.constexpr: a stride of 1 is one (Triton
        x = x * 1.0                     # specializes an integer 1), any other is not and the compiler rejects it
    tl.store(out_ptr + offs, x * 2, mask=mask)


@triton.jit
def _doubled_if_positive(x):
    if x > 0:  # the same mistake in a called function: the error names this line
        x = x * 2
    return x


@tdiff.check(launch=launch, reference=lambda x: x * 2, x=X)
@triton.jit
def if_in_a_called_function(x_ptr, out_ptr, n, stride, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, _doubled_if_positive(tl.load(x_ptr + offs * stride, mask=mask)), mask=mask)


@tdiff.check(launch=launch, reference=lambda x: x * 2, x=X)
@triton.jit
def doubled(x_ptr, out_ptr, n, stride, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs * stride, mask=mask) * 2, mask=mask)
