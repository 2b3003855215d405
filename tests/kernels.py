"""Kernels built for tdiff's own tests: correct ones, and ones with planted bugs of each kind.

They live in an importable module so tdiff's worker processes can find them.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

import tdiff
from tdiff import strategies as tst

BLOCK = 64


def _launch_1d(kernel, x):
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    kernel[(triton.cdiv(x.numel(), BLOCK),)](x, out, x.numel(), x.stride(0), BLOCK=BLOCK)
    return out


# ---------------------------------------------------------------- planted bugs (issue: strategies)

@tdiff.check(
    launch=_launch_1d,
    reference=lambda x: x * 2,
    x=tst.tensors(shape=(tst.sizes(block=BLOCK),), layouts=["contiguous"]),
)
@triton.jit
def masked_tail_bug(x_ptr, out_ptr, n, stride, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs <= n  # the bug: one element too many
    x = tl.load(x_ptr + offs * stride, mask=mask, other=0.0)
    tl.store(out_ptr + offs, x * 2, mask=mask)


def _launch_rows(kernel, x):
    rows, cols = x.shape
    out = torch.empty((rows, cols), dtype=x.dtype, device=x.device)
    kernel[(rows,)](x, out, cols, x.stride(1), BLOCK=triton.next_power_of_2(cols))
    return out


@tdiff.check(
    launch=_launch_rows,
    reference=lambda x: x + 1,
    # the kernel honours the column stride, so only views whose rows are not packed break it
    x=tst.tensors(ndim=2, max_side=16, layouts=["contiguous", "split"]),
)
@triton.jit
def row_stride_bug(x_ptr, out_ptr, n_cols, stride_col, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols * stride_col, mask=mask)  # the bug: row stride assumed == n_cols
    tl.store(out_ptr + row * n_cols + cols, x + 1, mask=mask)


@tdiff.check(
    launch=_launch_1d,
    reference=lambda x: x * 2,
    x=tst.tensors(shape=(tst.sizes(block=BLOCK),), layouts=["contiguous", "offset"]),
)
@triton.jit
def alignment_bug(x_ptr, out_ptr, n, stride, BLOCK: tl.constexpr):
    # the bug: rounds the base pointer down to 16 bytes, as if inputs were always aligned
    base = ((x_ptr.to(tl.int64) // 16) * 16).to(tl.pointer_type(tl.float32))
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(base + offs, mask=mask, other=0.0)
    tl.store(out_ptr + offs, x * 2, mask=mask)


# ---------------------------------------------------------------- correct kernels

@tdiff.check(
    launch=_launch_1d,
    reference=lambda x: x * 2,
    x=tst.tensors(shape=(tst.sizes(block=BLOCK),), dtype=["float32", "float16"]),
)
@triton.jit
def double_kernel(x_ptr, out_ptr, n, stride, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs * stride, mask=mask, other=0.0)
    tl.store(out_ptr + offs, x * 2, mask=mask)


double_noref = tdiff.check(
    launch=_launch_1d, name="noref", x=tst.tensors(shape=(tst.sizes(block=BLOCK),)),
)(triton.jit(double_kernel.fn))


double_midref = tdiff.check(
    launch=_launch_1d, name="midref", reference=lambda x: (x.double() * 2 * (1 + 2e-6)).to(x.dtype),
    # (declared: within it, the dataflow scale is the precision the check accepts; tdiff's own would measure the
    # problem's scale against this reference, 2e-6 off the exact result)
    tolerance="arith",
    x=tst.tensors(shape=(tst.sizes(block=BLOCK),), layouts=["contiguous"], values=tst.values(1, 8, specials=False)),
)(triton.jit(double_kernel.fn))


def _launch_inplace(kernel, t):
    rows, cols = t.shape
    kernel[(rows,)](t, t.stride(0), t.stride(1), cols, BLOCK=triton.next_power_of_2(cols))


@tdiff.check(launch=_launch_inplace, reference=lambda t: t.add_(1), t=tst.tensors(ndim=2, max_side=8))
@triton.jit
def inplace_add_one(ptr, stride_row, stride_col, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    p = ptr + row * stride_row + cols * stride_col
    tl.store(p, tl.load(p, mask=cols < n_cols) + 1, mask=cols < n_cols)


def _launch_overrun(kernel, t):
    rows, cols = t.shape
    kernel[(rows,)](t, t.stride(0), t.stride(1), cols, BLOCK=triton.next_power_of_2(cols + 1))


@tdiff.check(launch=_launch_overrun, reference=lambda t: t.add_(1), t=tst.tensors(ndim=2, max_side=8))
@triton.jit
def inplace_overrun(ptr, stride_row, stride_col, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    p = ptr + row * stride_row + cols * stride_col
    tl.store(p, tl.load(p, mask=cols <= n_cols) + 1, mask=cols <= n_cols)  # writes one element past each row


# ---------------------------------------------------------------- verdicts

@tdiff.check(launch=lambda kernel, out: kernel[(4,)](out), out=tst.tensors(shape=(1,), dtype="int32"))
@triton.jit
def race_kernel(out_ptr):
    tl.store(out_ptr, tl.program_id(0))  # every program writes the same element


def _launch_cast(kernel, x, out):
    kernel[(1,)](x, out, x.numel(), BLOCK=triton.next_power_of_2(x.numel()))


@tdiff.check(
    launch=_launch_cast,
    # saturating, as the GPU does
    reference=lambda x, out: out.copy_(x.double().clamp(-(2**31), 2**31 - 1).to(torch.int32)),
    # contiguous: the kernel reads x as `x_ptr + offs` (its one bug is the cast, not an ignored stride)
    x=tst.tensors(shape=(8,), values=tst.values(nan=False), layouts=["contiguous"]),
    out=tst.tensors(shape=(8,), dtype="int32", layouts=["contiguous"]),
)
@triton.jit
def cast_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(out_ptr + offs, x.to(tl.int32), mask=offs < n)


@tdiff.check(
    launch=_launch_1d,
    reference=lambda x: (x.float() * 2).to(x.dtype),
    x=tst.tensors(shape=(8,), dtype="bfloat16"),
)
@triton.jit
def bf16_const_kernel(x_ptr, out_ptr, n, stride, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs * stride, mask=offs < n)
    tl.store(out_ptr + offs, x * 2.0, mask=offs < n)  # bf16 times a float constant


@tdiff.check(
    launch=lambda kernel, x: kernel[(1,)](x, x.numel(), BLOCK=16),
    reference=lambda x: None,
    x=tst.tensors(shape=(4,), values=tst.values(-1, 1, specials=False)),
    check_pointers=False,
)
@triton.jit
def crash_kernel(x_ptr, n, BLOCK: tl.constexpr):
    flag = tl.load(x_ptr)
    if flag > 0:  # then: load through a pointer that is no address at all
        bad = tl.full((1,), 8, tl.int64).to(tl.pointer_type(tl.float32))
        tl.store(x_ptr + tl.arange(0, 1), tl.load(bad))


@tdiff.check(
    launch=lambda kernel, x: kernel[(1,)](x),
    reference=lambda x: None,
    x=tst.tensors(shape=(4,), values=tst.values(-1, 1, specials=False)),
)
@triton.jit
def hang_kernel(x_ptr):
    flag = tl.load(x_ptr)
    i = 0
    while flag > 0:  # never ends when the first element is positive
        i += 1
    tl.store(x_ptr, flag + i)


# ---------------------------------------------------------------- the interpreter's traps

@triton.jit
def _scaled(x, s):
    return x * s


@triton.jit
def _twice_scaled(x):
    return _scaled(_scaled(x, 1.0), 2.0)


def _launch_loop(kernel, x):
    out = torch.empty(1, dtype=torch.float32, device=x.device)
    kernel[(1,)](x, out, x.numel(), BK=8)
    return out


@tdiff.check(
    launch=_launch_loop,
    reference=lambda x: (2 * x.float().sum() + x.float().max()).reshape(1),
    x=tst.tensors(shape=(tst.sizes(block=8, max_blocks=4),), layouts=["contiguous", "offset"],
                  values=tst.values(-8, 8, specials=False)),
)
@triton.jit
def loop_reduce_kernel(x_ptr, out_ptr, K, BK: tl.constexpr):
    offs = tl.arange(0, BK)
    acc = tl.zeros((BK,), dtype=tl.float32)
    best = tl.full((BK,), -float("inf"), tl.float32)
    for k in range(0, tl.cdiv(K, BK)):  # a loop over a runtime bound
        x = tl.load(x_ptr + k * BK + offs, mask=k * BK + offs < K, other=0.0)
        acc += _twice_scaled(x)  # nested user device functions
        best = tl.maximum(best, tl.where(k * BK + offs < K, x, -float("inf")))
    tl.store(out_ptr, tl.sum(acc, axis=0) + tl.max(best, axis=0))


@triton.heuristics({"EVEN": lambda args: args["n"] % args["BLOCK"] == 0})
@triton.jit
def heuristic_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if EVEN:
        x = tl.load(x_ptr + offs)
    else:
        x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.store(out_ptr + offs, tl.softmax(x, dim=0) * 0 + x, mask=offs < n)


def _launch_heur(kernel, x):
    out = torch.empty_like(x)
    kernel[(triton.cdiv(x.numel(), 16),)](x, out, x.numel(), BLOCK=16)
    return out


heuristic_checked = tdiff.check(
    launch=_launch_heur, reference=lambda x: x.clone(),
    x=tst.tensors(shape=(tst.sizes(block=16, max_blocks=2),), layouts=["contiguous"],
                  values=tst.values(-5, 5, specials=False)),
)(heuristic_kernel)


# ---------------------------------------------------------------- for the GPU machine

@tdiff.check(
    launch=lambda kernel, x: kernel[(1,)](x, BLOCK=4),
    reference=lambda x: x.add_(1),
    x=tst.tensors(shape=(4,), values=tst.values(-1, 1, specials=False)),
)
@triton.jit
def far_write_kernel(x_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    far = (tl.load(x_ptr) > 0).to(tl.int64) * (1 << 40)  # a positive first element: write 1 TB away
    tl.store(x_ptr + offs + far, x + 1)


def _launch_table(kernel, x):
    table = torch.tensor([x.data_ptr()], dtype=torch.int64, device="cuda")  # a device address, always
    kernel[(1,)](x, table, BLOCK=4)


@tdiff.check(
    launch=_launch_table,
    reference=lambda x: None,
    x=tst.tensors(shape=(4,), values=tst.values(-1, 1, specials=False)),
    backends=("compiled", "interpreter:cuda"),
)
@triton.jit
def device_pointer_kernel(x_ptr, table_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    if tl.load(x_ptr) > 0:  # then load through the pointer read from memory
        p = tl.load(table_ptr).to(tl.pointer_type(tl.float32))
        tl.store(x_ptr + offs, tl.load(p + offs) * 2)


def _launch_dot(kernel, a, b):
    c = torch.empty((16, 16), dtype=torch.float32, device=a.device)
    kernel[(1,)](a, b, c, BLOCK=16)
    return c


@tdiff.check(
    launch=_launch_dot,
    reference=lambda a, b: a.float() @ b.float(),
    a=tst.tensors(shape=(16, 16), dtype="bfloat16", layouts=["contiguous"], values=tst.values(-2, 2, specials=False)),
    b=tst.tensors(shape=(16, 16), dtype="bfloat16", layouts=["contiguous"], values=tst.values(-2, 2, specials=False)),
)
@triton.jit
def bf16_dot_kernel(a_ptr, b_ptr, c_ptr, BLOCK: tl.constexpr):
    r = tl.arange(0, BLOCK)
    a = tl.load(a_ptr + r[:, None] * BLOCK + r[None, :])
    b = tl.load(b_ptr + r[:, None] * BLOCK + r[None, :])
    tl.store(c_ptr + r[:, None] * BLOCK + r[None, :], tl.dot(a, b))


def _launch_wide(kernel, x):
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    kernel[(triton.cdiv(x.numel(), 4),)](x, out, x.numel(), x.stride(0), BLOCK=4)
    return out


@tdiff.check(
    launch=_launch_wide,
    reference=lambda x: x * 2,
    x=tst.tensors(shape=(4 * 1024 - 1,), layouts=["contiguous"], values=tst.values(-4, 4, specials=False)),
    max_examples=3,
)
@triton.jit
def wide_grid_kernel(x_ptr, out_ptr, n, stride, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs * stride, mask=offs < n, other=0.0)
    tl.store(out_ptr + offs, x * 2, mask=offs < n)


@tdiff.check(
    launch=lambda kernel, x: _atomic_wide(kernel, x),
    reference=lambda x: x.float().sum().reshape(1),
    x=tst.tensors(shape=(4 * 256,), layouts=["contiguous"], values=tst.values(-4, 4, specials=False)),
    max_examples=2,
)
@triton.jit
def wide_atomic_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.atomic_add(out_ptr, tl.sum(tl.load(x_ptr + offs, mask=offs < n, other=0.0), axis=0))


def _atomic_wide(kernel, x):
    out = torch.zeros(1, dtype=torch.float32, device=x.device)
    kernel[(triton.cdiv(x.numel(), 4),)](x, out, x.numel(), BLOCK=4)
    return out


# ---------------------------------------------------------------- compile workers' protocol (test_compile_ahead)

def _launch_slowly(kernel, x):
    import time

    time.sleep(0.05)  # a launch function that takes its time: a compile worker's cases can be stopped midway
    return _launch_1d(kernel, x)


@tdiff.check(launch=_launch_slowly, reference=lambda x: x * 2,
             x=tst.tensors(shape=(tst.sizes(block=BLOCK),), layouts=["contiguous"]))
@triton.jit
def slow_launch_double(x_ptr, out_ptr, n, stride, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs * stride, mask=offs < n, other=0.0)
    tl.store(out_ptr + offs, x * 2, mask=offs < n)
