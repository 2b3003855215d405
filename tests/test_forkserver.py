"""Workers forked from a preloaded zygote (tdiff.execute.forkserver): the CPU lanes' workers fork from one process
per test process that imported torch, Triton and tdiff once; a crash in one reports as a started worker's does; the
GPU lanes and TDIFF_FORKSERVER=0 keep fresh interpreters."""

import os
import signal
import subprocess
import time

import pytest
import torch

from tdiff.core.backend_spec import BackendSpec
from tdiff.core.case import Case
from tdiff.execute import forkserver
from tdiff.execute.workers import Job, Pool
from tdiff.strategies import tensor_arg
from tests import kernels as K


def _case(first):
    return Case({"x": tensor_arg(torch.tensor([first, 0.5, 0.25, 0.125]))})


@pytest.fixture
def pool():
    p = Pool()
    yield p
    p.close()


@pytest.mark.skipif(not forkserver.enabled(), reason="no fork here (or TDIFF_FORKSERVER=0)")
def test_cpu_lanes_fork_from_the_zygote_and_a_restart_forks_again(pool):
    ref = K.hang_kernel.__tdiff_checks__[0].ref()
    assert pool.run(Job(ref, BackendSpec("interpreter"), _case(-1.0)), timeout=120).error is None
    assert pool.run(Job(ref, BackendSpec("reference"), _case(-1.0)), timeout=120).error is None
    cpu, ref_lane = pool.workers["cpu"], pool.workers["ref"]
    assert isinstance(cpu.proc, forkserver.Forked) and isinstance(ref_lane.proc, forkserver.Forked)
    zygote = forkserver.zygote()
    first = cpu.proc.pid
    hung = pool.run(Job(ref, BackendSpec("interpreter"), _case(1.0)), timeout=2)  # killed on its timeout
    assert hung.error is not None and hung.error.kind == "timeout"
    t0 = time.monotonic()
    assert pool.run(Job(ref, BackendSpec("interpreter"), _case(-1.0)), timeout=120).error is None
    assert isinstance(cpu.proc, forkserver.Forked) and cpu.proc.pid != first and cpu.starts == 2
    assert forkserver.zygote() is zygote  # the same zygote forked the new worker: no import paid again
    print(f"\nrestart and one case: {time.monotonic() - t0:.2f} s")


@pytest.mark.skipif(not forkserver.enabled(), reason="no fork here (or TDIFF_FORKSERVER=0)")
def test_a_forked_worker_that_dies_reports_its_signal(pool):
    ref = K.hang_kernel.__tdiff_checks__[0].ref()
    spec = BackendSpec("interpreter")
    assert pool.run(Job(ref, spec, _case(-1.0)), timeout=120).error is None
    w = pool.workers["cpu"]
    w.submit(Job(ref, spec, _case(1.0)))  # spins
    time.sleep(0.5)
    os.kill(w.proc.pid, signal.SIGSEGV)
    out = w.collect(Job(ref, spec, _case(1.0)), time.monotonic() + 60, 60)
    assert out.error is not None and out.error.kind == "crash" and "SIGSEGV" in out.error.message, out.error


def test_off_every_worker_is_a_fresh_interpreter(pool, monkeypatch):
    monkeypatch.setenv("TDIFF_FORKSERVER", "0")
    ref = K.hang_kernel.__tdiff_checks__[0].ref()
    assert pool.run(Job(ref, BackendSpec("interpreter"), _case(-1.0)), timeout=120).error is None
    assert isinstance(pool.workers["cpu"].proc, subprocess.Popen)


def test_lanes_that_see_the_gpu_never_fork(pool):
    assert not pool.worker("gpu").forks and not pool.worker("compile0").forks
    assert pool.worker("cpu").forks == forkserver.enabled()
