"""What a pass and a failure mean: kernel bugs and hostile declarations fail with the right verdict,
races are seen in one run, nothing unobserved passes, errors never become passes, and correct
kernels at the edge of the range pass. CPU only (GPU counterparts are in test_gpu.py)."""

import dataclasses
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
import torch

import tdiff
from tdiff.core.case import Case
from tdiff.core.rerun import FLOAT64_RUN
from tdiff.execute import forkserver
from tdiff.judge import verdict as V
from tdiff.strategies import tensor_arg
from tests import hostile as H
from tests import kernels as K
from tests.labelled import outcome

# no kernel reduction: no test here asserts on it (tests/test_reduce.py does), and a failing check with a
# reproducer would spend up to its 30 s budget on it
OPTS = tdiff.RunOptions(profile="ci", corpus_dir=None, repro_dir=None, shrink_budget=5,
                        reduce_budget=0)


def run(kernel, name="tdiff", **changes):
    (check,) = [c for c in tdiff.checks_of(kernel) if c.name == name]
    return tdiff.Runner(OPTS.with_(**changes)).run_check(check)


def run_repro(path, timeout=None):
    """Run a written reproducer as a user would: `python repro.py` in its folder (forked after the imports, as
    verification runs it: `forkserver.run_script`, tested in test_forkserver.py). (tdiff keeps a reproducer only
    once it has run it so in a fresh process and seen it exit 1 with the same kind of divergence on the same targets,
    `record/repro/verify.py`, tested in test_mutants_killed.py: a `repro_path` is that proof. The tests below run one
    again only to see what verification does not: its fix making it exit 0, its timeout, its sides' findings.)"""
    return forkserver.run_script([str(path)], path.parent, timeout=timeout)


def label(result):
    return [d.verdict.label for d in result.failures]


@pytest.mark.parametrize("kernel", [H.softmax_no_max, H.row_sum_drops_tail, H.row_max_zero_fill, H.rms_eps_outside,
                                    H.tiled_swapped_ids], ids=lambda k: k.fn.__name__)
def test_ordinary_kernel_bugs_fail_against_the_reference(kernel):
    r = run(kernel)
    assert r.status == "failed", r.report()
    assert label(r)[0] in (V.VS_REFERENCE, V.UNOBSERVED_RESULT), r.report()


@pytest.mark.parametrize("name,verdict", [
    ("reference-raises", "reference error"),
    ("reference-shape", V.STRUCTURE),
    ("two-outputs", V.STRUCTURE),
    ("python-float", V.STRUCTURE),
    ("int-output", V.STRUCTURE),
    ("never-launched", V.NEVER_LAUNCHED),
    ("returns-input", V.UNOBSERVED_RESULT),
    ("floor-grid", V.UNOBSERVED_RESULT),
    ("forgot-return", V.UNOBSERVED_RESULT),
    ("reference-none", V.STRUCTURE),
    ("reference-float64", V.STRUCTURE),
    ("dict-vs-tensor", V.STRUCTURE),
    ("wrong-reference", V.VS_REFERENCE),
])
def test_mistaken_and_hostile_declarations_fail(name, verdict):
    r = run(H.scale_kernel, name)
    assert r.status == "failed" and label(r) == [verdict], r.report()


def test_a_failing_reference_fails_on_the_first_case():
    r = run(H.scale_kernel, "reference-raises", shrink_budget=0)
    assert r.first_failure == 1 and "AttributeError" in r.report()


def test_lost_update_is_a_race_in_one_run_without_a_gpu_or_reference(tmp_path):
    r = run(H.lost_update, repro_dir=tmp_path)
    # no GPU and no reference: the two interpreter orders (and, in CI, the compile-only opinion)
    assert r.opinions[:2] == ("interpreter", "interpreter:reversed")
    assert set(r.opinions[2:]) <= {"compile-only"}
    (d,) = r.failures
    assert d.verdict.label == V.RACE and d.verdict.kind == "race"
    assert "program 0 and program 1" in d.report and "without atomics" in d.report
    assert d.repro_path is not None, d.repro_note  # (it exited 1 showing the race: see run_repro)


def test_an_inter_program_dependency_is_a_race_with_a_reference_and_no_gpu():
    r = run(H.block_prefix_sum)
    assert label(r) == [V.RACE] and "read of an element another program wrote" in r.report()


def test_programs_synchronized_by_atomics_pass_and_say_so():
    r = run(H.locked_sum)
    assert r.status == "passed", r.report()
    assert any("synchronize through atomic_cas" in line for line in r.caveat_lines())


def test_a_bug_in_a_padded_view_fails_whatever_else_the_tensor_holds():
    # a padded float32[8, 2] view (strides (6, 1)) holding the dtype's lowest value: the kernel
    # ignores the row stride, so rows land in the padding and ten elements never get their +1
    storage = np.full(8 * 6, np.nan, np.float32)
    values = np.arange(16, dtype=np.float32).reshape(8, 2)
    values[3, 1] = np.finfo(np.float32).min
    t = torch.from_numpy(storage).as_strided((8, 2), (6, 1))
    t.copy_(torch.from_numpy(values))
    judge = tdiff.Runner(OPTS.with_(isolation="none")).judge(H.add_one_ignores_row_stride.__tdiff_checks__[0])
    v, ev = judge.verdict(Case({"t": tensor_arg(t, "padded")}))
    assert v.failed and v.label == V.OUTSIDE_VIEW
    (pair,) = ev.pairs
    (m,) = [m for m in pair.comparison.mismatches if m.target == "t"]
    # the values are compared too: ten elements miss their +1 and nine differ (lowest + 1 == lowest in
    # float32): none hides behind the extreme one
    assert m.count == 9 and (3, 0) in [e[0] for e in m.examples]


def test_element_tolerance_follows_each_elements_inputs():
    # the same one-unit error passes nowhere, whatever other elements hold, for an elementwise kernel
    from tdiff.execute.interpreter.backend import InterpreterBackend
    from tdiff.judge.compare import compare
    from tdiff.judge.rules import Rules
    from tdiff.judge.targets import view

    check = K.double_kernel.__tdiff_checks__[0]
    x = torch.tensor([1.0, 2.0, -3.4e38, 4.0, 1e30, 0.5])
    case = Case({"x": tensor_arg(x)})
    good = InterpreterBackend().run(check, case)
    bad = InterpreterBackend().run(check, case)
    bad.returned.values[[0, 3]] += 1.0
    cmp = compare(good, bad, case, Rules(guide=view(good, case)))
    (m,) = cmp.mismatches
    assert m.count == 2 and m.examples[0][0] == (0,)
    scale = view(good, case).targets["returned"].scale
    # each element its own error scale: x * 2 carries |2| * |x| + |x| * |2| (first-order propagation)
    assert scale[0] == 4.0 and scale[1] == 8.0 and scale[2] == pytest.approx(4 * 3.4e38)


def test_differences_at_the_range_edge_pass_with_a_note():
    judge_of = {}

    def verdict(kernel, **inputs):
        check = kernel.__tdiff_checks__[0]
        runner = tdiff.Runner(OPTS.with_(isolation="none"))
        judge = judge_of.setdefault(kernel, runner.judge(check))
        return judge.verdict(Case({k: tensor_arg(v) for k, v in inputs.items()}))

    top = float(np.finfo(np.float32).max)
    v, _ = verdict(H.atomic_sum, x=torch.tensor([top, top, -top, 1.0, top, 2.0, 3.0, -top]))
    assert not v.failed, v
    # the variance overflows float32 on the way while the exact result (+-1.41) fits: float32's own overflow, a
    # caveat of its own (in float16 arithmetic it would fail: tests/test_sensitivity.py)
    v, _ = verdict(H.layer_norm, x=torch.tensor([[top, 1.0, 2.0, -top], [1.0, 2.0, 3.0, 4.0]]))
    assert not v.failed and any(k == "range-edge (float32 overflow)" for k, _ in v.notes), v
    a = torch.tensor([[top, 1.0], [float("inf"), -2.0]])
    v, _ = verdict(H.small_matmul, a=a, b=torch.tensor([[1.0, -1.0], [top, 3.0]]))
    assert not v.failed, v
    # exp(183) overflows float32 and inf - inf is NaN; the reference's exact result, -4e84, does not fit float32
    # either (-inf): found by liger's KL divergence. The same NaN against a finite reference is a bug.
    t, y = torch.tensor([183.375, 102.3125]), torch.tensor([272352.0, 0.0])
    v, _ = verdict(H.kl_log_target, t=t, y=y)
    assert not v.failed and any(k == "range-edge" for k, _ in v.notes), v
    v, _ = verdict(H.kl_log_target, t=torch.tensor([100.0, 1.0]), y=torch.tensor([100.0, 1.0]))  # inf * 0 vs 0
    assert v.failed, v


def test_a_reference_that_overflows_where_the_kernel_does_not_asks_the_float64_run():
    # the reference's x * x overflows to inf; the kernel's scaled hypot is finite and right: only the float64
    # run (not yet there when the pair is first compared) shows the reference is the one at the range edge
    check = H.stable_hypot.__tdiff_checks__[0]
    runner = tdiff.Runner(OPTS.with_(isolation="none"))
    judge = runner.judge(check)
    x, y = torch.tensor([3e19, 1.0]), torch.tensor([4e19, 2.0])
    v, ev = judge.verdict(Case({"x": tensor_arg(x), "y": tensor_arg(y)}))
    assert not v.failed and any(k == "range-edge" for k, _ in v.notes), v
    # compared again with the float64 run, which alone decides it: no modelled or perturbed reruns asked for
    assert {r.how for r in ev.extra} == {"fp64"}, sorted(ev.extra)
    assert run(H.stable_hypot).status == "passed"


def test_a_product_that_underflows_is_not_forgiven_where_it_is_amplified():
    # a subnormal weight (3 * 2**-149) times 0.629 rounds to 2 * 2**-149; over the weights' sum (the same subnormal)
    # that is 0.667 where the exact answer is 0.629. float32 gives it (torch's own float32 cross entropy does), but
    # the formula lost it: the error model does not widen an underflowed product's scale (liger 13, PolyNorm's
    # underflowing rstd cube, is this class: a widened scale passed its finding)
    check = H.weighted_share.__tdiff_checks__[0]
    runner = tdiff.Runner(OPTS.with_(isolation="none"))
    judge = runner.judge(check)
    w, x = torch.tensor([4.203895392974451e-45]), torch.tensor([0.629275])
    v, _ = judge.verdict(Case({"w": tensor_arg(w), "x": tensor_arg(x)}))
    assert v.label == V.VS_REFERENCE, v
    v, _ = judge.verdict(Case({"w": tensor_arg(torch.tensor([0.5, 1.5])), "x": tensor_arg(torch.tensor([1.0, 2.0]))}))
    assert not v.failed, v


def test_nan_where_the_exact_result_is_finite_fails():
    r = run(H.nan_into_finite)
    assert label(r) == [V.VS_REFERENCE] and "NaN" in r.report(), r.report()


def test_writes_outside_the_view_have_their_own_verdict():
    r = run(H.writes_padding)
    assert label(r) == [V.OUTSIDE_VIEW], r.report()
    # and a compiled side doing the same twice is not "nondeterministic"
    r = run(H.writes_padding, backends=("tests.faulty:FakeCompiledExact", "interpreter"))
    assert label(r) == [V.OUTSIDE_VIEW], r.report()


def test_loads_outside_the_view_have_their_own_verdict_and_reproducer(tmp_path):
    # the values read are dropped: the result is right, the kernel still reads memory that is not its input
    r = run(H.row_sum_over_reads, repro_dir=tmp_path)
    (d,) = r.failures
    assert d.verdict.label == V.READS_OUTSIDE_VIEW and d.verdict.targets == ("x",), r.report()
    assert "outside its view (padded)" in d.report and "mask=cols <= n" in d.report, d.report
    assert d.verdict.kind == "gap-read" and d.repro_path is not None, d.repro_note  # (it showed it: see run_repro)
    # a kernel that follows the strides reads only its view, whatever the layout
    ok = run(H.row_sum_strided)
    assert ok.status == "passed", ok.report()


def test_a_float16_accumulator_in_a_tf32_matmul_fails_where_no_side_ran_tf32():
    # the interpreter multiplies in IEEE float32: against the reference, the tf32 allowance is not given
    r = run(H.tf32_matmul_fp16_acc)
    assert label(r) == [V.VS_REFERENCE], r.report()
    assert run(H.tf32_matmul).status == "passed"
    # one float16 rounding of the sum (1.0001 -> 1.0) is within tf32's allowance, not within float32's
    check = H.tf32_matmul_fp16_acc.__tdiff_checks__[0]
    runner = tdiff.Runner(OPTS.with_(isolation="none"))
    judge = runner.judge(check)
    v, _ = judge.verdict(Case({"a": tensor_arg(torch.tensor([[1.0001]])), "b": tensor_arg(torch.tensor([[1.0]]))}))
    assert v.label == V.VS_REFERENCE, v


def test_an_error_of_tf32_size_fails_where_no_side_ran_tf32():
    # a float32 sum truncated to tf32's significand (a bitcast, no narrowing cast): within tf32's allowance,
    # which neither the interpreter nor the reference earns, so the pair fails
    r = run(H.tf32_matmul_truncates_the_sum)
    assert label(r) == [V.VS_REFERENCE], r.report()
    check = H.tf32_matmul_truncates_the_sum.__tdiff_checks__[0]
    runner = tdiff.Runner(OPTS.with_(isolation="none"))
    judge = runner.judge(check)
    a, b = torch.tensor([[1.0 + 2.0**-12]]), torch.tensor([[3.0]])
    v, _ = judge.verdict(Case({"a": tensor_arg(a), "b": tensor_arg(b)}))
    assert v.label == V.VS_REFERENCE, v


def test_agreeing_with_the_reference_only_within_tf32_blames_no_backend():
    # compiled (tf32) 3e-3 high, interpreter (IEEE float32) 3e-3 low: they disagree; the compiled side agrees
    # with the reference only within tf32's allowance, which the interpreter is not given: that is no evidence
    # that the interpreter is wrong
    check = H.tf32_matmul.__tdiff_checks__[0]
    runner = tdiff.Runner(OPTS.with_(isolation="none", backends=(
        "tests.faulty:FakeCompiledTf32High", "tests.faulty:FaultyInterpreterTf32Low", "reference")))
    judge = runner.judge(check)
    v, _ = judge.verdict(Case({"a": tensor_arg(torch.tensor([[1.0]])), "b": tensor_arg(torch.tensor([[1.0]]))}))
    assert v.label == V.VS_REFERENCE and v.pair == ("interpreter", "reference"), v
    assert "only within tf32's allowance" in v.reasons[0], v.reasons


def test_an_argmax_among_near_ties_passes_and_an_exact_tie_rule_is_judged():
    def verdict(kernel, x):
        check = kernel.__tdiff_checks__[0]
        runner = tdiff.Runner(OPTS.with_(isolation="none"))
        return runner.judge(check).verdict(Case({"x": tensor_arg(x)}))[0]

    # 1 and the next float32 both round to 1000 + 1: the kernel's own rounding ties them, the reference does not, and
    # one rounding of the inputs moves the reference's argmax: either index is right (measured, the flag named)
    one_up = float(np.nextafter(np.float32(1.0), np.float32(2)))
    v = verdict(H.argmax_rounded, torch.tensor([[1.0, one_up, -3.0]]))
    assert not v.failed and [k for k, _ in v.notes] == ["measured"] and "near-tie" in v.notes[0][1], v
    # 0 and 1e-5 tie in the kernel only: the problem does not have that tie (tests/test_sensitivity.py)
    assert verdict(H.argmax_rounded, torch.tensor([[0.0, 1e-5, -3.0]])).label == V.VS_REFERENCE
    assert verdict(H.argmax_rounded, torch.tensor([[0.0, 1.0, -3.0]])).label == V.PASSED  # far apart: exact
    # the same index rule, wrong, on loaded values: no arithmetic, so no backend may tie them differently
    v = verdict(H.argmax_last_tie, torch.tensor([[2.0, 2.0, -3.0]]))
    assert v.label == V.VS_REFERENCE, v
    # the search finds such a tie of the kernel's own making (x + 1000 - 1000 quantizes to 6e-5): an unstable
    # argmax, which no flag forgives any more
    r = run(H.argmax_rounded)
    assert label(r) == [V.VS_REFERENCE] and "flagged fragile" in r.report(), r.report()


def test_a_hang_costs_about_twice_the_timeout_and_leaves_a_reproducer(tmp_path):
    check = H.spins_on_negative.__tdiff_checks__[0]
    run(H.inplace_returned)  # (the worker processes are started)
    r = run(H.spins_on_negative, repro_dir=tmp_path, shrink_budget=60)
    assert label(r) == ["interpreter error"] and "timeout" in r.report()
    # not a timeout per shrink step and rerun (60 s of shrinking would be 6 or more): the first hang, half a
    # timeout more of hangs, worker restarts and the reproducer's own run (3 timeouts: on a loaded 2-core machine
    # the restarts and the reproducer's interpreter took 27.7 s once)
    assert r.wall < 3 * check.timeout, r.wall
    # the hang budget stopped it (with cheap forked restarts, hangs without it cost little more than 3 timeouts)
    assert any("hangs cost more than the per-case timeout" in n for n in r.notes), r.notes
    (d,) = r.failures
    assert d.repro_path is not None, d.repro_note
    ran = run_repro(d.repro_path, timeout=120)
    assert ran.returncode == 1 and "timeout" in ran.stdout, ran.stdout + ran.stderr


def test_a_kernel_updating_its_input_in_place_gets_a_reproducer(tmp_path):
    r = run(H.inplace_returned, repro_dir=tmp_path)
    (d,) = r.failures
    assert d.verdict.kind == "values" and d.repro_path is not None, d.repro_note  # (it showed it: see run_repro)


@pytest.fixture(scope="module")
def masked_tail_failure(tmp_path_factory):
    """masked_tail_bug's divergence and reproducer, found once for the two tests that read them (each of their
    own copy: one edits it)."""
    # (without kernel reduction (OPTS), which drops the mask altogether: the user's fix below is to the original)
    r = run(K.masked_tail_bug, repro_dir=tmp_path_factory.mktemp("masked_tail"))
    (d,) = r.failures
    return d


def _own_copy(d, tmp_path):
    return shutil.copytree(d.repro_path.parent, tmp_path / "repro") / "repro.py"


def test_an_out_of_bounds_reproducer_exits_1_then_0_once_fixed(masked_tail_failure, tmp_path):
    d = masked_tail_failure
    assert d.verdict.label == V.OUT_OF_BOUNDS and d.repro_path is not None, d.repro_note  # (exited 1: run_repro)
    path = _own_copy(d, tmp_path)
    text = path.read_text()
    assert "mask = offs <= n" in text
    path.write_text(text.replace("mask = offs <= n", "mask = offs < n"))
    ran = run_repro(path)
    assert ran.returncode == 0, ran.stdout + ran.stderr


_SIDE = """
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("repro", sys.argv[1])
repro = importlib.util.module_from_spec(spec)
spec.loader.exec_module(repro)
print(json.dumps(sorted((f["kind"], f["targets"]) for f in repro.run("cpu", traced=sys.argv[2] == "1")["findings"])))
"""


def test_an_out_of_bounds_store_is_caught_in_a_guard_band_and_not_performed_when_traced(masked_tail_failure,
                                                                                       tmp_path):
    # the launch's own output gets guard bands, so an untraced store one past its end lands there (without
    # them it hit the heap: `free(): invalid pointer`, exit 3); the tracer finds it and drops the lane
    d = masked_tail_failure
    path = _own_copy(d, tmp_path)
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    seen = {}
    for traced in ("0", "1"):
        p = subprocess.run([sys.executable, "-c", _SIDE, str(path), traced], env=env,
                           capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, p.stdout + p.stderr
        seen[traced] = [tuple(k[:1]) + tuple(k[1]) for k in json.loads(p.stdout.splitlines()[-1])]
    assert [k for k in seen["0"] if k[0] == "guard" and "launch 0" in k[1]], seen
    assert seen["1"] and {k[0] for k in seen["1"]} == {"oob"}, seen


def test_a_sum_over_undefined_masked_lanes_fails_and_its_reproducer_shows_it(tmp_path):
    # `tl.load(..., mask=m)` without other= leaves the masked-out lanes undefined (triton#9917): the
    # interpreter fills them with NaN, the verdict reruns it with zeros and names the load
    # (the whole kernel, whose fix is the line edited below: kernel reduction turns the mask into `mask=False`
    # and drops `n`, the same verdict on the same outputs, which this fix no longer matches)
    r = run(H.row_sum_no_other, repro_dir=tmp_path, reduce_budget=0)
    (d,) = r.failures
    assert d.verdict.label == V.UNDEFINED_LANES and d.verdict.kind == "values", r.report()
    assert "hostile.py" in d.report and "mask=cols < n)" in d.report and "lane(s)" in d.report
    assert "with them zero-filled it does not" in d.report
    assert d.repro_path is not None, d.repro_note  # (it exited 1 showing the values: see run_repro)
    text = d.repro_path.read_text()
    d.repro_path.write_text(text.replace("mask=cols < n)", "mask=cols < n, other=0.0)"))
    ran = run_repro(d.repro_path)
    assert ran.returncode == 0, ran.stdout + ran.stderr


def test_an_index_from_undefined_masked_lanes_is_named_as_the_cause():
    r = run(H.gather_unmasked_index)
    (d,) = r.failures
    assert d.verdict.label == V.UNDEFINED_LANES and d.verdict.kind == "oob", r.report()
    assert "i = tl.load(idx_ptr + offs, mask=offs < n)" in d.report


def test_undefined_lanes_through_a_running_max_fail(tmp_path):
    # a running max from -inf over a load without other=: the NaN poison must not lose the max (maxnum
    # semantics would drop it, the lane would stay at -inf and be zeroed: a blind spot), since on a GPU
    # the lane holds some value, 0 on NVIDIA, which enters the sum
    r = run(H.row_lse_no_other, repro_dir=tmp_path)
    (d,) = r.failures
    assert d.verdict.label == V.UNDEFINED_LANES, r.report()
    assert "mask=cols < n).to(tl.float32)" in d.report and "zero-filled it is wrong too" in d.report, d.report
    # its interpreter side keeps the poison through the max too (it showed it: see run_repro)
    assert d.verdict.kind == "values" and d.repro_path is not None, d.repro_note
    r = run(H.row_lse_where)
    assert r.status == "passed", r.report()


def test_masked_lanes_kept_out_of_the_result_pass():
    r = run(H.row_sum_where)
    assert r.status == "passed", r.report()


def test_zero_filled_masked_lanes_are_a_named_caveat():
    (check,) = tdiff.checks_of(H.row_sum_no_other)
    zero = dataclasses.replace(check, masked_loads="zero")
    r = tdiff.Runner(OPTS).run_check(zero)
    assert r.status == "passed", r.report()
    assert any("masked_loads='zero'" in line and "hostile.py" in line for line in r.caveat_lines()), r.caveat_lines()
    with pytest.raises(tdiff.DeclarationError, match="masked_loads"):
        tdiff.check(launch=lambda k, x: None, masked_loads="nan", x=1)(H.row_sum_where)


# ---------------------------------------------------------------- errors never become passes

@pytest.mark.parametrize("kernel", [K.double_kernel, K.double_noref], ids=["with-reference", "without"])
def test_a_compiled_backend_that_always_raises_fails(kernel):
    r = tdiff.Runner(OPTS.with_(backends=("tests.faulty:AlwaysRaises", "interpreter"))).run_check(
        tdiff.checks_of(kernel)[0])
    assert r.status == "failed" and label(r) == ["compiled error"], r.report()
    assert "NotImplementedError" in r.report()


def test_a_limitation_next_to_a_crash_reports_the_crash():
    r = tdiff.Runner(OPTS.with_(backends=("tests.faulty:CrashingCompiled", "tests.faulty:LimitedInterpreter"))) \
        .run_check(K.double_noref.__tdiff_checks__[0])
    (d,) = r.failures
    assert d.verdict.kind == "error" and d.verdict.targets == ("tests.faulty:CrashingCompiled",), r.report()
    assert "SIGSEGV" in r.report() and "limitation" not in d.verdict.label


def test_a_real_interpreter_limitation_skips_the_check_and_names_it():
    r = run(H.inline_asm_double)
    assert r.status == "skipped" and r.judged == 0 and r.cases <= 10
    assert "inline PTX assembly" in " ".join(r.notes)


def test_reading_the_launch_options_is_a_named_interpreter_limitation():
    # tl.extra.cuda.num_warps() has no interpreter version; a compiled variant pair checks such a kernel
    r = run(H.warps_assumed)
    assert r.status == "skipped" and r.judged == 0, r.report()
    assert "read the compile options" in " ".join(r.notes)


def test_a_limited_corpus_entry_is_not_passed(tmp_path):
    from tdiff.cli import main
    from tdiff.record import corpus

    check = H.inline_asm_double.__tdiff_checks__[0]
    case = Case({"x": tensor_arg(torch.ones(4))})
    runner = tdiff.Runner(OPTS.with_(isolation="none"))
    v, ev = runner.judge(check).verdict(case)
    assert v.label == V.NOT_JUDGED
    fake = V.Verdict("interpreter wrong", kind="values")
    path = corpus.write(tmp_path, check, case, fake, ev)
    replayed = runner.replay_entry(check, corpus.Entry(path))
    assert (replayed.entry, replayed.state) == (path.name, "not judged")
    assert main(["replay", str(path), "--isolation", "none"]) == 1


def test_isolation_none_stops_a_hang_with_its_watchdog():
    r = run(K.hang_kernel, isolation="none", timeout=2, max_examples=5)
    assert r.status == "failed" and "in-process watchdog" in r.report()


def test_a_broken_cuda_install_is_an_error_not_zero_gpus(monkeypatch):
    import ctypes

    from tdiff.execute import gpus

    class Driver:
        def cuInit(self, flags):
            return 999

        def cuDeviceGetCount(self, ref):
            return 999

    monkeypatch.setattr(gpus, "torch_has_cuda", lambda: True)
    monkeypatch.setattr(ctypes, "CDLL", lambda name: Driver())
    monkeypatch.delitem(sys.modules, "torch")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    gpus._probe.cache_clear()
    try:
        with pytest.raises(gpus.GPUError, match="unusable"):
            gpus.device_count()
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
        assert gpus.device_count() == 0  # the way out the message names
    finally:
        gpus._probe.cache_clear()


def test_a_malformed_check_attribute_is_an_error_not_nothing():
    from tdiff.declaration import CHECKS_ATTR

    kernel = K.double_kernel
    saved = getattr(kernel, CHECKS_ATTR)
    try:
        setattr(kernel, CHECKS_ATTR, "junk")
        with pytest.raises(tdiff.DeclarationError):
            tdiff.checks_of(kernel)
    finally:
        setattr(kernel, CHECKS_ATTR, saved)


def test_a_failing_grid_is_an_error():
    r = run(H.scale_kernel, "bad-grid")
    assert label(r) == ["interpreter error"] and "ZeroDivisionError" in r.report(), r.report()


def test_a_sum_that_comes_to_the_limit_of_its_dtype_is_at_the_range_edge():
    # 255 float16 squares summing to 65280: the interpreter's sum stays finite, the GPU's order of
    # float16 additions can pass 65504 (rstd 0, output 0: seen on the H100 in liger's fused_add_rms_norm)
    from tdiff.execute.interpreter.backend import InterpreterBackend
    from tdiff.judge.compare import compare
    from tdiff.judge.rules import Rules
    from tdiff.judge.targets import view

    check = H.fp16_rms.__tdiff_checks__[0]

    def sides(x):
        case = Case({"x": tensor_arg(x)})
        good = InterpreterBackend().run(check, case)
        zeros = InterpreterBackend().run(check, case)
        zeros.returned.values[:] = 0  # float16 zeros
        return compare(good, zeros, case, Rules(guide=view(good, case))), view(good, case).targets["returned"]

    cmp, t = sides(torch.full((255,), 16.0, dtype=torch.float16))  # a sum of squares of 65280
    assert t.overflow is not None and t.overflow.all() and (t.edge >= 1).all()
    assert not cmp.mismatches and cmp.forgiven, cmp.mismatches
    # far from the limit (a sum of squares of 16000), the same zeros are a plain mismatch
    cmp, t = sides(torch.full((250,), 8.0, dtype=torch.float16))
    assert t.overflow is None or not t.overflow.any()
    assert cmp.mismatches and not cmp.forgiven


def test_a_sum_whose_terms_pass_the_limit_in_some_order_is_at_the_range_edge():
    # seen on the H100 in liger's group norm backward: the GPU's order of a float32 sum of huge terms overflowed,
    # the interpreter's did not. Whatever the total, positive terms adding up past the largest float32 make the
    # result depend on the order.
    from tdiff.execute.interpreter.backend import InterpreterBackend
    from tdiff.judge.compare import compare
    from tdiff.judge.rules import Rules
    from tdiff.judge.targets import view

    check = H.atomic_sum.__tdiff_checks__[0]
    top = 3e38

    def against_inf(x):
        case = Case({"x": tensor_arg(x)})
        good = InterpreterBackend().run(check, case)
        other = InterpreterBackend().run(check, case)
        other.returned.values[:] = np.inf
        return compare(good, other, case, Rules(guide=view(good, case)))

    cmp = against_inf(torch.tensor([top, -top, top, -top]))  # 0 in this order, inf in another
    assert not cmp.mismatches and cmp.forgiven, cmp.mismatches
    cmp = against_inf(torch.tensor([1e37, -1e37, 1e37, -1e37]))  # no order overflows: inf is wrong
    assert cmp.mismatches and not cmp.forgiven


def test_the_float64_run_decides_nothing_when_the_launch_takes_another_path():
    from tdiff.judge.evidence import gather, same_path
    from tdiff.judge.rules import Rules

    def runs(kernel, which=0):
        check = kernel.__tdiff_checks__[which]
        runner = tdiff.Runner(OPTS.with_(isolation="none"))
        judge = runner.judge(check)
        from tdiff.core.backend_spec import BackendSpec

        return judge.run(case, [judge.spec(BackendSpec("interpreter")), judge.rerun_spec(FLOAT64_RUN)])

    def exact(kernel, which=0):
        run32, run64 = runs(kernel, which)
        ev = gather(case, "k", {"interpreter": run32}, Rules(), [], fp64=run64)
        return same_path(run32, run64), ev.rules.fp64

    case = Case({"x": tensor_arg(torch.tensor([1.0, 2.0, 3.0]))})
    same, fp64 = exact(H.rounds_by_dtype)  # float64 inputs make the launch pass tl.bfloat16
    assert not same and fp64 is None
    same, fp64 = exact(H.atomic_sum)
    assert same and fp64 is not None
    same, fp64 = exact(H.rounds_by_dtype, 1)  # tl.float32, then tl.float64: its inputs' own dtype each time
    assert same and fp64 is not None


def test_a_known_divergence_entry_that_now_fails_otherwise_is_a_new_failure(tmp_path):
    # an entry watching a known values divergence, replayed where the kernel now crashes, is not "known"
    import json

    from tdiff.record import corpus

    opts = tdiff.RunOptions(profile="ci", max_examples=2, corpus_dir=tmp_path, repro_dir=None, isolation="none",
                            backends=("tests.faulty:FaultyFirstProgram", "interpreter"))
    check = K.double_kernel.__tdiff_checks__[0]
    case = Case({"x": tensor_arg(torch.arange(5, dtype=torch.float32))})
    runner = tdiff.Runner(opts)
    verdict, ev = runner.judge(check).verdict(case)
    assert verdict.failed and verdict.kind == "values"
    path = corpus.write(tmp_path, check, case, verdict, ev)
    meta = json.loads((path / "entry.json").read_text())
    meta["expect"] = "divergence"
    (path / "entry.json").write_text(json.dumps(meta))
    (entry,) = corpus.entries_for(tmp_path, check)
    same = tdiff.Runner(opts)
    assert same.replay_entry(check, entry).state == "known"
    crashing = tdiff.Runner(opts.with_(backends=("tests.faulty:AlwaysRaises", "interpreter")))
    result = crashing.replay_entry(check, entry)
    assert result.state == "failed" and result.divergence is not None
    assert any("now fails otherwise" in n for n in result.notes), result.notes


def test_exact_comparison_stays_bitwise_when_programs_are_sampled():
    from tdiff.core import dtypes
    from tdiff.judge.compare import TargetPair, compare_targets
    from tdiff.judge.comparison import Comparison
    from tdiff.judge.rules import Rules
    from tdiff.judge.targets import Target

    a = np.array([2**60, 5], dtype=np.int64)
    b = np.array([2**60 + 1, 5], dtype=np.int64)
    ta = Target("t", dtypes.dtype("int64"), a.astype(np.float64), a, writers=np.zeros(2, np.int64))
    tb = Target("t", dtypes.dtype("int64"), b.astype(np.float64), b, writers=np.zeros(2, np.int64))

    class Sampled:  # an interpreter outcome that ran a sample of the programs (both elements' program)
        targets = {"t": ta}

    cmp = Comparison(outcome("a"), outcome("b"))
    rule = Rules().target("t", ta.dtype, set(), False)
    compare_targets(TargetPair("t", ta, tb, rule, None, Sampled()), Case({}), Rules(), cmp, set())
    assert cmp.mismatches, "2**60 and 2**60 + 1 compared equal"


def test_an_fp16_atomic_that_overflows_is_a_named_interpreter_limitation():
    # Triton 3.6's interpreter raises OverflowError('overflow to signed inf') where the GPU stores inf
    from tests import limited_kernels as VK

    r = run(VK.fp16_atomic_overflow)
    assert r.status == "skipped" and r.judged == 0, r.report()
    assert "an fp16 atomic whose result overflows" in " ".join(r.notes)

