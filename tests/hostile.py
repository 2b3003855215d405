"""Kernels and declarations that must fail (ordinary kernel bugs, mistaken or hostile declarations,
races, blind spots) and correct kernels that must pass (differences at the edge of the range).

They are the evidence for what a pass and a failure mean; they live in an importable module so
tdiff's worker processes can find them.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

import tdiff
from tdiff import strategies as tst

ROWS = tst.tensors(ndim=2, max_side=24, layouts=["contiguous"])


def _rows_launch(kernel, x):
    rows, cols = x.shape
    out = torch.empty((rows, cols), dtype=x.dtype, device=x.device)
    kernel[(rows,)](x, out, cols, BLOCK=triton.next_power_of_2(cols))
    return out


def _reduce_launch(kernel, x):
    rows, cols = x.shape
    out = torch.empty(rows, dtype=x.dtype, device=x.device)
    kernel[(rows,)](x, out, cols, BLOCK=triton.next_power_of_2(cols))
    return out


# ---------------------------------------------------------------- five ordinary kernel bugs

@tdiff.check(launch=_rows_launch, reference=lambda x: torch.softmax(x.double(), -1).to(x.dtype),
             x=tst.tensors(ndim=2, max_side=24, layouts=["contiguous"], values=tst.values(-200, 200, nan=False)))
@triton.jit
def softmax_no_max(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * n + cols, mask=cols < n, other=-float("inf"))
    e = tl.exp(x)  # the bug: no max subtraction, so exp overflows for inputs above ~88
    tl.store(out_ptr + row * n + cols, e / tl.sum(e, axis=0), mask=cols < n)


def _tail_launch(kernel, x):
    rows, cols = x.shape
    out = torch.empty(rows, dtype=x.dtype, device=x.device)
    kernel[(rows,)](x, out, cols, BLOCK=8)
    return out


@tdiff.check(launch=_tail_launch, reference=lambda x: x.double().sum(-1).to(x.dtype),
             x=tst.tensors(ndim=2, max_side=24, layouts=["contiguous"], values=tst.values(-8, 8, specials=False)))
@triton.jit
def row_sum_drops_tail(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros((BLOCK,), tl.float32)
    for k in range(0, n // BLOCK):  # the bug: floor division drops the row's last partial block
        offs = k * BLOCK + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + row * n + offs, mask=offs < n, other=0.0)
    tl.store(out_ptr + row, tl.sum(acc, axis=0))


@tdiff.check(launch=_reduce_launch, reference=lambda x: x.amax(-1), x=ROWS)
@triton.jit
def row_max_zero_fill(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * n + cols, mask=cols < n, other=0.0)  # the bug: masked lanes read 0, not -inf
    tl.store(out_ptr + row, tl.max(x, axis=0))


def _rms_launch(kernel, x):
    rows, cols = x.shape
    out = torch.empty_like(x)
    kernel[(rows,)](x, out, cols, 1e-2, BLOCK=triton.next_power_of_2(cols))
    return out


def _rms_reference(x):
    x64 = x.double()
    return (x64 / torch.sqrt((x64 * x64).mean(-1, keepdim=True) + 1e-2)).to(x.dtype)


@tdiff.check(launch=_rms_launch, reference=_rms_reference,
             x=tst.tensors(ndim=2, max_side=24, layouts=["contiguous"], values=tst.values(-4, 4, specials=False)))
@triton.jit
def rms_eps_outside(x_ptr, out_ptr, n, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * n + cols, mask=cols < n, other=0.0)
    ms = tl.sum(x * x, axis=0) / n
    tl.store(out_ptr + row * n + cols, x / (tl.sqrt(ms) + eps), mask=cols < n)  # the bug: eps outside the sqrt


def _tiled_launch(kernel, x):
    m, n = x.shape
    out = torch.empty_like(x)
    kernel[(triton.cdiv(m, 4), triton.cdiv(n, 4))](x, out, m, n, BM=4, BN=4)
    return out


@tdiff.check(launch=_tiled_launch, reference=lambda x: x * 2,
             x=tst.tensors(ndim=2, max_side=20, layouts=["contiguous"], values=tst.values(-8, 8, specials=False)))
@triton.jit
def tiled_swapped_ids(x_ptr, out_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr):
    pid_m = tl.program_id(1)  # the bug: the program ids are swapped
    pid_n = tl.program_id(0)
    rm = pid_m * BM + tl.arange(0, BM)[:, None]
    rn = pid_n * BN + tl.arange(0, BN)[None, :]
    mask = (rm < M) & (rn < N)
    tl.store(out_ptr + rm * N + rn, tl.load(x_ptr + rm * N + rn, mask=mask) * 2, mask=mask)


# ---------------------------------------------------------------- mistaken or hostile declarations

@triton.jit
def scale_kernel(x_ptr, out_ptr, n, factor, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * factor, mask=offs < n)


def _scale(kernel, x, factor=2.0, grid=None):
    out = torch.empty_like(x)
    n = x.numel()
    kernel[grid or (triton.cdiv(n, 16),)](x, out, n, factor, BLOCK=16)
    return out


X = tst.tensors(shape=(tst.sizes(block=16),), layouts=["contiguous"], values=tst.values(-8, 8, specials=False))


def _raises(x):
    return x.no_such_attribute * 2


def _forgot_return(kernel, x):
    out = torch.empty_like(x)
    kernel[(triton.cdiv(x.numel(), 16),)](x, out, x.numel(), 3.0, BLOCK=16)  # computes 3x; returns nothing


def _two_outputs(kernel, x):
    out = _scale(kernel, x)
    return out, out.clone()


def _python_float(kernel, x):
    return float(_scale(kernel, x).sum())


def _int_output(kernel, x):
    return _scale(kernel, x).to(torch.int32)


def _never_launches(kernel, x):
    return x * 2  # computes with torch; the kernel never runs


def _returns_input(kernel, x):
    _scale(kernel, x)  # the real output is made, written, and dropped
    return x


def _floor_grid(kernel, x):
    return _scale(kernel, x, grid=(x.numel() // 16,))  # short inputs run no program at all


def _returns_dict(kernel, x):
    return {"out": _scale(kernel, x)}


DECLARATIONS = {
    "reference-raises": dict(launch=_scale, reference=_raises),
    "reference-shape": dict(launch=_scale, reference=lambda x: (x * 2).reshape(-1, 1)),
    "two-outputs": dict(launch=_two_outputs, reference=lambda x: x * 2),
    "python-float": dict(launch=_python_float, reference=lambda x: (x * 2).sum().reshape(1)),
    "int-output": dict(launch=_int_output, reference=lambda x: x * 2),
    "never-launched": dict(launch=_never_launches, reference=lambda x: x * 2),
    "returns-input": dict(launch=_returns_input),
    "floor-grid": dict(launch=_floor_grid),
    "forgot-return": dict(launch=_forgot_return, reference=lambda x: x * 2),
    "reference-none": dict(launch=_scale, reference=lambda x: None),
    "reference-float64": dict(launch=_scale, reference=lambda x: x.double() * 2),
    "dict-vs-tensor": dict(launch=_returns_dict, reference=lambda x: x * 2),
    "wrong-reference": dict(launch=_scale, reference=lambda x: x * 3),
}

for _name, _decl in DECLARATIONS.items():
    tdiff.check(name=_name, x=X, **_decl)(scale_kernel)

tdiff.check(name="bad-grid", x=X, reference=lambda x: x * 2,
            launch=lambda kernel, x: kernel[lambda meta: (1 // 0,)](x, torch.empty_like(x), x.numel(), 2.0, BLOCK=16))(
    scale_kernel)


# ---------------------------------------------------------------- races

def _lost_update_launch(kernel, x):
    out = torch.zeros(1, dtype=torch.float32, device=x.device)
    kernel[(triton.cdiv(x.numel(), 8),)](x, out, x.numel(), BLOCK=8)
    return out


@tdiff.check(launch=_lost_update_launch,
             x=tst.tensors(shape=(tst.sizes(block=8, max_blocks=4),), layouts=["contiguous"],
                           values=tst.values(-4, 4, specials=False)))
@triton.jit
def lost_update(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    s = tl.sum(tl.load(x_ptr + offs, mask=offs < n, other=0.0), axis=0)
    tl.store(out_ptr, tl.load(out_ptr) + s)  # the bug: load, add, store; not tl.atomic_add


def _scan_launch(kernel, x):
    out = torch.empty_like(x)
    kernel[(triton.cdiv(x.numel(), 8),)](x, out, x.numel(), BLOCK=8)
    return out


@tdiff.check(launch=_scan_launch, reference=lambda x: torch.cumsum(x.double(), 0).to(x.dtype),
             x=tst.tensors(shape=(tst.sizes(block=8, max_blocks=4),), layouts=["contiguous"],
                           values=tst.values(-4, 4, specials=False)))
@triton.jit
def block_prefix_sum(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    x = tl.cumsum(tl.load(x_ptr + offs, mask=offs < n, other=0.0), axis=0)
    carry = tl.load(out_ptr + pid * BLOCK - 1, mask=pid > 0, other=0.0)  # the previous block's last output
    tl.store(out_ptr + offs, x + carry, mask=offs < n)


def _locked_launch(kernel, x):
    out = torch.zeros(1, dtype=torch.float32, device=x.device)
    lock = torch.zeros(1, dtype=torch.int32, device=x.device)
    kernel[(triton.cdiv(x.numel(), 8),)](x, out, lock, x.numel(), BLOCK=8)
    return out


@tdiff.check(launch=_locked_launch, reference=lambda x: x.double().sum().reshape(1).float(),
             x=tst.tensors(shape=(tst.sizes(block=8, max_blocks=4),), layouts=["contiguous"],
                           values=tst.values(-4, 4, specials=False)))
@triton.jit
def locked_sum(x_ptr, out_ptr, lock_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    s = tl.sum(tl.load(x_ptr + offs, mask=offs < n, other=0.0), axis=0)
    while tl.atomic_cas(lock_ptr, 0, 1) == 1:  # a spin lock: the read-modify-write below is ordered
        pass
    tl.store(out_ptr, tl.load(out_ptr) + s)
    tl.atomic_xchg(lock_ptr, 0)


# ---------------------------------------------------------------- blind spots and the range edge

def _add_one_launch(kernel, t):
    rows, cols = t.shape
    kernel[(rows,)](t, cols, t.stride(1), BLOCK=triton.next_power_of_2(cols))


@tdiff.check(launch=_add_one_launch, reference=lambda t: t.add_(1),
             t=tst.tensors(ndim=2, max_side=8, layouts=["contiguous", "padded"]))
@triton.jit
def add_one_ignores_row_stride(t_ptr, n_cols, stride_col, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    p = t_ptr + row * n_cols + cols * stride_col  # the bug: assumes packed rows
    tl.store(p, tl.load(p, mask=cols < n_cols) + 1, mask=cols < n_cols)


def _atomic_sum_launch(kernel, x):
    out = torch.zeros(1, dtype=torch.float32, device=x.device)
    kernel[(triton.cdiv(x.numel(), 4),)](x, out, x.numel(), BLOCK=4)
    return out


@tdiff.check(launch=_atomic_sum_launch, reference=lambda x: x.float().sum().reshape(1),
             x=tst.tensors(shape=(tst.sizes(block=4, max_blocks=6),), layouts=["contiguous"],
                           values=tst.values(nan=False)))
@triton.jit
def atomic_sum(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.atomic_add(out_ptr, tl.sum(tl.load(x_ptr + offs, mask=offs < n, other=0.0), axis=0))


def _ln_launch(kernel, x):
    rows, cols = x.shape
    out = torch.empty_like(x)
    kernel[(rows,)](x, out, cols, 1e-5, BLOCK=triton.next_power_of_2(cols))
    return out


@tdiff.check(launch=_ln_launch, reference=lambda x: torch.nn.functional.layer_norm(x, x.shape[-1:], eps=1e-5),
             x=tst.tensors(ndim=2, max_side=16, layouts=["contiguous"], values=tst.values(nan=False)))
@triton.jit
def layer_norm(x_ptr, out_ptr, n, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * n + cols, mask=cols < n, other=0.0)
    mean = tl.sum(x, axis=0) / n
    d = tl.where(cols < n, x - mean, 0.0)
    var = tl.sum(d * d, axis=0) / n
    tl.store(out_ptr + row * n + cols, d / tl.sqrt(var + eps), mask=cols < n)


def _matmul_launch(kernel, a, b):
    out = torch.empty((a.shape[0], b.shape[1]), dtype=torch.float32, device=a.device)
    kernel[(1,)](a, b, out, a.shape[0], a.shape[1], b.shape[1], BM=16, BK=32, BN=16)
    return out


def _weighted_launch(kernel, w, x):
    out = torch.empty_like(x)
    s = float(w.double().sum())  # the launch's float argument, as liger's cross entropy passes its weights' sum
    kernel[(1,)](w, x, out, s, x.numel(), BLOCK=triton.next_power_of_2(max(1, x.numel())))
    return out


@tdiff.check(launch=_weighted_launch, reference=lambda w, x: (w.double() * x.double() / w.double().sum()).float(),
             dims={"N": tst.sizes(max_value=4)},
             w=tst.tensors(shape=("N",), dtype="float32", layouts=["contiguous"],
                           values=tst.values(0, 4, nan=False, subnormal=False)),
             x=tst.tensors(shape=("N",), dtype="float32", layouts=["contiguous"], values=tst.values(-4, 4, nan=False)))
@triton.jit
def weighted_share(w_ptr, x_ptr, out_ptr, s, n, BLOCK: tl.constexpr):
    # w * x / sum(w): right for normal weights; a subnormal weight's product underflows and the division by the
    # weights' tiny sum amplifies what it lost
    offs = tl.arange(0, BLOCK)
    w = tl.load(w_ptr + offs, mask=offs < n, other=0.0)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.store(out_ptr + offs, w * x / s, mask=offs < n)


def _hypot_launch(kernel, x, y):
    out = torch.empty_like(x)
    kernel[(1,)](x, y, out, x.numel(), BLOCK=triton.next_power_of_2(max(1, x.numel())))
    return out


@tdiff.check(launch=_hypot_launch, reference=lambda x, y: torch.sqrt(x * x + y * y),  # overflows past 1.8e19
             dims={"N": tst.sizes(max_value=8)},
             x=tst.tensors(shape=("N",), dtype="float32", layouts=["contiguous"],
                           values=tst.values(nan=False, inf=False)),
             y=tst.tensors(shape=("N",), dtype="float32", layouts=["contiguous"],
                           values=tst.values(nan=False, inf=False)))
@triton.jit
def stable_hypot(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    # scaled by the larger magnitude: right where the reference's x * x overflows to inf
    offs = tl.arange(0, BLOCK)
    x = tl.abs(tl.load(x_ptr + offs, mask=offs < n, other=1.0))
    y = tl.abs(tl.load(y_ptr + offs, mask=offs < n, other=1.0))
    m = tl.maximum(x, y)
    s = tl.where(m > 0, m, 1.0)
    tl.store(out_ptr + offs, m * tl.sqrt((x / s) * (x / s) + (y / s) * (y / s)), mask=offs < n)


@tdiff.check(launch=_matmul_launch, reference=lambda a, b: a @ b,
             dims={"M": tst.sizes(max_value=16), "K": tst.sizes(max_value=32), "N": tst.sizes(max_value=16)},
             a=tst.tensors(shape=("M", "K"), layouts=["contiguous"], values=tst.values(nan=False)),
             b=tst.tensors(shape=("K", "N"), layouts=["contiguous"], values=tst.values(nan=False)))
@triton.jit
def small_matmul(a_ptr, b_ptr, c_ptr, M, K, N, BM: tl.constexpr, BK: tl.constexpr, BN: tl.constexpr):
    rm = tl.arange(0, BM)[:, None]
    rk = tl.arange(0, BK)
    rn = tl.arange(0, BN)[None, :]
    a = tl.load(a_ptr + rm * K + rk[None, :], mask=(rm < M) & (rk[None, :] < K), other=0.0)
    b = tl.load(b_ptr + rk[:, None] * N + rn, mask=(rk[:, None] < K) & (rn < N), other=0.0)
    tl.store(c_ptr + rm * N + rn, tl.dot(a, b), mask=(rm < M) & (rn < N))


@tdiff.check(launch=_rows_launch, reference=lambda x: (x.double() / x.double().abs().amax(-1, keepdim=True)
                                                       .clamp_min(1)).to(x.dtype),
             x=tst.tensors(ndim=2, max_side=16, layouts=["contiguous"], values=tst.values(-100, 100, specials=False)))
@triton.jit
def nan_into_finite(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * n + cols, mask=cols < n, other=0.0)
    big = tl.maximum(tl.max(tl.abs(x), axis=0), 1.0)
    tl.store(out_ptr + row * n + cols, x / big * (tl.exp(x) / tl.exp(x)), mask=cols < n)  # the bug: inf/inf = NaN


# ---------------------------------------------------------------- verdicts on hostile kernels

def _stride_launch(kernel, t):
    rows, cols = t.shape
    kernel[(rows,)](t, cols, BLOCK=triton.next_power_of_2(cols))


@tdiff.check(launch=_stride_launch, reference=lambda t: t.mul_(2),
             t=tst.tensors(ndim=2, max_side=8, layouts=["padded"], values=tst.values(-4, 4, specials=False)))
@triton.jit
def writes_padding(t_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    p = t_ptr + row * n_cols + cols  # ignores the row stride: writes into other rows and the padding
    tl.store(p, tl.load(p, mask=cols < n_cols) * 2, mask=cols < n_cols)


def _spin_launch(kernel, x):
    out = torch.empty_like(x)
    kernel[(1,)](x, out, x.numel(), BLOCK=triton.next_power_of_2(x.numel()))
    return out


@tdiff.check(launch=_spin_launch, reference=lambda x: x.abs(), timeout=10,
             x=tst.tensors(shape=(tst.sizes(block=4, max_blocks=2),), layouts=["contiguous"],
                           values=tst.values(-4, 4, specials=False)))
@triton.jit
def spins_on_negative(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    first = tl.load(x_ptr)
    while first < 0:  # never ends when the first element is negative
        first = first * 1.0
    tl.store(out_ptr + offs, tl.abs(x), mask=offs < n)


def _inplace_launch(kernel, t):
    kernel[(1,)](t, t.numel(), BLOCK=triton.next_power_of_2(t.numel()))
    return t


@tdiff.check(launch=_inplace_launch, reference=lambda t: t.mul_(3),
             t=tst.tensors(shape=(tst.sizes(block=4, max_blocks=2),), layouts=["contiguous"],
                           values=tst.values(-4, 4, specials=False)))
@triton.jit
def inplace_returned(t_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(t_ptr + offs, tl.load(t_ptr + offs, mask=offs < n) * 2, mask=offs < n)  # the bug: 2, not 3


# ---------------------------------------------------------------- a known interpreter limitation

def _asm_launch(kernel, x):
    out = torch.empty_like(x)
    kernel[(1,)](x, out, x.numel(), BLOCK=triton.next_power_of_2(x.numel()))
    return out


@tdiff.check(launch=_asm_launch, reference=lambda x: x * 2,
             x=tst.tensors(shape=(tst.sizes(block=4, max_blocks=2),), layouts=["contiguous"],
                           values=tst.values(-4, 4, specials=False)))
@triton.jit
def inline_asm_double(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    y = tl.inline_asm_elementwise("add.f32 $0, $1, $1;", "=r,r", [x], dtype=tl.float32, is_pure=True, pack=1)
    tl.store(out_ptr + offs, y, mask=offs < n)


# --- a float16 sum of squares at the limit of the range (liger's RMSNorm, casting_mode "none"): whether it
# overflows depends on the order the sum takes

def _fp16_rms_launch(kernel, x):
    out = torch.empty_like(x)
    kernel[(1,)](x, out, x.numel(), BLOCK=triton.next_power_of_2(x.numel()))
    return out


def _fp16_rms_reference(x):
    x64 = x.double()
    return (x64 * torch.rsqrt((x64 * x64).mean())).to(x.dtype)


@tdiff.check(launch=_fp16_rms_launch, reference=_fp16_rms_reference,
             x=tst.tensors(shape=(tst.sides(1, 300),), dtype="float16", layouts=["contiguous"]))
@triton.jit
def fp16_rms(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    ms = tl.sum(x * x, axis=0) / n  # in float16, as Triton sums float16
    tl.store(out_ptr + offs, x * (1.0 / tl.sqrt(ms.to(tl.float32))).to(tl.float16), mask=offs < n)


# --- a launch that picks a path by dtype (liger's group norm: tl.bfloat16 for every input that is not float32):
# the float64 run is another computation

def _by_dtype_launch(kernel, x):
    out = torch.empty_like(x)
    kernel[(1,)](x, out, x.numel(), OUT=tl.float32 if x.dtype == torch.float32 else tl.bfloat16,
                 BLOCK=triton.next_power_of_2(x.numel()))
    return out


@tdiff.check(launch=_by_dtype_launch, reference=lambda x: x * 3,
             x=tst.tensors(shape=(tst.sides(1, 8),), dtype="float32", layouts=["contiguous"]))
@triton.jit
def rounds_by_dtype(x_ptr, out_ptr, n, OUT: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(out_ptr + offs, (x * 3).to(OUT), mask=offs < n)


# --- a launch that passes its input's own dtype (liger's RMSNorm `X_dtype`, used for casts): in the float64 run it
# passes tl.float64, the same operations wider (the kernel above, declared again)

def _own_dtype_launch(kernel, x):
    out = torch.empty_like(x)
    own = {torch.float32: tl.float32, torch.float16: tl.float16, torch.float64: tl.float64}[x.dtype]
    kernel[(1,)](x, out, x.numel(), OUT=own, BLOCK=triton.next_power_of_2(x.numel()))
    return out


tdiff.check(name="own_dtype", launch=_own_dtype_launch, reference=lambda x: x * 3,
            x=tst.tensors(shape=(tst.sides(1, 8),), dtype="float32", layouts=["contiguous"]))(rounds_by_dtype)


# --- a result that does not fit the dtype (liger's KL divergence with log targets): exp overflows on the way and
# inf - inf gives NaN where the float64 reference's result, cast to float32, is -inf

def _kl_launch(kernel, t, y):
    out = torch.empty(1, dtype=torch.float32, device=t.device)
    kernel[(1,)](t, y, out, t.numel(), BLOCK=triton.next_power_of_2(t.numel()))
    return out


@tdiff.check(launch=_kl_launch, reference=lambda t, y: (t.double().exp() * (t.double() - y.double())).sum()
             .reshape(1).float(),
             t=tst.tensors(shape=(tst.sides(1, 8),), layouts=["contiguous"]), y=tst.tensors(like="t"))
@triton.jit
def kl_log_target(t_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    t = tl.load(t_ptr + offs, mask=offs < n, other=0.0).to(tl.float32)  # in float32 also in the float64 run
    y = tl.load(y_ptr + offs, mask=offs < n, other=0.0).to(tl.float32)
    tl.store(out_ptr, tl.sum(tl.exp(t) * (t - y), axis=0))


# -- masked loads without other=: the masked-out lanes are undefined (tdiff.execute.interpreter.undefined)

@tdiff.check(launch=_reduce_launch, reference=lambda x: x.sum(-1), x=ROWS)
@triton.jit
def row_sum_no_other(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * n + cols, mask=cols < n)  # the bug: no other=0.0, the sum reads undefined lanes
    tl.store(out_ptr + row, tl.sum(x, axis=0))


def _lse(x):
    return torch.logsumexp(x.double(), -1).to(x.dtype)


ROWS_FINITE = tst.tensors(ndim=2, max_side=24, layouts=["contiguous"], values=tst.values(-50, 50, nan=False, inf=False))


@tdiff.check(launch=_reduce_launch, reference=_lse, x=ROWS_FINITE)
@triton.jit
def row_lse_no_other(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * n + cols, mask=cols < n).to(tl.float32)  # the bug: no other=-inf
    m = tl.maximum(tl.full((BLOCK,), -float("inf"), tl.float32), x)  # a running max, started at -inf
    e = tl.where(m == -float("inf"), 0.0, tl.exp(x - m))  # lanes still at -inf add nothing
    mx = tl.max(m, axis=0)
    tl.store(out_ptr + row, tl.log(tl.sum(e * tl.exp(m - mx), axis=0)) + mx)


@tdiff.check(launch=_reduce_launch, reference=_lse, x=ROWS_FINITE)
@triton.jit
def row_lse_where(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * n + cols, mask=cols < n).to(tl.float32)  # no other=, kept out below: correct
    m = tl.where(cols < n, tl.maximum(tl.full((BLOCK,), -float("inf"), tl.float32), x), -float("inf"))
    e = tl.where(m == -float("inf"), 0.0, tl.exp(x - m))
    mx = tl.max(m, axis=0)
    tl.store(out_ptr + row, tl.log(tl.sum(e * tl.exp(m - mx), axis=0)) + mx)


@tdiff.check(launch=_reduce_launch, reference=lambda x: x.sum(-1), x=ROWS)
@triton.jit
def row_sum_where(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * n + cols, mask=cols < n)  # no other=, but the lanes are kept out: correct
    tl.store(out_ptr + row, tl.sum(tl.where(cols < n, x, 0.0), axis=0))


def _gather_launch(kernel, table, idx):
    out = torch.empty(idx.shape[0], dtype=table.dtype, device=table.device)
    kernel[(triton.cdiv(idx.shape[0], 16),)](table, idx, out, idx.shape[0], BLOCK=16)
    return out


@tdiff.check(launch=_gather_launch, reference=lambda table, idx: table[idx.long()],
             table=tst.tensors(shape=(5,), dtype="float32", layouts=["contiguous"]),
             idx=tst.tensors(shape=(tst.sizes(16, max_value=40),), dtype="int32", layouts=["contiguous"],
                             values=tst.values(0, 4)))
@triton.jit
def gather_unmasked_index(table_ptr, idx_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    i = tl.load(idx_ptr + offs, mask=offs < n)  # no other=: masked-out lanes hold an undefined index
    v = tl.load(table_ptr + i)  # the bug: unmasked, it reads the table at those undefined indices
    tl.store(out_ptr + offs, v, mask=offs < n)


# -- a kernel that assumes the default launch options (found by a compiled variant, tests/test_gpu.py)

def _warps_launch(kernel, x):
    out = torch.empty_like(x)
    kernel[(triton.cdiv(x.numel(), 128),)](x, out, x.numel(), BLOCK=128)
    return out


@tdiff.check(launch=_warps_launch, reference=lambda x: x * 2,
             x=tst.tensors(shape=(tst.sizes(block=128),), layouts=["contiguous"], values=tst.values(-4, 4)))
@triton.jit
def warps_assumed(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    TWO: tl.constexpr = tl.extra.cuda.num_warps() // 2  # the bug: right only with the default 4 warps
    tl.store(out_ptr + offs, x * TWO, mask=offs < n)



# -- loads outside the view: an off-by-one mask reads one element past each row (here the row padding; with
#    a packed tensor the last row's read falls past the allocation). The values read are dropped: only the
#    interpreter's memory trace sees it.

def _padded_sum_launch(kernel, x):
    rows, cols = x.shape
    out = torch.empty(rows, dtype=x.dtype, device=x.device)
    kernel[(rows,)](x, out, cols, x.stride(0), BLOCK=triton.next_power_of_2(cols + 1))
    return out


@tdiff.check(launch=_padded_sum_launch, reference=lambda x: x.sum(-1),
             x=tst.tensors(ndim=2, max_side=12, layouts=["padded"], values=tst.values(-4, 4, specials=False)))
@triton.jit
def row_sum_over_reads(x_ptr, out_ptr, n, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * stride + cols, mask=cols <= n, other=0.0)  # the bug: one element past each row
    tl.store(out_ptr + row, tl.sum(tl.where(cols < n, x, 0.0), axis=0))


@tdiff.check(launch=_padded_sum_launch, reference=lambda x: x.sum(-1),
             x=tst.tensors(ndim=2, max_side=12, layouts=["padded", "split", "offset"],
                           values=tst.values(-4, 4, specials=False)))
@triton.jit
def row_sum_strided(x_ptr, out_ptr, n, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * stride + cols, mask=cols < n, other=0.0)  # correct: reads only its view
    tl.store(out_ptr + row, tl.sum(x, axis=0))


# -- a float32 matmul at tl.dot's default precision (tf32 on a GPU) whose accumulator is float16: its error
#    is about tf32's, so only a pair that did not run tf32 (the interpreter against the reference) can see it

def _tf32_launch(kernel, a, b):
    out = torch.empty((a.shape[0], b.shape[1]), dtype=torch.float32, device=a.device)
    kernel[(1,)](a, b, out, a.shape[0], a.shape[1], b.shape[1], a.stride(0), b.stride(0), BM=16, BK=16, BN=16)
    return out


_TF32 = dict(launch=_tf32_launch, reference=lambda a, b: (a.double() @ b.double()).float(),
             dims={"M": tst.sizes(max_value=16), "K": tst.sizes(16, max_value=48), "N": tst.sizes(max_value=16)},
             a=tst.tensors(shape=("M", "K"), dtype="float32", layouts=["contiguous"],
                           values=tst.values(-4, 4, nan=False, inf=False, extremes=False)),
             b=tst.tensors(shape=("K", "N"), dtype="float32", layouts=["contiguous"],
                           values=tst.values(-4, 4, nan=False, inf=False, extremes=False)))


@tdiff.check(**_TF32)
@triton.jit
def tf32_matmul_fp16_acc(a_ptr, b_ptr, c_ptr, M, K, N, sa, sb, BM: tl.constexpr, BK: tl.constexpr,
                         BN: tl.constexpr):
    rm = tl.arange(0, BM)[:, None]
    rn = tl.arange(0, BN)[None, :]
    acc = tl.zeros((BM, BN), dtype=tl.float16)  # the bug: a float16 accumulator
    for k in range(0, tl.cdiv(K, BK)):
        rk = k * BK + tl.arange(0, BK)
        a = tl.load(a_ptr + rm * sa + rk[None, :], mask=(rm < M) & (rk[None, :] < K), other=0.0)
        b = tl.load(b_ptr + rk[:, None] * sb + rn, mask=(rk[:, None] < K) & (rn < N), other=0.0)
        acc += tl.dot(a, b).to(tl.float16)
    tl.store(c_ptr + rm * N + rn, acc.to(tl.float32), mask=(rm < M) & (rn < N))


@tdiff.check(**_TF32)
@triton.jit
def tf32_matmul(a_ptr, b_ptr, c_ptr, M, K, N, sa, sb, BM: tl.constexpr, BK: tl.constexpr, BN: tl.constexpr):
    rm = tl.arange(0, BM)[:, None]
    rn = tl.arange(0, BN)[None, :]
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        rk = k * BK + tl.arange(0, BK)
        a = tl.load(a_ptr + rm * sa + rk[None, :], mask=(rm < M) & (rk[None, :] < K), other=0.0)
        b = tl.load(b_ptr + rk[:, None] * sb + rn, mask=(rk[:, None] < K) & (rn < N), other=0.0)
        acc += tl.dot(a, b)
    tl.store(c_ptr + rm * N + rn, acc, mask=(rm < M) & (rn < N))


@tdiff.check(**_TF32)
@triton.jit
def tf32_matmul_truncates_the_sum(a_ptr, b_ptr, c_ptr, M, K, N, sa, sb, BM: tl.constexpr, BK: tl.constexpr,
                                  BN: tl.constexpr):
    rm = tl.arange(0, BM)[:, None]
    rn = tl.arange(0, BN)[None, :]
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        rk = k * BK + tl.arange(0, BK)
        a = tl.load(a_ptr + rm * sa + rk[None, :], mask=(rm < M) & (rk[None, :] < K), other=0.0)
        b = tl.load(b_ptr + rk[:, None] * sb + rn, mask=(rk[:, None] < K) & (rn < N), other=0.0)
        acc += tl.dot(a, b)
    # the bug: the sum's low 13 significand bits cleared (no cast: a bitcast and a mask), an error of tf32's size
    acc = (acc.to(tl.int32, bitcast=True) & -8192).to(tl.float32, bitcast=True)
    tl.store(c_ptr + rm * N + rn, acc, mask=(rm < M) & (rn < N))


# -- an argmax among near-ties: the kernel's own rounding (x + 1000 - 1000) makes values within its tolerance
#    compare equal, so its index may differ from the reference's, legitimately; the same tie rule on raw loaded
#    values (no arithmetic: every backend compares the same bits) is judged exactly

def _argmax_launch(kernel, x):
    rows, cols = x.shape
    out = torch.empty(rows, dtype=torch.int32, device=x.device)
    kernel[(rows,)](x, out, cols, BLOCK=triton.next_power_of_2(cols))
    return out


_ARGMAX = dict(launch=_argmax_launch, reference=lambda x: torch.argmax(x, -1).int(),
               x=tst.tensors(ndim=2, max_side=8, dtype="float32", layouts=["contiguous"],
                             values=tst.values(-4, 4, specials=False)))


@tdiff.check(**_ARGMAX)
@triton.jit
def argmax_rounded(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * n + cols, mask=cols < n, other=float("-inf"))
    v = (x + 1000.0) - 1000.0  # rounds to the float32 grid at 1000: close values tie
    m = tl.max(v, axis=0)
    tl.store(out_ptr + row, tl.min(tl.where(v == m, cols, BLOCK), axis=0))


@tdiff.check(**_ARGMAX)
@triton.jit
def argmax_last_tie(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * n + cols, mask=cols < n, other=float("-inf"))
    m = tl.max(x, axis=0)
    tl.store(out_ptr + row, tl.max(tl.where(x == m, cols, -1), axis=0))  # the bug: the last of equal maxima


# ---------------------------------------------------------------- blind spots: infinite inputs, narrowing casts,
# strides of size-1 dimensions (tests/test_blind_spots.py)

def _lse_reference(x):
    return torch.logsumexp(x.float(), dim=-1).to(x.dtype)


@tdiff.check(launch=_reduce_launch, reference=_lse_reference, x=ROWS)
@triton.jit
def lse_max_subtracted(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * n + cols, mask=cols < n, other=-float("inf")).to(tl.float32)
    m = tl.max(x, axis=0)  # the bug: an infinite maximum is subtracted (-inf - -inf, inf - inf: NaN)
    tl.store(out_ptr + row, m + tl.log(tl.sum(tl.exp(x - m), axis=0)))


@tdiff.check(launch=_reduce_launch, reference=_lse_reference, x=ROWS)
@triton.jit
def lse_torch_like(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * n + cols, mask=cols < n, other=-float("inf")).to(tl.float32)
    m = tl.max(x, axis=0)
    m = tl.where(tl.abs(m) == float("inf"), 0.0, m)  # as torch: an infinite maximum is not subtracted
    tl.store(out_ptr + row, m + tl.log(tl.sum(tl.exp(x - m), axis=0)))


@tdiff.check(launch=_rows_launch, reference=lambda x: torch.softmax(x.float(), -1).to(x.dtype), x=ROWS)
@triton.jit
def softmax_rows(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * n + cols, mask=cols < n, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=0))  # NaN for a row holding +inf or only -inf, as torch.softmax gives
    tl.store(out_ptr + row * n + cols, e / tl.sum(e, axis=0), mask=cols < n)


def _vector_launch(kernel, x):
    out = torch.empty_like(x)
    kernel[(1,)](x, out, x.numel(), BLOCK=triton.next_power_of_2(max(x.numel(), 1)))
    return out


HALF_VECTOR = tst.tensors(shape=(tst.sides(1, 64),), dtype="float16", layouts=["contiguous"],
                          values=tst.values(-100, 100, specials=False))


@tdiff.check(launch=_vector_launch, reference=lambda x: (x.float() * 3).to(x.dtype), x=HALF_VECTOR,
             tolerances={"returned": tdiff.Tolerance.preset("arith", "bfloat16")}, name="declared")
@tdiff.check(launch=_vector_launch, reference=lambda x: (x.float() * 3).to(x.dtype), x=HALF_VECTOR)
@triton.jit
def fp16_via_bf16(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n).to(tl.float32)
    y = (x * 3).to(tl.bfloat16)  # the bug: float16 values rounded through bfloat16
    tl.store(out_ptr + offs, y, mask=offs < n)


@tdiff.check(launch=_vector_launch, reference=lambda x: (x.float() * 3 + 1).to(x.dtype), x=HALF_VECTOR)
@triton.jit
def fp16_via_fp16(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n).to(tl.float32)
    y = (x * 3).to(tl.float16)  # a cast to the inputs' own dtype: free
    tl.store(out_ptr + offs, y.to(tl.float32) + 1.0, mask=offs < n)


def _decode_launch(kernel, q):
    # q: (batch, 1, heads, head_dim), one decode step; made contiguous as a wrapper would (PyTorch copies only
    # what it does not call contiguous: the stride of the size-1 dimension does not count)
    qc = q.contiguous()
    bsz, seq, heads, dim = qc.shape
    kernel[(bsz * seq, heads)](qc, qc.stride(0), qc.stride(1), qc.stride(2), seq, dim,
                               BLOCK=triton.next_power_of_2(dim))
    if qc is not q:
        q.copy_(qc)


DECODE = dict(launch=_decode_launch, reference=lambda q: q.mul_(2),
              dims={"B": tst.sides(1, 4), "H": tst.sides(1, 4), "D": tst.sides(1, 16)},
              q=tst.tensors(shape=("B", 1, "H", "D"), dtype=tst.FLOATS, values=tst.values(-4, 4)))


@tdiff.check(**DECODE)
@triton.jit
def decode_row_stride(q_ptr, stride_b, stride_s, stride_h, seq, dim, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    d = tl.arange(0, BLOCK)
    p = q_ptr + row * stride_s + tl.program_id(1) * stride_h + d  # the bug: row b * seq + s at seq's stride
    tl.store(p, tl.load(p, mask=d < dim) * 2, mask=d < dim)


@tdiff.check(**DECODE)
@triton.jit
def decode_rows(q_ptr, stride_b, stride_s, stride_h, seq, dim, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    d = tl.arange(0, BLOCK)
    p = q_ptr + (row // seq) * stride_b + (row % seq) * stride_s + tl.program_id(1) * stride_h + d
    tl.store(p, tl.load(p, mask=d < dim) * 2, mask=d < dim)


# ---------------------------------------------------------------- an operand within its rounding error of a pole
# (tests/test_blind_spots.py): rsqrt of E[(x - mean)^2] with a float32 mean; for a constant row of large values the
# mean is off by an ulp in some orders of the sum, the variance is rounding noise, and rstd anything up to 1/sqrt(eps)

def _rstd_reference(x):
    xd = x.double()
    return (1 / torch.sqrt(((xd - xd.mean(-1, keepdim=True)) ** 2).mean(-1) + 1e-5)).to(x.dtype)


@tdiff.check(launch=_reduce_launch, reference=_rstd_reference, x=ROWS_FINITE)
@triton.jit
def rstd_two_pass(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    m = cols < n
    x = tl.load(x_ptr + row * n + cols, mask=m, other=0.0).to(tl.float32)
    mean = tl.sum(x) / n
    d = tl.where(m, x - mean, 0.0)
    tl.store(out_ptr + row, tl.math.rsqrt(tl.sum(d * d) / n + 1e-5))
