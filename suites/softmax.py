"""Fused row softmax: tl.max and tl.sum on each row, any row and column stride."""

import torch
import triton
import triton.language as tl

import tdiff
from tdiff import strategies as tst


def launch(kernel, x):
    rows, cols = x.shape
    out = torch.empty((rows, cols), dtype=x.dtype, device=x.device)
    block = triton.next_power_of_2(max(cols, 1))
    kernel[(rows,)](out, x, x.stride(0), x.stride(1), out.stride(0), cols, BLOCK=block)
    return out


@tdiff.check(
    launch=launch,
    reference=lambda x: torch.softmax(x.float(), dim=-1).to(x.dtype),
    x=tst.tensors(ndim=2, max_side=48, dtype=tst.FLOATS),
)
@triton.jit
def softmax_kernel(out_ptr, x_ptr, stride_row, stride_col, out_stride_row, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_row + cols * stride_col, mask=mask, other=-float("inf")).to(tl.float32)
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    out = num / tl.sum(num, axis=0)
    tl.store(out_ptr + row * out_stride_row + cols, out, mask=mask)
