"""Planted precision bugs, declared generically: the classes tdiff's flags and dataflow scale used to forgive.

Each original is a correct kernel declared the way a user declares it (drawn sides, every layout, the default
values); each mutant keeps that declaration and changes the numerics the way shipped kernels got them wrong:

| mutant | class |
|---|---|
| rms_norm_eps_outside | eps added outside the square root: `x / (sqrt(mean(x*x)) + eps)` |
| layer_norm_one_pass_var | the variance as E[x^2] - E[x]^2, unclamped, under rsqrt (cancellation) |
| layer_norm_fp16_stats | a float16 LayerNorm whose row statistics are summed in float16 |
| rev_cumsum_total_minus_prefix | a reverse cumulative sum computed as `total - prefix + x` (cancellation) |
| exprel_difference | `(exp(x) - 1) / x`: a division by a difference that cancels near 0 |

Imported by bench/power_mutants.py, which adds these to MUTANTS, ORIGINALS and TRIGGERS.
"""

from __future__ import annotations

from typing import Any

import torch
import triton
import triton.language as tl

from bench.power_generic import _torch, generic
from tdiff import strategies as tst

#: (mutant kernel, original kernel, kind, bug, trigger, triggered(case)), as in bench/power_generic.py
PRECISION: list[tuple[Any, Any, str, str, str, Any]] = []
ORIGINALS: list[Any] = []


def precise(**declaration: Any):
    """`generic(...)`, recorded in this module's PRECISION and ORIGINALS."""
    return generic(into=(PRECISION, ORIGINALS), **declaration)


def _rows(kernel, x, *extra):
    m, n = x.shape
    out = torch.empty((m, n), dtype=x.dtype, device=x.device)
    kernel[(m,)](x, out, n, x.stride(0), x.stride(1), *extra, BLOCK=triton.next_power_of_2(n))
    return out


# ------------------------------------------------------------------ RMS norm: eps outside the square root

EPS = 1e-6


def _rms_reference(x):
    x64 = x.double()
    return (x64 * torch.rsqrt((x64 * x64).mean(-1, keepdim=True) + EPS)).to(x.dtype)


@precise(launch=lambda kernel, x: _rows(kernel, x, EPS), reference=_rms_reference, x=tst.tensors(ndim=2))
@triton.jit
def rms_norm_rows(x_ptr, out_ptr, n, stride_m, stride_n, eps, BLOCK: tl.constexpr):
    """y = x * rsqrt(mean(x^2) + eps), one row per program."""
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n
    x = tl.load(x_ptr + row * stride_m + cols * stride_n, mask=mask, other=0.0).to(tl.float32)
    ms = tl.sum(x * x, axis=0) / n
    y = x * tl.rsqrt(ms + eps)
    tl.store(out_ptr + row * n + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


def _tiny_rows(c: Any) -> bool:
    x = _torch(c, "x").double()
    ms = (x * x).mean(-1)
    return bool(((ms < 1e2 * EPS) & (x.abs().amax(-1) > 0)).any())


@rms_norm_rows.mutant(kind="precision: eps outside the square root", bug="x / (sqrt(mean(x^2)) + eps)",
                      trigger="a nonzero row whose mean square is near eps or below", triggered=_tiny_rows)
@triton.jit
def rms_norm_eps_outside(x_ptr, out_ptr, n, stride_m, stride_n, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n
    x = tl.load(x_ptr + row * stride_m + cols * stride_n, mask=mask, other=0.0).to(tl.float32)
    ms = tl.sum(x * x, axis=0) / n
    y = x / (tl.sqrt(ms) + eps)  # BUG: eps outside the square root
    tl.store(out_ptr + row * n + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


# ------------------------------------------------------------------ LayerNorm: one-pass variance

LN_EPS = 1e-5


def _ln_reference(x):
    return torch.nn.functional.layer_norm(x.double(), x.shape[-1:], eps=LN_EPS).to(x.dtype)


@precise(launch=lambda kernel, x: _rows(kernel, x, LN_EPS), reference=_ln_reference, x=tst.tensors(ndim=2))
@triton.jit
def layer_norm_rows(x_ptr, out_ptr, n, stride_m, stride_n, eps, BLOCK: tl.constexpr):
    """y = (x - mean) * rsqrt(var + eps) (no affine), statistics in float32, two passes."""
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n
    x = tl.load(x_ptr + row * stride_m + cols * stride_n, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / n
    d = tl.where(mask, x - mean, 0.0)
    var = tl.sum(d * d, axis=0) / n
    tl.store(out_ptr + row * n + cols, (d * tl.rsqrt(var + eps)).to(out_ptr.dtype.element_ty), mask=mask)


def _offset_rows(c: Any) -> bool:
    x = _torch(c, "x").double()
    return bool(((x.mean(-1).abs() > 8 * x.std(-1, unbiased=False).nan_to_num(0)) & (x.shape[-1] > 1)).any())


@layer_norm_rows.mutant(kind="precision: one-pass variance", bug="var = E[x^2] - E[x]^2, unclamped, under rsqrt",
                        trigger="a row whose mean is large against its spread", triggered=_offset_rows)
@triton.jit
def layer_norm_one_pass_var(x_ptr, out_ptr, n, stride_m, stride_n, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n
    x = tl.load(x_ptr + row * stride_m + cols * stride_n, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / n
    var = tl.sum(x * x, axis=0) / n - mean * mean  # BUG: cancels, may go negative
    d = tl.where(mask, x - mean, 0.0)
    tl.store(out_ptr + row * n + cols, (d * tl.rsqrt(var + eps)).to(out_ptr.dtype.element_ty), mask=mask)


# ------------------------------------------------------------------ LayerNorm in float16: statistics in float16

@precise(launch=lambda kernel, x: _rows(kernel, x, LN_EPS), reference=_ln_reference,
         x=tst.tensors(ndim=2, dtype="float16"))
@triton.jit
def layer_norm_fp16(x_ptr, out_ptr, n, stride_m, stride_n, eps, BLOCK: tl.constexpr):
    """A float16 LayerNorm with float32 statistics."""
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n
    x = tl.load(x_ptr + row * stride_m + cols * stride_n, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / n
    d = tl.where(mask, x - mean, 0.0)
    var = tl.sum(d * d, axis=0) / n
    tl.store(out_ptr + row * n + cols, (d * tl.rsqrt(var + eps)).to(tl.float16), mask=mask)


def _fp16_stats_hurt(c: Any) -> bool:
    x = _torch(c, "x").double()
    if not torch.isfinite(x).all():
        return False
    return bool((x.abs().sum(-1) > 2048).any() or ((x - x.mean(-1, keepdim=True)) ** 2).sum(-1).max() > 2048)


@layer_norm_fp16.mutant(kind="precision: float16 statistics", bug="mean and variance summed in float16",
                        trigger="a row whose sums outgrow float16's precision or range", triggered=_fp16_stats_hurt)
@triton.jit
def layer_norm_fp16_stats(x_ptr, out_ptr, n, stride_m, stride_n, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n
    x = tl.load(x_ptr + row * stride_m + cols * stride_n, mask=mask, other=0.0)  # BUG: stays float16
    mean = tl.sum(x, axis=0) / n
    d = tl.where(mask, x - mean, 0.0).to(tl.float16)
    var = tl.sum(d * d, axis=0) / n
    y = d.to(tl.float32) * tl.rsqrt(var.to(tl.float32) + eps)
    tl.store(out_ptr + row * n + cols, y.to(tl.float16), mask=mask)


# ------------------------------------------------------------------ a reverse cumulative sum

def _rev_reference(x):
    return torch.flip(torch.cumsum(torch.flip(x.double(), [1]), 1), [1]).to(x.dtype)


@precise(launch=_rows, reference=_rev_reference, x=tst.tensors(ndim=2))
@triton.jit
def rev_cumsum(x_ptr, out_ptr, n, stride_m, stride_n, BLOCK: tl.constexpr):
    """out[i] = sum(x[i:]) per row, scanned from the end."""
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n
    back = n - 1 - cols  # the row read back to front
    x = tl.load(x_ptr + row * stride_m + back * stride_n, mask=mask, other=0.0).to(tl.float32)
    s = tl.cumsum(x, axis=0)
    tl.store(out_ptr + row * n + back, s.to(out_ptr.dtype.element_ty), mask=mask)


def _suffix_cancels(c: Any) -> bool:
    x = _torch(c, "x").double()
    if x.shape[-1] < 2 or not torch.isfinite(x).all():
        return False
    suffix = torch.flip(torch.cumsum(torch.flip(x, [1]), 1), [1])
    total = x.abs().sum(-1, keepdim=True)
    return bool((suffix.abs() * 1e3 < total).any())


@rev_cumsum.mutant(kind="precision: cancellation", bug="out = total - prefix + x",
                   trigger="a suffix sum small against the row's total", triggered=_suffix_cancels)
@triton.jit
def rev_cumsum_total_minus_prefix(x_ptr, out_ptr, n, stride_m, stride_n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n
    x = tl.load(x_ptr + row * stride_m + cols * stride_n, mask=mask, other=0.0).to(tl.float32)
    total = tl.sum(x, axis=0)
    s = total - tl.cumsum(x, axis=0) + x  # BUG: cancels where the suffix is small
    tl.store(out_ptr + row * n + cols, s.to(out_ptr.dtype.element_ty), mask=mask)


# ------------------------------------------------------------------ (exp(x) - 1) / x

def _exprel_reference(x):
    x64 = x.double()
    return torch.where(x64 == 0, torch.ones_like(x64), torch.special.expm1(x64) / x64).to(x.dtype)


def _flat(kernel, x):
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    n = x.numel()
    kernel[(triton.cdiv(n, 128),)](x, out, n, BLOCK=128)
    return out


@precise(launch=_flat, reference=_exprel_reference,
         x=tst.tensors(ndim=1, layouts=("contiguous",), values=tst.values(-20, 20)))
@triton.jit
def exprel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """(exp(x) - 1) / x, accurately (Kahan: u = exp(x); (u - 1) / log(u))."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=1.0)
    u = tl.exp(x)
    y = tl.where(u == 1.0, 1.0, (u - 1.0) / tl.log(u))
    tl.store(out_ptr + offs, y, mask=mask)


@exprel.mutant(kind="precision: cancelling difference", bug="(exp(x) - 1) / x", trigger="0 < |x| < 1e-3",
               triggered=lambda c: bool(((_torch(c, "x").abs() < 1e-3) & (_torch(c, "x") != 0)).any()))
@triton.jit
def exprel_difference(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=1.0)
    y = tl.where(x == 0.0, 1.0, (tl.exp(x) - 1.0) / x)  # BUG: exp(x) - 1 cancels near 0
    tl.store(out_ptr + offs, y, mask=mask)

