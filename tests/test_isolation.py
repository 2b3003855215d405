"""Isolation: a segfault or a hang in a backend fails that case; the next case runs in a healthy worker."""

import time

import numpy as np
import pytest
import torch

import tdiff
from tdiff.core.backend_spec import BackendSpec
from tdiff.core.case import Case
from tdiff.execute.workers import Job, Pool
from tdiff.strategies import tensor_arg
from tests import kernels as K


@pytest.fixture(scope="module")
def pool():
    p = Pool()
    yield p
    p.close()


def _case(first: float) -> Case:
    return Case({"x": tensor_arg(torch.tensor([first, 0.5, 0.25, 0.125]))})


def test_segfault_fails_one_case_and_the_next_runs(pool):
    ref = K.crash_kernel.__tdiff_checks__[0].ref()
    spec = BackendSpec("interpreter", check_pointers=False)
    ok = pool.run(Job(ref, spec, _case(-1.0)), timeout=60)
    assert ok.error is None
    crashed = pool.run(Job(ref, spec, _case(1.0)), timeout=60)
    assert crashed.error is not None and crashed.error.kind == "crash"
    assert "SIGSEGV" in crashed.error.message
    assert "Fatal Python error" in crashed.error.details  # faulthandler's stack of the dead worker
    starts = pool.workers["cpu"].starts
    again = pool.run(Job(ref, spec, _case(-1.0)), timeout=60)
    assert again.error is None and pool.workers["cpu"].starts == starts + 1


def test_pointer_checks_turn_the_segfault_into_a_report(pool):
    ref = K.crash_kernel.__tdiff_checks__[0].ref()
    out = pool.run(Job(ref, BackendSpec("interpreter"), _case(1.0)), timeout=60)
    assert out.error is None
    (v,) = out.trace.violations
    assert v.op == "load" and v.address == 8 and v.where == "outside every allocation"


def test_hang_times_out_and_the_next_case_runs(pool):
    ref = K.hang_kernel.__tdiff_checks__[0].ref()
    spec = BackendSpec("interpreter")
    t0 = time.monotonic()
    hung = pool.run(Job(ref, spec, _case(1.0)), timeout=2)
    assert hung.error is not None and hung.error.kind == "timeout"
    assert time.monotonic() - t0 < 15
    fine = pool.run(Job(ref, spec, _case(-1.0)), timeout=60)
    assert fine.error is None


def test_lanes_run_side_by_side_and_hide_the_gpu_from_cpu_work(pool):
    check = K.double_kernel.__tdiff_checks__[0]
    case = Case({"x": tensor_arg(torch.arange(10, dtype=torch.float32))})
    a, b = pool.run_many([Job(check.ref(), BackendSpec.parse("interpreter"), case),
                          Job(check.ref(), BackendSpec.parse("reference"), case)], timeout=60)
    assert a.error is None and b.error is None
    assert np.array_equal(a.returned.values, b.returned.values)
    assert pool.workers["cpu"].env["CUDA_VISIBLE_DEVICES"] == ""


def test_a_crashing_kernel_under_hypothesis_fails_its_cases_and_the_session_goes_on(tmp_path):
    opts = tdiff.RunOptions(profile="ci", max_examples=10, corpus_dir=None, repro_dir=None, shrink_budget=5,
                            isolation="process", timeout=30)
    with pytest.raises(tdiff.DivergenceError) as err:
        tdiff.verify(K.crash_kernel, options=opts)
    text = str(err.value)
    assert "crash" in text and "SIGSEGV" in text
    # and the process that ran it is fine: a correct kernel still passes afterwards
    (res,) = tdiff.verify(K.double_kernel, options=opts)
    assert res.status == "passed" and res.cases > 0


def test_a_check_workers_cannot_import_is_an_error_not_a_divergence():
    import triton

    from tdiff import strategies as tst

    # a kernel made at run time: worker processes cannot import it
    local = tdiff.check(launch=K._launch_1d, reference=lambda x: x * 2, name="local",
                        x=tst.tensors(shape=(8,)))(triton.jit(K.double_kernel.fn))
    opts = tdiff.RunOptions(profile="ci", max_examples=3, corpus_dir=None, repro_dir=None, isolation="process")
    with pytest.raises(tdiff.DivergenceError, match=r"could not run the case: LookupError: check 'local'") as err:
        tdiff.verify(local, options=opts)
    assert err.value.results[0].status == "error"
    (res,) = tdiff.verify(local, options=opts.with_(isolation="none"))  # in-process it works
    assert res.status == "passed"
