"""Kernels that lose accuracy the problem does not (findings, not bugs): a float16 sum kept in float16, whose
intermediate overflows where the mean fits (torch accumulates float16 in float32)."""

import torch
import triton
import triton.language as tl

import tdiff
from tdiff import strategies as tst


@triton.jit
def mean_half(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + i, mask=i < n, other=0.0)
    total = tl.sum(x, axis=0)  # (a float16 sum stays float16)
    tl.store(out_ptr, total / n)


def _mean(kernel, x):
    out = torch.empty((), dtype=x.dtype)
    kernel[(1,)](x, out, x.numel(), BLOCK=triton.next_power_of_2(x.numel()))
    return out


tdiff.check(launch=_mean, reference=lambda x: x.double().mean().to(x.dtype),
            x=tst.tensors(shape=(tst.sides(1, 32),), dtype="float16"))(mean_half)
