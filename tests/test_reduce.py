"""Kernel reduction: a divergence's kernel reduced on its shrunk case to the code that still fails the same way
(tdiff.record.reduce, tdiff.drive.reduce_kernel), and the reproducer that carries it."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch

import tdiff
from tdiff import options as options_mod
from tdiff.core import kernels
from tdiff.core.backend_spec import BackendSpec
from tdiff.core.case import Case
from tdiff.core.settings import RunOptions
from tdiff.declaration import checks_of
from tdiff.drive import reduce_kernel as rk
from tdiff.drive.runner import Runner
from tdiff.judge.verdict import Verdict
from tdiff.record.reduce import candidates, code_lines, collect
from tdiff.record.reduce import ddmin as ddmin_mod
from tdiff.record.reduce.build import DroppingJIT
from tdiff.record.reduce.build import build as build_kernel
from tdiff.strategies import tensor_arg
from tests import reduce_kernels as R

BUG = "w_ptr + (cols - start)"  # the planted bug's expression (tests/reduce_kernels.py: BUGGY_LINE)


def _judge(kernel):
    check = checks_of(kernel)[0]
    runner = Runner(RunOptions(isolation="none", corpus_dir=None, repro_dir=None))
    return runner.judge(check)


def _rows_case(cols=17):
    x = torch.arange(1, cols + 1, dtype=torch.float32).reshape(1, cols)
    return Case({"x": tensor_arg(x), "w": tensor_arg(torch.arange(1, cols + 1, dtype=torch.float32))},
                dims={"R": 1, "C": cols})


def _offset_case(n=17):
    return Case({"x": tensor_arg(torch.arange(n, dtype=torch.float32))})


def _kernel_text(sources):
    return next(iter(sources.values()))


# ------------------------------------------------------------------ reduction of a planted bug

def test_planted_bug_reduces_to_the_lines_that_carry_it():
    assert BUG in R.BUGGY_LINE
    judge = _judge(R.fused_rows)
    case = _rows_case()
    verdict, ev = judge.verdict(case, final=True)
    assert verdict.label == "disagrees with reference" and verdict.targets == ("returned",)
    red = rk.reduce_kernel(judge, case, verdict, ev, budget=60)
    assert not isinstance(red, str), red
    original = collect(R.fused_rows)
    before = sum(code_lines(f.source) for f in original.values())
    kernel = _kernel_text(red.reduction.sources)
    assert red.reduction.before == before
    assert red.reduction.after == code_lines(kernel) <= before / 4, kernel
    assert BUG in kernel, kernel
    assert not red.reduction.out_of_time
    # the reduced kernel, judged again, fails the same way on the same outputs
    assert red.verdict.label == verdict.label and red.verdict.targets == verdict.targets
    assert "kernel reduced from 62 to" in red.describe()
    assert "_gelu (original)" in red.diff and "+++ (removed)" in red.diff


def test_reproducer_carries_the_reduced_kernel_and_its_diff(tmp_path):
    opts = RunOptions(profile="ci", corpus_dir=None, repro_dir=tmp_path / "out", isolation="none")
    with pytest.raises(tdiff.DivergenceError) as info:
        tdiff.verify(R.fused_rows, options=opts)
    report = str(info.value)
    assert "kernel reduced from 62 to" in report
    div = info.value.results[0].divergences[0]
    assert div.kernel_reduced.startswith("kernel reduced from 62 to")
    text = Path(div.repro_path).read_text()
    kernel = text[text.index("@triton.jit\ndef fused_rows"):text.index("KERNELS = ")]
    assert BUG in kernel and "HAS_BIAS" not in kernel and "_gelu" not in kernel
    assert code_lines(kernel) - 1 <= 62 / 4  # (the decorator line)
    # the parameters the reduced body no longer reads are gone from its `def` and from the launch it replays
    signature = kernel[kernel.index("def fused_rows("):kernel.index("):")]
    for gone in ("b_ptr", "res_ptr", "stats_ptr", "HAS_BIAS", "STORE_STATS", "ACTIVATION"):
        assert gone not in signature, signature
    launches = text[text.index("LAUNCHES = "):]
    launches = launches[:launches.index("\n")]
    assert "HAS_BIAS" not in launches and "STORE_STATS" not in launches, launches
    assert "(--live is not available" in text  # (the module's kernel takes the original's arguments)
    assert "# --- fused_rows (original)" in text and "# -            if HAS_BIAS:" in text
    # shrinking zeroed most values: the guard case (fresh values) keeps the reduced kernel computing what the
    # original computes, so the loads of x and the product stay
    assert "tl.load(x_row + cols" in kernel or "tl.load(x_ptr + cols" in kernel
    # (and it reproduces: tdiff keeps a reduced kernel's reproducer only once it has run it in a fresh process and
    # seen it exit 1 with the same divergence, else it writes the whole kernel; record/repro/verify.py, tested in
    # test_mutants_killed.py)


def test_reduction_off_writes_the_whole_kernel(tmp_path):
    opts = RunOptions(profile="ci", corpus_dir=None, repro_dir=tmp_path / "out", isolation="none", reduce_budget=0)
    with pytest.raises(tdiff.DivergenceError) as info:
        tdiff.verify(R.off_by_one, options=opts)
    div = info.value.results[0].divergences[0]
    assert "kernel reduced" not in str(info.value) and "kernel not reduced" not in str(info.value)
    assert div.kernel_reduced == ""
    text = Path(div.repro_path).read_text()
    assert "(original)" not in text and '"""Every output one too large' in text


# ------------------------------------------------------------------ the oracle rejects other verdicts

def test_a_deletion_that_changes_the_verdict_kind_is_rejected():
    judge = _judge(R.off_by_one)
    case = _offset_case()
    verdict, ev = judge.verdict(case, final=True)
    assert verdict.label == "disagrees with reference" and verdict.kind == "values"
    oracle = rk.Oracle(judge, case, judge.verdict(case)[0], ev.outcomes, timeout=30)
    functions = collect(R.off_by_one)
    key = next(iter(functions))
    src = functions[key].source
    unmasked = src.replace("tl.store(out_ptr + offs, x * 2 + 1, mask=mask)", "tl.store(out_ptr + offs, x * 2 + 1)")
    no_mask_line = src.replace("    mask = offs < n\n", "")
    assert unmasked != src and no_mask_line != src
    # the obvious deletions change what the case shows: a write out of bounds, a crash
    got = oracle.candidate({key: unmasked}).verdict(case)[0]
    assert got.failed and got.kind != verdict.kind, got
    crash = oracle.candidate({key: no_mask_line}).verdict(case)[0]
    assert crash.kind == "error", crash
    assert not oracle({key: unmasked}) and not oracle({key: no_mask_line})
    # a bug that only changes its value is still the same verdict, but not the same outputs
    assert not oracle({key: src.replace("x * 2 + 1", "x * 2 + 2")})
    assert oracle({key: src.replace('    """Every output', '    """Any output')})
    # the reduction keeps the mask and the bug
    red = rk.reduce_kernel(judge, case, verdict, ev, budget=60)
    kernel = _kernel_text(red.reduction.sources) if not isinstance(red, str) else src
    assert "mask=mask" in kernel and "+ 1" in kernel, kernel


def test_specialising_a_constexpr_that_changes_the_outputs_is_rejected():
    judge = _judge(R.fused_rows)
    case = _rows_case()
    verdict, ev = judge.verdict(case)
    oracle = rk.Oracle(judge, case, verdict, ev.outcomes, timeout=30)
    functions = collect(R.fused_rows)
    key = next(iter(functions))
    src = functions[key].source
    assert oracle({key: src.replace("if ONE_TILE:", "if False:")})  # the case's value: the looped path
    assert not oracle({key: src.replace("if ONE_TILE:", "if True:")})  # the one-tile path has no bug


# ------------------------------------------------------------------ the time budget

def test_the_budget_stops_reduction_with_the_best_kernel_so_far(monkeypatch):
    judge = _judge(R.fused_rows)
    case = _rows_case()
    verdict, ev = judge.verdict(case, final=True)
    clock = [0.0]
    real = rk.Oracle.__call__

    def costly(self, sources):  # every candidate costs one second of a clock the loop reads
        clock[0] += 1.0
        return real(self, sources)

    monkeypatch.setattr(rk.Oracle, "__call__", costly)
    monkeypatch.setattr(ddmin_mod.time, "perf_counter", lambda: clock[0])
    monkeypatch.setattr(rk.time, "perf_counter", lambda: clock[0])
    red = rk.reduce_kernel(judge, case, verdict, ev, budget=12)
    assert not isinstance(red, str), red
    r = red.reduction
    assert r.out_of_time and r.tried <= 12 and r.kept > 0
    assert r.after < r.before  # the best so far: smaller, and it still fails the same way
    assert "stopped at the time budget" in red.describe()
    assert red.verdict.label == verdict.label
    full = rk.reduce_kernel(judge, case, verdict, ev, budget=10_000)
    assert full.reduction.after < r.after and not full.reduction.out_of_time


def test_a_budget_too_small_for_one_candidate_keeps_the_kernel():
    judge = _judge(R.off_by_one)
    case = _offset_case()
    verdict, ev = judge.verdict(case, final=True)
    got = rk.reduce_kernel(judge, case, verdict, ev, budget=1e-6)
    assert isinstance(got, str) and "stopped at the time budget" in got and "0 candidates" in got


# ------------------------------------------------------------------ the compiled backend, without a GPU

def _reduced_as_compiled_wrong(kernel):
    """The kernel reduced here (no GPU) on the offset case, as if a GPU had recorded `compiled wrong` on it."""
    judge = _judge(kernel)
    case = _offset_case()
    _, ev = judge.verdict(case)
    compiled = Verdict("compiled wrong", pair=("compiled", "interpreter"), kind="values", targets=("returned",),
                       sides={s: BackendSpec(s).role for s in ("compiled", "interpreter")})  # (recorded on a GPU)
    red = rk.reduce_kernel(judge, case, compiled, ev, budget=120)
    assert not isinstance(red, str), red
    return judge, case, compiled, red


def test_a_compiled_verdict_is_reduced_conservatively_without_a_gpu():
    judge, case, compiled, red = _reduced_as_compiled_wrong(R.off_by_one)
    assert red.compiled_unchecked and red.verdict is None
    assert "the compiled verdict was not rechecked here" in red.describe()
    kernel = _kernel_text(red.reduction.sources)
    assert "+ 1" in kernel and "mask=mask" in kernel
    assert rk.compiles(red.check, case)
    key = next(iter(collect(R.off_by_one)))
    oracle = rk.Oracle(judge, case, compiled, {}, 30)
    body = kernel.index("\n") + 1
    broken = kernel[:body] + "    unused = [i for i in range(2)]\n" + kernel[body:]  # Python, not Triton
    assert oracle.candidate({key: broken}).run(case, [judge.spec(BackendSpec("interpreter"))])[0].error is None
    assert not rk.compiles(oracle.candidate({key: broken}).check, case)
    # so the oracle rejects a candidate that interprets as the original does but would not compile
    here, again = judge.verdict(case)
    strict = rk.Oracle(judge, case, here, again.outcomes, 30, interpreter_only=True, targets=("returned",))
    src = collect(R.off_by_one)[key].source
    body = src.index('"""\n') + 4
    assert strict({key: src.replace("Every output", "Each output")})
    assert not strict({key: src[:body] + "    unused = [i for i in range(2)]\n" + src[body:]})


# ------------------------------------------------------------------ candidates and options

def test_candidates_keep_the_text_they_do_not_touch():
    src = ("def k(x_ptr, FLAG: tl.constexpr):\n"
           "    a = 1  # kept comment\n"
           "    # a comment line\n"
           "    if FLAG:\n"
           "        b = 2\n"
           "    elif a > 0:\n"
           "        b = 3\n"
           "    else:\n"
           "        b = 4\n"
           "    for i in range(0, 8, 2):\n"
           "        tl.store(x_ptr + i, b, mask=a > 0)\n")
    made = {e.what: e.make() for name, _ in candidates.PASSES
            for e in candidates.edits(name, src, {"FLAG": False})}
    assert "    # a comment line\n" not in made["comments and blank lines dropped"]
    assert "a = 1  # kept comment" in made["comments and blank lines dropped"]
    assert "    if False:\n" in made["constexpr FLAG specialised to False"]
    elif_ = made["line 4: if replaced by its else"]
    assert "    if a > 0:\n        b = 3\n    else:\n        b = 4\n" in elif_ and "FLAG" not in elif_.split("\n", 1)[1]
    assert "    b = 2\n    for" in made["line 4: if replaced by its body"]
    first = made["line 10: loop replaced by its first iteration"]
    assert "    i = 0\n    tl.store(x_ptr + i, b, mask=a > 0)\n" in first
    assert "range(0, (0) + (2), 2)" in made["line 10: loop cut to one iteration"]
    assert "tl.store(x_ptr + i, b)\n" in made["line 11: `mask=` dropped"]
    assert "tl.store(x_ptr, b, mask=a > 0)" in made["line 11: `x_ptr + i` -> `x_ptr`"]
    for text in made.values():
        compile(text, "<candidate>", "exec")


def test_reduce_budget_option():
    def build(**given):
        return options_mod.build(lambda name: given.get(name.replace("-", "_")), Path("."))

    assert build().reduce_budget == 30.0
    assert build(reduce_budget="5").reduce_budget == 5.0
    assert build(reduce_budget="0").reduce_budget == 0.0
    with pytest.raises(ValueError, match="reduce-budget"):
        build(reduce_budget="-1")


def test_unused_parameters_are_dropped_and_read_ones_kept():
    src = ("def k(\n"
           "    x_ptr,\n"
           "    stride,  # unused\n"
           "    out_ptr,\n"
           "    n,\n"
           "    FLAG: tl.constexpr,\n"
           "    BLOCK: tl.constexpr = 16,\n"
           "):\n"
           "    n = n + 1\n"
           "    tl.store(out_ptr, tl.load(x_ptr) + n)\n")
    made = {e.what: e.make() for e in candidates.edits("parameters", src, {})}
    assert set(made) == {"unused parameters stride, FLAG, BLOCK dropped", "unused parameter stride dropped",
                         "unused parameter FLAG dropped", "unused parameter BLOCK dropped"}
    assert made["unused parameters stride, FLAG, BLOCK dropped"].startswith(
        "def k(\n    x_ptr,\n    out_ptr,\n    n,\n):\n")
    assert "    FLAG: tl.constexpr,\n):" in made["unused parameter BLOCK dropped"]
    one_line = "def k(a, b, c: tl.constexpr, d=3):\n    tl.store(a, 1)\n"
    assert candidates.edits("parameters", one_line, {})[0].make() == "def k(a):\n    tl.store(a, 1)\n"
    for text in made.values():
        compile(text, "<candidate>", "exec")


def test_a_kernel_without_its_unused_parameters_takes_the_original_launch():
    # the launch (user code) passes every original argument; the rebuilt kernel drops those it lost
    functions = collect(R.fused_rows)
    key = next(iter(functions))
    src = functions[key].source
    kept = ("x_ptr", "w_ptr", "out_ptr", "stride_x", "stride_out", "n_cols", "scale", "HAS_BIAS", "HAS_RESIDUAL",
            "ACTIVATION", "STORE_STATS", "ONE_TILE", "BLOCK")
    fewer = src.replace("b_ptr, res_ptr, ", "").replace("stats_ptr, ", "")
    assert fewer != src
    built = build_kernel(R.fused_rows, {key: fewer}, functions)
    assert isinstance(built, DroppingJIT) and tuple(kernels.arg_names(built)) == kept
    assert built.dropped == {"b_ptr", "res_ptr", "stats_ptr"}
    judge = _judge(R.fused_rows)
    case = _rows_case()
    verdict, ev = judge.verdict(case)
    oracle = rk.Oracle(judge, case, verdict, ev.outcomes, timeout=30)
    interpreter = [judge.spec(BackendSpec("interpreter"))]
    want = oracle.candidate({}).run(case, interpreter)[0]
    got = oracle.candidate({key: fewer}).run(case, interpreter)[0]
    assert got.error is None and rk.same_outputs({"i": got}, {"i": want}, case, None)
    # what the launch records (the reproducer's launch) is the reduced kernel's, with its own arguments
    assert len(want.launches[0].args) + len(want.launches[0].kwargs) == 16
    assert len(got.launches[0].args) + len(got.launches[0].kwargs) == 13
    assert oracle({key: fewer})
    # a parameter the body reads cannot go: the candidate fails and the oracle rejects it
    broken = src.replace("w_ptr, b_ptr", "b_ptr")
    assert oracle.candidate({key: broken}).run(case, interpreter)[0].error is not None
    assert not oracle({key: broken})


def test_an_expected_failure_is_confirmed_by_its_first_divergence_in_a_pytest_run(tmp_path):
    # an xfail check (a known finding) in a pytest run: its first divergence confirms it, neither shrunk nor
    # reduced, and no reproducer; `tdiff replay` and pytest --runxfail (shrink_expected, reduce_expected) do all three
    check = checks_of(R.fused_rows)[0]
    xfail = dataclasses.replace(check, marks=(pytest.mark.xfail(strict=True, reason="a known finding"),))
    assert xfail.expects_failure()
    opts = RunOptions(profile="ci", corpus_dir=None, repro_dir=tmp_path / "out", isolation="none")
    result = Runner(opts).run_check(xfail)
    div = result.divergences[0]
    assert result.status == "failed" and div.verdict.failed
    assert div.repro_path is None and not (tmp_path / "out").exists()
    assert "reproducer: not written (an expected divergence, as found: pytest --runxfail" in div.report, div.report
    # (hypothesis runs the failing case once more to report it: no shrink step)
    assert div.shrink is None and result.search_shrinks <= 1, (div.shrink, result.search_shrinks)
    full = opts.with_(repro_dir=tmp_path / "again", reduce_expected=True, shrink_expected=True)
    shrunk = Runner(full).run_check(xfail)
    again = shrunk.divergences[0]
    assert again.kernel_reduced.startswith("kernel reduced from 62 to"), again.kernel_reduced
    assert again.repro_path is not None and again.shrink is not None and shrunk.search_shrinks > 1


def test_a_name_bound_once_to_another_is_replaced_by_it():
    src = ("def k(x_ptr, out_ptr):\n"
           "    base = x_ptr\n"
           "    acc = 0.0\n"
           "    for i in range(2):\n"
           "        acc += tl.load(base + i)\n"
           "    eps = -1e-6\n"
           "    tl.store(out_ptr, acc + eps)\n")
    made = {e.what: e.make() for e in candidates.edits("alias", src, {})}
    # `acc` is rebound (`+=`): never replaced by its first value
    assert set(made) == {"line 2: `base` replaced by `x_ptr`", "line 6: `eps` replaced by `(-1e-6)`"}
    assert made["line 2: `base` replaced by `x_ptr`"] == src.replace("    base = x_ptr\n", "").replace("base + i",
                                                                                                  "x_ptr + i")
    assert "    tl.store(out_ptr, acc + (-1e-6))\n" in made["line 6: `eps` replaced by `(-1e-6)`"]
    assert "eps" not in made["line 6: `eps` replaced by `(-1e-6)`"]


def test_a_name_read_once_is_written_where_it_is_read():
    src = ("def k(x_ptr, out_ptr, n):\n"
           "    offs = tl.arange(0, 4)\n"
           "    x = tl.load(x_ptr + offs)\n"
           "    s = x + 1\n"
           "    acc = 0.0\n"
           "    for i in range(2):\n"
           "        acc += s\n"
           "    tl.store(out_ptr + offs, s * 2 + acc)\n"
           "    tl.store(out_ptr, offs)\n")
    made = {e.what: e.make() for e in candidates.edits("temporary", src, {})}
    # `offs` and `s` are read twice, `acc` is rebound: only `x` goes
    assert set(made) == {"line 3: `x` inlined where it is read"}
    assert "    s = tl.load(x_ptr + offs) + 1\n" in made["line 3: `x` inlined where it is read"]
    # parentheses where they change the meaning; none where a line would grow past MAX_LINE
    src = "def k(a, b, out):\n    s = a + b\n    tl.store(out, s * 2)\n"
    assert candidates.edits("temporary", src, {})[0].make() == "def k(a, b, out):\n    tl.store(out, (a + b) * 2)\n"
    long = "x" * (candidates.MAX_LINE - 20)
    assert candidates.edits("temporary", f"def k(a, out):\n    s = a + {long}\n    tl.store(out, s * 2)\n", {}) == []


def test_a_def_over_several_lines_is_written_on_one():
    src = "def k(\n    x_ptr,  # in\n    n,\n    BLOCK: tl.constexpr = 4,\n):\n    tl.store(x_ptr, n)\n"
    (edit,) = candidates.edits("signature", src, {})
    assert edit.make() == "def k(x_ptr, n, BLOCK: tl.constexpr = 4):\n    tl.store(x_ptr, n)\n"
    assert candidates.edits("signature", edit.make(), {}) == []  # (one line already)
    many = ", ".join(f"p{i}" for i in range(40))
    assert candidates.edits("signature", f"def k(\n    {many},\n):\n    pass\n", {}) == []  # (too long)


def test_outputs_that_do_not_diverge_are_not_required():
    judge = _judge(R.two_outputs)
    case = _offset_case()
    verdict, ev = judge.verdict(case, final=True)
    assert verdict.label == "disagrees with reference" and verdict.targets == ("returned[0]",)
    red = rk.reduce_kernel(judge, case, verdict, ev, budget=60)
    assert not isinstance(red, str), red
    kernel = _kernel_text(red.reduction.sources)
    # the second output's computation and store go (it is not what fails), its parameter with them
    assert "sq_ptr" not in kernel and "x * x" not in kernel and "* 2 + 1" in kernel, kernel
    assert red.verdict.targets == ("returned[0]",)
    assert "judged on `returned[0]` alone: its other outputs may differ" in red.describe()


def test_a_compiled_verdict_reduced_without_a_gpu_keeps_the_stores_behind_its_outputs():
    # (liger's one-class cross entropy: the interpreter's loss is the 0 the output held before the kernel ran, so
    # a kernel reduced to `pass` gave the same interpreter outputs; the compiled one was not zero)
    *_, red = _reduced_as_compiled_wrong(R.cancels)
    kernel = _kernel_text(red.reduction.sources)
    assert "tl.store(out_ptr" in kernel, kernel


def test_a_candidate_much_slower_than_the_original_is_rejected():
    # (a reduction is smaller, not slower: a program looping over every row once its share is cut passed on the
    # case and then timed out in the final verdict's reruns)
    judge = _judge(R.off_by_one)
    case = _offset_case()
    verdict, ev = judge.verdict(case)
    key = next(iter(collect(R.off_by_one)))
    src = collect(R.off_by_one)[key].source
    oracle = rk.Oracle(judge, case, verdict, ev.outcomes, 30)
    body = src.index('"""\n') + 4
    assert oracle({key: src.replace("Every output", "Each output")})
    spin = "    acc = 0\n    for i in range(4000):\n        acc += 1\n"  # (the interpreter runs it in Python)
    assert not oracle({key: src[:body] + spin + src[body:]})
