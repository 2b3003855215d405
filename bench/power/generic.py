"""Planted bugs declared the way a user declares the kernel: no strategy aimed at the trigger.

bench/power/mutants.py declares its blind-spot mutants with strategies that draw the trigger on purpose
(q of shape (B, 1, H, D): the size-1 dimension fixed). Here each original is declared generically (each
side drawn by `tst.sizes` up to a bound, every layout allowed, the default values), and each mutant
keeps that declaration; the bug needs a *combination* of boundary classes that independent draws reach
by luck, and that the boundary plan (tdiff.generate.plan) is meant to reach by construction:

| mutant | combination |
|---|---|
| rope_bhsd_row_stride | a size-1 dimension (seq, a decode step) among larger ones (batch and heads) |
| tile_even_n_unmasked | a block multiple on one axis (N % 32 == 0) with a tail on the other (M % 32 != 0) |
| copy_misaligned_odd | a misaligned data pointer (the launcher's unaligned path) with an odd size |
| bias_expanded_rows | an expanded (stride-0) input along its columns with more than one column |
| colsum_transposed_tail | a non-contiguous input (row stride 1) with a tail (columns not a block multiple) |
| rope_flag_row_stride | three ways: a size-1 dimension (seq), two ordinary sizes (batch, heads), a user's layout flag |
| colsum16_transposed_tail | three ways: a tail size (columns), a stride class (row stride 1), a dtype (16-bit) |

Imported by bench/power/mutants.py, which adds these to MUTANTS, ORIGINALS and TRIGGERS.
"""

from __future__ import annotations

from typing import Any

import torch
import triton
import triton.language as tl
from hypothesis import strategies as st

import tdiff
from tdiff import strategies as tst
from tdiff.declaration import checks_of

unit = tst.values(-4, 4, nan=False, inf=False)
#: (mutant kernel, original kernel, kind, bug, trigger, triggered(case))
GENERIC: list[tuple[Any, Any, str, str, str, Any]] = []
ORIGINALS: list[Any] = []


def generic(*, into: tuple[list, list] | None = None, **declaration: Any):
    """Declare an original and, with `mutant(...)`, its mutants, all with the same `@tdiff.check`; recorded in
    `into` (mutants, originals), by default this module's GENERIC and ORIGINALS."""
    mutants, originals = into if into is not None else (GENERIC, ORIGINALS)

    def original(kernel: Any) -> Any:
        tdiff.check(**declaration)(kernel)
        originals.append(kernel)

        def mutant(*, kind: str, bug: str, trigger: str, triggered: Any):
            def decorate(m: Any) -> Any:
                tdiff.check(**declaration)(m)
                mutants.append((m, kernel, kind, bug, trigger, triggered))
                return m
            return decorate

        kernel.mutant = mutant
        return kernel

    return original


def check_of(kernel: Any) -> Any:
    (c,) = [c for c in checks_of(kernel) if c.module == __name__]
    return c


def _shape(c: Any, name: str) -> tuple[int, ...]:
    return tuple(c.inputs[name].shape)


def _torch(c: Any, name: str) -> torch.Tensor:
    from tdiff.generate import to_torch

    return to_torch(c.inputs[name])


# ------------------------------------------------------------------ a size-1 dimension among larger ones

def _rope_tables(s: int, half: int) -> tuple[torch.Tensor, torch.Tensor]:
    pos = torch.arange(s, dtype=torch.float32)[:, None] + 3  # a decode step at position 3 and on
    freq = 1.0 / (10000.0 ** (torch.arange(half, dtype=torch.float32) / max(half, 1)))
    return torch.cos(pos * freq), torch.sin(pos * freq)


def _rope_launch(kernel, q):
    # q: (batch, heads, seq, head_dim); the kernel wants (batch, seq, heads, head_dim), as a wrapper makes it
    qt = q.transpose(1, 2).contiguous()  # (a no-op where PyTorch calls the transposed view contiguous: seq == 1)
    b, s, h, d = qt.shape
    half = d // 2
    cos, sin = _rope_tables(s, half)
    cos, sin = cos.to(q.device), sin.to(q.device)
    kernel[(b * s, h)](qt, cos, sin, qt.stride(0), qt.stride(1), qt.stride(2), s, half,
                       BLOCK=triton.next_power_of_2(max(half, 1)))
    if qt.data_ptr() != q.transpose(1, 2).data_ptr() or qt.stride() != q.transpose(1, 2).stride():
        q.copy_(qt.transpose(1, 2))


def _rope_reference(q):
    b, h, s, d = q.shape
    half = d // 2
    cos, sin = _rope_tables(s, half)
    x = q.float()
    q1, q2 = x[..., :half], x[..., half:2 * half]
    c, sn = cos[None, None], sin[None, None]
    out = x.clone()
    out[..., :half] = q1 * c - q2 * sn
    out[..., half:2 * half] = q2 * c + q1 * sn
    q.copy_(out.to(q.dtype))


@generic(launch=_rope_launch, reference=_rope_reference,
         q=tst.tensors(shape=(tst.sizes(max_value=4), tst.sizes(max_value=8), tst.sizes(max_value=9),
                              tst.sizes(max_value=64)), values=unit))
@triton.jit
def rope_bhsd(q_ptr, cos_ptr, sin_ptr, stride_b, stride_s, stride_h, seq, half, BLOCK: tl.constexpr):
    """Rotary embedding in place, one program per (token row, head)."""
    row = tl.program_id(0)
    h = tl.program_id(1)
    b = row // seq
    s = row % seq
    base = q_ptr + b * stride_b + s * stride_s + h * stride_h
    d = tl.arange(0, BLOCK)
    mask = d < half
    q1 = tl.load(base + d, mask=mask).to(tl.float32)
    q2 = tl.load(base + d + half, mask=mask).to(tl.float32)
    c = tl.load(cos_ptr + s * half + d, mask=mask)
    sn = tl.load(sin_ptr + s * half + d, mask=mask)
    tl.store(base + d, (q1 * c - q2 * sn).to(q_ptr.dtype.element_ty), mask=mask)
    tl.store(base + d + half, (q2 * c + q1 * sn).to(q_ptr.dtype.element_ty), mask=mask)


def _rope_triggered(c: Any) -> bool:
    q = _torch(c, "q")
    b, h, s, d = q.shape
    if not (s == 1 and b > 1 and h > 1 and d >= 2):
        return False
    qt = q.transpose(1, 2)
    return qt.is_contiguous() and qt.stride(0) != qt.stride(1)


@rope_bhsd.mutant(kind="size-1 dimension", bug="token row `b * seq + s` addressed with seq's stride",
                  trigger="seq == 1 with batch > 1 and heads > 1, q packed (the transpose is not copied)",
                  triggered=_rope_triggered)
@triton.jit
def rope_bhsd_row_stride(q_ptr, cos_ptr, sin_ptr, stride_b, stride_s, stride_h, seq, half, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    h = tl.program_id(1)
    s = row % seq
    base = q_ptr + row * stride_s + h * stride_h  # BUG: assumes stride_b == seq * stride_s
    d = tl.arange(0, BLOCK)
    mask = d < half
    q1 = tl.load(base + d, mask=mask).to(tl.float32)
    q2 = tl.load(base + d + half, mask=mask).to(tl.float32)
    c = tl.load(cos_ptr + s * half + d, mask=mask)
    sn = tl.load(sin_ptr + s * half + d, mask=mask)
    tl.store(base + d, (q1 * c - q2 * sn).to(q_ptr.dtype.element_ty), mask=mask)
    tl.store(base + d + half, (q2 * c + q1 * sn).to(q_ptr.dtype.element_ty), mask=mask)


# ------------------------------------------------------------------ a block multiple on one axis, a tail on the other

TILE = 32


def _tile_launch(kernel, x):
    m, n = x.shape
    out = torch.empty((m, n), dtype=x.dtype, device=x.device)
    kernel[(triton.cdiv(m, TILE), triton.cdiv(n, TILE))](x, out, m, n, x.stride(0), x.stride(1),
                                                       EVEN_N=n % TILE == 0, BLOCK=TILE)
    return out


@generic(launch=_tile_launch, reference=lambda x: x * 2, x=tst.tensors(ndim=2))
@triton.jit
def tile_scale(x_ptr, out_ptr, m, n, stride_m, stride_n, EVEN_N: tl.constexpr, BLOCK: tl.constexpr):
    """out = 2 x over 2-D tiles; an EVEN_N path (columns a tile multiple) without the column mask."""
    rm = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)[:, None]
    rn = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)[None, :]
    mask = rm < m if EVEN_N else (rm < m) & (rn < n)
    x = tl.load(x_ptr + rm * stride_m + rn * stride_n, mask=mask)
    tl.store(out_ptr + rm * n + rn, x * 2, mask=mask)


@tile_scale.mutant(kind="block boundary x tail", bug="the EVEN_N path drops the row mask too",
                   trigger="n % 32 == 0 with m % 32 != 0", triggered=lambda c: (
                       _shape(c, "x")[1] % TILE == 0 and _shape(c, "x")[1] > 0 and _shape(c, "x")[0] % TILE != 0))
@triton.jit
def tile_even_n_unmasked(x_ptr, out_ptr, m, n, stride_m, stride_n, EVEN_N: tl.constexpr, BLOCK: tl.constexpr):
    rm = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)[:, None]
    rn = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)[None, :]
    if EVEN_N:
        x = tl.load(x_ptr + rm * stride_m + rn * stride_n)  # BUG: no mask at all (rows past m too)
        tl.store(out_ptr + rm * n + rn, x * 2)
    else:
        mask = (rm < m) & (rn < n)
        x = tl.load(x_ptr + rm * stride_m + rn * stride_n, mask=mask)
        tl.store(out_ptr + rm * n + rn, x * 2, mask=mask)


# ------------------------------------------------------------------ a misaligned pointer with an odd size

def _copy_launch(kernel, x):
    n = x.numel()
    out = torch.empty(n, dtype=x.dtype, device=x.device)
    aligned = x.data_ptr() % 16 == 0  # the launcher's check, as wrappers pick a vectorized path
    kernel[(triton.cdiv(n, 64),)](x, out, n, x.stride(0), ALIGNED=aligned, BLOCK=64)
    return out


@generic(launch=_copy_launch, reference=lambda x: x * 3, x=tst.tensors(shape=(tst.sizes(),)))
@triton.jit
def copy_scale(x_ptr, out_ptr, n, stride, ALIGNED: tl.constexpr, BLOCK: tl.constexpr):
    """out = 3 x; the unaligned path reads pairs of elements (and the odd one alone)."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if ALIGNED:
        x = tl.load(x_ptr + offs * stride, mask=offs < n)
        tl.store(out_ptr + offs, x * 3, mask=offs < n)
    else:
        pair = offs // 2 * 2
        x = tl.load(x_ptr + offs * stride, mask=(pair < n) & (offs < n))
        tl.store(out_ptr + offs, x * 3, mask=(pair < n) & (offs < n))


def _misaligned(c: Any) -> bool:
    a = c.inputs["x"]
    return (a.offset * a.dt.itemsize) % 16 != 0


@copy_scale.mutant(kind="misaligned x odd size", bug="the unaligned path's pair mask drops the last odd element",
                   trigger="a misaligned data pointer with an odd size",
                   triggered=lambda c: _misaligned(c) and _shape(c, "x")[0] % 2 == 1)
@triton.jit
def copy_misaligned_odd(x_ptr, out_ptr, n, stride, ALIGNED: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if ALIGNED:
        x = tl.load(x_ptr + offs * stride, mask=offs < n)
        tl.store(out_ptr + offs, x * 3, mask=offs < n)
    else:
        pair = offs // 2 * 2
        x = tl.load(x_ptr + offs * stride, mask=pair + 1 < n)  # BUG: the last element of an odd n is left out
        tl.store(out_ptr + offs, x * 3, mask=pair + 1 < n)


# ------------------------------------------------------------------ an expanded (stride-0) input

def _bias_launch(kernel, x, b):
    m, n = x.shape
    out = torch.empty((m, n), dtype=x.dtype, device=x.device)
    kernel[(m,)](x, b, out, n, x.stride(0), x.stride(1), b.stride(0), b.stride(1), BLOCK=triton.next_power_of_2(n))
    return out


@generic(launch=_bias_launch, reference=lambda x, b: x + b, x=tst.tensors(ndim=2),
         b=tst.tensors(like="x", readonly=True))
@triton.jit
def bias_add(x_ptr, b_ptr, out_ptr, n, sx0, sx1, sb0, sb1, BLOCK: tl.constexpr):
    """out = x + b, one program per row."""
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n
    x = tl.load(x_ptr + row * sx0 + cols * sx1, mask=mask)
    b = tl.load(b_ptr + row * sb0 + cols * sb1, mask=mask)
    tl.store(out_ptr + row * n + cols, x + b, mask=mask)


@bias_add.mutant(kind="expanded input", bug="a bias of stride 0 along its rows read as packed columns",
                 trigger="b expanded along both dimensions (a broadcast scalar) with more than one column",
                 triggered=lambda c: c.inputs["b"].strides[0] == 0 and c.inputs["b"].strides[1] != 1
                 and _shape(c, "b")[1] > 1)
@triton.jit
def bias_expanded_rows(x_ptr, b_ptr, out_ptr, n, sx0, sx1, sb0, sb1, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n
    x = tl.load(x_ptr + row * sx0 + cols * sx1, mask=mask)
    col_stride = sb1 if sb0 != 0 else 1  # BUG: "a broadcast row" taken to be packed along its columns
    b = tl.load(b_ptr + row * sb0 + cols * col_stride, mask=mask)
    tl.store(out_ptr + row * n + cols, x + b, mask=mask)


# ------------------------------------------------------------------ a non-contiguous input with a tail

def _colsum_launch(kernel, x):
    m, n = x.shape
    out = torch.empty(n, dtype=torch.float32, device=x.device)
    kernel[(triton.cdiv(n, 16),)](x, out, m, n, x.stride(0), x.stride(1), BLOCK_M=triton.next_power_of_2(m),
                                  BLOCK_N=16)
    return out


@generic(launch=_colsum_launch, reference=lambda x: x.float().sum(0), x=tst.tensors(ndim=2, values=unit))
@triton.jit
def colsum(x_ptr, out_ptr, m, n, sm, sn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """Column sums of x (float32), 16 columns a program."""
    rn = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    rm = tl.arange(0, BLOCK_M)
    mask = (rm[:, None] < m) & (rn[None, :] < n)
    x = tl.load(x_ptr + rm[:, None] * sm + rn[None, :] * sn, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + rn, tl.sum(x, axis=0), mask=rn < n)


@colsum.mutant(kind="non-contiguous x tail", bug="a column-major fast path (row stride 1) without the column mask",
               trigger="x with row stride 1 (transposed), more than one row and column, n % 16 != 0",
               triggered=lambda c: (c.inputs["x"].strides[0] == 1 and _shape(c, "x")[0] > 1
                                    and _shape(c, "x")[1] > 1 and _shape(c, "x")[1] % 16 != 0))
@triton.jit
def colsum_transposed_tail(x_ptr, out_ptr, m, n, sm, sn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rn = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    rm = tl.arange(0, BLOCK_M)
    mask = (rm[:, None] < m) & (rn[None, :] < n)
    if sm == 1:  # noqa: SIM102  (nested: a compiled `and` of runtime scalars specialized to 1 fails to compile)
        if m > 1:  # noqa: SIM102
            if n > 1:
                mask = (rm[:, None] < m) & (rn[None, :] >= 0)  # BUG: the column-major path forgets the column tail
    x = tl.load(x_ptr + rm[:, None] * sm + rn[None, :] * sn, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + rn, tl.sum(x, axis=0), mask=rn < n)


# ------------------------------------------------------------------ three ways: a size 1, ordinary sizes, a flag
# Declared as a user declares RoPE: q and k over named dimensions (batch, heads, kv heads, seq, head_dim), a dtype,
# q and k head-major or in HF's layout (a flag), cos and sin per batch or shared (a flag), the position of the first
# token; the bug needs seq 1 with batch > 1 and heads > 1 and the head-major flag.

def _rope_flag_tables(b: int, s: int, half: int, start: int, per_batch: bool) -> tuple[torch.Tensor, torch.Tensor]:
    # (a token after the first: at position 0 the rotation changes nothing)
    pos = torch.arange(s, dtype=torch.float32)[None, :, None] + (start + 1) + torch.arange(b if per_batch else 1)[
        :, None, None]
    freq = 1.0 / (10000.0 ** (torch.arange(half, dtype=torch.float32) / max(half, 1)))
    return torch.cos(pos * freq), torch.sin(pos * freq)  # (batch or 1, seq, half)


def _rope_flag_launch(kernel, q, k, head_major, per_batch, start):
    # q, k: (batch, heads, seq, head_dim). head_major: the wrapper gets them as they are, packed head-major (as a
    # decode step keeps them); else in HF's layout, (batch, seq, heads, head_dim) tensors seen transposed (copies,
    # written back). The wrapper makes its (batch, seq, heads, head_dim) views contiguous: no copy where PyTorch
    # calls the transposed view contiguous (seq == 1 with q head-major)
    b, _, s, d = q.shape
    half = d // 2
    cos, sin = _rope_flag_tables(b, s, half, start, per_batch)
    cos, sin = cos.to(q.device).expand(b, s, half), sin.to(q.device).expand(b, s, half)  # (shared: batch stride 0)
    for x in (q, k):
        h = x.shape[1]
        src = x if head_major else torch.empty((b, s, h, d), dtype=x.dtype, device=x.device).copy_(
            x.transpose(1, 2)).transpose(1, 2)  # (strides of its own: packed (batch, seq, heads, head_dim) at seq 1)
        xt = src.transpose(1, 2).contiguous()
        kernel[(b * s, h)](xt, cos, sin, xt.stride(0), xt.stride(1), xt.stride(2), cos.stride(0), s, half,
                           BLOCK=triton.next_power_of_2(max(half, 1)))
        if xt.data_ptr() != x.data_ptr():
            x.copy_(xt.transpose(1, 2))


def _rope_flag_reference(q, k, head_major, per_batch, start):
    b, _, s, d = q.shape
    half = d // 2
    cos, sin = _rope_flag_tables(b, s, half, start, per_batch)
    for x in (q, k):
        f = x.float()
        x1, x2 = f[..., :half], f[..., half:2 * half]
        c, sn = cos[:, None], sin[:, None]  # (batch or 1, 1, seq, half)
        out = f.clone()
        out[..., :half] = x1 * c - x2 * sn
        out[..., half:2 * half] = x2 * c + x1 * sn
        x.copy_(out.to(x.dtype))


@generic(launch=_rope_flag_launch, reference=_rope_flag_reference,
         dims={"B": tst.sizes(max_value=4), "H": tst.sizes(max_value=8), "HK": tst.sizes(max_value=8),
               "S": tst.sizes(max_value=9), "D": tst.sizes(max_value=64)},
         q=tst.tensors(shape=("B", "H", "S", "D"), dtype=["float32", "float16", "bfloat16"], layouts=["contiguous"],
                       values=unit),
         k=tst.tensors(shape=("B", "HK", "S", "D"), dtype=["float32", "float16", "bfloat16"],
                       layouts=["contiguous"], values=unit),
         head_major=st.booleans(), per_batch=st.booleans(), start=st.integers(0, 8))
@triton.jit
def rope_flag(x_ptr, cos_ptr, sin_ptr, stride_b, stride_s, stride_h, stride_cb, seq, half, BLOCK: tl.constexpr):
    """Rotary embedding in place, one program per (token row, head); cos/sin per batch (stride_cb) or shared (0)."""
    row = tl.program_id(0)
    h = tl.program_id(1)
    b = row // seq
    s = row % seq
    base = x_ptr + b * stride_b + s * stride_s + h * stride_h
    d = tl.arange(0, BLOCK)
    mask = d < half
    x1 = tl.load(base + d, mask=mask).to(tl.float32)
    x2 = tl.load(base + d + half, mask=mask).to(tl.float32)
    c = tl.load(cos_ptr + b * stride_cb + s * half + d, mask=mask)
    sn = tl.load(sin_ptr + b * stride_cb + s * half + d, mask=mask)
    tl.store(base + d, (x1 * c - x2 * sn).to(x_ptr.dtype.element_ty), mask=mask)
    tl.store(base + d + half, (x2 * c + x1 * sn).to(x_ptr.dtype.element_ty), mask=mask)


def _rope_flag_triggered(c: Any) -> bool:
    b, h, s, d = _shape(c, "q")
    hk = _shape(c, "k")[1]
    return bool(c.inputs["head_major"]) and s == 1 and b > 1 and max(h, hk) > 1 and d >= 2


@rope_flag.mutant(kind="size-1 x sizes x flag", bug="token row `b * seq + s` addressed with seq's stride",
                  trigger="seq == 1 with batch > 1 and heads > 1 (q or k), head-major (the user's flag)",
                  triggered=_rope_flag_triggered)
@triton.jit
def rope_flag_row_stride(x_ptr, cos_ptr, sin_ptr, stride_b, stride_s, stride_h, stride_cb, seq, half,
                         BLOCK: tl.constexpr):
    row = tl.program_id(0)
    h = tl.program_id(1)
    b = row // seq
    s = row % seq
    base = x_ptr + row * stride_s + h * stride_h  # BUG: assumes stride_b == seq * stride_s
    d = tl.arange(0, BLOCK)
    mask = d < half
    x1 = tl.load(base + d, mask=mask).to(tl.float32)
    x2 = tl.load(base + d + half, mask=mask).to(tl.float32)
    c = tl.load(cos_ptr + b * stride_cb + s * half + d, mask=mask)
    sn = tl.load(sin_ptr + b * stride_cb + s * half + d, mask=mask)
    tl.store(base + d, (x1 * c - x2 * sn).to(x_ptr.dtype.element_ty), mask=mask)
    tl.store(base + d + half, (x2 * c + x1 * sn).to(x_ptr.dtype.element_ty), mask=mask)


# ------------------------------------------------------------------ three ways: a tail, a stride class, a dtype
# Declared as a user declares a column reduction: x of any layout and one of three dtypes, a second input y like x,
# an optional scale (a flag); the bug needs a 16-bit dtype, x with row stride 1 and columns not a multiple of 16.

def _colsum16_launch(kernel, x, y, scaled):
    m, n = x.shape
    out = torch.empty(n, dtype=torch.float32, device=x.device)
    kernel[(triton.cdiv(n, 16),)](x, y, out, m, n, x.stride(0), x.stride(1), y.stride(0), y.stride(1),
                                  2.0 if scaled else 1.0, HALF=x.element_size() == 2,
                                  BLOCK_M=triton.next_power_of_2(m), BLOCK_N=16)
    return out


@generic(launch=_colsum16_launch, reference=lambda x, y, scaled: (x.float() + y.float()).sum(0) * (2.0 if scaled
                                                                                                    else 1.0),
         x=tst.tensors(ndim=2, dtype=["float32", "float16", "bfloat16"], values=unit),
         y=tst.tensors(like="x", readonly=True, values=unit), scaled=st.booleans())
@triton.jit
def colsum16(x_ptr, y_ptr, out_ptr, m, n, sxm, sxn, sym, syn, scale, HALF: tl.constexpr, BLOCK_M: tl.constexpr,
             BLOCK_N: tl.constexpr):
    """Column sums of x + y (float32), times scale, 16 columns a program; a 16-bit path of its own (HALF)."""
    rn = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    rm = tl.arange(0, BLOCK_M)
    mask = (rm[:, None] < m) & (rn[None, :] < n)
    x = tl.load(x_ptr + rm[:, None] * sxm + rn[None, :] * sxn, mask=mask, other=0.0).to(tl.float32)
    y = tl.load(y_ptr + rm[:, None] * sym + rn[None, :] * syn, mask=(rm[:, None] < m) & (rn[None, :] < n),
                other=0.0).to(tl.float32)
    tl.store(out_ptr + rn, tl.sum(x + y, axis=0) * scale, mask=rn < n)


def _colsum16_triggered(c: Any) -> bool:
    x = c.inputs["x"]
    m, n = _shape(c, "x")
    return x.dt.itemsize == 2 and x.strides[0] == 1 and m > 1 and n > 1 and n % 16 != 0


@colsum16.mutant(kind="tail x stride class x dtype",
                 bug="the 16-bit column-major path (row stride 1) drops the column mask",
                 trigger="x 16-bit with row stride 1 (transposed), more than one row and column, n % 16 != 0",
                 triggered=_colsum16_triggered)
@triton.jit
def colsum16_transposed_tail(x_ptr, y_ptr, out_ptr, m, n, sxm, sxn, sym, syn, scale, HALF: tl.constexpr,
                             BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rn = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    rm = tl.arange(0, BLOCK_M)
    mask = (rm[:, None] < m) & (rn[None, :] < n)
    if HALF:  # noqa: SIM102
        if sxm == 1:  # noqa: SIM102  (nested: a compiled `and` of runtime scalars specialized to 1 fails to compile)
            if m > 1:  # noqa: SIM102
                if n > 1:
                    mask = (rm[:, None] < m) & (rn[None, :] >= 0)  # BUG: the 16-bit column-major path, no column tail
    x = tl.load(x_ptr + rm[:, None] * sxm + rn[None, :] * sxn, mask=mask, other=0.0).to(tl.float32)
    y = tl.load(y_ptr + rm[:, None] * sym + rn[None, :] * syn, mask=(rm[:, None] < m) & (rn[None, :] < n),
                other=0.0).to(tl.float32)
    tl.store(out_ptr + rn, tl.sum(x + y, axis=0) * scale, mask=rn < n)
