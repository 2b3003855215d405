"""`tl.minimum`/`tl.maximum`/`tl.clamp`/`tl.where`: exact. With `propagate_nan=ALL` a NaN operand gives
NaN (LLVM `minimumf`/`maximumf`); under the default `propagate_nan=NONE` a NaN and a number give either
(`minnumf`/`maxnumf`: the number on NVIDIA): unspecified, drawn by `maximum_nan_unspecified`.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

import tdiff
from tdiff import strategies as tst

from ._common import SIZE, same

F32 = dict(shape=(SIZE,), dtype=["float32", "float16"], layouts=["contiguous"])
NO_NEG_ZERO = tst.values(neg_zero=False)  # (min/max of -0.0 and 0.0 may give either: unspecified)


@tdiff.check(launch=same, reference=lambda x, y: torch.where(x > y, torch.minimum(x, y), torch.maximum(x, y)),
             tolerance="exact", x=tst.tensors(**F32, values=NO_NEG_ZERO),
             y=tst.tensors(like="x", layouts=["contiguous"], values=NO_NEG_ZERO))
@triton.jit
def minmax_propagate_all(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    y = tl.load(y_ptr + offs, mask=m)
    lo = tl.minimum(x, y, propagate_nan=tl.PropagateNan.ALL)
    hi = tl.maximum(x, y, propagate_nan=tl.PropagateNan.ALL)
    tl.store(out_ptr + offs, tl.where(x > y, lo, hi), mask=m)


def _bound(y: torch.Tensor) -> torch.Tensor:
    b = y.abs()
    return torch.where((b == 0) | torch.isnan(b), torch.ones_like(b), b)


@tdiff.check(launch=same, reference=lambda x, y: torch.clamp(x, -_bound(y), _bound(y)),
             tolerance="exact",
             x=tst.tensors(**F32, values=tst.values(nan=False, neg_zero=False)),
             y=tst.tensors(like="x", layouts=["contiguous"]))
@triton.jit
def clamp(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    b = tl.abs(tl.load(y_ptr + offs, mask=m))
    b = tl.where((b == 0) | (b != b), 1.0, b)  # bounds neither NaN (unspecified) nor 0 (either zero: FINDINGS)
    tl.store(out_ptr + offs, tl.clamp(x, -b, b), mask=m)


@tdiff.check(launch=same, reference=lambda x, y: torch.fmax(x, y), tolerance="exact", unspecified="note",
             x=tst.tensors(**F32, values=tst.values(neg_zero=False)),  # (max of -0.0 and 0.0: either)
             y=tst.tensors(like="x", layouts=["contiguous"], values=tst.values(neg_zero=False)))
@triton.jit
def maximum_nan_unspecified(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=m), tl.load(y_ptr + offs, mask=m)), mask=m)
