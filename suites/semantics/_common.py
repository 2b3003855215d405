"""Launchers and value strategies shared by the semantics checks."""

from __future__ import annotations

import numpy as np
import torch
import triton
from hypothesis import strategies as st

from tdiff import strategies as tst

BLOCK = 64
SIZE = tst.sides(1, 130)


def out_like(dtype: torch.dtype):
    """launch(kernel, x[, y]): one program per BLOCK elements, an output of `dtype`."""

    def launch(kernel, x, y=None):
        out = torch.empty(x.shape, dtype=dtype, device=x.device)
        n = x.numel()
        args = (x, out) if y is None else (x, y, out)
        kernel[(triton.cdiv(n, BLOCK),)](*args, n, BLOCK=BLOCK)
        return out

    return launch


def same(kernel, x, y=None):
    return out_like(x.dtype)(kernel, x, y)


_F32_SPECIALS = (0x7FC00000, 0x7F800000, 0xFF800000, 0x80000000, 0x00000000, 0x7F7FFFFF, 0xFF7FFFFF,
                 0x00000001, 0x00400000, 0x80000001, 0x00800000, 0x3F800000, 0x477FE000, 0x477FF000,
                 0x43E00000, 0x43F00000)  # NaN inf -inf -0 0 max lowest subnormals tiny 1 fp16-max and its tie, 448


def _tie(low_bits: int):
    """float32 bit patterns that sit exactly halfway between two values of a narrower type (or one
    unit either side), `low_bits` being the bits the narrowing drops."""
    half = 1 << (low_bits - 1)
    return st.builds(lambda sign, exp, mant, d: (sign << 31) | (exp << 23) | ((mant << low_bits) & 0x7FFFFF)
                     | (half + d),
                     st.integers(0, 1), st.integers(100, 150), st.integers(0, (1 << (23 - low_bits)) - 1),
                     st.sampled_from((0, 0, 0, 1, -1)))


def float32_bits(max_len: int = 130, bf16_ties: bool = True, fp16_ties: bool = True) -> st.SearchStrategy:
    """float32 tensors drawn as bit patterns: any pattern, the specials, and halfway cases for bf16 and fp16."""
    word = [st.integers(0, 2**32 - 1), st.sampled_from(_F32_SPECIALS)]
    if bf16_ties:
        word.append(_tie(16))
    if fp16_ties:
        word.append(_tie(13))
    return st.lists(st.one_of(*word), min_size=1, max_size=max_len).map(
        lambda w: torch.from_numpy(np.array(w, dtype=np.uint32).view(np.float32).copy()))


def in_range(t: torch.Tensor, lo: float, hi: float) -> torch.Tensor:
    """NaN and values outside [lo, hi] replaced by values inside (for the exact checks' domain)."""
    f = t.double()
    f = torch.where(torch.isnan(f), torch.zeros_like(f), f)
    return torch.where((f < lo) | (f > hi), torch.remainder(f.clamp(-1e300, 1e300), hi - lo) + lo, f).to(t.dtype)
