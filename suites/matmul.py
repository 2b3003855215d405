"""Tiled matmul with tl.dot, looping over K with a runtime bound (the interpreter's numpy >= 2.4 trap)."""

import torch
import triton
import triton.language as tl

import tdiff
from tdiff import strategies as tst

BM, BN, BK = 16, 16, 16
small = tst.values(-4, 4, nan=False, inf=False, extremes=False)


def launch(kernel, a, b):
    M, K = a.shape
    _, N = b.shape
    c = torch.empty((M, N), dtype=a.dtype, device=a.device)
    grid = (triton.cdiv(M, BM), triton.cdiv(N, BN))
    kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
                 BLOCK_M=BM, BLOCK_N=BN, BLOCK_K=BK)
    return c


@tdiff.check(
    launch=launch,
    reference=lambda a, b: (a.float() @ b.float()).to(a.dtype),
    dims={"M": tst.sizes(block=BM, max_blocks=2), "K": tst.sizes(block=BK, max_blocks=3),
          "N": tst.sizes(block=BN, max_blocks=2)},
    # bfloat16 is left out: Triton 3.6's interpreter multiplies bf16 bit patterns as integers
    a=tst.tensors(shape=("M", "K"), dtype=["float32", "float16"], values=small),
    b=tst.tensors(shape=("K", "N"), like="a", values=small),
)
@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
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
