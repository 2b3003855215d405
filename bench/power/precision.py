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

Imported by bench/power/mutants.py, which adds these to MUTANTS, ORIGINALS and TRIGGERS.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
import triton
import triton.language as tl

from bench.power.generic import _torch, generic
from tdiff import strategies as tst
from tdiff.core.tolerance import Tolerance
from tdiff.execute.backends.float32_arithmetic import float32_arithmetic
from tdiff.judge.sensitivity import ACCUMULATION, LOADED_ROUNDINGS

#: (mutant kernel, original kernel, kind, bug, trigger, triggered(case)), as in bench/power/generic.py
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


# ------------------------------------------------------------------ triggers: can the case show the bug?

#: random draws of the inputs moved by one rounding (in float64, and by one ulp at their own precision) that a
#: trigger measures the problem's own spread with (the judge draws 6 and 4: fewer draws measure a smaller spread,
#: so the trigger errs towards counting a case)
DRAWS = 4


def _spread(reference: Any, x: np.ndarray, torch_reference: Any = None) -> tuple[np.ndarray, np.ndarray]:
    """(the float64 reference on `x`, the largest change of it when every element of `x` moves by one rounding:
    x * (1 +- u) in float64, and one ulp at x's precision with the result rounded to it), as the judge measures
    what the problem allows (tdiff.judge.sensitivity); with `torch_reference` (the check's), also its runs on the
    moved inputs with its float64 arithmetic in float32, their distance from the float64 result times
    `ACCUMULATION` (the judge's native runs)."""
    x64 = x.astype(np.float64)
    with np.errstate(all="ignore"):
        exact = reference(x64)
        spread = np.zeros(exact.shape)
        rng = np.random.default_rng(0)
        u = np.finfo(x.dtype).eps / 2
        for _ in range(DRAWS):
            signs = rng.choice(np.array([-1.0, 1.0]), size=x.shape)
            spread = np.fmax(spread, np.abs(reference(x64 * (1 + signs * u)) - exact))
            moved = np.nextafter(x, (signs * np.inf).astype(x.dtype))
            moved = np.where(np.isfinite(moved), moved, x)
            native = reference(moved.astype(np.float64)).astype(x.dtype).astype(np.float64)
            spread = np.fmax(spread, np.abs(native - exact))
            if torch_reference is not None:
                with float32_arithmetic():
                    computed = torch_reference(torch.from_numpy(moved.copy())).double().numpy()
                d = np.where(np.isfinite(computed) | ~np.isfinite(exact), np.abs(computed - exact), 0.0)
                spread = np.fmax(spread, ACCUMULATION * d)
    return exact, spread


def _shows(c: Any, mutant: Any, correct: Any, reference: Any, tolerance: str, torch_reference: Any = None) -> bool:
    """Whether the case can show the planted bug at the check's tolerance: some element where the mutant's float
    program (simulated in numpy in the kernel's own dtypes, as the CPU interpreter computes: `np.sum` over the
    padded block, elementwise operations rounded to the dtype) is off the float64 reference by more than the
    strict tolerance (`tolerance`, the preset of the kernel's operations) plus twice what one rounding of the
    inputs moves the reference (what the judge allows the problem), while the correct kernel's float program is
    within that there. A necessary condition for the mutant to fail on the case, not a sufficient one."""
    x = _torch(c, "x").numpy()
    if not x.size:
        return False
    exact, spread = _spread(reference, x, torch_reference)
    tol = Tolerance.preset(tolerance, str(x.dtype))
    with np.errstate(all="ignore"):
        # the judge's `LOADED_ROUNDINGS` float32 roundings of the largest input each element's program loaded
        # (a row; a block of 128 for the flat kernel)
        mag = np.abs(np.where(np.isfinite(x), x, 0)).astype(np.float64)
        if x.ndim == 1:
            blocks = np.array_split(mag, max(1, -(-x.size // 128)))
            loaded = np.repeat([b.max() for b in blocks], [len(b) for b in blocks])
        else:
            loaded = mag.max(-1, keepdims=True)
        rounding = LOADED_ROUNDINGS * np.finfo(np.float32).eps * loaded

        def off(v: np.ndarray) -> np.ndarray:
            v = v.astype(np.float64)
            return ~(np.abs(v - exact) <= tol.atol + tol.rtol * np.minimum(np.abs(v), np.abs(exact)) + rounding
                     + 2 * spread)

        # the judge's one rule left (judge.edges `_at_float32_limits`): an overflow on the way from inputs at
        # float32's limits (1.8e19 and beyond) is what any float32 kernel gives, forgiven as `range-edge (float32
        # overflow)`; an element fed by such inputs whose mutant value overflowed cannot show the bug
        wrong = mutant(x)
        edge = (loaded >= np.sqrt(float(np.finfo(np.float32).max))) & ~np.isfinite(wrong)
        fin = np.isfinite(exact)
        return bool((fin & off(wrong) & ~off(correct(x)) & ~edge).any())


def _padded(x: np.ndarray) -> np.ndarray:
    """Rows of `x` padded with zeros to the kernel's block (the masked lanes a `tl.load(..., other=0.0)` fills)."""
    n = x.shape[-1]
    out = np.zeros((*x.shape[:-1], triton.next_power_of_2(n)), x.dtype)
    out[..., :n] = x
    return out


def _row_sum(x: np.ndarray) -> np.ndarray:
    """`tl.sum(x, axis=0)` per row as the interpreter computes it: numpy's sum over the padded block, in x's dtype."""
    return np.sum(_padded(x), axis=-1, keepdims=True)


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


def _rms_exact(x: np.ndarray) -> np.ndarray:
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + EPS)


def _rms_ms(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float32)
    return _row_sum(x * x) / np.float32(x.shape[-1])


def _tiny_rows(c: Any) -> bool:
    x32 = np.float32
    return _shows(c, lambda x: x.astype(x32) / (np.sqrt(_rms_ms(x)) + x32(EPS)),
                  lambda x: x.astype(x32) * (x32(1) / np.sqrt(_rms_ms(x) + x32(EPS))), _rms_exact, "transcendental",
                  _rms_reference)


@rms_norm_rows.mutant(kind="precision: eps outside the square root", bug="x / (sqrt(mean(x^2)) + eps)",
                      trigger="its float32 program off where the correct one is not (_shows: a row whose mean square "
                              "is near eps or below)", triggered=_tiny_rows)
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


def _ln_exact(x: np.ndarray) -> np.ndarray:
    d = x - x.mean(-1, keepdims=True)
    return d / np.sqrt((d * d).mean(-1, keepdims=True) + LN_EPS)


def _ln_two_pass(x: np.ndarray) -> np.ndarray:
    """layer_norm_rows's float program: statistics in float32, two passes."""
    x = x.astype(np.float32)
    n = np.float32(x.shape[-1])
    d = x - _row_sum(x) / n
    return d * (np.float32(1) / np.sqrt(_row_sum(d * d) / n + np.float32(LN_EPS)))


def _ln_one_pass(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float32)
    n = np.float32(x.shape[-1])
    mean = _row_sum(x) / n
    var = _row_sum(x * x) / n - mean * mean
    return (x - mean) * (np.float32(1) / np.sqrt(var + np.float32(LN_EPS)))


def _offset_rows(c: Any) -> bool:
    return _shows(c, _ln_one_pass, _ln_two_pass, _ln_exact, "transcendental", _ln_reference)


@layer_norm_rows.mutant(kind="precision: one-pass variance", bug="var = E[x^2] - E[x]^2, unclamped, under rsqrt",
                        trigger="its float32 program off where the correct one is not (_shows: a row whose mean is "
                                "large against its spread)", triggered=_offset_rows)
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


def _ln_fp16_stats(x: np.ndarray) -> np.ndarray:
    x16 = np.float16
    n = x16(x.shape[-1])
    d = (x - _row_sum(x) / n).astype(x16)
    var = _row_sum(d * d) / n
    return (d.astype(np.float32) * (np.float32(1) / np.sqrt(var.astype(np.float32) + np.float32(LN_EPS)))).astype(x16)


def _fp16_stats_hurt(c: Any) -> bool:
    return _shows(c, _ln_fp16_stats, lambda x: _ln_two_pass(x).astype(np.float16), _ln_exact, "transcendental",
                  _ln_reference)


@layer_norm_fp16.mutant(kind="precision: float16 statistics", bug="mean and variance summed in float16",
                        trigger="its float16 program off where the correct one is not (_shows: row sums that outgrow "
                                "float16's precision or range)", triggered=_fp16_stats_hurt)
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


def _suffix_sums(x: np.ndarray, dt: Any = None) -> np.ndarray:
    return np.flip(np.cumsum(np.flip(x, -1), -1, dtype=dt), -1)


def _total_minus_prefix(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float32)
    return _row_sum(x) - np.cumsum(x, -1, dtype=np.float32) + x


def _suffix_cancels(c: Any) -> bool:
    return _shows(c, _total_minus_prefix, lambda x: _suffix_sums(x.astype(np.float32), np.float32), _suffix_sums,
                  "reduce", _rev_reference)


@rev_cumsum.mutant(kind="precision: cancellation", bug="out = total - prefix + x",
                   trigger="its float32 program off where the correct one is not (_shows: a suffix small against the "
                           "row's total)", triggered=_suffix_cancels)
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


def _exprel_exact(x: np.ndarray) -> np.ndarray:
    return np.where(x == 0, 1.0, np.expm1(x) / np.where(x == 0, 1.0, x))


def _exprel_kahan(x: np.ndarray) -> np.ndarray:
    u = np.exp(x.astype(np.float32))
    return np.where(u == 1, np.float32(1), (u - np.float32(1)) / np.log(u))


def _exprel_difference(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float32)
    return np.where(x == 0, np.float32(1), (np.exp(x) - np.float32(1)) / x)


@exprel.mutant(kind="precision: cancelling difference", bug="(exp(x) - 1) / x",
               trigger="its float32 program off where the correct one is not (_shows: 0 < |x| below ~1e-3)",
               triggered=lambda c: _shows(c, _exprel_difference, _exprel_kahan, _exprel_exact, "transcendental",
                                                   _exprel_reference))
@triton.jit
def exprel_difference(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=1.0)
    y = tl.where(x == 0.0, 1.0, (tl.exp(x) - 1.0) / x)  # BUG: exp(x) - 1 cancels near 0
    tl.store(out_ptr + offs, y, mask=mask)

