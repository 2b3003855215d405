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


@triton.jit
def product3(x_ptr, y_ptr, z_ptr, out_ptr, n, NEGATE: tl.constexpr, BLOCK: tl.constexpr):
    """x * y * z: x * y may fall below float32's normal range, and z bring it back near its bottom."""
    i = tl.arange(0, BLOCK)
    m = i < n
    x, y, z = tl.load(x_ptr + i, mask=m), tl.load(y_ptr + i, mask=m), tl.load(z_ptr + i, mask=m)
    out = x * y * z
    if NEGATE:  # (a bug: the sign of the result)
        out = -out
    tl.store(out_ptr + i, out, mask=m)


def _product3(negate):
    def launch(kernel, x, y, z):
        out = torch.empty_like(x)
        kernel[(1,)](x, y, z, out, x.numel(), NEGATE=negate, BLOCK=triton.next_power_of_2(x.numel()))
        return out

    return launch


def _exact_product(x, y, z):
    return (x.double() * y.double() * z.double()).float()


VEC3 = {k: tst.tensors(shape=(tst.sides(1, 8),), dtype="float32") for k in "xyz"}
tdiff.check(launch=_product3(False), reference=_exact_product, name="product", **VEC3)(product3)
tdiff.check(launch=_product3(True), reference=_exact_product, name="negated", **VEC3)(product3)
