"""pytest --tdiff, tested with pytester: the flag, collection and naming, options, reports, xdist."""

import re
import textwrap

import pytest

from tests.projects import import_all_of_tdiff, kernel_project

pytest_plugins = ["pytester"]

# pytest runs in this process (runpytest_inprocess) where what is tested is the plugin, not how a process starts
# (a fresh one costs 2-3 s of `import torch, triton`), and those runs check in this process too (isolation none: a
# worker zygote outliving one project would keep its `kernels.ops` for the next). The xdist test is a pytest of its
# own, with worker processes (isolation process) as users run it.
import_all_of_tdiff()


KERNELS = textwrap.dedent('''
    import torch
    import triton
    import triton.language as tl

    import tdiff
    from tdiff import strategies as tst


    def launch(kernel, x):
        out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
        kernel[(triton.cdiv(x.numel(), 32),)](x, out, x.numel(), x.stride(0), BLOCK=32)
        return out


    @tdiff.check(launch=launch, reference=lambda x: x * 2, x=tst.tensors(shape=(tst.sizes(block=32),)))
    @triton.jit
    def twice(x_ptr, out_ptr, n, stride, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs * stride, mask=offs < n)
        tl.store(out_ptr + offs, x * 2, mask=offs < n)


    @tdiff.check(launch=launch, reference=lambda x: x * 2, x=tst.tensors(shape=(tst.sizes(block=32),)))
    @triton.jit
    def broken(x_ptr, out_ptr, n, stride, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs * stride, mask=offs < n)
        tl.store(out_ptr + offs, x * 3, mask=offs < n)
''')


@pytest.fixture
def project(pytester):
    # (no boundary plan: these tests count cases and read the output, the plan is tests/test_plan.py's)
    # (no kernel reduction: no test here asserts on it, and each failing check with a reproducer paid up to 30 s)
    kernel_project(pytester, KERNELS, tdiff_examples=4, tdiff_profile="ci", tdiff_shrink_budget=5, tdiff_plan=0,
                   tdiff_reduce_budget=0, tdiff_isolation="none")
    pytester.makepyfile(test_plain="def test_plain():\n    assert True\n")
    return pytester


def test_without_the_flag_nothing_changes(project):
    result = project.runpytest_inprocess("-q")
    result.assert_outcomes(passed=1)
    assert "tdiff" not in result.stdout.str()


def test_collection_naming_and_selection(project):
    result = project.runpytest_inprocess("--tdiff", "--collect-only", "-q")
    out = result.stdout.str()
    assert "kernels/ops.py::twice[tdiff]" in out and "kernels/ops.py::broken[tdiff]" in out
    assert "test_plain.py::test_plain" in out
    # (selected by tdiff's marker as well: one run, not two; plain `-k` runs are the other tests')
    result = project.runpytest_inprocess("--tdiff", "-m", "tdiff", "-k", "twice", "-v")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*tdiff: interpreter (no CUDA GPU: the compiled backend is skipped; compile-only: the "
                                 "specializations compiled for sm_90, not run) on every case, plus each check's "
                                 "reference*",
                                 "*kernels/ops.py::twice?tdiff? PASSED (4 cases*",
                                 "*PASSED  kernels.ops::twice[[]tdiff[]]: 4 cases (4 judged); compared: interpreter "
                                 "(+trace), reference, compile-only; no divergence*compile-only: * specializations "
                                 "compiled for sm_90 through TTGIR*"])


def test_failing_check_fails_its_item_with_the_report_and_junit_properties(project):
    result = project.runpytest_inprocess("--tdiff", "-k", "broken", "--junitxml=report.xml",
                                          "--tdiff-corpus=corp", "--tdiff-repro-dir=out")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "tdiff: disagrees with reference on kernels.ops::broken[tdiff]" in out and "Traceback" not in out
    assert "tdiff summary" in out and "reproducer:" in out
    xml = (project.path / "report.xml").read_text()
    assert 'name="tdiff_verdict" value="disagrees with reference"' in xml
    assert 'name="tdiff_reproducer"' in xml
    assert 'name="tdiff_compared" value="interpreter (+trace), reference, compile-only"' in xml
    assert list((project.path / "out" / "broken").iterdir())
    # the corpus named is replayed, never written: new entries go to the run directory's corpus
    assert not (project.path / "corp").exists()
    assert list((project.path / ".tdiff" / "corpus" / "broken").iterdir())
    # the next run replays the corpus entry first
    again = project.runpytest_inprocess("--tdiff", "-k", "broken", "--tdiff-corpus=corp", "--tdiff-repro-dir=out")
    assert "replayed from corpus entry" in again.stdout.str()


def test_each_module_of_checks_goes_to_the_zygotes_as_soon_as_it_is_collected(pytester, monkeypatch):
    # the zygote imports a module while collection goes on, not after it: a module's name reaches it before this
    # process imports the module (pytest's own name for it), and the names of the checks' modules after collection
    from tdiff.execute import forkserver

    events: list = []
    monkeypatch.setattr(forkserver, "preload", lambda modules: events.append(("preload", tuple(modules))))
    monkeypatch.setattr(forkserver, "_collect_events", events, raising=False)
    kernel_project(pytester, KERNELS + "\nfrom tdiff.execute import forkserver\nforkserver._collect_events.append("
                   "('import', __name__))\n", tdiff_isolation="process")
    pytester.path.joinpath("kernels", "first.py").write_text(KERNELS)  # (collected before ops.py)
    result = pytester.runpytest_inprocess("--tdiff", "--collect-only", "-q")
    assert "kernels/first.py::twice[tdiff]" in result.stdout.str()
    assert events.index(("preload", ("kernels.ops",))) < events.index(("import", "kernels.ops")), events
    assert events[-1] == ("preload", ("kernels.first", "kernels.ops")), events  # (and all of them at the end)


def test_options_from_ini_and_command_line(project):
    result = project.runpytest_inprocess("--tdiff", "-k", "twice", "-v", "--tdiff-examples", "7")
    result.stdout.fnmatch_lines(["*twice?tdiff? PASSED (7 cases*"])
    bad = project.runpytest_inprocess("--tdiff", "--tdiff-backends", "interpreter,gpu")
    assert "unknown backend 'gpu'" in bad.stderr.str()


def test_xdist_spreads_checks_and_merges_results(project):
    import json

    # (a pytest of its own: the controller is what is tested, and this process may itself be an xdist worker)
    result = project.runpytest_subprocess("--tdiff", "-n", "2", "--tdiff-corpus=none", "--tdiff-repro-dir=none",
                                          "--tdiff-json", "run.json", "--tdiff-isolation", "process")
    result.assert_outcomes(passed=2, failed=1)
    out = result.stdout.str()
    assert "FAILED  kernels.ops::broken[tdiff]: disagrees with reference" in out
    assert "tdiff: 2 checks" in out and "; 1 passed, 1 failed; " in out
    checks = {c["id"]: c for c in json.loads((project.path / "run.json").read_text())["checks"]}
    twice = checks["kernels.ops::twice[tdiff]"]  # (a worker's record, carried to the controller)
    assert twice["cases"] == 4 and twice["outcome"] == "PASSED"
    assert checks["kernels.ops::broken[tdiff]"]["outcome"] == "FAILED"


def test_xdist_workers_are_pinned_to_gpus_round_robin(monkeypatch):
    from tdiff.execute.gpus import gpu_for_worker as _gpu_for

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    assert [_gpu_for(i) for i in range(5)] == [0, 1, 0, 1, 0]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    assert [_gpu_for(i) for i in range(3)] == [3, 3, 3]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert _gpu_for(1) is None


def test_worker_lanes_get_their_gpu(monkeypatch):
    from tdiff.execute.workers import Pool

    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    pool = Pool(gpu=1)
    assert pool._env("gpu")["CUDA_VISIBLE_DEVICES"] == "1"
    assert pool._env("cpu")["CUDA_VISIBLE_DEVICES"] == ""


def test_compile_budget_option_and_the_compiles_in_the_summary(project):
    result = project.runpytest_inprocess(  # (-v: each check's own lines, its notes among them)
        "--tdiff", "-v", "-k", "twice", "--tdiff-examples", "12", "--tdiff-max-compiles", "1",
        "--tdiff-backends", "tests.faulty:FakeCompiling,interpreter", "--tdiff-corpus=none", "--tdiff-repro-dir=none")
    result.assert_outcomes(passed=1)
    out = result.stdout.str()
    assert "note: compile budget (1 compiles) reached" in out
    assert re.search(r"tdiff: 1 checks, 12 cases \(12 judged\); .*; \d+ specializations compiled in [\d.]+s", out), out
    bad = project.runpytest_inprocess("--tdiff", "--tdiff-max-compiles", "-1")
    assert "--tdiff-max-compiles must be 0 (no limit) or more" in bad.stderr.str()


XFAIL_KERNELS = KERNELS + textwrap.dedent('''
    import pytest


    def _raise(x):
        raise ValueError("the strategy broke")


    XF = [pytest.mark.xfail(strict=True, reason="a known divergence")]
    tdiff.check(launch=launch, reference=lambda x: x * 2, x=tst.tensors(shape=(tst.sizes(block=32),)), marks=XF,
                name="expected")(broken)
    tdiff.check(launch=launch, reference=lambda x: x * 2, x=tst.tensors(shape=(tst.sizes(block=32),)).map(_raise),
                marks=XF, name="strategy_raises")(broken)
''')


def test_an_xfail_check_that_errors_fails_instead_of_xfailing(pytester):
    # an xfail mark expects a divergence: a check whose own run errors (here its strategy raises) is not one
    kernel_project(pytester, XFAIL_KERNELS, tdiff_examples=4, tdiff_profile="ci", tdiff_shrink_budget=5,
                   tdiff_reduce_budget=0, tdiff_isolation="none")
    result = pytester.runpytest_inprocess("--tdiff", "-k", "expected or strategy_raises", "-rxXf",
                                           "--tdiff-corpus=none", "--tdiff-repro-dir=none")
    result.assert_outcomes(failed=1, xfailed=1)
    result.stdout.fnmatch_lines(["*XFAIL*broken*expected*", "*FAILED*broken*strategy_raises*"])
    assert "the strategy broke" in result.stdout.str()
