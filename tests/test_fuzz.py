"""tdiff checks as plain hypothesis tests (`--tdiff-fuzz-targets`), the form HypoFuzz fuzzes: a
divergence raises tdiff's report and leaves one corpus entry (the smallest case) that `tdiff replay`
fails on; a bounded `hypothesis fuzz` run finds a planted bug."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import hypothesis
import pytest
import torch
import triton
import triton.language as tl
from hypothesis import settings

import tdiff
from tdiff import cli
from tdiff import strategies as tst
from tdiff.core.settings import hypothesis_settings
from tdiff.drive.case_judge import CaseJudge
from tdiff.drive.fuzz import FuzzDivergence, hypothesis_test
from tdiff.drive.pipeline import kernel_thresholds
from tdiff.execute.compile_budget import layout_of

from . import fuzz_kernels as FK

ROOT = Path(__file__).resolve().parents[1]
pytest_plugins = ["pytester"]


def _plugin_args() -> list[str]:
    """`-p tdiff.plugin` unless tdiff is installed (its entry point loads the plugin)."""
    from importlib.metadata import entry_points

    installed = any(ep.value.startswith("tdiff.plugin") for ep in entry_points(group="pytest11"))
    return [] if installed else ["-p", "tdiff.plugin"]


def _check():
    (c,) = tdiff.checks_of(FK.doubles_wrongly_past_five)
    return c


def test_a_check_as_a_hypothesis_test_reports_and_keeps_the_smallest_case(tmp_path):
    # (no kernel reduction: not what this tests, and the final example's reproducer paid up to 30 s for it)
    opts = tdiff.RunOptions(isolation="none", corpus_dir=tmp_path / "corpus", repro_dir=tmp_path / "out",
                            reduce_budget=0)
    runner = tdiff.Runner(opts)
    # (no example database: the search finds, then shrinks, a failure)
    test = hypothesis_test(_check(), lambda: runner, settings=settings(database=None))
    assert hasattr(test, "hypothesis")  # what HypoFuzz collects
    assert test._hypothesis_internal_use_settings.deadline is None  # (a first compile takes up to a second)
    with pytest.raises(FuzzDivergence, match="disagrees with reference"):
        test()
    entries = [p for p in (tmp_path / "corpus").rglob("entry.json")]
    assert len(entries) == 1, entries  # hypothesis shrank: each smaller case replaced the entry before it
    assert list((tmp_path / "out").rglob("repro.py")), "the final example's reproducer"
    assert cli.main(["replay", str(tmp_path / "corpus")]) == 1  # CI replays it: still failing


def test_pytest_collects_checks_as_hypothesis_functions(pytester):
    pytester.syspathinsert(str(ROOT))
    pytester.makeini("[pytest]\ntdiff_paths = suites\n")
    pytester.mkdir("suites")
    (pytester.path / "suites" / "planted.py").write_text((ROOT / "tests" / "fuzz_kernels.py").read_text())
    args = [*_plugin_args(), "--tdiff", "--tdiff-fuzz-targets", "--tdiff-isolation", "none", "--tdiff-corpus", "none",
            "--tdiff-repro-dir", "none", "suites/planted.py"]
    result = pytester.runpytest(*args, "--co", "-q")
    result.stdout.fnmatch_lines(["*planted.py::doubles_wrongly_past_five*"])
    ran = pytester.runpytest(*args, "-q")
    ran.assert_outcomes(failed=1)
    ran.stdout.fnmatch_lines(["*FuzzDivergence*", "*disagrees with reference*"])


@pytest.mark.skipif(not Path(sys.executable).with_name("hypothesis").exists(), reason="HypoFuzz is not installed")
def test_a_bounded_hypofuzz_run_finds_a_planted_bug(tmp_path):
    pytest.importorskip("hypofuzz")
    corpus = tmp_path / "run" / "corpus"  # (new entries go to the run directory's corpus)
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "PYTEST_XDIST_WORKER", "PYTEST_ADDOPTS")}
    env["HYPOTHESIS_STORAGE_DIRECTORY"] = str(tmp_path / "hyp")
    env["PYTHONPATH"] = str(ROOT)
    cmd = [str(Path(sys.executable).with_name("hypothesis")), "fuzz", "-n", "1", "--no-dashboard", "--",
           *_plugin_args(), "--tdiff", "--tdiff-fuzz-targets", "--tdiff-isolation", "none",
           "--tdiff-run-dir", str(tmp_path / "run"), "--tdiff-repro-dir", "none", "tests/fuzz_kernels.py"]
    proc = subprocess.Popen(cmd, cwd=str(ROOT), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and not list(corpus.rglob("entry.json")) and proc.poll() is None:
            time.sleep(1)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
        out = proc.communicate(timeout=30)[0].decode(errors="replace")
    assert list(corpus.rglob("entry.json")), out[-3000:]
    # HypoFuzz replays no final example, so no reproducer was written: replay writes it from the corpus
    assert cli.main(["replay", str(corpus), "--repro-dir", str(tmp_path / "out")]) == 1
    assert list((tmp_path / "out").rglob("repro.py"))


def _launch_rows(kernel, x):
    out = torch.empty_like(x)
    kernel[(triton.cdiv(x.numel(), 16),)](x, out, x.numel(), BLOCK=16)
    return out


@tdiff.check(launch=_launch_rows, reference=lambda x: x * 2,
             x=tst.tensors(shape=(tst.sizes(block=16, max_blocks=3),), dtype=["float32", "float16"],
                           layouts=["contiguous", "offset"]))
@triton.jit
def doubles_past_a_threshold(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    y = x + x if n > 24 else x * 2  # a threshold inside the drawn sizes: both sides right
    tl.store(out_ptr + offs, y, mask=offs < n)


def _drawn(monkeypatch, run) -> list[tuple]:
    """The cases `run()` judges, as their layouts and values."""
    seen: list[tuple] = []
    verdict = CaseJudge.verdict

    def recording(self, case, final=False, opinions=None):
        seen.append((layout_of(case), tuple(v.values().tobytes() for v in case.tensors().values())))
        return verdict(self, case, final=final, opinions=opinions)

    monkeypatch.setattr(CaseJudge, "verdict", recording)
    run()
    monkeypatch.setattr(CaseJudge, "verdict", verdict)
    return seen


def test_a_fuzz_target_draws_the_cases_the_search_draws(monkeypatch):
    # one strategy for both: the search's (with the kernel's thresholds) is the fuzz target's, case for case
    (check,) = tdiff.checks_of(doubles_past_a_threshold)
    opts = tdiff.RunOptions(profile="ci", seed=7, max_examples=12, plan=0, isolation="none", corpus_dir=None,
                            repro_dir=None)
    assert kernel_thresholds(check, opts)  # (the check has thresholds the sizes reach)
    runner = tdiff.Runner(opts)

    def search(options):
        return lambda: tdiff.Runner(options).run_check(check)

    def fuzz():
        test = hypothesis_test(check, lambda: runner, options=opts,
                               settings=hypothesis_settings(opts, check.max_examples))
        hypothesis.seed(7)(test)()

    searched = _drawn(monkeypatch, search(opts))
    fuzzed = _drawn(monkeypatch, fuzz)
    assert len(searched) == 12 and fuzzed[:12] == searched
    assert _drawn(monkeypatch, search(opts.with_(thresholds=False))) != searched  # (the thresholds change the draws)
