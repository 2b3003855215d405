"""A small flash-attention forward: online softmax over key blocks, two tl.dot per block, causal or not."""

import math

import torch
import triton
import triton.language as tl

import tdiff
from tdiff import strategies as tst

BM, BN = 16, 16
small = tst.values(-2, 2, nan=False, inf=False, extremes=False)


def launch(kernel, q, k, v, causal):
    bh, seq, d = q.shape
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    out = torch.empty((bh, seq, d), dtype=q.dtype, device=q.device)
    kernel[(triton.cdiv(seq, BM), bh)](q, k, v, out, seq, 1.0 / math.sqrt(d), D=d, BLOCK_M=BM, BLOCK_N=BN,
                                      CAUSAL=causal)
    return out


def reference(q, k, v, causal):
    scores = (q.float() @ k.float().transpose(1, 2)) / math.sqrt(q.shape[-1])
    if causal:
        seq = q.shape[1]
        mask = torch.ones(seq, seq, dtype=torch.bool, device=q.device).tril()
        scores = scores.masked_fill(~mask, float("-inf"))
    return (torch.softmax(scores, dim=-1) @ v.float()).to(q.dtype)


@tdiff.check(
    launch=launch,
    reference=reference,
    dims={"BH": tst.sides(1, 3), "S": tst.sizes(block=BN, max_blocks=3)},
    q=tst.tensors(shape=("BH", "S", tst.sides(16, 32).map(lambda d: 16 if d < 24 else 32)),
                  dtype=["float32", "float16"], values=small),
    k=tst.tensors(like="q", values=small),
    v=tst.tensors(like="q", values=small),
    causal=[False, True],
)
@triton.jit
def flash_attn_fwd(q_ptr, k_ptr, v_ptr, o_ptr, seq, scale, D: tl.constexpr, BLOCK_M: tl.constexpr,
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
