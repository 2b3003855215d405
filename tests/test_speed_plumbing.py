"""The plumbing behind tdiff's speed: wire format, GPU probe, lazy imports, spinning, ordering."""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from tdiff.execute import gpus, wire
from tdiff.execute.workers import Pool, spin_seconds
from tests.projects import import_all_of_tdiff, kernel_project

pytest_plugins = ["pytester"]

import_all_of_tdiff()  # (before the in-process pytest runs below: see its docstring)


@pytest.mark.parametrize("make", [
    lambda: np.arange(12, dtype=np.float32),
    lambda: np.arange(12, dtype=np.float32)[::3],  # strided
    lambda: np.arange(12, dtype=np.int64).reshape(3, 4).T,  # transposed
    lambda: np.zeros((0, 3), dtype=np.uint16),  # empty
    lambda: np.array(7, dtype=np.int32),  # 0-d
    lambda: np.array([True, False]),
    lambda: np.array([1.5, np.nan, -0.0], dtype=np.float64),
])
def test_wire_round_trips_arrays_exactly_and_writable(make):
    a = make()
    b = wire.loads(wire.dumps({"a": a, "nested": [a, (a,)]}))["a"]
    assert b.dtype == a.dtype and b.shape == a.shape
    assert a.tobytes() == np.ascontiguousarray(b).tobytes()  # bit for bit, NaN and -0.0 included
    if b.size:
        b.reshape(-1)[0] = b.reshape(-1)[-1]  # arrives writable


def test_wire_keeps_read_only_arrays_read_only_and_objects_work():
    a = np.arange(4.0)
    a.flags.writeable = False
    assert not wire.loads(wire.dumps(a)).flags.writeable
    obj = np.array([{"x": 1}, None], dtype=object)
    assert wire.loads(wire.dumps(obj)).tolist() == obj.tolist()


def test_wire_sends_arrays_as_bytes_and_a_dtype_string_not_a_dtype_object():
    import pickle

    a = np.arange(64, dtype=np.float32)
    assert b"dtype" in pickle.dumps(a, protocol=5)  # numpy's own path pickles a dtype object per array
    blob = wire.dumps({"x": a})
    assert b"dtype" not in blob and b"_rebuild" in blob and b"<f4" in blob and a.tobytes() in blob


def test_torch_build_is_read_without_importing_torch(tmp_path):
    code = ("import sys; from tdiff.execute import gpus; gpus.torch_has_cuda(); "
            "n = gpus.device_count(); print('torch' in sys.modules, n)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "CUDA_VISIBLE_DEVICES": ""}).stdout.split()
    assert out == ["False", "0"]  # no GPU visible: 0, and torch was never imported


def test_gpu_count_agrees_with_torch_when_it_is_loaded():
    import torch

    expected = torch.cuda.device_count() if torch.cuda.is_available() else 0
    assert gpus.device_count() == expected


def test_loading_the_plugin_imports_neither_torch_nor_triton():
    code = "import sys, tdiff.plugin, tdiff; print(sorted(m for m in ('torch', 'triton') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_package_names_load_on_first_use():
    code = textwrap.dedent("""
        import sys, tdiff
        assert "torch" not in sys.modules
        assert sorted(tdiff.__all__) == sorted(tdiff._LAZY)  # every public name loads lazily
        from tdiff import strategies as tst, check, RunOptions, verify
        import tdiff.declaration  # importing the module must not shadow the decorator
        assert callable(tdiff.check) and tdiff.check.__module__ == "tdiff.declaration"
        assert tdiff.strategies is tst and RunOptions().profile
        try:
            tdiff.nope
        except AttributeError as exc:
            print("ok", exc)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.startswith("ok") and "nope" in out


def test_spinning_needs_spare_cores_and_can_be_set(monkeypatch):
    monkeypatch.setenv("TDIFF_SPIN_MS", "5")
    assert spin_seconds() == 0.005
    monkeypatch.setenv("TDIFF_SPIN_MS", "0")
    assert spin_seconds() == 0.0
    monkeypatch.delenv("TDIFF_SPIN_MS")
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(16)), raising=False)
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "1")
    assert spin_seconds() > 0  # 16 cores, 3 busy processes
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "4")
    assert spin_seconds() == 0.0  # 12 busy processes: no core to spare
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "1")
    assert spin_seconds() == 0.0  # CI: 2 cores


def test_spinning_pool_runs_cases_and_closes_without_waiting():
    import torch

    from tdiff.core.backend_spec import BackendSpec
    from tdiff.core.case import Case
    from tdiff.execute.workers import Job
    from tdiff.strategies import tensor_arg
    from tests import kernels as K

    pool = Pool(spin=0.005)
    assert pool._env("cpu")["TDIFF_SPIN_MS"] == "5.0"
    ref = K.double_kernel.__tdiff_checks__[0].ref()
    case = Case({"x": tensor_arg(torch.arange(5, dtype=torch.float32))})
    (out,) = pool.run_many([Job(ref, BackendSpec("interpreter"), case)], timeout=60)
    assert out.error is None, out.error
    procs = [w.proc for w in pool.workers.values()]
    pool.close(wait=False)
    assert pool.closed and not pool.workers
    for p in procs:  # they were asked to stop and exit on their own
        assert p.wait(timeout=30) == 0


ORDER_KERNELS = textwrap.dedent('''
    import time
    import torch
    import triton
    import triton.language as tl

    import tdiff
    from tdiff import strategies as tst


    def launch(kernel, x):
        out = torch.empty_like(x)
        kernel[(1,)](x, out, x.numel(), BLOCK=8)
        return out


    X = tst.tensors(shape=(tst.sizes(block=8, max_blocks=1, max_value=8),), layouts=["contiguous"])


    def slow_reference(x):
        time.sleep(0.75)  # 6 cases: 4.5 s, far more than a_quick with its warm-up on a busy machine
        return x * 2


    @tdiff.check(launch=launch, reference=lambda x: x * 2, x=X)
    @triton.jit
    def a_quick(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)


    @tdiff.check(launch=launch, reference=slow_reference, x=X)
    @triton.jit
    def b_slow(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)
''')


def test_checks_that_took_longest_last_time_run_first(pytester):
    # (no boundary plan: the 6 cases the slow reference is timed for, not up to 3 more on each of the two runs)
    kernel_project(pytester, ORDER_KERNELS, tdiff_examples=6, tdiff_profile="ci", tdiff_plan=0)
    # the reference makes b_slow slow: compare with it on every machine, GPU or not; in-process, so
    # the first check's wall does not include starting the workers on a busy machine
    args = ("--tdiff", "-v", "-p", "cacheprovider", "--tdiff-corpus=none", "--tdiff-repro-dir=none",
            "--tdiff-backends=interpreter,reference", "--tdiff-isolation=none")
    first = pytester.runpytest_inprocess(*args)  # (the order is the plugin's: no process of its own needed)
    first.assert_outcomes(passed=2)
    cache = pytester.path / ".pytest_cache" / "v" / "tdiff" / "durations"
    walls = json.loads(cache.read_text())
    assert walls["kernels/ops.py::b_slow[tdiff]"] > walls["kernels/ops.py::a_quick[tdiff]"]
    # the order is set at collection: the second run need only collect (running b_slow again proved nothing more)
    second = pytester.runpytest_inprocess(*args, "--collect-only").stdout.lines
    assert [ln.strip() for ln in second if "TdiffItem" in ln] == ["<TdiffItem b_slow[tdiff]>",
                                                                   "<TdiffItem a_quick[tdiff]>"], second


def test_the_controllers_summary_imports_neither_torch_nor_triton():
    # an xdist controller prints the run's summary from its workers' records: it must not load Triton for that
    from tdiff.execute.interpreter.shims import BF16_ARITH
    from tdiff.record.results import CheckResult
    from tdiff.record.summary import record

    result = CheckResult("m::k[tdiff]", "k[tdiff]", ("interpreter", "reference"), compared="interpreter, reference",
                         cases=3, judged=3)
    result.shims[BF16_ARITH] = 3
    code = textwrap.dedent(f"""
        import json, sys
        from tdiff.pytest_plugin.session import Ran
        from tdiff.pytest_plugin.terminal import summary_lines
        lines = summary_lines([Ran("m.py::k[tdiff]", json.loads({json.dumps(json.dumps(record(result)))}),
                                   "PASSED")], full=True)
        print(sorted(m for m in ("torch", "triton") if m in sys.modules))
        print("\\n".join(lines))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    loaded, text = out.split("\n", 1)
    assert loaded == "[]", out
    assert "bf16 arithmetic and comparisons computed on the values" in text, text  # (the shims were named)
