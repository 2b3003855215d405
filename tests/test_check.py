"""Bad declarations fail at decoration time, naming the kernel and the argument."""

import pytest
import triton
import triton.language as tl

import tdiff
from tdiff import strategies as tst


@triton.jit
def k(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    pass


def ok_launch(kernel, x, y):
    kernel[(1,)](x, y, x.numel(), BLOCK=16)


def _decorate(**kw):
    fresh = triton.jit(k.fn)  # a fresh kernel object each time
    return tdiff.check(**kw)(fresh)


def test_unknown_input_name():
    with pytest.raises(tdiff.DeclarationError, match=r"kernel `k`.*launch does not accept input\(s\) 'z'"):
        _decorate(launch=ok_launch, x=tst.tensors(ndim=1), y=tst.tensors(like="x"), z=tst.tensors(ndim=1))


def test_launch_requires_an_input_without_strategy():
    with pytest.raises(tdiff.DeclarationError, match=r"kernel `k`.*launch requires 'y'"):
        _decorate(launch=ok_launch, x=tst.tensors(ndim=1))


def test_like_names_a_missing_input():
    with pytest.raises(tdiff.DeclarationError, match=r"kernel `k`.*input `y` refers to `w`"):
        _decorate(launch=ok_launch, x=tst.tensors(ndim=1), y=tst.tensors(like="w"))


def test_unsupported_dtype():
    with pytest.raises(tdiff.DeclarationError, match=r"kernel `k`.*input `x`.*unsupported dtype 'float128'"):
        _decorate(launch=ok_launch, x=tst.tensors(ndim=1, dtype="float128"), y=tst.tensors(like="x"))


def test_unknown_layout():
    with pytest.raises(tdiff.DeclarationError, match=r"input `x`.*unknown layout"):
        _decorate(launch=ok_launch, x=tst.tensors(ndim=1, layouts=["diagonal"]), y=tst.tensors(like="x"))


def test_reference_must_accept_the_inputs():
    with pytest.raises(tdiff.DeclarationError, match=r"reference must accept the inputs"):
        _decorate(launch=ok_launch, reference=lambda x: x, x=tst.tensors(ndim=1), y=tst.tensors(like="x"))


def test_not_a_kernel_and_bad_strategy_values():
    with pytest.raises(tdiff.DeclarationError, match="must decorate a @triton.jit kernel"):
        tdiff.check(launch=ok_launch)(lambda: None)
    with pytest.raises(tdiff.DeclarationError, match=r"input `y`: expected a strategy"):
        _decorate(launch=ok_launch, x=tst.tensors(ndim=1), y=object())


def test_autotune_config_indices_are_checked():
    from suites.autotuned import axpb_kernel

    with pytest.raises(tdiff.DeclarationError, match=r"configs \[5\] do not exist"):
        tdiff.check(launch=lambda kernel, x: None, x=tst.tensors(ndim=1), configs=[5], name="bad")(axpb_kernel)


def test_kernel_stays_launchable_and_checks_stack():
    kern = _decorate(launch=ok_launch, x=tst.tensors(ndim=1), y=tst.tensors(like="x"))
    kern = tdiff.check(launch=ok_launch, x=tst.tensors(ndim=1), y=tst.tensors(like="x"), name="second")(kern)
    assert isinstance(kern, triton.runtime.jit.JITFunction)
    names = [c.name for c in tdiff.checks_of(kern)]
    assert names == ["tdiff", "second"]
    with pytest.raises(tdiff.DeclarationError, match="two checks named 'second'"):
        tdiff.check(launch=ok_launch, x=tst.tensors(ndim=1), y=tst.tensors(like="x"), name="second")(kern)


def test_verify_needs_a_check():
    with pytest.raises(TypeError, match="has no @tdiff.check"):
        tdiff.verify(triton.jit(k.fn))


def test_a_bad_tolerance_fails_at_declaration_naming_the_kernel():
    strategies = dict(launch=ok_launch, x=tst.tensors(ndim=1), y=tst.tensors(like="x"))
    with pytest.raises(tdiff.DeclarationError, match=r"kernel `k`.*tolerance: unknown tolerance preset 'aritmetic'"):
        _decorate(tolerance="aritmetic", **strategies)
    with pytest.raises(tdiff.DeclarationError, match=r"kernel `k`.*tolerances\['returned'\]: unknown tolerance field"):
        _decorate(tolerances={"returned": {"rtoll": 1e-3}}, **strategies)
    with pytest.raises(tdiff.DeclarationError, match=r"tolerance: .*must be non-negative"):
        _decorate(tolerance={"rtol": -1.0}, **strategies)
    with pytest.raises(tdiff.DeclarationError, match=r"tolerance: a tolerance must be a Tolerance"):
        _decorate(tolerance=1e-3, **strategies)
    _decorate(tolerance="arith", tolerances={"y": tdiff.Tolerance.preset("reduce", "float16")}, **strategies)
