"""A reduction across programs with tl.atomic_add: the summation order differs between backends."""

import torch
import triton
import triton.language as tl

import tdiff
from tdiff import strategies as tst

BLOCK = 64


def launch(kernel, x):
    out = torch.zeros(1, dtype=torch.float32, device=x.device)
    n = x.numel()
    kernel[(triton.cdiv(n, BLOCK),)](x, out, n, x.stride(0), BLOCK=BLOCK)
    return out


@tdiff.check(
    launch=launch,
    reference=lambda x: x.float().sum().reshape(1),
    x=tst.tensors(shape=(tst.sizes(block=BLOCK, max_blocks=8),), dtype=tst.FLOATS,
                  values=tst.values(-1000, 1000, nan=False, inf=False)),
)
@triton.jit
def atomic_sum_kernel(x_ptr, out_ptr, n, stride, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs * stride, mask=offs < n, other=0.0).to(tl.float32)
    tl.atomic_add(out_ptr, tl.sum(x, axis=0))
