"""Each interpreter shim (and the poison of masked-out lanes) in a small kernel: the reproducer tdiff writes
for it installs the same shim on stock TRITON_INTERPRET=1, and its interpreter side computes exactly
tdiff's interpreter's numbers, bit for bit, with the same shim uses, on the Triton this runs under (CI
repeats this module under every allowed Triton minor).

A deliberately wrong backend (`tests.faulty`, replaced by its recorded result in the reproducer) makes
the divergence, so it does not depend on a bug in the kernel; the masked-lane kernel reads undefined
lanes and is judged against its reference.
"""

import json
import os

import numpy as np
import pytest
import torch
import triton
import triton.language as tl
from triton.language.extra.libdevice import rsqrt

import tdiff
from tdiff import compat
from tdiff import strategies as tst
from tdiff.core.case import Case
from tdiff.drive.runner import Runner
from tdiff.execute import forkserver
from tdiff.execute.interpreter import shims
from tdiff.judge.targets import view
from tdiff.record import repro
from tdiff.strategies import tensor_arg

pytestmark = pytest.mark.triton_matrix

WRONG = ("tests.faulty:FaultyFirstProgram", "interpreter")

cast = tl.cast  # a module-level alias of a builtin, as released kernels write it


@triton.jit
def float_args(x_ptr, out_ptr, n, eps, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=0.0)
    tl.store(out_ptr + offs, x * 3 + eps.to(tl.float32), mask=m)  # a Python float has no .to()


@triton.jit
def bf16_constants(x_ptr, out_ptr, n, eps, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=0.0)  # bfloat16
    tl.store(out_ptr + offs, (x * 1.5).to(tl.float32), mask=m)  # no get_bf16 before Triton 3.9


@triton.jit
def bf16_arith(x_ptr, out_ptr, n, eps, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=0.0)  # bfloat16
    y = tl.where(x > 0, x * x, x + x)  # on the bits, stock compares and multiplies garbage
    total = tl.sum(y, axis=0)  # a bf16 reduction
    tl.store(out_ptr + offs, y.to(tl.float32) + total.to(tl.float32), mask=m)


@triton.jit
def libdevice(x_ptr, out_ptr, n, eps, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=0.0)
    tl.store(out_ptr + offs, rsqrt(tl.abs(x) + 1.0), mask=m)  # the stub returns None under stock


@triton.jit
def bf16_atomics(x_ptr, out_ptr, n, eps, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=0.0)  # bfloat16
    acc = out_ptr + BLOCK + offs  # (a bf16 scratch row after the output, in float32 elements: 2 bf16 each)
    tl.atomic_add(acc.to(tl.pointer_type(tl.bfloat16)), x, mask=m)  # "Unsupported data type" under stock
    back = tl.load(acc.to(tl.pointer_type(tl.bfloat16)), mask=m, other=0.0)
    tl.store(out_ptr + offs, back.to(tl.float32), mask=m)


@triton.jit
def _lowest(dtype):
    d = dtype.value  # the compiler wraps a dtype argument of a device function in constexpr
    if d.is_floating():
        value: tl.constexpr = float("-inf")
        return value
    return 0


@triton.jit
def constexpr_args(x_ptr, out_ptr, n, eps, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=_lowest(x_ptr.type.element_ty))
    tl.store(out_ptr + offs, x, mask=m)


@triton.jit
def tensor_and_or(x_ptr, out_ptr, n, eps, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=0.0)
    pos = m and (x > 0)  # Python's `and` of two tensors under stock
    tl.store(out_ptr + offs, tl.where(pos, x, -1.0), mask=m)


@triton.jit
def nan_minmax(x_ptr, out_ptr, n, eps, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=0.0)
    tl.store(out_ptr + offs, tl.maximum(x, 0.25) + tl.minimum(x, 1.0), mask=m)  # maxnum: NaN loses


@triton.jit
def nan_max_reduction(x_ptr, out_ptr, n, eps, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=float("-inf"))
    tl.store(out_ptr + offs, x * 0 + tl.max(x, axis=0) - tl.min(tl.where(m, x, 3.0), axis=0), mask=m)  # NaN skipped


@triton.jit
def fma_rounding(x_ptr, out_ptr, n, eps, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=0.0)
    tl.store(out_ptr + offs, tl.fma(x, x, -(x * x)), mask=m)  # the product's rounding error, 0 if rounded twice


@triton.jit
def masked_relu_sum(x_ptr, out_ptr, n, eps, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)  # no other=: the masked-out lanes are undefined
    relu = tl.maximum(x, 0.0)  # a max of the poison stays poison (zero-filled lanes would hide the bug)
    tl.store(out_ptr, tl.sum(relu, axis=0))


@triton.jit
def builtin_aliases(x_ptr, out_ptr, n, eps, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=0.0)
    tl.store(out_ptr + offs, cast(x * 3, tl.float16).to(tl.float32), mask=m)  # stock: "`_semantic` argument ..."


@triton.jit
def bool_splat(x_ptr, out_ptr, n, eps, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = (offs < n) & (tl.program_id(0) < 1)  # a scalar comparison splat: stock makes it int32
    x = tl.load(x_ptr + offs, mask=m, other=0.0)  # stock: "mask has unsupported dtype"
    tl.store(out_ptr + offs, x * 2, mask=m)


@triton.jit
def int_methods(x_ptr, out_ptr, n, eps, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], tl.float32)
    for i in range(2):
        acc += tl.load(x_ptr + i.to(tl.int64) * 0 + offs, mask=offs < n, other=0.0)  # stock: an int has no .to
    tl.store(out_ptr + offs, acc, mask=offs < n)


@triton.jit
def _scale_for(dtype):
    if dtype is tl.float32:  # the compiler compares the constexpr's value
        return 3.0
    return 1.0


@triton.jit
def constexpr_is(x_ptr, out_ptr, n, eps, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.store(out_ptr + offs, x * _scale_for(tl.float32), mask=offs < n)


def _launch(kernel, x):
    block = triton.next_power_of_2(x.numel())
    out = torch.zeros(2 * block, dtype=torch.float32, device=x.device)  # (bf16_atomics' scratch in the second half)
    kernel[(1,)](x, out, x.numel(), 0.5, BLOCK=block)
    return out[: x.numel()]


F32 = torch.tensor([1.0, -2.0, 3.0, 0.5, -0.25, 7.0, 0.1, 1 + 2.0**-12])
BF16 = torch.tensor([1.0, -2.0, 3.0, 0.5, -0.25, 7.0, 2.0**-130, 1e-3]).bfloat16()
NAN = torch.tensor([float("nan"), -2.0, 3.0, 0.5, float("nan"), 0.0, 1.0, -1.0])

#: (name, the shim, whether this Triton's stock TRITON_INTERPRET=1 needs it here, kernel, input, the backends compared)
CASES = [
    ("float-args", shims.FLOAT_ARGS, True, float_args, F32, WRONG),
    ("bf16-constants", shims.BF16_CONSTANTS, not compat.has_get_bf16(), bf16_constants, BF16, WRONG),
    ("bf16-arith", shims.BF16_ARITH, True, bf16_arith, BF16, WRONG),
    ("libdevice", shims.LIBDEVICE, True, libdevice, F32, WRONG),
    ("bf16-atomics", shims.BF16_ATOMICS, True, bf16_atomics, BF16, WRONG),
    ("constexpr-args", shims.CONSTEXPR_ARGS, True, constexpr_args, F32, WRONG),
    ("tensor-and-or", shims.BOOL_OPS, True, tensor_and_or, F32, WRONG),
    ("nan-minmax", shims.NAN_MINMAX, compat.minmax_propagates_nan(), nan_minmax, NAN, WRONG),
    ("nan-minmax-reduction", shims.NAN_MINMAX, compat.reduce_minmax_propagates_nan(), nan_max_reduction, NAN, WRONG),
    ("fma-rounding", shims.FMA_ROUNDING, not compat.fma_rounds_once(), fma_rounding, F32, WRONG),
    ("masked-lanes", None, True, masked_relu_sum, F32[:5], ("interpreter", "reference")),
    ("builtin-aliases", shims.BUILTIN_ALIASES, True, builtin_aliases, F32, WRONG),
    ("bool-splat", shims.BOOL_SPLAT, True, bool_splat, F32, WRONG),
    ("int-methods", shims.INT_METHODS, True, int_methods, F32, WRONG),
    ("constexpr-is", shims.CONSTEXPR_IS, True, constexpr_is, F32, WRONG),
]


def _launch_sum(kernel, x):
    return _launch(kernel, x)[:1]


def _check(kernel, x, backends):
    x_strategy = tst.tensors(shape=(x.numel(),), dtype=str(x.dtype).split(".")[-1])
    if "reference" in backends:
        return tdiff.check(launch=_launch_sum, reference=lambda x: x.float().clamp(min=0).sum().reshape(1),
                           x=x_strategy)(kernel).__tdiff_checks__[-1]
    return tdiff.check(launch=_launch, x=x_strategy)(kernel).__tdiff_checks__[-1]


@pytest.mark.parametrize("shim,needed,kernel,x,backends", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_the_reproducers_interpreter_computes_what_tdiffs_did(tmp_path, shim, needed, kernel, x, backends):
    check = _check(kernel, x, backends)
    case = Case({"x": tensor_arg(x)})
    runner = Runner(tdiff.RunOptions(isolation="none", corpus_dir=None, repro_dir=None, backends=backends))
    verdict, ev = runner.judge(check).verdict(case)
    assert verdict.failed and verdict.kind == "values", verdict.label
    ours = ev.outcomes["interpreter"]
    assert ours.error is None, ours.error
    used = {k: v for k, v in ours.trace.shims.items() if v}
    if shim is not None:
        assert (shim in used) == needed, used
    else:  # the masked-lane poison
        assert ours.trace.poisoned and ours.trace.undefined
    path = repro.write(tmp_path / "repro", check, case, verdict, ev, validate=False)
    out = tmp_path / "side.npz"
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"} | {"TRITON_INTERPRET": "1"}
    ran = forkserver.run_script([str(path), "--side", "interpreter", str(out)], path.parent, env=env, timeout=300)
    assert ran.returncode == 0, (ran.stdout + ran.stderr)[-3000:]
    data = np.load(out, allow_pickle=False)
    theirs = json.loads((tmp_path / "side.npz.json").read_text())["shims"]
    assert theirs == used  # the same shims, used as many times
    targets = view(ours, case).targets
    assert set(data.files) == {"returned"}
    np.testing.assert_array_equal(data["returned"], targets["returned"].values)
