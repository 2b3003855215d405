"""Mutants for bench/power/power.py: copies of the bundled suite kernels (`suites/*.py`) with ONE planted bug each.

The blind-spot classes (NaN where infinite inputs give an infinity, narrowing casts, strides of size-1
dimensions) have no bundled suite kernel: their originals are declared here (`ORIGINALS`, correct
kernels with their checks, which bench/power/power.py runs for false alarms like the suites').

Each mutant is declared with the original check's declaration (its `launch`, strategies, dims,
reference and tolerances, taken from the suite's `@tdiff.check` on the original kernel), so the only
difference between an original and its mutant is the planted line, marked `# BUG:`.

This module declares its checks at import, at module level, so tdiff's worker processes find them
(`isolation="process"`); bench/power/power.py puts the repository root on their PYTHONPATH.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import triton
import triton.language as tl

import tdiff
from suites import (
    add_one,
    atomic_sum,
    autotuned,
    cross_entropy,
    device_fn,
    flash_attention,
    layer_norm,
    matmul,
    quantize,
    rms_norm,
    rotary,
    softmax,
    swiglu,
    vector_add,
)
from tdiff import strategies as tst
from tdiff.core import kernels
from tdiff.declaration import Check, checks_of


@dataclass
class Mutant:
    name: str  # the mutant kernel's name (unique)
    original: Check  # the suite check it copies
    kind: str  # the bug kind (for the table)
    bug: str  # the planted line, in words
    trigger: str  # which cases can show it
    kernel: Any = None
    triggered: Any = None  # Case -> bool: the case can show the bug (a necessary condition), set below

    @property
    def check(self) -> Check:
        (c,) = [c for c in checks_of(self.kernel) if c.module in (__name__, "bench.power.generic")]
        return c


MUTANTS: list[Mutant] = []


def _strategy(value: Any) -> Any:
    """A stored strategy back as the keyword `@tdiff.check` took."""
    if isinstance(value, tuple) and len(value) == 2 and value[0] in ("choices", "const"):
        return list(value[1]) if value[0] == "choices" else value[1]
    return value


def original_check(kernel: Any, name: str = "tdiff") -> Check:
    (c,) = [c for c in checks_of(kernel) if c.name == name and (c.module.startswith("suites.") or c.module == __name__)]
    return c


def mutant(original: Any, *, kind: str, bug: str, trigger: str, check_name: str = "tdiff"):
    """Declare a mutant's check on the mutated kernel with the original check's declaration."""
    orig = original_check(original, check_name)

    def decorate(kernel: Any) -> Any:
        tdiff.check(
            launch=orig.launch, reference=orig.reference, inputs=orig.inputs, dims=dict(orig.dims),
            tolerance=orig.tolerance, tolerances=dict(orig.tolerances), max_examples=orig.max_examples,
            timeout=orig.timeout, check_pointers=orig.check_pointers, sample_programs=orig.sample_programs,
            backends=orig.backends, configs=orig.configs, max_compiles=orig.max_compiles,
            masked_loads=orig.masked_loads,
            **{k: _strategy(v) for k, v in orig.strategies.items()},
        )(kernel)
        from tdiff.core import kernels

        MUTANTS.append(Mutant(kernels.kernel_name(kernel), orig, kind, bug, trigger, kernel))
        return kernel

    return decorate


# ------------------------------------------------------------------ off-by-one masks

@mutant(add_one.add_one_kernel, kind="off-by-one mask", bug="column mask `<=` for `<`",
        trigger="columns not a power of two (the block has a lane at `size_1`)")
@triton.jit
def add_one_mask_le(ptr, stride_0, stride_1, size_0, size_1, BLOCK_SIZE_0: tl.constexpr,
                    BLOCK_SIZE_1: tl.constexpr):
    pid = tl.program_id(0)
    offset_0 = pid * BLOCK_SIZE_0 + tl.arange(0, BLOCK_SIZE_0)
    offset_1 = tl.arange(0, BLOCK_SIZE_1)
    mask = (offset_0[:, None] < size_0) & (offset_1[None, :] <= size_1)  # BUG: <= for <
    offsets = offset_0[:, None] * stride_0 + offset_1[None, :] * stride_1
    data = tl.load(ptr + offsets, mask=mask, other=0.0)
    tl.store(ptr + offsets, data + 1.0, mask=mask)


@mutant(vector_add.add_kernel, kind="off-by-one mask", bug="`offs <= n` for `offs < n`",
        trigger="n not a multiple of BLOCK=256")
@triton.jit
def vector_add_mask_le(x_ptr, y_ptr, out_ptr, n, stride_x, stride_y, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs <= n  # BUG: <= for <
    x = tl.load(x_ptr + offs * stride_x, mask=mask).to(tl.float32)
    y = tl.load(y_ptr + offs * stride_y, mask=mask).to(tl.float32)
    tl.store(out_ptr + offs, x + y, mask=mask)


# ------------------------------------------------------------------ ignored strides

@mutant(vector_add.add_kernel, kind="ignored stride", bug="y read as `y_ptr + offs` (stride_y ignored)",
        trigger="y drawn with a stride other than 1 (layout `sliced`)")
@triton.jit
def vector_add_ignores_stride_y(x_ptr, y_ptr, out_ptr, n, stride_x, stride_y, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs * stride_x, mask=mask).to(tl.float32)
    y = tl.load(y_ptr + offs, mask=mask).to(tl.float32)  # BUG: stride_y ignored
    tl.store(out_ptr + offs, x + y, mask=mask)


@mutant(rotary.rotary_kernel, kind="ignored stride", bug="q's last-dim stride assumed 1",
        trigger="q with stride_d != 1 (transposed, sliced)")
@triton.jit
def rotary_ignores_stride_d(q_ptr, cos_ptr, sin_ptr, stride_s, stride_h, stride_d, stride_cos, stride_sin, half,
                            BLOCK: tl.constexpr):
    s = tl.program_id(0)
    h = tl.program_id(1)
    d = tl.arange(0, BLOCK)
    mask = d < half
    base = q_ptr + s * stride_s + h * stride_h
    q1 = tl.load(base + d, mask=mask).to(tl.float32)  # BUG: stride_d ignored (here and below)
    q2 = tl.load(base + (d + half), mask=mask).to(tl.float32)
    c = tl.load(cos_ptr + s * stride_cos + d, mask=mask).to(tl.float32)
    sn = tl.load(sin_ptr + s * stride_sin + d, mask=mask).to(tl.float32)
    tl.store(base + d, q1 * c - q2 * sn, mask=mask)
    tl.store(base + (d + half), q2 * c + q1 * sn, mask=mask)


@mutant(quantize.dequantize_int8, kind="ignored stride", bug="scale read as `scale_ptr + row` (stride ignored)",
        trigger="scale with stride != 1 (sliced) and more than one row")
@triton.jit
def dequantize_ignores_scale_stride(q_ptr, scale_ptr, out_ptr, stride_row, stride_col, stride_scale, n_cols,
                                    BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    q = tl.load(q_ptr + row * stride_row + cols * stride_col, mask=mask, other=0).to(tl.float32)
    s = tl.load(scale_ptr + row)  # BUG: stride_scale ignored
    tl.store(out_ptr + row * n_cols + cols, q * s, mask=mask)


# ------------------------------------------------------------------ missing other= on a masked load feeding a reduction

@mutant(cross_entropy.cross_entropy_fwd, kind="missing other=", bug="chunk load without `other=-inf`",
        trigger="vocab not a multiple of CHUNK=256 (masked lanes enter the logsumexp)")
@triton.jit
def cross_entropy_no_other(logits_ptr, targets_ptr, loss_ptr, stride_row, stride_col, vocab, ignore_index,
                           CHUNK: tl.constexpr):
    row = tl.program_id(0)
    target = tl.load(targets_ptr + row)
    base = logits_ptr + row * stride_row
    offs = tl.arange(0, CHUNK)
    m = tl.full((CHUNK,), -float("inf"), tl.float32)
    s = tl.zeros((CHUNK,), tl.float32)
    for start in range(0, vocab, CHUNK):
        x = tl.load(base + (start + offs) * stride_col, mask=start + offs < vocab)  # BUG: no other=-inf
        x = x.to(tl.float32)
        m_new = tl.maximum(m, x)
        s = s * tl.exp(m - m_new) + tl.exp(x - m_new)
        s = tl.where(m_new == -float("inf"), 0.0, s)
        m = m_new
    mx = tl.max(m, axis=0)
    lse = mx + tl.log(tl.sum(s * tl.exp(m - mx), axis=0))
    valid = target != ignore_index
    picked = tl.load(base + tl.where(valid, target, 0) * stride_col).to(tl.float32)
    tl.store(loss_ptr + row, tl.where(valid, lse - picked, 0.0))


@mutant(rms_norm.rms_norm_fwd, kind="missing other=", bug="x load without `other=0.0` (feeds sum(x*x))",
        trigger="columns not a power of two (masked lanes: undefined on a GPU, 0 in the interpreter)")
@triton.jit
def rms_norm_no_other(x_ptr, w_ptr, y_ptr, rstd_ptr, stride_row, stride_col, n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_row + cols * stride_col, mask=mask).to(tl.float32)  # BUG: no other=0.0
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / n_cols + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * n_cols + cols, x * rstd * w, mask=mask)
    tl.store(rstd_ptr + row, rstd)


# ------------------------------------------------------------------ wrong accumulator dtype

@mutant(matmul.matmul_kernel, kind="fp16 accumulator", bug="acc in float16 (`acc += tl.dot(a, b).to(fp16)`)",
        trigger="float32 inputs (the partial sums lose fp32 precision)")
@triton.jit
def matmul_fp16_acc(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float16)  # BUG: float16 accumulator
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        kk = k * BLOCK_K + rk
        a = tl.load(a_ptr + rm[:, None] * stride_am + kk[None, :] * stride_ak,
                    mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
        b = tl.load(b_ptr + kk[:, None] * stride_bk + rn[None, :] * stride_bn,
                    mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(a, b).to(tl.float16)
    c = acc.to(c_ptr.dtype.element_ty)
    tl.store(c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn, c, mask=(rm[:, None] < M) & (rn[None, :] < N))


@mutant(layer_norm.layer_norm_fwd, kind="fp16 accumulator", bug="the mean's sum accumulated in float16",
        trigger="float32 inputs (the sum loses fp32 precision)")
@triton.jit
def layer_norm_fp16_sum(x_ptr, y_ptr, w_ptr, b_ptr, mean_ptr, rstd_ptr, stride_row, stride_col, stride_w, stride_b,
                        n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_row + cols * stride_col, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x.to(tl.float16), axis=0).to(tl.float32) / n_cols  # BUG: float16 accumulation
    diff = tl.where(mask, x - mean, 0.0)
    var = tl.sum(diff * diff, axis=0) / n_cols
    rstd = 1 / tl.sqrt(var + eps)
    w = tl.load(w_ptr + cols * stride_w, mask=mask).to(tl.float32)
    b = tl.load(b_ptr + cols * stride_b, mask=mask).to(tl.float32)
    y = diff * rstd * w + b
    tl.store(y_ptr + row * n_cols + cols, y, mask=mask)
    tl.store(mean_ptr + row, mean)
    tl.store(rstd_ptr + row, rstd)


# ------------------------------------------------------------------ swapped program ids

@mutant(matmul.matmul_kernel, kind="swapped program ids", bug="pid_m, pid_n = program_id(1), program_id(0)",
        trigger="cdiv(M, 16) != cdiv(N, 16)")
@triton.jit
def matmul_swapped_pids(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm,
                        stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(1)  # BUG: program ids swapped
    pid_n = tl.program_id(0)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        kk = k * BLOCK_K + rk
        a = tl.load(a_ptr + rm[:, None] * stride_am + kk[None, :] * stride_ak,
                    mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
        b = tl.load(b_ptr + kk[:, None] * stride_bk + rn[None, :] * stride_bn,
                    mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(a, b)
    c = acc.to(c_ptr.dtype.element_ty)
    tl.store(c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn, c, mask=(rm[:, None] < M) & (rn[None, :] < N))


@mutant(swiglu.swiglu_fwd, kind="swapped program ids", bug="row, column block = program_id(1), program_id(0)",
        trigger="rows != cdiv(H, 64)")
@triton.jit
def swiglu_swapped_pids(a_ptr, b_ptr, out_ptr, stride_ar, stride_ac, stride_br, stride_bc, h, BLOCK: tl.constexpr):
    row = tl.program_id(1)  # BUG: program ids swapped
    cols = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < h
    a = tl.load(a_ptr + row * stride_ar + cols * stride_ac, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + row * stride_br + cols * stride_bc, mask=mask, other=0.0).to(tl.float32)
    silu = a * tl.sigmoid(a)
    tl.store(out_ptr + row * h + cols, silu * b, mask=mask)


@mutant(flash_attention.flash_attn_fwd, kind="swapped program ids",
        bug="query block, batch-head = program_id(1), program_id(0)", trigger="cdiv(S, 16) != BH")
@triton.jit
def flash_attn_swapped_pids(q_ptr, k_ptr, v_ptr, o_ptr, seq, scale, D: tl.constexpr, BLOCK_M: tl.constexpr,
                            BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr):
    start_m = tl.program_id(1) * BLOCK_M  # BUG: program ids swapped
    bh = tl.program_id(0)
    base = bh * seq * D
    rm = start_m + tl.arange(0, BLOCK_M)
    rd = tl.arange(0, D)
    q = tl.load(q_ptr + base + rm[:, None] * D + rd[None, :], mask=rm[:, None] < seq, other=0.0)
    m_i = tl.full((BLOCK_M,), -float("inf"), tl.float32)
    l_i = tl.zeros((BLOCK_M,), tl.float32)
    acc = tl.zeros((BLOCK_M, D), tl.float32)
    end = tl.minimum(seq, start_m + BLOCK_M) if CAUSAL else seq
    for start_n in range(0, end, BLOCK_N):
        rn = start_n + tl.arange(0, BLOCK_N)
        k = tl.load(k_ptr + base + rn[:, None] * D + rd[None, :], mask=rn[:, None] < seq, other=0.0)
        s = tl.dot(q, tl.trans(k)) * scale
        valid = rn[None, :] < seq
        if CAUSAL:
            valid = valid & (rn[None, :] <= rm[:, None])
        s = tl.where(valid, s, -float("inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        alpha = tl.exp(m_i - m_new)
        p = tl.exp(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        v = tl.load(v_ptr + base + rn[:, None] * D + rd[None, :], mask=rn[:, None] < seq, other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    out = acc / l_i[:, None]
    tl.store(o_ptr + base + rm[:, None] * D + rd[None, :], out.to(o_ptr.dtype.element_ty), mask=rm[:, None] < seq)


# ------------------------------------------------------------------ dropped tails (floor instead of ceil)

@mutant(matmul.matmul_kernel, kind="dropped tail", bug="K loop `range(0, K // BLOCK_K)` for `tl.cdiv(K, BLOCK_K)`",
        trigger="K not a multiple of 16")
@triton.jit
def matmul_floor_k(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K // BLOCK_K):  # BUG: floor drops the last partial K block
        kk = k * BLOCK_K + rk
        a = tl.load(a_ptr + rm[:, None] * stride_am + kk[None, :] * stride_ak,
                    mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
        b = tl.load(b_ptr + kk[:, None] * stride_bk + rn[None, :] * stride_bn,
                    mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(a, b)
    c = acc.to(c_ptr.dtype.element_ty)
    tl.store(c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn, c, mask=(rm[:, None] < M) & (rn[None, :] < N))


@mutant(cross_entropy.cross_entropy_fwd, kind="dropped tail",
        bug="vocab loop to `vocab // CHUNK * CHUNK` (the last partial chunk dropped)",
        trigger="vocab not a multiple of CHUNK=256")
@triton.jit
def cross_entropy_floor_vocab(logits_ptr, targets_ptr, loss_ptr, stride_row, stride_col, vocab, ignore_index,
                              CHUNK: tl.constexpr):
    row = tl.program_id(0)
    target = tl.load(targets_ptr + row)
    base = logits_ptr + row * stride_row
    offs = tl.arange(0, CHUNK)
    m = tl.full((CHUNK,), -float("inf"), tl.float32)
    s = tl.zeros((CHUNK,), tl.float32)
    for start in range(0, vocab // CHUNK * CHUNK, CHUNK):  # BUG: floor drops the last partial chunk
        x = tl.load(base + (start + offs) * stride_col, mask=start + offs < vocab, other=-float("inf"))
        x = x.to(tl.float32)
        m_new = tl.maximum(m, x)
        s = s * tl.exp(m - m_new) + tl.exp(x - m_new)
        s = tl.where(m_new == -float("inf"), 0.0, s)
        m = m_new
    mx = tl.max(m, axis=0)
    lse = mx + tl.log(tl.sum(s * tl.exp(m - mx), axis=0))
    valid = target != ignore_index
    picked = tl.load(base + tl.where(valid, target, 0) * stride_col).to(tl.float32)
    tl.store(loss_ptr + row, tl.where(valid, lse - picked, 0.0))


# ------------------------------------------------------------------ a race between programs

@mutant(atomic_sum.atomic_sum_kernel, kind="race (no atomic)", bug="`store(out, load(out) + s)` for `atomic_add`",
        trigger="more than one program (n > 64)")
@triton.jit
def atomic_sum_race(x_ptr, out_ptr, n, stride, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs * stride, mask=offs < n, other=0.0).to(tl.float32)
    tl.store(out_ptr, tl.load(out_ptr) + tl.sum(x, axis=0))  # BUG: load-add-store, not tl.atomic_add


# ------------------------------------------------------------------ wrong reduction init / identity (0 for -inf)

@mutant(softmax.softmax_kernel, kind="wrong init (0 for -inf)", bug="masked lanes filled `other=0.0`, not -inf",
        trigger="columns not a power of two (masked lanes add exp(-max) to the sum)")
@triton.jit
def softmax_zero_fill(out_ptr, x_ptr, stride_row, stride_col, out_stride_row, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_row + cols * stride_col, mask=mask, other=0.0).to(tl.float32)  # BUG: 0, not -inf
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    out = num / tl.sum(num, axis=0)
    tl.store(out_ptr + row * out_stride_row + cols, out, mask=mask)


@mutant(flash_attention.flash_attn_fwd, kind="wrong init (0 for -inf)",
        bug="masked scores set to 0.0, not -inf, before the online max",
        trigger="S not a multiple of 16, or causal")
@triton.jit
def flash_attn_mask_zero(q_ptr, k_ptr, v_ptr, o_ptr, seq, scale, D: tl.constexpr, BLOCK_M: tl.constexpr,
                         BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr):
    start_m = tl.program_id(0) * BLOCK_M
    bh = tl.program_id(1)
    base = bh * seq * D
    rm = start_m + tl.arange(0, BLOCK_M)
    rd = tl.arange(0, D)
    q = tl.load(q_ptr + base + rm[:, None] * D + rd[None, :], mask=rm[:, None] < seq, other=0.0)
    m_i = tl.full((BLOCK_M,), -float("inf"), tl.float32)
    l_i = tl.zeros((BLOCK_M,), tl.float32)
    acc = tl.zeros((BLOCK_M, D), tl.float32)
    end = tl.minimum(seq, start_m + BLOCK_M) if CAUSAL else seq
    for start_n in range(0, end, BLOCK_N):
        rn = start_n + tl.arange(0, BLOCK_N)
        k = tl.load(k_ptr + base + rn[:, None] * D + rd[None, :], mask=rn[:, None] < seq, other=0.0)
        s = tl.dot(q, tl.trans(k)) * scale
        valid = rn[None, :] < seq
        if CAUSAL:
            valid = valid & (rn[None, :] <= rm[:, None])
        s = tl.where(valid, s, 0.0)  # BUG: 0.0, not -inf
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        alpha = tl.exp(m_i - m_new)
        p = tl.exp(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        v = tl.load(v_ptr + base + rn[:, None] * D + rd[None, :], mask=rn[:, None] < seq, other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    out = acc / l_i[:, None]
    tl.store(o_ptr + base + rm[:, None] * D + rd[None, :], out.to(o_ptr.dtype.element_ty), mask=rm[:, None] < seq)


# ------------------------------------------------------------------ eps outside the sqrt

@mutant(rms_norm.rms_norm_fwd, kind="eps outside sqrt", bug="`1 / (sqrt(ms) + eps)` for `1 / sqrt(ms + eps)`",
        trigger="a row whose RMS is below ~1e-2 (relative error eps/rms above rstd's rtol of 1e-4)")
@triton.jit
def rms_norm_eps_outside(x_ptr, w_ptr, y_ptr, rstd_ptr, stride_row, stride_col, n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_row + cols * stride_col, mask=mask, other=0.0).to(tl.float32)
    rstd = 1.0 / (tl.sqrt(tl.sum(x * x, axis=0) / n_cols) + eps)  # BUG: eps outside the sqrt
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * n_cols + cols, x * rstd * w, mask=mask)
    tl.store(rstd_ptr + row, rstd)


@mutant(layer_norm.layer_norm_fwd, kind="eps outside sqrt", bug="`1 / (sqrt(var) + eps)` for `1 / sqrt(var + eps)`",
        trigger="a row whose std is below ~0.1 (relative error eps/std above 1e-4): N == 1, constant rows")
@triton.jit
def layer_norm_eps_outside(x_ptr, y_ptr, w_ptr, b_ptr, mean_ptr, rstd_ptr, stride_row, stride_col, stride_w,
                           stride_b, n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_row + cols * stride_col, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / n_cols
    diff = tl.where(mask, x - mean, 0.0)
    var = tl.sum(diff * diff, axis=0) / n_cols
    rstd = 1 / (tl.sqrt(var) + eps)  # BUG: eps outside the sqrt
    w = tl.load(w_ptr + cols * stride_w, mask=mask).to(tl.float32)
    b = tl.load(b_ptr + cols * stride_b, mask=mask).to(tl.float32)
    y = diff * rstd * w + b
    tl.store(y_ptr + row * n_cols + cols, y, mask=mask)
    tl.store(mean_ptr + row, mean)
    tl.store(rstd_ptr + row, rstd)


# ------------------------------------------------------------------ boundary specializations: an argument equal to 1

@mutant(softmax.softmax_kernel, kind="boundary: stride == 1",
        bug="a `stride_col == 1` fast path that assumes packed rows (`row * n_cols`)",
        trigger="stride_col == 1 and stride_row != n_cols (padded, split on dim 1, sliced rows)")
@triton.jit
def softmax_stride1_fastpath(out_ptr, x_ptr, stride_row, stride_col, out_stride_row, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    if stride_col == 1:  # the contiguous fast path (what Triton's stride == 1 specialization folds)
        ptrs = x_ptr + row * n_cols + cols  # BUG: assumes stride_row == n_cols
    else:
        ptrs = x_ptr + row * stride_row + cols * stride_col
    x = tl.load(ptrs, mask=mask, other=-float("inf")).to(tl.float32)
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    out = num / tl.sum(num, axis=0)
    tl.store(out_ptr + row * out_stride_row + cols, out, mask=mask)


@mutant(add_one.add_one_kernel, kind="boundary: n_rows == 1",
        bug="a `size_0 == 1` single-row path that masks columns only (rows 1..3 of the block written)",
        trigger="t with exactly one row")
@triton.jit
def add_one_single_row(ptr, stride_0, stride_1, size_0, size_1, BLOCK_SIZE_0: tl.constexpr,
                       BLOCK_SIZE_1: tl.constexpr):
    pid = tl.program_id(0)
    offset_0 = pid * BLOCK_SIZE_0 + tl.arange(0, BLOCK_SIZE_0)
    offset_1 = tl.arange(0, BLOCK_SIZE_1)
    if size_0 == 1:  # a single row (what Triton's == 1 specialization folds)
        mask = (offset_0[:, None] >= 0) & (offset_1[None, :] < size_1)  # BUG: the row mask is dropped
    else:
        mask = (offset_0[:, None] < size_0) & (offset_1[None, :] < size_1)
    offsets = offset_0[:, None] * stride_0 + offset_1[None, :] * stride_1
    data = tl.load(ptr + offsets, mask=mask, other=0.0)
    tl.store(ptr + offsets, data + 1.0, mask=mask)


# ------------------------------------------------------------------ boundary specializations: a multiple of 16

@mutant(rms_norm.rms_norm_fwd, kind="boundary: n % 16 == 0",
        bug="an `n_cols % 16 == 0` path with unmasked loads/stores (assumes BLOCK == n_cols)",
        trigger="n_cols a multiple of 16 that is not a power of two (48, 80, 96)")
@triton.jit
def rms_norm_div16_unmasked(x_ptr, w_ptr, y_ptr, rstd_ptr, stride_row, stride_col, n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    if n_cols % 16 == 0:  # the "even" path (what Triton's divisible-by-16 specialization folds)
        mask = cols < BLOCK  # BUG: assumes BLOCK == n_cols; true only for powers of two
    else:
        mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_row + cols * stride_col, mask=mask, other=0.0).to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / n_cols + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * n_cols + cols, x * rstd * w, mask=mask)
    tl.store(rstd_ptr + row, rstd)


@mutant(matmul.matmul_kernel, kind="boundary: K % 16 == 0",
        bug="an EVEN_K path (`K % 16 == 0`) whose loads drop every mask, the M and N ones too",
        trigger="K a multiple of 16 and M or N not")
@triton.jit
def matmul_even_k_unmasked(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm,
                           stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        kk = k * BLOCK_K + rk
        if K % 16 == 0:  # EVEN_K (what Triton's divisible-by-16 specialization folds)
            a = tl.load(a_ptr + rm[:, None] * stride_am + kk[None, :] * stride_ak)  # BUG: M mask dropped too
            b = tl.load(b_ptr + kk[:, None] * stride_bk + rn[None, :] * stride_bn)  # BUG: N mask dropped too
        else:
            a = tl.load(a_ptr + rm[:, None] * stride_am + kk[None, :] * stride_ak,
                        mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
            b = tl.load(b_ptr + kk[:, None] * stride_bk + rn[None, :] * stride_bn,
                        mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(a, b)
    c = acc.to(c_ptr.dtype.element_ty)
    tl.store(c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn, c, mask=(rm[:, None] < M) & (rn[None, :] < N))


# ------------------------------------------------------------------ others: a config-specific bug, a device function

@mutant(autotuned.axpb_kernel, kind="config-specific block", bug="program offset `pid * 64` (BLOCK hard-coded)",
        trigger="config #1 (BLOCK=256) with n > 256 (a second program)")
@triton.autotune(
    configs=[
        triton.Config({"BLOCK": 64}, num_warps=2),
        triton.Config({"BLOCK": 256}, num_warps=4),
    ],
    key=["n"],
)
@triton.jit
def axpb_hardcoded_block(x_ptr, out_ptr, n, alpha, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * 64 + tl.arange(0, BLOCK)  # BUG: 64, not BLOCK
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    tl.store(out_ptr + offs, x * alpha + 1.0, mask=mask)


@triton.jit
def _tanh(x):
    e = tl.exp(-2.0 * tl.abs(x))
    t = (1.0 - e) / (1.0 + e)
    return tl.where(x >= 0, t, -t)


@triton.jit
def _gelu_wrong(x):
    inner = 0.7978845608028654 * (x + 0.044715 * x * x)  # BUG: x*x for x*x*x
    return 0.5 * x * (1.0 + _tanh(inner))


@mutant(device_fn.gelu_kernel, kind="device function math", bug="GELU's cubic term `x*x` for `x*x*x`",
        trigger="some x with 0.1 < |x| < 10 (elsewhere both versions agree or saturate)")
@triton.jit
def gelu_wrong_cubic(x_ptr, out_ptr, n, stride, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs * stride, mask=mask).to(tl.float32)
    tl.store(out_ptr + offs, _gelu_wrong(x), mask=mask)


# ------------------------------------------------------------------ coverage: paths only rare sizes reach

@mutant(swiglu.swiglu_fwd, kind="coverage: rare size class",
        bug="an `h % 80 == 0` fast path that drops the masks (assumes BLOCK divides h)",
        trigger="H a multiple of 80 (80, 160): the path runs and its last block reads and writes past h")
@triton.jit
def swiglu_h80_fastpath(a_ptr, b_ptr, out_ptr, stride_ar, stride_ac, stride_br, stride_bc, h, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    if h % 80 == 0:  # a fast path for a common hidden size
        mask = cols < BLOCK  # BUG: 80 is not a multiple of BLOCK (64)
    else:
        mask = cols < h
    a = tl.load(a_ptr + row * stride_ar + cols * stride_ac, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + row * stride_br + cols * stride_bc, mask=mask, other=0.0).to(tl.float32)
    silu = a * tl.sigmoid(a)
    tl.store(out_ptr + row * h + cols, silu * b, mask=mask)


@mutant(rms_norm.rms_norm_fwd, kind="coverage: rare dtype and size",
        bug="a float16 long-row path (`n_cols > 72`) whose mean square divides by BLOCK, not n_cols",
        trigger="float16 x with 73 to 127 columns (BLOCK is the next power of two)")
@triton.jit
def rms_norm_long_row_fp16(x_ptr, w_ptr, y_ptr, rstd_ptr, stride_row, stride_col, n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_row + cols * stride_col, mask=mask, other=0.0)
    xf = x.to(tl.float32)
    ms = tl.sum(xf * xf, axis=0) / n_cols
    if x.dtype == tl.float16:  # noqa: SIM102 (a constexpr test, then a runtime one)
        if n_cols > 72:  # a long-row path for half inputs
            ms = tl.sum(xf * xf, axis=0) / BLOCK  # BUG: BLOCK, not n_cols
    rstd = 1.0 / tl.sqrt(ms + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * n_cols + cols, x.to(tl.float32) * rstd * w, mask=mask)
    tl.store(rstd_ptr + row, rstd)


# ------------------------------------------------------------------ blind spots: originals of their own

def _lse_launch(kernel, x):
    rows, cols = x.shape
    out = torch.empty(rows, dtype=x.dtype, device=x.device)
    kernel[(rows,)](x, out, x.stride(0), x.stride(1), cols, BLOCK=triton.next_power_of_2(cols))
    return out


@tdiff.check(launch=_lse_launch, reference=lambda x: torch.logsumexp(x.float(), dim=-1).to(x.dtype),
             x=tst.tensors(ndim=2, max_side=32, dtype=tst.FLOATS))
@triton.jit
def logsumexp_rows(x_ptr, out_ptr, stride_row, stride_col, n_cols, BLOCK: tl.constexpr):
    """Each row's logsumexp, as torch computes it: an infinite maximum is not subtracted (a row of -inf
    gives -inf, a row holding +inf gives inf)."""
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * stride_row + cols * stride_col, mask=cols < n_cols, other=-float("inf"))
    x = x.to(tl.float32)
    m = tl.max(x, axis=0)
    m = tl.where(tl.abs(m) == float("inf"), 0.0, m)
    tl.store(out_ptr + row, (m + tl.log(tl.sum(tl.exp(x - m), axis=0))).to(out_ptr.dtype.element_ty))


def _axpy_launch(kernel, x, y):
    out = torch.empty_like(x)
    n = x.shape[0]
    kernel[(triton.cdiv(n, 64),)](x, y, out, n, x.stride(0), y.stride(0), BLOCK=64)
    return out


@tdiff.check(launch=_axpy_launch, reference=lambda x, y: (x.float() * 3 + y.float()).to(x.dtype),
             x=tst.tensors(shape=(tst.sizes(block=64),), dtype="float16"), y=tst.tensors(like="x"))
@triton.jit
def fp16_axpy(x_ptr, y_ptr, out_ptr, n, stride_x, stride_y, BLOCK: tl.constexpr):
    """3x + y of float16 vectors, in float32, rounded once to float16."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs * stride_x, mask=mask).to(tl.float32)
    y = tl.load(y_ptr + offs * stride_y, mask=mask).to(tl.float32)
    tl.store(out_ptr + offs, (x * 3.0 + y).to(out_ptr.dtype.element_ty), mask=mask)


@tdiff.check(launch=_axpy_launch, reference=lambda x, y: (x.float() * y.float()).to(x.dtype),
             x=tst.tensors(shape=(tst.sizes(block=64),), dtype="float16"), y=tst.tensors(like="x"))
@triton.jit
def fp16_grad_mul(dy_ptr, w_ptr, dx_ptr, n, stride_dy, stride_w, BLOCK: tl.constexpr):
    """A float16 backward's elementwise gradient dx = dy * w, in float32, rounded once to float16."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    dy = tl.load(dy_ptr + offs * stride_dy, mask=mask).to(tl.float32)
    w = tl.load(w_ptr + offs * stride_w, mask=mask).to(tl.float32)
    tl.store(dx_ptr + offs, (dy * w).to(dx_ptr.dtype.element_ty), mask=mask)


unit = tst.values(-4, 4, nan=False, inf=False)


def _rope_launch(kernel, q, cos, sin):
    # q: (batch, seq, heads, head_dim) of a decode step (seq 1), made contiguous as liger's wrapper does (a
    # copy only where PyTorch does not call it contiguous, which ignores the stride of a size-1 dimension)
    qc = q.contiguous()
    bsz, seq, heads, dim = qc.shape
    kernel[(bsz * seq, heads)](qc, cos, sin, qc.stride(0), qc.stride(1), qc.stride(2), cos.stride(0), sin.stride(0),
                               seq, dim // 2, BLOCK=triton.next_power_of_2(dim // 2))
    if qc is not q:
        q.copy_(qc)


def _rope_reference(q, cos, sin):
    half = q.shape[-1] // 2
    q1, q2 = q[..., :half].float(), q[..., half:].float()
    c, s = cos.float()[None, :, None, :], sin.float()[None, :, None, :]
    q.copy_(torch.cat([q1 * c - q2 * s, q2 * c + q1 * s], dim=-1).to(q.dtype))


@tdiff.check(launch=_rope_launch, reference=_rope_reference,
             dims={"B": tst.sides(1, 4), "H": tst.sides(1, 4), "D2": tst.sides(1, 16)},
             q=tst.tensors(shape=("B", 1, "H", lambda d: 2 * d["D2"]), dtype=tst.FLOATS, values=unit),
             cos=tst.tensors(shape=(1, "D2"), like="q", layouts=["contiguous"], values=unit),
             sin=tst.tensors(like="cos", layouts=["contiguous"], values=unit))
@triton.jit
def rope_decode(q_ptr, cos_ptr, sin_ptr, stride_b, stride_s, stride_h, stride_cos, stride_sin, seq, half,
                BLOCK: tl.constexpr):
    """Rotary embedding of a decode step's q, in place: one program per (token row, head)."""
    row = tl.program_id(0)
    h = tl.program_id(1)
    b = row // seq
    s = row % seq
    base = q_ptr + b * stride_b + s * stride_s + h * stride_h
    d = tl.arange(0, BLOCK)
    mask = d < half
    q1 = tl.load(base + d, mask=mask).to(tl.float32)
    q2 = tl.load(base + d + half, mask=mask).to(tl.float32)
    c = tl.load(cos_ptr + s * stride_cos + d, mask=mask).to(tl.float32)
    sn = tl.load(sin_ptr + s * stride_sin + d, mask=mask).to(tl.float32)
    tl.store(base + d, q1 * c - q2 * sn, mask=mask)
    tl.store(base + d + half, q2 * c + q1 * sn, mask=mask)


def _row_scale_launch(kernel, x, s):
    rows, cols = x.shape
    s = s.contiguous()  # a copy only where PyTorch does not call s contiguous (it ignores the size-1 dim's stride)
    out = torch.empty((rows, cols), dtype=x.dtype, device=x.device)
    kernel[(rows,)](x, s, out, x.stride(0), x.stride(1), s.stride(0), s.stride(1), cols,
                    BLOCK=triton.next_power_of_2(cols))
    return out


@tdiff.check(launch=_row_scale_launch, reference=lambda x, s: (x.float() * s.float()).to(x.dtype),
             dims={"M": tst.sides(1, 8), "N": tst.sides(1, 32)},
             x=tst.tensors(shape=("M", "N"), dtype=tst.FLOATS),
             s=tst.tensors(shape=("M", 1), like="x", readonly=True))
@triton.jit
def row_scale(x_ptr, s_ptr, out_ptr, stride_row, stride_col, stride_s0, stride_s1, n_cols, BLOCK: tl.constexpr):
    """Each row of x times its row's scale, s of shape (rows, 1) (a keepdim reduction's result)."""
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_row + cols * stride_col, mask=mask).to(tl.float32)
    sc = tl.load(s_ptr + row * stride_s0).to(tl.float32)
    tl.store(out_ptr + row * n_cols + cols, (x * sc).to(out_ptr.dtype.element_ty), mask=mask)


#: the blind-spot classes' originals (bench/power/power.py runs their checks for false alarms)
ORIGINALS = (logsumexp_rows, fp16_axpy, fp16_grad_mul, rope_decode, row_scale)


# ------------------------------------------------------------------ blind spots: NaN where infinite inputs give inf

@mutant(logsumexp_rows, kind="NaN for infinite inputs",
        bug="only a +inf maximum is kept out of `x - max` (a row of -inf, fully masked, gives -inf - -inf = NaN)",
        trigger="a row of -inf (no NaN in it)")
@triton.jit
def lse_masked_row_nan(x_ptr, out_ptr, stride_row, stride_col, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * stride_row + cols * stride_col, mask=cols < n_cols, other=-float("inf"))
    x = x.to(tl.float32)
    m = tl.max(x, axis=0)
    m = tl.where(m == float("inf"), 0.0, m)  # BUG: a -inf maximum (a fully masked row) is subtracted
    tl.store(out_ptr + row, (m + tl.log(tl.sum(tl.exp(x - m), axis=0))).to(out_ptr.dtype.element_ty))


@mutant(logsumexp_rows, kind="NaN for infinite inputs",
        bug="only a -inf maximum is kept out of `x - max` (a row holding +inf gives inf - inf = NaN)",
        trigger="a row holding +inf (no NaN in it)")
@triton.jit
def lse_inf_max_nan(x_ptr, out_ptr, stride_row, stride_col, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * stride_row + cols * stride_col, mask=cols < n_cols, other=-float("inf"))
    x = x.to(tl.float32)
    m = tl.max(x, axis=0)
    m = tl.where(m == -float("inf"), 0.0, m)  # BUG: a +inf maximum is subtracted
    tl.store(out_ptr + row, (m + tl.log(tl.sum(tl.exp(x - m), axis=0))).to(out_ptr.dtype.element_ty))


# ------------------------------------------------------------------ blind spots: narrowing casts

@mutant(fp16_axpy, kind="narrowing cast", bug="3x rounded through bfloat16 before adding y",
        trigger="some 3x that bfloat16 does not hold exactly")
@triton.jit
def fp16_axpy_via_bf16(x_ptr, y_ptr, out_ptr, n, stride_x, stride_y, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs * stride_x, mask=mask).to(tl.float32)
    y = tl.load(y_ptr + offs * stride_y, mask=mask).to(tl.float32)
    t = (x * 3.0).to(tl.bfloat16).to(tl.float32)  # BUG: a round trip through bfloat16
    tl.store(out_ptr + offs, (t + y).to(out_ptr.dtype.element_ty), mask=mask)


@mutant(fp16_grad_mul, kind="narrowing cast", bug="the float16 gradient rounded through bfloat16 before its store",
        trigger="some dy * w that bfloat16 and float16 round differently")
@triton.jit
def fp16_grad_via_bf16(dy_ptr, w_ptr, dx_ptr, n, stride_dy, stride_w, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    dy = tl.load(dy_ptr + offs * stride_dy, mask=mask).to(tl.float32)
    w = tl.load(w_ptr + offs * stride_w, mask=mask).to(tl.float32)
    tl.store(dx_ptr + offs, (dy * w).to(tl.bfloat16), mask=mask)  # BUG: bfloat16, then the float16 store


# ------------------------------------------------------------------ blind spots: strides of size-1 dimensions

@mutant(rope_decode, kind="size-1 stride", bug="token row `b * seq + s` addressed with seq's stride (liger 1)",
        trigger="bsz > 1 and q contiguous to PyTorch with its size-1 seq dim strided unlike the batch")
@triton.jit
def rope_decode_row_stride(q_ptr, cos_ptr, sin_ptr, stride_b, stride_s, stride_h, stride_cos, stride_sin, seq, half,
                           BLOCK: tl.constexpr):
    row = tl.program_id(0)
    h = tl.program_id(1)
    s = row % seq
    base = q_ptr + row * stride_s + h * stride_h  # BUG: assumes stride_b == seq * stride_s
    d = tl.arange(0, BLOCK)
    mask = d < half
    q1 = tl.load(base + d, mask=mask).to(tl.float32)
    q2 = tl.load(base + d + half, mask=mask).to(tl.float32)
    c = tl.load(cos_ptr + s * stride_cos + d, mask=mask).to(tl.float32)
    sn = tl.load(sin_ptr + s * stride_sin + d, mask=mask).to(tl.float32)
    tl.store(base + d, q1 * c - q2 * sn, mask=mask)
    tl.store(base + d + half, q2 * c + q1 * sn, mask=mask)


@mutant(row_scale, kind="size-1 stride", bug="the row's scale read with the stride of s's size-1 dimension",
        trigger="more than one row, s contiguous to PyTorch and its size-1 dim strided unlike its rows")
@triton.jit
def row_scale_unit_stride(x_ptr, s_ptr, out_ptr, stride_row, stride_col, stride_s0, stride_s1, n_cols,
                          BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_row + cols * stride_col, mask=mask).to(tl.float32)
    sc = tl.load(s_ptr + row * stride_s1).to(tl.float32)  # BUG: the size-1 dimension's stride
    tl.store(out_ptr + row * n_cols + cols, (x * sc).to(out_ptr.dtype.element_ty), mask=mask)


# ------------------------------------------------------------------ which drawn cases can show each bug

def _shape(c: Any, name: str) -> tuple[int, ...]:
    return tuple(c.inputs[name].shape)


def _values(c: Any, name: str) -> Any:
    import numpy as np

    from tdiff.core import dtypes

    a = c.inputs[name]
    return dtypes.as_float64(a.values(), a.dt).reshape(a.shape) if a.numel else np.zeros(a.shape)


def _pow2(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _row_stat(c: Any, stat: str, below: float) -> bool:
    import numpy as np

    x = _values(c, "x")
    with np.errstate(all="ignore"):
        v = np.sqrt(np.mean(x * x, axis=1)) if stat == "rms" else np.std(x, axis=1)
    return bool((np.isfinite(v) & (v < below)).any())


def _gelu_range(c: Any) -> bool:
    import numpy as np

    x = np.abs(_values(c, "x"))
    return bool(((x > 0.1) & (x < 10)).any())


def _inf_row(c: Any, sign: float, whole: bool) -> bool:
    import numpy as np

    x = _values(c, "x")
    nan = np.isnan(x).any(axis=1)
    hit = (x == sign * np.inf).all(axis=1) if whole else (x == sign * np.inf).any(axis=1)
    return bool((hit & ~nan).any())


def _bf16_rounds(c: Any, product: bool) -> bool:
    """Whether rounding through bfloat16 changes a value the mutant rounds: 3x (`fp16_axpy_via_bf16`), or
    dy * w where bfloat16 and float16 round it differently (`fp16_grad_via_bf16`)."""
    import numpy as np
    import torch

    x, y = _values(c, "x"), _values(c, "y")
    with np.errstate(all="ignore"):
        v = torch.tensor(x * y if product else 3 * x, dtype=torch.float32)
    bf = v.to(torch.bfloat16).float()
    other = v.to(torch.float16).float() if product else v
    return bool((torch.isfinite(v) & (bf != other)).any())


def _packed_but_unit(c: Any, name: str) -> bool:
    """Contiguous to PyTorch (every dimension larger than 1 at its packed stride), whatever the strides of
    its size-1 dimensions."""
    a = c.inputs[name]
    acc = 1
    for n, st in reversed(list(zip(a.shape, a.strides))):
        if n > 1 and st != acc:
            return False
        acc *= max(n, 1)
    return True


TRIGGERS = {
    "add_one_mask_le": lambda c: not _pow2(_shape(c, "t")[1]),
    "vector_add_mask_le": lambda c: _shape(c, "x")[0] % 256 != 0,
    "vector_add_ignores_stride_y": lambda c: c.inputs["y"].strides[0] != 1 and _shape(c, "y")[0] > 1,
    "rotary_ignores_stride_d": lambda c: c.inputs["q"].strides[2] != 1,
    "dequantize_ignores_scale_stride": lambda c: c.inputs["scale"].strides[0] != 1 and _shape(c, "scale")[0] > 1,
    "cross_entropy_no_other": lambda c: _shape(c, "logits")[1] % cross_entropy.CHUNK != 0,
    "rms_norm_no_other": lambda c: not _pow2(_shape(c, "x")[1]),
    "matmul_fp16_acc": lambda c: c.inputs["a"].dtype == "float32",
    "layer_norm_fp16_sum": lambda c: c.inputs["x"].dtype == "float32",
    "matmul_swapped_pids": lambda c: _cdiv(_shape(c, "a")[0], 16) != _cdiv(_shape(c, "b")[1], 16),
    "swiglu_swapped_pids": lambda c: _shape(c, "ab")[0] != _cdiv(_shape(c, "ab")[1] // 2, 64),
    "flash_attn_swapped_pids": lambda c: _cdiv(_shape(c, "q")[1], 16) != _shape(c, "q")[0],
    "matmul_floor_k": lambda c: _shape(c, "a")[1] % 16 != 0,
    "cross_entropy_floor_vocab": lambda c: _shape(c, "logits")[1] % cross_entropy.CHUNK != 0,
    "atomic_sum_race": lambda c: _shape(c, "x")[0] > atomic_sum.BLOCK,
    "softmax_zero_fill": lambda c: not _pow2(_shape(c, "x")[1]),
    "flash_attn_mask_zero": lambda c: _shape(c, "q")[1] % 16 != 0 or bool(c.inputs["causal"]),
    "rms_norm_eps_outside": lambda c: _row_stat(c, "rms", 1e-2),
    "layer_norm_eps_outside": lambda c: _row_stat(c, "std", 0.1),
    "softmax_stride1_fastpath": lambda c: (c.inputs["x"].strides[1] == 1 and _shape(c, "x")[0] > 1
                                           and c.inputs["x"].strides[0] != _shape(c, "x")[1]),
    "add_one_single_row": lambda c: _shape(c, "t")[0] == 1,
    "rms_norm_div16_unmasked": lambda c: _shape(c, "x")[1] % 16 == 0 and not _pow2(_shape(c, "x")[1]),
    "matmul_even_k_unmasked": lambda c: _shape(c, "a")[1] % 16 == 0 and (_shape(c, "a")[0] % 16 != 0
                                                                          or _shape(c, "b")[1] % 16 != 0),
    "axpb_hardcoded_block": lambda c: c.config == 1 and _shape(c, "x")[0] > 256,
    "gelu_wrong_cubic": _gelu_range,
    "swiglu_h80_fastpath": lambda c: (_shape(c, "ab")[1] // 2) % 80 == 0,
    "rms_norm_long_row_fp16": lambda c: c.inputs["x"].dtype == "float16" and 72 < _shape(c, "x")[1] < 128,
    "lse_masked_row_nan": lambda c: _inf_row(c, -1.0, whole=True),
    "lse_inf_max_nan": lambda c: _inf_row(c, 1.0, whole=False),
    "fp16_axpy_via_bf16": lambda c: _bf16_rounds(c, product=False),
    "fp16_grad_via_bf16": lambda c: _bf16_rounds(c, product=True),
    "rope_decode_row_stride": lambda c: (_shape(c, "q")[0] > 1 and _packed_but_unit(c, "q")
                                         and c.inputs["q"].strides[1] != c.inputs["q"].strides[0]),
    "row_scale_unit_stride": lambda c: (_shape(c, "s")[0] > 1 and _packed_but_unit(c, "s")
                                        and c.inputs["s"].strides[1] != c.inputs["s"].strides[0]),
}

for _m in MUTANTS:
    _m.triggered = TRIGGERS[_m.name]

BY_NAME = {m.name: m for m in MUTANTS}

# ------------------------------------------------------------------ generic declarations (bench/power/generic.py,
# and the precision bugs of bench/power/precision.py)

from bench.power import generic as power_generic  # noqa: E402
from bench.power import precision as power_precision  # noqa: E402

for _module, _declared in ((power_generic, power_generic.GENERIC), (power_precision, power_precision.PRECISION)):
    ORIGINALS = (*ORIGINALS, *_module.ORIGINALS)
    for _kernel, _orig, _kind, _bug, _trigger, _triggered in _declared:
        _m = Mutant(kernels.kernel_name(_kernel), power_generic.check_of(_orig), f"generic: {_kind}", _bug,
                    _trigger, _kernel, _triggered)
        MUTANTS.append(_m)
        TRIGGERS[_m.name] = _triggered
BY_NAME = {m.name: m for m in MUTANTS}
