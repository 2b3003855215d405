"""Kernels for the batched interpreter's tests: in a wide grid, one program strays (`STRAY`), as a bug in
one tile does; a sample of the grid's programs would skip it."""

import torch
import triton
import triton.language as tl

import tdiff
from tdiff import strategies as tst

BLOCK = 4
N = 1024 * BLOCK  # 1024 programs
STRAY = 777


def launch(kernel, x, out, mode):
    kernel[(triton.cdiv(N, BLOCK),)](x, out, N, STRAY=STRAY, MODE=mode, BLOCK=BLOCK)
    return out


@triton.jit
def stray_kernel(x_ptr, out_ptr, n, STRAY: tl.constexpr, MODE: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    lanes = tl.arange(0, BLOCK)
    offs = pid * BLOCK + lanes
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=0.0)
    if MODE == 0:  # program STRAY loads far past the input
        far = tl.where(pid == STRAY, 1 << 22, 0)
        x += tl.load(x_ptr + offs + far, mask=m, other=0.0)
    tl.store(out_ptr + offs, x * 2, mask=m)
    if MODE == 1:  # program STRAY also writes its neighbour's first element
        tl.store(out_ptr + (pid + 1) * BLOCK + lanes, x, mask=lanes < (pid == STRAY).to(tl.int32))
    if MODE == 2:  # program STRAY writes one element past the output's view (its storage's padding)
        tl.store(out_ptr + n + lanes, x, mask=lanes < (pid == STRAY).to(tl.int32))


def stray_case() -> dict[str, torch.Tensor]:
    """The input, and an output view with padding after it (storage past the view)."""
    return {"x": torch.arange(N, dtype=torch.float32), "out": torch.zeros(N + 64, dtype=torch.float32)[:N]}


for _mode in (0, 1, 2):
    tdiff.check(launch=lambda kernel, x, out, _m=_mode: launch(kernel, x, out, _m),
                reference=lambda x, out: x * 2, x=tst.tensors(shape=(N,), layouts=["contiguous"]),
                out=tst.tensors(shape=(N,), layouts=["contiguous"]), max_examples=1)(stray_kernel)


def swap_launch(kernel, x):
    out = torch.zeros_like(x)
    kernel[(triton.cdiv(x.numel(), BLOCK),)](x, out, x.numel(), BLOCK=BLOCK)
    return out


@tdiff.check(launch=swap_launch, reference=lambda x: x, x=tst.tensors(shape=(64,), layouts=["contiguous"]),
             max_examples=1)
@triton.jit
def swap_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """Writes its input with atomic exchanges (which batches do not run: they make locks and flags)."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.atomic_xchg(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)
