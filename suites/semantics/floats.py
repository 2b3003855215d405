"""Float arithmetic. Exact: one `+`, `-` or `*` of float32 operands (IEEE, rounded to nearest even; the
float64 result rounded once to float32 is the same), `tl.fma` (PTX `fma.rn`), `tl.math.div_rn` and
`tl.math.sqrt_rn` (PTX `div.rn`, `sqrt.rn`). Approximate: default `/` (`div.full.f32`, 2 ulp), `exp`,
`log`, `sin`, `cos`, `rsqrt`, `erf`, `sqrt` (the GPU's approximations, flush-to-zero: the
`transcendental` tolerance).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import torch
import triton
import triton.language as tl

import tdiff
from tdiff import strategies as tst

from ._common import SIZE, same

F32 = dict(shape=(SIZE,), dtype="float32", layouts=["contiguous"])


def _f64_once(fn):
    return lambda x, y: torch.from_numpy(fn(x.double().numpy(), y.double().numpy()).astype(np.float32))


@tdiff.check(launch=same, reference=_f64_once(lambda a, b: a + b), tolerance="exact",
             x=tst.tensors(**F32), y=tst.tensors(like="x", layouts=["contiguous"]))
@triton.jit
def add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)


@tdiff.check(launch=same, reference=_f64_once(lambda a, b: a * b), tolerance="exact",
             x=tst.tensors(**F32), y=tst.tensors(like="x", layouts=["contiguous"]))
@triton.jit
def mul(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) * tl.load(y_ptr + offs, mask=m), mask=m)


def _fma_ref(x, y):
    def one(a: float, b: float) -> float:
        if not (np.isfinite(a) and np.isfinite(b)):
            return float(np.float32(a * b + b))
        exact = Fraction(a) * Fraction(b) + Fraction(b)
        return float(np.float32(float(exact))) if exact != 0 else a * b + b

    return torch.tensor([one(a, b) for a, b in zip(x.tolist(), y.tolist())], dtype=torch.float32)


@tdiff.check(launch=same, reference=_fma_ref, tolerance="exact",
             x=tst.tensors(**F32, values=tst.values(-1e15, 1e15, subnormal=False)),
             y=tst.tensors(like="x", layouts=["contiguous"], values=tst.values(-1e15, 1e15, subnormal=False)))
@triton.jit
def fma(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    y = tl.load(y_ptr + offs, mask=m)
    tl.store(out_ptr + offs, tl.fma(x, y, y), mask=m)


@tdiff.check(launch=same, reference=_f64_once(lambda a, b: a / b), tolerance="exact",
             x=tst.tensors(**F32, values=tst.values(subnormal=False)),
             y=tst.tensors(like="x", layouts=["contiguous"], values=tst.values(subnormal=False)))
@triton.jit
def div_rn(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.math.div_rn(tl.load(x_ptr + offs, mask=m), tl.load(y_ptr + offs, mask=m)), mask=m)


@tdiff.check(launch=same, reference=_f64_once(lambda a, b: np.sqrt(a)), tolerance="exact",
             x=tst.tensors(**F32, values=tst.values(0, None, subnormal=False)),
             y=tst.tensors(like="x", layouts=["contiguous"]))
@triton.jit
def sqrt_rn(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.math.sqrt_rn(tl.load(x_ptr + offs, mask=m)), mask=m)


@tdiff.check(launch=same, reference=_f64_once(lambda a, b: a / b),  # approximate: div.full.f32, 2 ulp
             x=tst.tensors(**F32, values=tst.values(-1e30, 1e30, subnormal=False)),
             y=tst.tensors(like="x", layouts=["contiguous"], values=tst.values(1e-30, 1e30, subnormal=False)))
@triton.jit
def default_division(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) / tl.load(y_ptr + offs, mask=m, other=1.0), mask=m)


def _math_ref(x, y):
    a = x.double()
    return (torch.exp(a.clamp(-80, 80)) + torch.log(a.abs() + 1) + torch.sin(a) + torch.cos(a)
            + torch.rsqrt(a.abs() + 1) + torch.erf(a)).float()


@tdiff.check(launch=same, reference=_math_ref,  # approximate: the transcendental tolerance
             x=tst.tensors(**F32, values=tst.values(-50, 50, nan=False, inf=False)),
             y=tst.tensors(like="x", layouts=["contiguous"]))
@triton.jit
def math_functions(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    a = tl.load(x_ptr + offs, mask=m)
    r = tl.exp(tl.clamp(a, -80.0, 80.0)) + tl.log(tl.abs(a) + 1) + tl.sin(a) + tl.cos(a) \
        + tl.math.rsqrt(tl.abs(a) + 1) + tl.math.erf(a)
    tl.store(out_ptr + offs, r, mask=m)
