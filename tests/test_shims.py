"""tdiff's interpreter runs what the compiler accepts: each shim is needed (the kernel fails or is
wrong without it), gives the reference's numbers with it, and is counted."""

import math

import pytest
import torch
import triton
import triton.language as tl

import tdiff
from tdiff import compat
from tdiff.core.case import Case
from tdiff.execute.interpreter import shims
from tdiff.execute.interpreter.backend import InterpreterBackend
from tdiff.strategies import tensor_arg

pytestmark = pytest.mark.triton_matrix  # CI repeats these under every allowed Triton minor


def _launch(kernel, x):
    out = torch.empty_like(x)
    kernel[(1,)](x, out, x.numel(), 0.5, BLOCK=triton.next_power_of_2(x.numel()))
    return out


@tdiff.check(launch=_launch, reference=lambda x: (x.float() * 3 + 0.5).to(x.dtype),
             x=tdiff.strategies.tensors(shape=(8,), layouts=["contiguous"]))
@triton.jit
def eps_to(x_ptr, out_ptr, n, eps, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(out_ptr + offs, x * 3 + eps.to(tl.float32), mask=offs < n)  # as liger's RMSNorm does with eps


@tdiff.check(launch=_launch, reference=lambda x: ((x * 2.0).float() * 0.5 + 0.5).to(x.dtype),
             x=tdiff.strategies.tensors(shape=(8,), dtype="bfloat16", layouts=["contiguous"]))
@triton.jit
def bf16_math(x_ptr, out_ptr, n, half, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    y = tl.where(x > 0, x * 2.0, x + x)  # bf16 product with a constant, a bf16 comparison, a bf16 sum
    tl.store(out_ptr + offs, y.to(tl.float32) * half + 0.5, mask=offs < n)


def _run(kernel, x):
    check = kernel.__tdiff_checks__[0]
    return InterpreterBackend().run(check, Case({"x": tensor_arg(x)}))


@pytest.fixture
def without(monkeypatch):
    def switch_off(name):
        monkeypatch.setitem(shims.ENABLED, name, False)

    return switch_off


def test_float_arguments_are_fp32_scalars(without):
    x = torch.tensor([1.0, -2.0, 3.0, 0.25])
    out = _run(eps_to, x)
    assert out.error is None and out.trace.shims[shims.FLOAT_ARGS] == 1
    assert out.returned.values.tolist() == [3.5, -5.5, 9.5, 1.25]
    without(shims.FLOAT_ARGS)
    out = _run(eps_to, x)
    assert out.error is not None and "'float' object has no attribute 'to'" in out.error.message


def _promote_launch(kernel, x):
    out = torch.empty(x.shape, dtype=torch.float32, device=x.device)
    kernel[(1,)](x, out, x.numel(), 0.5, BLOCK=triton.next_power_of_2(x.numel()))
    return out


@tdiff.check(launch=_promote_launch, reference=lambda x: torch.full(x.shape, 0.5),
             x=tdiff.strategies.tensors(shape=(4,), dtype="float16", layouts=["contiguous"],
                                        values=tdiff.strategies.values(-2000, 2000, specials=False)))
@triton.jit
def promotes(x_ptr, out_ptr, n, eps, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(out_ptr + offs, (x + eps) - x, mask=offs < n)


def test_float_arguments_promote_as_compiled(without):
    # the compiler types a float argument fp32: fp16 + eps is computed in fp32 (0.5 exactly); a Python
    # float would keep it fp16, where 2000 + 0.5 rounds back to 2000
    x = torch.tensor([2000.0, 1.0, -2000.0, 0.0], dtype=torch.float16)
    out = _run(promotes, x)
    assert out.error is None and out.returned.values.tolist() == [0.5] * 4
    without(shims.FLOAT_ARGS)
    out = _run(promotes, x)
    assert out.returned.values.tolist() == [0.0, 0.5, 0.0, 0.5]


@pytest.mark.skipif(compat.has_get_bf16(), reason="this Triton's interpreter has bf16 constants (3.9+)")
def test_bf16_constants(without):
    x = torch.tensor([1.0, -2.0, 3.0, 0.5], dtype=torch.bfloat16)
    without(shims.BF16_CONSTANTS)
    out = _run(bf16_math, x)
    assert out.error is not None and "get_bf16" in out.error.message
    assert out.error.kind == "limitation" and out.error.limitation == "bf16-constant"


def test_bf16_arithmetic_on_values_not_bits(without):
    x = torch.tensor([1.0, -2.0, 3.0, 0.5, -0.25, 0.0, 7.0, -5.0], dtype=torch.bfloat16)
    want = ((x * 2.0).float() * 0.5 + 0.5).to(torch.bfloat16)
    out = _run(bf16_math, x)
    assert out.error is None and out.trace.shims[shims.BF16_ARITH] > 0
    got = torch.from_numpy(out.returned.values).view(torch.bfloat16)
    assert torch.equal(got, want)
    without(shims.BF16_ARITH)
    out = _run(bf16_math, x)
    got = torch.from_numpy(out.returned.values).view(torch.bfloat16)
    assert not torch.equal(got, want)  # stock: numpy arithmetic on the bits


def test_shims_are_counted_in_the_summary():
    from tdiff.record.summary import check_lines, record

    (r,) = tdiff.verify(eps_to, profile="ci", max_examples=5, corpus_dir=None, repro_dir=None, isolation="none")
    lines = "\n".join(check_lines(record(r)))
    assert f"interpreter: worked around {shims.FLOAT_ARGS} in 5 case(s)" in lines


@tdiff.check(launch=_launch, x=tdiff.strategies.tensors(shape=(8,), layouts=["contiguous"]))
@triton.jit
def relu_like(x_ptr, out_ptr, n, unused, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(out_ptr + offs, tl.maximum(x, 0.0) + tl.minimum(x, 1.0), mask=offs < n)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_maximum_and_minimum_skip_nan_as_compiled_code_does(without, dtype):
    x = torch.tensor([float("nan"), -2.0, 3.0, 0.5], dtype=dtype)
    out = _run(relu_like, x)
    # maxnum(NaN, 0) = 0 and minnum(NaN, 1) = 1 on the GPU (propagate_nan=NONE); stock TRITON_INTERPRET=1 gives
    # NaN before Triton 3.8, where the shim is needed and counted
    needed = compat.minmax_propagates_nan()
    assert out.error is None and out.trace.shims[shims.NAN_MINMAX] == (2 if needed else 0)
    assert _floats(out.returned.values, dtype) == [1.0, -2.0, 4.0, 1.0]
    x_finite = torch.tensor([1.0, -2.0, 3.0, 0.5], dtype=dtype)
    assert _run(relu_like, x_finite).trace.shims[shims.NAN_MINMAX] == 0  # counted only where it mattered
    without(shims.NAN_MINMAX)
    out = _run(relu_like, x)
    assert out.trace.shims[shims.NAN_MINMAX] == 0
    assert math.isnan(_floats(out.returned.values, dtype)[0]) == needed  # stock: NaN wins before Triton 3.8


def _floats(values, dtype):
    return torch.from_numpy(values.copy()).view(dtype).float().tolist()


def test_poison_nan_is_told_by_its_payload_through_widening_casts():
    import numpy as np
    import triton.language as tl

    from tdiff.execute.interpreter import undefined
    from tdiff.execute.interpreter.shims import bf16_to_f32
    from tdiff.generate.values import NAN_BITS

    p16 = undefined.poison(tl.float16, np.dtype(np.float16), (2,))
    pbf = undefined.poison(tl.bfloat16, np.dtype(np.uint16), (2,))
    p32 = undefined.poison(tl.float32, np.dtype(np.float32), (2,))
    assert undefined.is_poison_nan(p16, tl.float16).all() and undefined.is_poison_nan(pbf, tl.bfloat16).all()
    # bf16 arithmetic (on float32 values, rounded back) keeps it
    from tdiff.execute.interpreter.shims import f32_to_bf16

    assert undefined.is_poison_nan(f32_to_bf16(bf16_to_f32(pbf) * np.float32(2)), tl.bfloat16).all()
    assert f32_to_bf16(np.array([np.nan, -np.inf, 1.0], np.float32)).tolist() == [0x7FC0, 0xFF80, 0x3F80]
    for widened in (p16.astype(np.float32), bf16_to_f32(pbf), p32):
        assert undefined.is_poison_nan(widened, tl.float32).all()
        assert undefined.is_poison_nan(widened.astype(np.float64), tl.float64).all()
    # NaNs that are not poison: an invalid operation's, and the ones tdiff draws (also widened)
    plain = [np.array([np.inf - np.inf, 1.0], np.float32)]
    for name, (carrier, bits) in NAN_BITS.items():
        raw = np.array([bits], carrier)
        if name == "bfloat16":
            assert not undefined.is_poison_nan(raw, tl.bfloat16).any()
            plain.append(bf16_to_f32(raw))
        else:
            np_dt, tl_dt = {"float32": (np.float32, tl.float32), "float16": (np.float16, tl.float16),
                            "float64": (np.float64, tl.float64)}[name]
            drawn = raw.view(np_dt)
            assert not undefined.is_poison_nan(drawn, tl_dt).any()
            plain.append(drawn if name == "float64" else drawn.astype(np.float32))
    for a in plain:
        assert not undefined.is_poison_nan(a.astype(np.float64), tl.float64).any()
        if a.dtype == np.float32:
            assert not undefined.is_poison_nan(a, tl.float32).any()
    assert not undefined.is_poison_nan(np.array([1, 2], np.int32), tl.int32).any()
