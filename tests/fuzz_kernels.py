"""A check with a planted bug, for the fuzz-target tests (its rows past the fifth are doubled twice)."""

import torch
import triton
import triton.language as tl

import tdiff
from tdiff import strategies as tst


def _launch(kernel, x):
    out = torch.empty_like(x)
    kernel[(triton.cdiv(x.numel(), 16),)](x, out, x.numel(), BLOCK=16)
    return out


@tdiff.check(launch=_launch, reference=lambda x: x * 2,
             x=tst.tensors(shape=(tst.sides(1, 40),), dtype="float32", layouts=["contiguous"],
                           values=tst.values(-4, 4, nan=False, inf=False)))
@triton.jit
def doubles_wrongly_past_five(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=0.0)
    y = tl.where(offs > 5, x * 4, x * 2)  # the planted bug
    tl.store(out_ptr + offs, y, mask=m)
