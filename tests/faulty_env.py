"""A check whose launch behaves differently in another environment's worker (it reads the variable
tdiff sets there): a planted divergence between two environments, for the report's versions."""

import os

import torch
import triton
import triton.language as tl

import tdiff
from tdiff import strategies as tst


def _launch(kernel, x):
    out = torch.empty_like(x)
    scale = 2.0 if os.environ.get("TDIFF_OTHER_ENV") else 1.0  # planted: the other environment doubles
    kernel[(triton.cdiv(x.numel(), 16),)](x, out, x.numel(), scale, BLOCK=16)
    return out


@tdiff.check(launch=_launch, reference=lambda x: x.clone(),
             x=tst.tensors(shape=(tst.sides(1, 32),), dtype="float32", layouts=["contiguous"],
                           values=tst.values(1, 4, nan=False, inf=False)))
@triton.jit
def env_dependent(x_ptr, out_ptr, n, scale, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) * scale, mask=m)
