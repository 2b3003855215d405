"""Compiling ahead of use (tdiff.execute.ahead): planned cases in the order hypothesis runs them, claims that keep a
specialization from being compiled twice, and the compile workers' protocol. The compiles themselves need a GPU
(tests/test_gpu.py)."""

import dataclasses
import os
import subprocess
import sys
import threading
import time

import hypothesis
import torch
from hypothesis import Phase

from tdiff.core.backend_spec import Lane
from tdiff.core.case import Case
from tdiff.core.settings import RunOptions
from tdiff.drive.pipeline import drawn_cases
from tdiff.execute import ahead
from tdiff.execute.compile_claims import Claims
from tdiff.execute.workers import Ahead, Pool
from tdiff.generate.plan import boundary_plan, seeded_database
from tdiff.strategies import tensor_arg
from tests import kernels as K


def test_planned_cases_come_in_the_order_hypothesis_runs_them():
    check = K.masked_tail_bug.__tdiff_checks__[0]
    strategy = drawn_cases(check, RunOptions())
    plan = boundary_plan(strategy, 12, seed=3)
    assert len(plan.cases) == len(plan.choices) >= 4
    key = b"tdiff-test-order"
    seen = []

    @hypothesis.settings(database=seeded_database(plan.choices, key), phases=[Phase.reuse], max_examples=100,
                         deadline=None)
    @hypothesis.given(strategy)
    def run(case):
        seen.append(case.describe())

    run._hypothesis_internal_database_key = key
    run()
    order = [c.describe() for c in plan.replay_order()]
    assert seen == order
    assert order != [c.describe() for c in plan.cases]  # (the plan's own order is another one)


def test_planned_cases_sharing_a_specialization_run_one_after_another():
    check = K.masked_tail_bug.__tdiff_checks__[0]
    strategy = drawn_cases(check, RunOptions())
    plan = boundary_plan(strategy, 12, seed=3)

    def spec(case):  # (a stand-in for the launch keys: the size's class)
        n = case.inputs["x"].shape[0]
        return "one" if n == 1 else "16" if n % 16 == 0 else "other"

    assert len({spec(c) for c in plan.cases}) >= 2
    grouped = plan.grouped(spec)
    key = b"tdiff-test-grouped"
    seen = []

    @hypothesis.settings(database=grouped.database(key), phases=[Phase.reuse], max_examples=100, deadline=None)
    @hypothesis.given(strategy)
    def run(case):
        seen.append(case)

    run._hypothesis_internal_database_key = key
    run()
    assert [c.describe() for c in seen] == [c.describe() for c in grouped.replay_order()] == \
        [c.describe() for c in grouped.cases]
    keys = [spec(c) for c in seen]
    assert keys == sorted(keys, key=keys.index)  # each specialization's cases one after another
    assert keys[0] == spec(plan.replay_order()[0])  # (the groups in the order hypothesis would reach them)
    assert sorted(c.describe() for c in seen) == sorted(c.describe() for c in plan.cases)


def test_a_case_s_specialization_is_the_launch_keys_a_dry_launch_predicts():
    import tdiff

    check = K.masked_tail_bug.__tdiff_checks__[0]
    key = tdiff.Runner(RunOptions(isolation="none")).specialization(check)
    three, five, thirty_two, forty_eight, one = (key(Case({"x": tensor_arg(torch.zeros(n))}))
                                                 for n in (3, 5, 32, 48, 1))
    assert three == five and thirty_two == forty_eight and len({three, thirty_two, one}) == 3
    assert three[0] == "keys"


def test_a_layout_goes_to_one_compile_worker_and_the_last_cases_first():
    cases = [Case({"x": tensor_arg(torch.zeros(n))}) for n in (1, 2, 2, 3, 4, 5)]
    jobs = ahead.jobs("target", cases, 2)
    assert [[c.inputs["x"].shape[0] for c in j.cases] for j in jobs] == [[5, 3, 1], [4, 2]]
    assert [j.lane for j in jobs] == [Lane("compile0"), Lane("compile1")]
    assert len(ahead.jobs("target", cases[:1], 3)) == 1  # no idle workers started


def test_a_claim_holds_a_specialization_for_one_process(tmp_path):
    mine, theirs = Claims(tmp_path), Claims(tmp_path)
    held = mine.take("k")
    assert held is not None and theirs.take("k") is None
    t0 = time.perf_counter()
    threading.Timer(0.2, mine.release, (held, "k")).start()
    waited = theirs.wait("k")
    assert 0.15 < waited < 5 and time.perf_counter() - t0 < 5
    assert "k" in mine.done and theirs.take("k") is not None  # free again once released
    assert theirs.wait("nothing") < 0.1


def test_a_claim_whose_process_died_is_taken_over(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    (tmp_path / "k").write_text(dead.stdout.strip())
    claims = Claims(tmp_path)
    assert claims.wait("k") < 1.0  # not waited on
    assert claims.take("k") is not None and (tmp_path / "k").read_text() == str(os.getpid())


def _finished(pool, lane, seconds=60):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not pool.workers[lane].conn_in.poll(0.1):
        pass


def test_compile_workers_stop_when_told_and_serve_the_next_check():
    ref = K.slow_launch_double.__tdiff_checks__[0].ref()
    cases = [Case({"x": tensor_arg(torch.ones(n + 1))}) for n in range(100)]  # 0.05 s each: 5 s in all
    lane = Lane("compile0")
    pool = Pool()
    try:
        pool.ahead([Ahead(ref, cases[:3], lane)])
        _finished(pool, lane)
        first = pool.stop_ahead(timeout=30)  # (the stop comes after the worker went through its cases)
        assert not first.stopped and first.cases == 3, first
        # two specializations (n equal to 1, and other): compiled, or without a GPU each one's error, never neither
        assert len(first.errors) + first.compiles + first.loads + first.taken == 2, first
        pool.ahead([Ahead(ref, cases, lane)])  # the same worker, past its stale stop
        time.sleep(0.5)
        second = pool.stop_ahead(timeout=30)
        assert second.stopped and 0 < second.cases < 100, second
        assert pool.workers[lane].starts == 1  # never restarted
    finally:
        pool.close()


def test_the_totals_line_counts_what_was_compiled_ahead():
    from tdiff.record.results import CheckResult
    from tdiff.record.summary import record, total_lines

    r = CheckResult("m::k[tdiff]", "k[tdiff]", ("compiled", "interpreter"), compiles=3, compile_seconds=0.6,
                    cache_loads=12, compile_wait=0.25,
                    ahead={"workers": 2, "cases": 15, "done": 15, "compiles": 12, "compile_seconds": 0.85, "loads": 0,
                           "taken": 1, "stopped": False, "wall": 8.0, "errors": []})
    line = total_lines([record(r)])[0]
    assert "3 specializations compiled in 0.6s; 12 compiled ahead by compile workers in 0.8s (the GPU workers " \
           "waited 0.2s for them), 12 loaded from Triton's cache" in line, line
    assert "compiled ahead" not in total_lines([record(dataclasses.replace(r, ahead={}))])[0]


def test_compile_workers_only_for_the_plain_compiled_opinion(monkeypatch):
    from tdiff.drive import runner as R

    monkeypatch.setattr(R, "gpu_available", lambda: True)
    check = K.masked_tail_bug.__tdiff_checks__[0]
    pool = Pool()  # (no worker starts: none is asked for)
    try:
        for backends, ahead_option, want in ((("compiled", "interpreter"), 3, 3),
                                             (("compiled[num_warps=2]", "interpreter"), 3, 0),
                                             (("interpreter",), 3, 0),
                                             (("compiled", "interpreter"), 0, 0)):
            r = R.Runner(RunOptions(backends=backends, compile_ahead=ahead_option), executor=pool)
            assert r.ahead_workers(r.judge(check)) == want, backends
        r = R.Runner(RunOptions(backends=("compiled", "interpreter")), executor=pool)
        assert r.ahead_workers(r.judge(check)) == ahead.auto_workers() >= 1
        monkeypatch.setattr(R, "gpu_available", lambda: False)
        assert r.ahead_workers(r.judge(check)) == 0
    finally:
        pool.close()


def test_a_compiled_kernel_s_launcher_is_built_through_triton_s_driver(monkeypatch):
    # the launcher a kernel's first launch builds (Triton's driver.active.launcher_cls), built ahead; nothing for
    # what is not a compiled kernel, or a driver without such launchers
    from types import SimpleNamespace

    from triton.runtime import driver

    from tdiff.execute.backends.compile_ahead import build_launcher

    built = []
    fake = SimpleNamespace(launcher_cls=lambda src, metadata: built.append((src, metadata)))
    monkeypatch.setattr(type(driver), "active", property(lambda self: fake))
    kernel = SimpleNamespace(src="the source", metadata="the metadata")
    assert build_launcher(kernel) and built == [("the source", "the metadata")]
    assert not build_launcher(None) and not build_launcher(SimpleNamespace(src=None, metadata=1)) and len(built) == 1
    del fake.launcher_cls
    assert not build_launcher(kernel) and len(built) == 1


def test_a_launcher_that_fails_to_build_is_an_error_and_the_compile_still_counts(monkeypatch):
    # the compile worker compiled the kernel; its launcher's build failed: the compile counts, the failure is one
    # of the check's compile-worker errors (the GPU worker's first launch builds the launcher again)
    from tdiff.execute.backends import compile_ahead as ca

    def dry_launches(target, case, then):
        then("jit", "original", (), (1,), {}, None)

    def fail(kernel):
        raise OSError("no C compiler")

    monkeypatch.setattr(ca, "dry_launches", dry_launches)
    monkeypatch.setattr(ca, "counted", lambda jit, call: ("a compiled kernel", 1, 0, 0.25))
    monkeypatch.setattr(ca, "build_launcher", fail)
    count = ca.AheadCount()
    ca.compile_case(None, None, count)
    assert (count.cases, count.compiles, count.seconds, count.launchers) == (1, 1, 0.25, 0)
    assert count.errors == ["launcher: OSError: no C compiler"]
    monkeypatch.setattr(ca, "build_launcher", lambda kernel: True)
    ca.compile_case(None, None, count)
    assert (count.compiles, count.launchers, len(count.errors)) == (2, 1, 1)
