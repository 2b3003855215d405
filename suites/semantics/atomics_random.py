"""Atomics and random numbers. Exact: integer `atomic_add` (wraps; any order gives the same sum),
`atomic_max`/`atomic_min` (order-free), `tl.randint` and `tl.rand` (Philox: a function of seed and
offset; compiled against interpreted only, no reference). Approximate: float `atomic_add` (the order
of the additions is the hardware's) and `tl.randn` (Box-Muller with the GPU's log, sqrt, cos: the
`transcendental` tolerance).
"""

from __future__ import annotations

import numpy as np
import torch
import triton
import triton.language as tl

import tdiff
from tdiff import strategies as tst

BLOCK = 32


def _atomic_launch(kernel, x):
    out = torch.zeros(3, dtype=x.dtype, device=x.device)
    out[1] = torch.iinfo(x.dtype).min if not x.dtype.is_floating_point else -float("inf")
    out[2] = torch.iinfo(x.dtype).max if not x.dtype.is_floating_point else float("inf")
    kernel[(triton.cdiv(x.numel(), BLOCK),)](x, out, x.numel(), BLOCK=BLOCK)
    return out


def _atomic_ref(x):
    v = x.numpy().astype(np.int64)
    total = ((v.sum() + (1 << 31)) % (1 << 32)) - (1 << 31)
    return torch.tensor([total, v.max(), v.min()], dtype=torch.int32)


@tdiff.check(launch=_atomic_launch, reference=_atomic_ref, tolerance="exact",
             x=tst.tensors(shape=(tst.sides(1, 200),), dtype="int32", layouts=["contiguous"]))
@triton.jit
def int_atomics(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=0)
    tl.atomic_add(out_ptr + tl.zeros_like(offs), x, mask=m)
    tl.atomic_max(out_ptr + 1 + tl.zeros_like(offs), x, mask=m)
    tl.atomic_min(out_ptr + 2 + tl.zeros_like(offs), x, mask=m)


def _float_ref(x):
    v = x.double()
    return torch.stack([v.sum(), v.max(), v.min()]).float()


# The sum accumulates up to 200 float32 values one atomic add at a time: its rounding error grows with the count
# (17 float32 ulps of -58729.6 at 188 values of +-1e3, a CPU dev-profile soak seed), where torch's float32 sum
# (pairwise) and the float64 reference do not: declared at a sequential sum's precision, 200 roundings. Its absolute
# part is float32's smallest normal, as the derived tolerance's is: `atom.add.f32` flushes subnormal inputs and
# results to zero (PTX ISA), so a sum of 4.2e-45 is 0 on the GPU (an H200 main job at a random seed)
@tdiff.check(launch=_atomic_launch, reference=_float_ref,
             tolerances={"returned": tdiff.Tolerance(rtol=200 * 2.0**-24, atol=2.0**-126, scale=200 * 2.0**-24,
                                                     name="sequential sum")},
             x=tst.tensors(shape=(tst.sides(1, 200),), dtype="float32", layouts=["contiguous"],
                           values=tst.values(-1e3, 1e3, nan=False, inf=False, neg_zero=False)))
@triton.jit
def float_atomics(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=0.0)
    tl.atomic_add(out_ptr + tl.zeros_like(offs), x, mask=m)
    tl.atomic_max(out_ptr + 1 + tl.zeros_like(offs), x, mask=m)
    tl.atomic_min(out_ptr + 2 + tl.zeros_like(offs), x, mask=m)


def _random_launch(kernel, seed, x):
    n, dev = x.numel(), x.device  # (x: the size, and the device the outputs go on)
    ints = torch.empty(n, dtype=torch.int32, device=dev)
    unif = torch.empty(n, dtype=torch.float32, device=dev)
    norm = torch.empty(n, dtype=torch.float32, device=dev)
    kernel[(triton.cdiv(n, BLOCK),)](ints, unif, norm, seed, n, BLOCK=BLOCK)
    return ints, unif, norm


@tdiff.check(launch=_random_launch, tolerances={"returned[0]": "exact", "returned[1]": "exact"},
             seed=tst.ints(0, 2**31 - 1),
             x=tst.tensors(shape=(tst.sides(1, 200),), dtype="int32", layouts=["contiguous"]))
@triton.jit
def philox(ints_ptr, unif_ptr, norm_ptr, seed, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(ints_ptr + offs, tl.randint(seed, offs).to(tl.int32, bitcast=True), mask=m)
    tl.store(unif_ptr + offs, tl.rand(seed, offs), mask=m)
    tl.store(norm_ptr + offs, tl.randn(seed, offs), mask=m)
