"""Vector add: the smallest masked kernel, on every float dtype and any 1-D layout."""

import torch
import triton
import triton.language as tl

import tdiff
from tdiff import strategies as tst

BLOCK = 256


def launch(kernel, x, y):
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    n = x.numel()
    kernel[(triton.cdiv(n, BLOCK),)](x, y, out, n, x.stride(0), y.stride(0), BLOCK=BLOCK)
    return out


@tdiff.check(
    launch=launch,
    reference=lambda x, y: (x.float() + y.float()).to(x.dtype),
    x=tst.tensors(shape=(tst.sizes(block=BLOCK, max_blocks=4),), dtype=tst.FLOATS),
    y=tst.tensors(like="x"),
)
@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, stride_x, stride_y, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs * stride_x, mask=mask).to(tl.float32)
    y = tl.load(y_ptr + offs * stride_y, mask=mask).to(tl.float32)
    tl.store(out_ptr + offs, x + y, mask=mask)
