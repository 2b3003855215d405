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


def rows_launch(kernel, x, w):
    out = torch.empty_like(x)
    kernel[(x.shape[0],)](x, w, out, x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]))
    return out


@tdiff.check(launch=rows_launch, reference=lambda x, w: torch.where(x.abs() < 0.5, x.abs() + w, x * w),
             x=tst.tensors(shape=(16, 8), layouts=["contiguous"]), w=tst.tensors(shape=(8,), layouts=["contiguous"]),
             max_examples=1)
@triton.jit
def rows_kernel(x_ptr, w_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """A comparison of computed values before the first arithmetic (its tolerance follows the operations run
    so far), and a row every program loads the same (the same value in every program) stored widened."""
    cols = tl.arange(0, BLOCK)
    m = cols < n
    x = tl.load(x_ptr + tl.program_id(0) * n + cols, mask=m, other=0.0)
    w = tl.load(w_ptr + cols, mask=m, other=0.0)
    b = tl.abs(x)
    near = b < 0.5
    tl.store(out_ptr + tl.program_id(0) * n + cols, tl.where(near, b + w, x * w), mask=m)


def sums_launch(kernel, x):
    out = torch.zeros(2, dtype=x.dtype)
    kernel[(x.numel() // 2,)](x, out)
    return out


@tdiff.check(launch=sums_launch, reference=lambda x: torch.stack([x.sum(), x.sum()]),
             x=tst.tensors(shape=(32,), layouts=["contiguous"]), max_examples=1)
@triton.jit
def sums_kernel(x_ptr, out_ptr):
    """Two atomic additions to the same element per program: program by program they alternate."""
    pid = tl.program_id(0)
    tl.atomic_add(out_ptr, tl.load(x_ptr + 2 * pid))
    tl.atomic_add(out_ptr, tl.load(x_ptr + 2 * pid + 1))


def chain_launch(kernel, x):
    out = torch.zeros_like(x)
    kernel[(x.numel(),)](x, out)
    return out


@tdiff.check(launch=chain_launch, reference=lambda x: x, x=tst.tensors(shape=(8,), layouts=["contiguous"]),
             max_examples=1)
@triton.jit
def chain_kernel(x_ptr, out_ptr):
    """Each program stores its element, then reads its neighbour's (a race: who wrote it first depends on the
    order of the programs)."""
    pid = tl.program_id(0)
    tl.store(out_ptr + pid, tl.load(x_ptr + pid))
    prev = tl.load(out_ptr + tl.maximum(pid - 1, 0))
    tl.store(x_ptr + pid, prev)


def bcast_launch(kernel, w):
    out = torch.empty(16, w.numel(), dtype=w.dtype)
    kernel[(16,)](w, out, w.numel(), BLOCK=triton.next_power_of_2(w.numel()))
    return out


@tdiff.check(launch=bcast_launch, reference=lambda w: ((torch.arange(w.numel()) + 1.0) / 3.0).expand(16, -1),
             w=tst.tensors(shape=(8,), layouts=["contiguous"]), max_examples=1)
@triton.jit
def bcast_kernel(w_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """Every program stores the same computed row (a value with no program axis, widened to each program's)."""
    cols = tl.arange(0, BLOCK)
    tl.store(out_ptr + tl.program_id(0) * n + cols, (cols.to(tl.float32) + 1.0) / 3.0, mask=cols < n)


def stride_launch(kernel, x):
    out = torch.empty_like(x)
    kernel[(8,)](x, out, x.numel())
    return out


@tdiff.check(launch=stride_launch, reference=lambda x: x * 2, x=tst.tensors(shape=(61,), layouts=["contiguous"]),
             max_examples=1)
@triton.jit
def stride_kernel(x_ptr, out_ptr, n):
    """A grid-stride loop: each program starts at its own element, so its loop variable differs between
    programs, and its trip count too where the grid does not divide n."""
    for i in range(tl.program_id(0), n, tl.num_programs(0)):
        tl.store(out_ptr + i, tl.load(x_ptr + i) * 2)


def minimum_launch(kernel, x):
    out = torch.empty(x.numel() // 4 * 5, dtype=x.dtype, device=x.device)
    kernel[(x.numel() // 4,)](x, out, BLOCK=4)
    return out


def _minimum_reference(x):
    rows = x.reshape(-1, 4)
    low = torch.where(rows.isnan(), rows.new_tensor(0.0), torch.clamp(rows, max=0.0))
    smallest = torch.where(rows.isnan(), rows.new_tensor(float("inf")), rows).min(-1, keepdim=True).values
    return torch.cat([low, smallest], -1).reshape(-1)


@tdiff.check(launch=minimum_launch, reference=_minimum_reference,
             x=tst.tensors(shape=(16,), layouts=["contiguous"]))
@triton.jit
def minimum_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    """`tl.minimum` and `tl.min` per program of 4 elements: a NaN loses (propagate_nan=NONE), as compiled code
    does; the interpreter's shim for that (`nan-minmax`) counts the programs that met a NaN."""
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    tl.store(out_ptr + pid * (BLOCK + 1) + tl.arange(0, BLOCK), tl.minimum(x, 0.0))
    tl.store(out_ptr + pid * (BLOCK + 1) + BLOCK, tl.min(x, axis=0))
