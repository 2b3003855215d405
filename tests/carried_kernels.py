"""Kernels whose outputs `launch` multiplies on with torch (tdiff.judge.carried): the kernel's own rounding reaches
them only through the wrapper."""

import torch
import triton
import triton.language as tl

import tdiff
from tdiff import strategies as tst

SCALE = 1000.0


@triton.jit
def shifted_back(x_ptr, c_ptr, y_ptr, n, BLOCK: tl.constexpr):
    """y = (x + c) - c: x rounded at c's magnitude (one float32 rounding of c, what the judge allows of a value
    computed from an input that large)."""
    i = tl.arange(0, BLOCK)
    m = i < n
    x = tl.load(x_ptr + i, mask=m)
    c = tl.load(c_ptr)
    tl.store(y_ptr + i, (x + c) - c, mask=m)


def _scratch(kernel, x, c):
    y = torch.empty_like(x)
    kernel[(1,)](x, c, y, x.numel(), BLOCK=triton.next_power_of_2(x.numel()))
    return y


def amplified(kernel, x, c):
    """The kernel writes a scratch tensor; `launch` returns it scaled by torch (the kernel's rounding, amplified)."""
    return (_scratch(kernel, x, c) * SCALE).reshape(2, 3).t()


def misplaced(kernel, x, c):
    """The same with a wrapper bug: a reshape where the transpose belongs."""
    return (_scratch(kernel, x, c) * SCALE).reshape(3, 2)


def scaled_transpose(x, c):
    return (x.double() * SCALE).reshape(2, 3).t().float()


INPUTS = dict(x=tst.tensors(shape=(6,), dtype="float32"), c=tst.tensors(shape=(1,), dtype="float32"))
tdiff.check(launch=amplified, reference=scaled_transpose, name="amplified", **INPUTS)(shifted_back)
tdiff.check(launch=misplaced, reference=scaled_transpose, name="misplaced", **INPUTS)(shifted_back)
