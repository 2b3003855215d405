"""Rotary position embedding applied in place to q of shape (seq, heads, head_dim)."""

import torch
import triton
import triton.language as tl

import tdiff
from tdiff import strategies as tst

unit = tst.values(-4, 4, nan=False, inf=False)


def launch(kernel, q, cos, sin):
    seq, heads, dim = q.shape
    half = dim // 2
    kernel[(seq, heads)](q, cos, sin, q.stride(0), q.stride(1), q.stride(2), cos.stride(0), sin.stride(0), half,
                         BLOCK=triton.next_power_of_2(half))


def reference(q, cos, sin):
    half = q.shape[-1] // 2
    q1, q2 = q[..., :half].float(), q[..., half:].float()
    c, s = cos.float()[:, None, :], sin.float()[:, None, :]
    out = torch.cat([q1 * c - q2 * s, q2 * c + q1 * s], dim=-1)
    q.copy_(out.to(q.dtype))


@tdiff.check(
    launch=launch,
    reference=reference,
    dims={"S": tst.sides(1, 12), "D2": tst.sides(1, 24)},
    q=tst.tensors(shape=("S", tst.sides(1, 4), lambda d: 2 * d["D2"]), dtype=tst.FLOATS, values=unit),
    cos=tst.tensors(shape=("S", "D2"), like="q", layouts=["contiguous"], values=unit),
    sin=tst.tensors(like="cos", layouts=["contiguous", "padded"], values=unit),
)
@triton.jit
def rotary_kernel(q_ptr, cos_ptr, sin_ptr, stride_s, stride_h, stride_d, stride_cos, stride_sin, half,
                  BLOCK: tl.constexpr):
    s = tl.program_id(0)
    h = tl.program_id(1)
    d = tl.arange(0, BLOCK)
    mask = d < half
    base = q_ptr + s * stride_s + h * stride_h
    q1 = tl.load(base + d * stride_d, mask=mask).to(tl.float32)
    q2 = tl.load(base + (d + half) * stride_d, mask=mask).to(tl.float32)
    c = tl.load(cos_ptr + s * stride_cos + d, mask=mask).to(tl.float32)
    sn = tl.load(sin_ptr + s * stride_sin + d, mask=mask).to(tl.float32)
    tl.store(base + d * stride_d, q1 * c - q2 * sn, mask=mask)
    tl.store(base + (d + half) * stride_d, q2 * c + q1 * sn, mask=mask)
