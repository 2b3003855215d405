"""Kernels for tests/test_stages.py and bench/gpu/stages_gpu.py: small (quick to compile), each with a check.

`TDIFF_STAGES_PLANT=<stage>:<builder>:<occurrence>` (e.g. `ttgir:ttgpuir.add_remove_layout_conversions:0`)
plants a miscompile in every compile of the process that imports this module (and of tdiff's workers,
which import it to find the checks): after that pass, `arith.addf` becomes `arith.subf` (in make_llir,
`llvm.fadd` becomes `llvm.fsub`). Only the GPU demo sets it.
"""

from __future__ import annotations

import os
import re
import tempfile

import torch
import triton
import triton.language as tl

import tdiff
from tdiff import strategies as tst
from tdiff.execute.stages.passes import PassCall, Planted, control

BLOCK = 128
PLANT_ENV = "TDIFF_STAGES_PLANT"


def add_launch(kernel, x, y):
    out = torch.empty_like(x)
    n = x.numel()
    kernel[(triton.cdiv(n, BLOCK),)](x, y, out, n, x.stride(0), y.stride(0), BLOCK=BLOCK)
    return out


@tdiff.check(
    launch=add_launch,
    reference=lambda x, y: (x.double() + y.double()).to(x.dtype),
    x=tst.tensors(shape=(tst.sizes(block=BLOCK),), dtype="float32"),
    y=tst.tensors(like="x"),
    max_examples=12,
)
@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, stride_x, stride_y, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs * stride_x, mask=mask)
    y = tl.load(y_ptr + offs * stride_y, mask=mask)
    tl.store(out_ptr + offs, x + y, mask=mask)


def colsum_launch(kernel, x):
    m, n = x.shape
    out = torch.empty(n, dtype=torch.float32, device=x.device)
    kernel[(triton.cdiv(n, 32),)](x, out, m, n, x.stride(0), x.stride(1), BM=16, BN=32)
    return out


@tdiff.check(  # one specialization on every case: an edited IR of it judges them all
    name="fixed",
    launch=colsum_launch,
    reference=lambda x: x.double().sum(0).float(),
    x=tst.tensors(shape=(32, 64), dtype="float32", layouts=["contiguous"]),
    max_examples=12,
)
@tdiff.check(
    launch=colsum_launch,
    reference=lambda x: x.double().sum(0).float(),
    x=tst.tensors(shape=(tst.sides(1, 40), tst.sides(1, 70)), dtype="float32"),
    max_examples=12,
)
@triton.jit
def colsum_kernel(x_ptr, out_ptr, M, N, stride_m, stride_n, BM: tl.constexpr, BN: tl.constexpr):
    cols = tl.program_id(0) * BN + tl.arange(0, BN)
    acc = tl.zeros((BN,), tl.float32)
    for start in range(0, M, BM):
        rows = start + tl.arange(0, BM)
        mask = (rows[:, None] < M) & (cols[None, :] < N)
        x = tl.load(x_ptr + rows[:, None] * stride_m + cols[None, :] * stride_n, mask=mask, other=0.0)
        acc += tl.sum(x, axis=0)
    tl.store(out_ptr + cols, acc, mask=cols < N)


def dot_launch(kernel, a, b):
    c = torch.empty((16, 16), dtype=torch.float32, device=a.device)
    kernel[(1,)](a, b, c, a.shape[1], a.stride(0), a.stride(1), b.stride(0), b.stride(1), BK=16)
    return c


@tdiff.check(
    launch=dot_launch,
    reference=lambda a, b: a.double() @ b.double(),
    a=tst.tensors(shape=(16, "K"), dtype="float16", values=tst.values(-4, 4)),
    b=tst.tensors(shape=("K", 16), dtype="float16", values=tst.values(-4, 4)),
    dims={"K": tst.sizes(block=16, max_blocks=3)},
    max_examples=8,
)
@triton.jit
def dot_kernel(a_ptr, b_ptr, c_ptr, K, sam, sak, sbk, sbn, BK: tl.constexpr):
    r = tl.arange(0, 16)
    acc = tl.zeros((16, 16), tl.float32)
    for k in range(0, K, BK):
        kk = k + tl.arange(0, BK)
        a = tl.load(a_ptr + r[:, None] * sam + kk[None, :] * sak, mask=kk[None, :] < K, other=0.0)
        b = tl.load(b_ptr + kk[:, None] * sbk + r[None, :] * sbn, mask=kk[:, None] < K, other=0.0)
        acc += tl.dot(a, b)
    tl.store(c_ptr + r[:, None] * 16 + r[None, :], acc)


def add_to_sub(text: str) -> str:
    """The planted miscompile: every floating add becomes a subtract (MLIR arith, or LLVM dialect)."""
    return text.replace("arith.addf", "arith.subf").replace("llvm.fadd", "llvm.fsub")


def plant(spec: str) -> Planted:
    """`<stage>:<builder>:<occurrence>` as a `Planted` layer."""
    stage, builder, occurrence = spec.split(":")
    return Planted(PassCall(stage, builder, int(occurrence)), add_to_sub)


if os.environ.get(PLANT_ENV):  # the GPU demo: every compile in this process is planted, in a cache of its own
    from triton import knobs

    knobs.cache.dir = os.path.join(tempfile.gettempdir(), f"tdiff-planted-cache-{os.getuid()}",
                                   re.sub(r"[^A-Za-z0-9_.-]", "_", os.environ[PLANT_ENV]))
    _PLANTED = control(plant(os.environ[PLANT_ENV]))  # kept: a dropped context manager would close at once
    _PLANTED.__enter__()
