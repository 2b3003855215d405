"""Kernels whose values reach what Triton's interpreter cannot do: an fp16 atomic that overflows."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

import tdiff
from tdiff import strategies as tst


def _launch_atomic(kernel, x):
    out = torch.zeros(1, dtype=x.dtype, device=x.device)
    kernel[(x.numel(),)](x, out)
    return out


@tdiff.check(launch=_launch_atomic, reference=lambda x: x.double().sum().reshape(1).to(x.dtype),
             x=tst.tensors(shape=(tst.sides(2, 4),), dtype=["float16"], layouts=["contiguous"],
                           values=tst.values(40000, 60000, specials=False)))
@triton.jit
def fp16_atomic_overflow(x_ptr, out_ptr):
    tl.atomic_add(out_ptr, tl.load(x_ptr + tl.program_id(0)))  # two of these pass 65504
