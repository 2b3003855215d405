"""The seed's stride-aware add-one kernel, run in place on 2-D views: split halves, transposes, offsets.

A write through one half of `torch.split` lands in its parent's storage; tdiff compares the
whole storage, so a kernel (or an interpreter) that writes outside the view is caught.
"""

import triton
import triton.language as tl

import tdiff
from tdiff import strategies as tst


def launch(kernel, t):
    rows, cols = t.shape
    b0, b1 = 4, triton.next_power_of_2(max(cols, 1))
    kernel[(triton.cdiv(rows, b0),)](t, t.stride(0), t.stride(1), rows, cols, BLOCK_SIZE_0=b0, BLOCK_SIZE_1=b1)


def reference(t):
    t.add_(1.0)


@tdiff.check(
    launch=launch,
    reference=reference,
    t=tst.tensors(ndim=2, max_side=40, dtype=["float32", "float16"]),
)
@triton.jit
def add_one_kernel(ptr, stride_0, stride_1, size_0, size_1, BLOCK_SIZE_0: tl.constexpr,
                   BLOCK_SIZE_1: tl.constexpr):
    pid = tl.program_id(0)
    offset_0 = pid * BLOCK_SIZE_0 + tl.arange(0, BLOCK_SIZE_0)
    offset_1 = tl.arange(0, BLOCK_SIZE_1)
    mask = (offset_0[:, None] < size_0) & (offset_1[None, :] < size_1)
    offsets = offset_0[:, None] * stride_0 + offset_1[None, :] * stride_1
    data = tl.load(ptr + offsets, mask=mask, other=0.0)
    tl.store(ptr + offsets, data + 1.0, mask=mask)
