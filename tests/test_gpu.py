"""Tests of the compiled path; they need a CUDA GPU and are skipped (with the reason) without one."""

import subprocess
import sys

import numpy as np
import pytest
import torch

import tdiff
from tdiff.backends.base import BackendSpec
from tdiff.case import Case
from tdiff.strategies import tensor_arg
from tdiff.workers import Job, Pool
from tests import kernels as K
from tests.test_suites import _suite_checks

pytestmark = pytest.mark.gpu


def _case(first):
    return Case({"x": tensor_arg(torch.tensor([first, 0.5, 0.25, 0.125]))})


@pytest.mark.parametrize("kernel,name", _suite_checks())
def test_suite_compiled_and_interpreted_in_one_process(kernel, name, tmp_path):
    # isolation="none": the same kernel objects are compiled and interpreted, case after case, here
    opts = tdiff.RunOptions(profile="ci", isolation="none", corpus_dir=None, repro_dir=tmp_path,
                            backends=("compiled", "interpreter"))
    for r in tdiff.verify(kernel, options=opts):
        assert r.status == "passed", r.report()
        assert r.compiles >= 1 and r.seconds.get("compiled", 0) > 0


def test_out_of_bounds_gpu_write_fails_one_case_and_the_run_goes_on():
    pool = Pool()
    try:
        ref = K.far_write_kernel.__tdiff_checks__[0].ref()
        spec = BackendSpec("compiled")
        bad = pool.run(Job(ref, spec, _case(1.0)), timeout=120)
        assert bad.error is not None and bad.error.kind in ("cuda", "crash"), bad.error
        print(f"\nout-of-bounds GPU write: {bad.error.summary()}")
        good = pool.run(Job(ref, spec, _case(-1.0)), timeout=120)
        assert good.error is None and pool.workers["gpu"].starts == 2  # a fresh worker, healthy
    finally:
        pool.close()


def test_device_pointer_load_under_the_interpreter_fails_one_case():
    pool = Pool()
    try:
        ref = K.device_pointer_kernel.__tdiff_checks__[0].ref()
        reported = pool.run(Job(ref, BackendSpec.parse("interpreter:cuda"), _case(1.0)), timeout=120)
        assert reported.error is None and reported.trace.violations  # stopped and reported
        print(f"\ndevice pointer, checked: {reported.trace.violations[0]}")
        spec = BackendSpec.parse("interpreter:cuda").with_(check_pointers=False)
        crashed = pool.run(Job(ref, spec, _case(1.0)), timeout=120)
        assert crashed.error is not None and crashed.error.kind == "crash", crashed.error
        print(f"device pointer, unchecked: {crashed.error.summary()}")
        fine = pool.run(Job(ref, spec, _case(-1.0)), timeout=120)
        assert fine.error is None
    finally:
        pool.close()


def test_bf16_dot_divergence_becomes_a_reproducer(tmp_path):
    opts = tdiff.RunOptions(profile="ci", max_examples=5, corpus_dir=tmp_path / "corpus", repro_dir=tmp_path / "out",
                            backends=("compiled", "interpreter"))
    with pytest.raises(tdiff.DivergenceError) as err:
        tdiff.verify(K.bf16_dot_kernel, options=opts)
    (div,) = err.value.results[0].failures
    print("\n" + div.report)
    assert div.verdict.label == "interpreter wrong"
    ran = subprocess.run([sys.executable, str(div.repro_path)], capture_output=True, text=True,
                         cwd=div.repro_path.parent)
    print(ran.stdout)
    assert ran.returncode == 1 and "compiled: ran here" in ran.stdout and "interpreter: ran here" in ran.stdout


def test_compiled_backend_records_launches_and_compiles():
    from tdiff.backends.compiled import CompiledBackend

    check = K.double_kernel.__tdiff_checks__[0]
    case = Case({"x": tensor_arg(torch.arange(100, dtype=torch.float32))})
    out = CompiledBackend().run(check, case)
    assert out.error is None and out.launches[0].grid == (2, 1, 1)
    assert np.array_equal(out.returned.values, np.arange(100, dtype=np.float32) * 2)
    assert out.device.startswith("NVIDIA")


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_each_pool_compiles_on_its_own_gpu():
    check = K.double_kernel.__tdiff_checks__[0]
    case = Case({"x": tensor_arg(torch.arange(10, dtype=torch.float32))})
    for gpu in (0, 1):
        pool = Pool(gpu=gpu)
        try:
            out = pool.run(Job(check.ref(), BackendSpec("compiled"), case), timeout=120)
            assert out.error is None and out.device.endswith(f"(CUDA_VISIBLE_DEVICES={gpu})"), out.device
        finally:
            pool.close()


def test_launch_keys_predict_real_compiles():
    """The compile budget's dry launches (CPU tensors) classify arguments as Triton's JIT cache does:
    for every suite kernel they equal the keys the compiled backend reports from the real launches,
    and there are as many as a fresh worker compiled."""
    from tdiff.runner import Runner
    from tdiff.specialization import launch_keys

    ran = []

    class Recording(Runner):
        def evaluate(self, check, case, pair, result=None, keys=None):
            sink = [] if keys is None else keys
            out = super().evaluate(check, case, pair, result, sink)
            ran.append((case, {k for ks in sink for k in ks}))
            return out

    opts = tdiff.RunOptions(profile="ci", max_examples=12, corpus_dir=None, repro_dir=None, max_compiles=0,
                            backends=("compiled", "interpreter"), shrink_budget=0, verdict=False)
    kernels = {id(p.values[0]): p.values[0] for p in _suite_checks()}
    pool = Pool()  # fresh workers: every kernel's cache starts empty
    rows, wrong = [], []
    try:
        runner = Recording(opts, pool)
        for kernel in kernels.values():
            keys, compiles = set(), 0
            for check in tdiff.checks_of(kernel):
                ran.clear()
                compiles += runner.run_check(check).compiles
                for case, reported in ran:
                    predicted = set(launch_keys(check, case) or ())
                    wrong += [case] if predicted != reported else []
                    keys |= reported
            rows.append((tdiff.checks_of(kernel)[0].kernel_name, len(keys), compiles))
    finally:
        pool.close()
    print("\n(kernel, launch keys, compiles): " + ", ".join(map(str, rows)))
    assert not wrong, wrong[:3]
    assert all(k == c for _, k, c in rows), rows


def test_compile_budget_bounds_real_compiles():
    from suites import vector_add

    def run(limit):
        opts = tdiff.RunOptions(profile="ci", max_examples=30, corpus_dir=None, repro_dir=None, max_compiles=limit,
                                backends=("compiled", "interpreter"))
        pool = Pool()  # a fresh worker: an empty kernel cache
        try:
            (r,) = tdiff.verify(vector_add.add_kernel, options=opts, executor=pool)
        finally:
            pool.close()
        return r

    free, bounded = run(0), run(3)
    print(f"\nno budget: {free.compiles} compiles ({free.compile_seconds:.2f}s), {free.wall:.1f}s; budget 3: "
          f"{bounded.compiles} compiles ({bounded.compile_seconds:.2f}s; {bounded.budget_beyond} past the budget, "
          f"one per 40 skipped draws), {bounded.budget_skipped} drawn cases skipped, {bounded.wall:.1f}s")
    assert bounded.cases == free.cases == 30 and bounded.budget_skipped > 0
    assert 3 <= bounded.compiles < free.compiles
