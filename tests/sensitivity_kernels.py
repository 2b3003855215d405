"""Kernels whose differences a flag marked and used to forgive (tests/test_sensitivity.py): an overflow on the way
to a result that fits, float16 statistics of a float16 row; each with the correct twin where there is one."""

import torch
import triton
import triton.language as tl
from triton.language.extra import libdevice

import tdiff
from tdiff import strategies as tst


def _elementwise_launch(kernel, x):
    out = torch.empty_like(x)
    kernel[(1,)](x, out, x.numel(), BLOCK=triton.next_power_of_2(max(1, x.numel())))
    return out


@tdiff.check(launch=_elementwise_launch, reference=lambda x: x * 2,
             x=tst.tensors(shape=(4,), dtype="float16", layouts=["contiguous"], values=tst.values(-4, 4)))
@triton.jit
def twice_via_four(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.store(out_ptr + offs, (x * 4.0) / 2.0, mask=offs < n)  # overflows for |x| > max / 4, where x * 2 fits


def _row_mean_launch(kernel, x):
    rows, cols = x.shape
    out = torch.empty(rows, dtype=x.dtype, device=x.device)
    kernel[(rows,)](x, out, cols, BLOCK=triton.next_power_of_2(cols))
    return out


_ROW_MEAN = dict(launch=_row_mean_launch, reference=lambda x: x.double().mean(-1).to(x.dtype),
                 x=tst.tensors(ndim=2, max_side=8, dtype="float16", layouts=["contiguous"],
                               values=tst.values(-4, 4, specials=False)))


@tdiff.check(**_ROW_MEAN)
@triton.jit
def row_mean_fp16_sum(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * n + cols, mask=cols < n, other=0.0)
    tl.store(out_ptr + row, tl.sum(x, axis=0) / n)  # the bug: the statistics summed in float16


@tdiff.check(**_ROW_MEAN)
@triton.jit
def row_mean_fp32_sum(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * n + cols, mask=cols < n, other=0.0).to(tl.float32)
    tl.store(out_ptr + row, tl.sum(x, axis=0) / n)


@tdiff.check(launch=_elementwise_launch, reference=lambda x: x * 2,
             x=tst.tensors(shape=(4,), dtype="float16", layouts=["contiguous"], values=tst.values(-4, 4)))
@triton.jit
def twice_as_four(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.store(out_ptr + offs, x * 4.0, mask=offs < n)  # the bug: 4x; at 20000, inf against 40000, 80000 in float64



def _float64_refused(x):
    assert x.dtype != torch.float64, "this reference runs only at the case's precision"
    return x.clone()


_ROUNDTRIP = dict(launch=_elementwise_launch,
                  x=tst.tensors(shape=(4,), dtype="float32", layouts=["contiguous"], values=tst.values(0, 1)))


def _offset_roundtrip(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.store(out_ptr + offs, (x + 1024.0) - 1024.0, mask=offs < n)  # the bug: x's low bits rounded away at 1024


#: an unstable algorithm: within the dataflow scale (it follows the kernel's own 1024), beyond what the problem allows
offset_roundtrip = tdiff.check(reference=lambda x: x.clone(), **_ROUNDTRIP)(triton.jit(_offset_roundtrip))
#: the same, its precision declared
offset_roundtrip_declared = tdiff.check(reference=lambda x: x.clone(), tolerance="arith", name="declared",
                                        **_ROUNDTRIP)(triton.jit(_offset_roundtrip))
#: the same, with a reference that cannot run in float64: nothing measures the problem's scale
offset_roundtrip_unmeasured = tdiff.check(reference=_float64_refused, name="unmeasured",
                                          **_ROUNDTRIP)(triton.jit(_offset_roundtrip))


@tdiff.check(reference=lambda x: x * 2, name="split", **_ROUNDTRIP)
@triton.jit
def offset_split(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """The same cancellation over three lines: the spread grows where 1024 is subtracted, not before or after."""
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    y = x + 1024.0
    z = y - 1024.0  # the spread grows here
    tl.store(out_ptr + offs, z * 2.0, mask=offs < n)


# ---------------------------------------------------------------- what a float32 computation of the problem carries

def _rows_launch(kernel, x):
    rows, cols = x.shape
    out = torch.empty_like(x)
    kernel[(rows,)](x, out, cols, BLOCK=triton.next_power_of_2(cols))
    return out


_LAYER_NORM = dict(launch=_rows_launch,
                   reference=lambda x: torch.nn.functional.layer_norm(x.double(), x.shape[-1:], eps=1e-5).to(x.dtype),
                   x=tst.tensors(ndim=2, max_side=8, layouts=["contiguous"], values=tst.values(-4, 4)))


@tdiff.check(**_LAYER_NORM)
@triton.jit
def layer_norm_two_pass(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """Correct: the float32 rounding of the mean moves a row [a, a + d] by about u * |a| / d, as it moves PyTorch's
    float32 LayerNorm, while the exact result (+-1) does not move at all."""
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n
    x = tl.load(x_ptr + row * n + cols, mask=mask, other=0.0)
    mean = tl.sum(x, axis=0) / n
    d = tl.where(mask, x - mean, 0.0)
    var = tl.sum(d * d, axis=0) / n
    tl.store(out_ptr + row * n + cols, d * tl.rsqrt(var + 1e-5), mask=mask)


@tdiff.check(**_LAYER_NORM)
@triton.jit
def layer_norm_one_pass(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """The bug: var = E[x^2] - E[x]^2 cancels (u * a^2 / d^2, where float32 arithmetic of the problem: u * a / d)."""
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n
    x = tl.load(x_ptr + row * n + cols, mask=mask, other=0.0)
    mean = tl.sum(x, axis=0) / n
    var = tl.sum(x * x, axis=0) / n - mean * mean
    d = tl.where(mask, x - mean, 0.0)
    tl.store(out_ptr + row * n + cols, d * tl.rsqrt(var + 1e-5), mask=mask)


@tdiff.check(launch=_elementwise_launch, reference=lambda x: (x.double() * x.double()).sqrt().to(x.dtype),
             x=tst.tensors(shape=(4,), layouts=["contiguous"], values=tst.values(-4, 4)))
@triton.jit
def abs_via_square(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.store(out_ptr + offs, tl.sqrt(x * x), mask=offs < n)  # x * x overflows float32 for |x| > 1.8e19


@tdiff.check(reference=lambda x: x.clone(), name="near_pole", **_ROUNDTRIP)
@triton.jit
def offset_roundtrip_near_pole(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """offset_roundtrip's cancellation, flagged fragile: it adds 0 times the square root of rounding noise (near the
    square root's pole), a flag every value computed from it carries."""
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    noise = tl.sqrt(tl.abs((x + 1.0) - 1.0 - x))
    tl.store(out_ptr + offs, (x + 1024.0) - 1024.0 + noise * 0.0, mask=offs < n)


def _row_argmax_launch(kernel, x):
    rows, cols = x.shape
    idx = torch.empty(rows, dtype=torch.int32, device=x.device)
    kernel[(rows,)](x, idx, cols, BLOCK=triton.next_power_of_2(cols))
    return idx


# the index of each row's largest x + 1000, as the float64 reference has it
_ROW_ARGMAX = dict(launch=_row_argmax_launch, reference=lambda x: (x.double() + 1000.0).argmax(-1).to(torch.int32),
                   x=tst.tensors(ndim=2, max_side=8, layouts=["contiguous"], values=tst.values(-1, 1)))


@triton.jit
def _this_row(x_ptr, n, BLOCK: tl.constexpr):
    """This program's row of x, -inf past its end."""
    cols = tl.arange(0, BLOCK)
    return tl.load(x_ptr + tl.program_id(0) * n + cols, mask=cols < n, other=-float("inf"))


@tdiff.check(**_ROW_ARGMAX)
@triton.jit
def argmax_offset(x_ptr, idx_ptr, n, BLOCK: tl.constexpr):
    """The index of each row's largest x + 1000 (float32): values a few ulps of 1000 apart near-tie there."""
    tl.store(idx_ptr + tl.program_id(0), tl.argmax(_this_row(x_ptr, n, BLOCK) + 1000.0, axis=0))


@tdiff.check(**_ROW_ARGMAX)
@triton.jit
def argmax_two_offsets(x_ptr, idx_ptr, n, BLOCK: tl.constexpr):
    """As `argmax_offset`, adding 1000 in two steps (two roundings, as a GPU's approximations may round)."""
    tl.store(idx_ptr + tl.program_id(0), tl.argmax((_this_row(x_ptr, n, BLOCK) + 500.0) + 500.0, axis=0))


def _scaled_tanh_launch(kernel, x):
    y = torch.empty_like(x)
    kernel[(1,)](x, y, x.numel(), BLOCK=triton.next_power_of_2(x.numel()))
    return y


@tdiff.check(launch=_scaled_tanh_launch, reference=lambda x: (torch.tanh(x.double() * 1e-30) * 1e25).float(),
             x=tst.tensors(ndim=1, max_side=8, layouts=["contiguous"]))
@triton.jit
def scaled_tanh_flushed(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    """tanh(x * 1e-30) * 1e25 with the tanh's subnormal operand flushed to zero, as Triton's compiled libdevice
    `tanh` does (`enable_reflect_ftz`): written out, so that the interpreter gives what a GPU gives."""
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    t = x * 1e-30
    t = tl.where(tl.abs(t) < 1.1754943508222875e-38, 0.0, t)
    tl.store(y_ptr + offs, libdevice.tanh(t) * 1e25, mask=offs < n)


def _hit_launch(kernel, x, y):
    out = torch.empty(x.shape[0], dtype=torch.float32, device=x.device)
    kernel[(x.shape[0],)](x, y, out, x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]))
    return out


@tdiff.check(launch=_hit_launch, reference=lambda x, y: ((30 * torch.tanh(x.double() / 30)).argmax(-1) == y).float(),
             x=tst.tensors(shape=(1, 2), layouts=["contiguous"]),
             y=tst.tensors(shape=(1,), dtype="int64", values=tst.values(0, 1)))
@triton.jit
def softcap_hit_flushed(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """liger's token accuracy after soft-capping: 1.0 where the row's first largest capped logit is at its target,
    decided by a Python `if` on that index (the value stored is a constant); the tanh's subnormal operand flushed to
    zero, as Triton's compiled libdevice `tanh` does (written out, so that the interpreter gives what a GPU gives)."""
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * n + offs, mask=offs < n, other=float("-inf"))
    t = x / 30.0
    t = tl.where(tl.abs(t) < 1.1754943508222875e-38, 0.0, t)
    x = 30.0 * libdevice.tanh(t)
    top = tl.max(x, axis=0)
    idx = tl.min(tl.where(x == top, offs, BLOCK), axis=0)
    hit = 1.0 if idx == tl.load(y_ptr + row) else 0.0
    tl.store(out_ptr + row, hit)

