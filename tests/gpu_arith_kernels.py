"""Kernels whose NaNs and infinities depend on the GPU's arithmetic (tdiff.judge.modelled), with checks whose
compiled side is the interpreter computing as the GPU does (tests.faulty:FakeCompiledGpu) or a faulty one."""

import torch
import triton
import triton.language as tl

import tdiff
from tdiff import strategies as tst

GPU = "tests.faulty:FakeCompiledGpu"
TF32_ALWAYS = "tests.faulty:FakeCompiledTf32Always"
SQUARE = dict(a=tst.tensors(shape=(16, 16), dtype="float32"), b=tst.tensors(shape=(16, 16), dtype="float32"))


@triton.jit
def dot16(a_ptr, b_ptr, c_ptr, PREC: tl.constexpr):
    i = tl.arange(0, 16)
    a = tl.load(a_ptr + i[:, None] * 16 + i[None, :])
    b = tl.load(b_ptr + i[:, None] * 16 + i[None, :])
    tl.store(c_ptr + i[:, None] * 16 + i[None, :], tl.dot(a, b, input_precision=PREC))


def _dot(prec):
    def launch(kernel, a, b):
        c = torch.empty(16, 16, dtype=torch.float32, device=a.device)
        kernel[(1,)](a, b, c, PREC=prec)
        return c

    return launch


def matmul(a, b):
    return (a.double() @ b.double()).float()


# a correct tf32 kernel on a GPU: compiled (tf32) against the interpreter and the reference
tdiff.check(launch=_dot("tf32"), reference=matmul, name="tf32", backends=("interpreter", GPU), **SQUARE)(dot16)
# a faulty compiler that runs an IEEE dot in tf32
tdiff.check(launch=_dot("ieee"), reference=matmul, name="ieee", backends=("interpreter", TF32_ALWAYS), **SQUARE)(dot16)


@triton.jit
def decay(x_ptr, c_ptr, y_ptr, w_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """exp(-(x * c - y) * w): the GPU contracts x * c - y into one multiply-add (its exact residual, times an
    infinite w: -inf, exp: 0) where IEEE arithmetic rounds x * c first (a residual of 0, times w: NaN)."""
    i = tl.arange(0, BLOCK)
    m = i < n
    x, c = tl.load(x_ptr + i, mask=m), tl.load(c_ptr + i, mask=m)
    y, w = tl.load(y_ptr + i, mask=m), tl.load(w_ptr + i, mask=m)
    tl.store(out_ptr + i, tl.exp(-(x * c - y) * w), mask=m)


@triton.jit
def decay_last_lane_lost(x_ptr, c_ptr, y_ptr, w_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """`decay` with an off-by-one mask: the last lane's x is read as a real 0 (other=0.0)."""
    i = tl.arange(0, BLOCK)
    m = i < n
    x = tl.load(x_ptr + i, mask=i < n - 1, other=0.0)
    c, y, w = tl.load(c_ptr + i, mask=m), tl.load(y_ptr + i, mask=m), tl.load(w_ptr + i, mask=m)
    tl.store(out_ptr + i, tl.exp(-(x * c - y) * w), mask=m)


def _decay(kernel, x, c, y, w):
    out = torch.empty_like(x)
    kernel[(1,)](x, c, y, w, out, x.numel(), BLOCK=triton.next_power_of_2(x.numel()))
    return out


def decayed(x, c, y, w):
    return torch.exp(-(x.double() * c.double() - y.double()) * w.double()).float()


VECTORS = {name: tst.tensors(shape=(4,), dtype="float32") for name in ("x", "c", "y", "w")}
for _kernel in (decay, decay_last_lane_lost):
    tdiff.check(launch=_decay, reference=decayed, name="cpu", **VECTORS)(_kernel)
    tdiff.check(launch=_decay, reference=decayed, name="compiled", backends=("interpreter", GPU), **VECTORS)(_kernel)


@triton.jit
def centred_times(x_ptr, w_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """(x - mean(x)) * w over one row: where x is nearly constant, x - mean is a rounding-level value that another
    summation order makes 0 (times an infinite w: NaN where the other gives an infinity)."""
    i = tl.arange(0, BLOCK)
    m = i < n
    x = tl.load(x_ptr + i, mask=m, other=0.0)
    mean = tl.sum(x, axis=0) / n
    tl.store(out_ptr + i, (x - mean) * tl.load(w_ptr + i, mask=m), mask=m)


def _centred(kernel, x, w):
    out = torch.empty_like(x)
    kernel[(1,)](x, w, out, x.numel(), BLOCK=triton.next_power_of_2(x.numel()))
    return out


def centred(x, w):
    xd = x.double()
    return ((xd - xd.mean()) * w.double()).float()


ROW = dict(x=tst.tensors(shape=(127,), dtype="float32"), w=tst.tensors(shape=(127,), dtype="float32"))
tdiff.check(launch=_centred, reference=centred, name="compiled",
            backends=("interpreter", "tests.faulty:FakeCompiledGpuOther"), **ROW)(centred_times)
tdiff.check(launch=_centred, reference=centred, name="gpu", backends=("interpreter", "tests.faulty:FakeCompiledGpu"),
            **ROW)(centred_times)

#: a row of five whose float32 sum is the same in every order, whose mean the GPU's `div.full.f32` (x * (1/5))
#: rounds onto its first element where IEEE's x / 5 rounds one ulp below: times an infinite weight, NaN against inf
#: (FlagGems' LayerNorm on an H200 gave that NaN at a random seed)
DIV_FULL_ROW = [1.809853434562683, 1.809853196144104, 1.8098530769348145, 1.8098535537719727, 1.8098535537719727]

@triton.jit
def row_sum(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """The sum of one row, scaled far from the range's edge: near float32's limits the sum overflows in one summation
    order and not another, and the scaled result is an ordinary number (no range-edge rule decides it)."""
    i = tl.arange(0, BLOCK)
    tl.store(out_ptr, tl.sum(tl.load(x_ptr + i, mask=i < n, other=0.0), axis=0) * 1e-30)


def _row_sum(kernel, x):
    out = torch.empty(1, dtype=x.dtype, device=x.device)
    kernel[(1,)](x, out, x.numel(), BLOCK=triton.next_power_of_2(x.numel()))
    return out


def summed(x):
    return (x.double().sum() * 1e-30).float().reshape(1)


tdiff.check(launch=_row_sum, reference=summed, name="compiled", backends=("interpreter", GPU),
            x=tst.tensors(shape=(4,), dtype="float32"))(row_sum)

# on a GPU machine: the real compiled kernel (tests/test_gpu.py)
for _p in ("tf32", "tf32x3", "ieee"):
    tdiff.check(launch=_dot(_p), reference=matmul, name=f"{_p}_compiled", **SQUARE)(dot16)
