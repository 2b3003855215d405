"""Kernel coverage: the lines of a kernel (and its device functions) that no case ran are named in
the check's summary and JUnit properties, and fail the check under `--tdiff-coverage require`."""

from __future__ import annotations

import inspect

import pytest

import tdiff
from tdiff.record.summary import check_lines, record

from . import coverage_kernels as CK
from .projects import import_all_of_tdiff

pytest_plugins = ["pytester"]

import_all_of_tdiff()  # (before the in-process pytest runs below: see its docstring)

OPTS = tdiff.RunOptions(profile="ci", max_examples=8, isolation="none", corpus_dir=None, repro_dir=None)


def _line(fn, text: str) -> int:
    lines, first = inspect.getsourcelines(fn.fn)
    return first + next(i for i, line in enumerate(lines) if text in line)


def test_a_branch_the_sizes_never_reach_is_named_and_the_check_passes():
    (res,) = tdiff.verify(CK.long_path_kernel, options=OPTS)
    assert res.status == "passed"
    (text,) = res.uncovered()
    a, b = _line(CK.long_path_kernel, "y = x + x"), _line(CK.long_path_kernel, "y = y + 0.0")
    assert f"lines {a}-{b} (the body of `if n > 1000` (line {a - 1}))" in text
    assert text.startswith("tests/coverage_kernels.py: ") and text.endswith("of long_path_kernel")
    # the device function ran, every line of it: not named
    assert not any("_twice" in t for t in res.uncovered())
    lines = check_lines(record(res))
    assert any(line.strip().startswith("kernel code no case ran: tests/coverage_kernels.py") for line in lines)


def test_require_fails_a_check_with_code_no_case_ran():
    with pytest.raises(tdiff.DivergenceError, match=r"--tdiff-coverage require: kernel code no case ran: .*"
                                                    r"the body of `if n > 1000`"):
        tdiff.verify(CK.long_path_kernel, options=OPTS.with_(coverage="require"))


def test_a_bug_on_a_path_no_case_reaches_is_not_a_silent_pass():
    (res,) = tdiff.verify(CK.long_path_bug, options=OPTS)  # it passes: no case reaches the bug...
    (text,) = res.uncovered()  # ...but the summary says which lines never ran
    assert f"line {_line(CK.long_path_bug, 'y = x * 3')} " in text


def test_every_line_run_reports_nothing():
    from suites import softmax

    (res,) = tdiff.verify(softmax.softmax_kernel, options=OPTS.with_(coverage="require"))
    assert res.status == "passed" and res.uncovered() == [] and res.lines_run


def test_coverage_option_is_validated():
    from tdiff import options

    with pytest.raises(ValueError, match="--tdiff-coverage must be report or require"):
        options.build({"coverage": "all"}.get, __import__("pathlib").Path("."))


BRANCHY = '''
import torch
import triton
import triton.language as tl

import tdiff
from tdiff import strategies as tst


def launch(kernel, x):
    out = torch.empty_like(x)
    kernel[(triton.cdiv(x.numel(), 16),)](x, out, x.numel(), BLOCK=16)
    return out


@tdiff.check(launch=launch, reference=lambda x: x * 2,
             x=tst.tensors(shape=(tst.sizes(block=16, max_blocks=2),), layouts=["contiguous"]))
@triton.jit
def branchy(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    if n > 5000:
        x = x + 0.0
    tl.store(out_ptr + offs, x * 2, mask=offs < n)
'''


def test_pytest_reports_code_no_case_ran_in_the_summary_and_junit(pytester):
    from tests.projects import kernel_project

    # (pytest in this process, checking in it too (isolation none): what is tested is the summary and the junit
    # properties; a worker zygote outliving this project would keep its kernels.ops for another test's)
    kernel_project(pytester, BRANCHY, tdiff_examples=4, tdiff_profile="ci", tdiff_isolation="none")
    result = pytester.runpytest_inprocess("--tdiff", "--junitxml=report.xml", "--tdiff-corpus=none",
                                          "--tdiff-repro-dir=none")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*kernel code no case ran: kernels/ops.py: line 23 (the body of `if n > 5000` "
                                 "(line 22)) of branchy*"])
    xml = (pytester.path / "report.xml").read_text()
    assert 'name="tdiff_never_ran"' in xml and "the body of `if n &gt; 5000`" in xml
    strict = pytester.runpytest_inprocess("--tdiff", "--tdiff-coverage", "require", "--tdiff-corpus=none",
                                          "--tdiff-repro-dir=none")
    strict.assert_outcomes(failed=1)
    assert "--tdiff-coverage require: kernel code no case ran" in strict.stdout.str()
