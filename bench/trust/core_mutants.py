"""A mutation check of tdiff's core: a curated list of planted bugs, each run against the tests that
should catch it.

Each mutant names a file, an exact snippet of it, the snippet's replacement and the bug it plants,
and the test files (or test ids) relevant to it. The script copies the repository to a temporary
directory (the working tree itself is never touched), and for each mutant in turn applies it there,
runs its tests (`-x -p no:cacheprovider`, `CI=true`, the copy first on `PYTHONPATH`), records killed
(a test failed) or survived, and restores the file. A mutant whose snippet no longer occurs exactly
once in the source is reported as stale and counted as neither killed nor survived. Before the
mutants, the tests they use run once on the unmutated copy (the baseline); tests failing there are
left out of every mutant's run, so a mutant is never counted killed by a test that fails anyway.

    python -m bench.trust.core_mutants --list          # the mutants, and whether each snippet still matches
    python -m bench.trust.core_mutants                 # run them all; print a markdown table and the kill rate
    python -m bench.trust.core_mutants -k shrink-      # run those whose name contains "shrink-"
    python -m bench.trust.core_mutants --before        # without tests/test_mutants_killed.py (the kill rate before it)

It is not part of CI: on 2 cores a run takes about 10 minutes (15 to 20 with --before, where the
survivors run every test mapped to them).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NEW = "tests/test_mutants_killed.py"  # tests written to kill what survived the existing ones


@dataclass
class Mutant:
    name: str
    file: str  # relative to the repository root
    old: str  # an exact snippet of the file (must occur once)
    new: str  # its replacement
    bug: str  # the bug it plants, in one line
    tests: tuple[str, ...]  # existing tests relevant to it (files or node ids)
    new_tests: tuple[str, ...] = ()  # tests in tests/test_mutants_killed.py written for it
    equivalent: str = ""  # why no test can tell it from the original, where that is so

    @property
    def module(self) -> str:
        return self.file.removeprefix("tdiff/").removesuffix(".py")


def M(name: str, file: str, old: str, new: str, bug: str, tests: tuple[str, ...] | list[str] = (),
      new_tests: tuple[str, ...] | list[str] = (), equivalent: str = "") -> Mutant:
    return Mutant(name, file, old, new, bug, tuple(tests), tuple(f"{NEW}::{t}" for t in new_tests), equivalent)


C = "tests/test_compare.py"
V = "tests/test_verdicts.py"
T = "tests/test_trust.py"
S = "tests/test_shrink_repro_corpus.py"
B = "tests/test_backends.py"
SAMPLING = "tests/test_sampling.py"


def t(*names: str, file: str = T) -> tuple[str, ...]:
    return tuple(f"{file}::{n}" for n in names)


RACES = t("test_race_is_found_by_program_order_alone", file=V) + t(
    "test_an_inter_program_dependency_is_a_race_with_a_reference_and_no_gpu",
    "test_programs_synchronized_by_atomics_pass_and_say_so")
LIMITS = t("test_a_limitation_next_to_a_crash_reports_the_crash",
           "test_a_real_interpreter_limitation_skips_the_check_and_names_it",
           "test_a_compiled_backend_that_always_raises_fails", "test_a_limited_corpus_entry_is_not_passed")
CORPUS = t("test_corrupted_corpus_entries_give_readable_errors", "test_known_divergences_are_watched_not_failed",
           "test_cases_round_trip_through_json_and_npz", file=S) + t("test_a_limited_corpus_entry_is_not_passed")
SUITES = tuple(f"tests/test_suites.py::test_suite_kernel_matches_its_reference[suites.{k}[tdiff]]"
               for k in ("softmax::softmax_kernel", "matmul::matmul_kernel"))


MUTANTS: list[Mutant] = [
    # ------------------------------------------------------------------ compare.py, closeness.py, edges.py
    M("compare-rtol-larger-side", "tdiff/judge/closeness.py",
      "tol.rtol * np.minimum(np.abs(a), np.abs(b))", "tol.rtol * np.maximum(np.abs(a), np.abs(b))",
      "the relative term of the tolerance takes the larger side's magnitude, not the smaller's",
      [C], ["test_relative_tolerance_is_relative_to_the_smaller_side"]),
    M("compare-nan-matches-anything", "tdiff/judge/closeness.py",
      "ok = np.where(nan_a | nan_b, nan_a & nan_b, ok)", "ok = np.where(nan_a | nan_b, True, ok)",
      "NaN on one side agrees with any value on the other",
      t("test_nan_inf_and_signed_zero_policy", file=C)),
    M("compare-inf-sign-ignored", "tdiff/judge/closeness.py",
      "ok = np.where(inf, a == b, ok)", "ok = np.where(inf, np.isinf(a) & np.isinf(b), ok)",
      "+inf agrees with -inf",
      t("test_nan_inf_and_signed_zero_policy", file=C)),
    M("compare-signed-zero-ignored", "tdiff/judge/closeness.py",
      "ok = np.where(zeros, np.signbit(a) == np.signbit(b), ok)", "ok = np.where(zeros, True, ok)",
      "Tolerance(signed_zero=True) no longer tells -0.0 from 0.0",
      t("test_nan_inf_and_signed_zero_policy", file=C)),
    M("compare-exact-any-byte", "tdiff/judge/closeness.py",
      "rb.view(np.uint8).reshape(rb.size, -1)).all(axis=-1)", "rb.view(np.uint8).reshape(rb.size, -1)).any(axis=-1)",
      "exact comparison passes elements whose bytes agree in any one byte",
      t("test_exact_for_integers_bool_and_data_movement", file=C), ["test_exact_compares_bits_not_values"]),
    M("compare-coarse-scale-always", "tdiff/judge/compare.py",
      "scale = np.where(known, guide.scale, coarse)", "scale = np.full(ta.shape, coarse)",
      "the per-element dataflow scale is ignored: every element gets the tensor-wide coarse scale",
      t("test_element_tolerance_follows_each_elements_inputs",
        "test_a_bug_in_a_padded_view_fails_whatever_else_the_tensor_holds")),
    M("compare-sampled-compares-all", "tdiff/judge/compare.py",
      "keep = st.writers >= 0 if st is not None and st.writers is not None else np.zeros(ta.shape, bool)",
      "keep = np.ones(ta.shape, bool)",
      "under program sampling, elements no interpreted program wrote are compared too",
      [SAMPLING], ["test_under_sampling_only_what_interpreted_programs_wrote_is_compared"]),
    M("compare-structure-ignores-dtype", "tdiff/judge/compare.py",
      "if ta.shape != tb.shape or ta.dtype.name != tb.dtype.name:", "if ta.shape != tb.shape:",
      "two results of the same shape and different dtypes are compared as values, not as a structure mismatch",
      t("test_mistaken_and_hostile_declarations_fail"), ["test_storages_of_another_dtype_are_a_structure_mismatch"]),
    M("compare-returned-structure-ignored", "tdiff/judge/compare.py",
      "    if va.structure != vb.structure:\n", "    if False:\n",
      "different returned structures (tuple vs tensor, dict vs tensor) are not a mismatch",
      t("test_mistaken_and_hostile_declarations_fail")),
    M("compare-leaf-values-ignored", "tdiff/judge/compare.py",
      "if x != y and not (x is None and y is None):", "if False:",
      "returned non-numeric leaves (strings, bools, None) are never compared",
      t("test_mistaken_and_hostile_declarations_fail"), ["test_returned_leaves_are_compared"]),
    M("compare-edge-fed-always", "tdiff/judge/edges.py",
      "        fed = guide.edge >= 1\n", "        fed = np.ones(bad.shape, bool)\n",
      "range-edge forgiveness without inputs near the dtype's limits (any overflow is forgiven)",
      t("test_nan_where_the_exact_result_is_finite_fails", "test_differences_at_the_range_edge_pass_with_a_note"),
      ["test_an_overflow_from_ordinary_inputs_fails_beside_inputs_at_the_limits"]),
    M("compare-edge-either-side-is-reference", "tdiff/judge/edges.py",
      'if side.role.is_reference:  # a reference in the case\'s precision may overflow',
      "if True:  # any side at the edge, as if it were a reference that overflowed",
      "range-edge forgiveness treats a kernel side at the edge like a reference that overflowed",
      t("test_differences_at_the_range_edge_pass_with_a_note", "test_nan_where_the_exact_result_is_finite_fails"),
      ["test_a_kernel_overflow_the_float64_run_does_not_share_fails"]),
    M("dataflow-underflow-widened", "tdiff/execute/interpreter/dataflow.py",
      "        ovf = under if ovf is None else ovf | under\n",
      "        ovf = under if ovf is None else ovf | under\n"
      "        mag = np.where(under, np.maximum(mag, 1e-31), mag)\n",
      "a product that underflowed gets an absolute error scale: amplified by a division or a large factor, what it "
      "lost passes (liger 13's underflowing rstd cube would pass)",
      t("test_a_product_that_underflows_is_not_forgiven_where_it_is_amplified")),
    M("compare-edge-never-pending", "tdiff/judge/edges.py",
      "    pending = int(", "    pending = 0 * int(",
      "a range-edge difference never asks for the float64 run that could show it to be legitimate",
      t("test_differences_at_the_range_edge_pass_with_a_note",
        "test_a_reference_that_overflows_where_the_kernel_does_not_asks_the_float64_run")),
    M("compare-coarse-no-products", "tdiff/judge/compare.py",
      "return (max(i, i * i) if dots else i) * reduction_factor(case, numel)",
      "return i * reduction_factor(case, numel)",
      "the coarse scale of a kernel with tl.dot ignores that products grow with the square of the inputs",
      [C], ["test_coarse_scale_squares_the_inputs_for_dots"]),
    M("compare-reduction-factor-one", "tdiff/judge/compare.py",
      "return float(np.sqrt(max(1.0, input_numel(case) / max(1, target_numel))))", "return 1.0",
      "the coarse scale does not grow with the terms summed into each output",
      [C], ["test_coarse_scale_grows_with_the_terms_summed"]),

    # ------------------------------------------------------------------ tolerance.py
    M("tolerance-arith-100x", "tdiff/core/tolerance.py",
      '"arith": {64: (8, 16), 32: (8, 16),', '"arith": {64: (8, 16), 32: (800, 1600),',
      "the float32 arithmetic tolerance is 100x too loose",
      t("test_slightly_off_compiled_side_is_blamed_by_the_reference", file=V) + (C,)),
    M("tolerance-no-tf32-floor", "tdiff/core/tolerance.py",
      '    "tf32": (2e-3, 2 * TF32_EPS),\n', "",
      "fp32 tl.dot at default precision gets no tf32 allowance",
      [C]),
    M("tolerance-combine-tightest", "tdiff/core/tolerance.py",
      "return Tolerance(rtol=max(t.rtol for t in loose)", "return Tolerance(rtol=min(t.rtol for t in loose)",
      "several op classes combine to the tightest relative tolerance, not the loosest",
      [C]),
    M("tolerance-no-ops-not-exact", "tdiff/core/tolerance.py",
      '    if not classes:\n        return Tolerance(exact=True, name="exact")\n',
      '    if not classes:\n        classes = {"arith"}\n',
      "a float kernel that only moves data is compared with a float tolerance instead of bit for bit",
      t("test_exact_for_integers_bool_and_data_movement", file=C)),
    M("tolerance-loosened-keeps-scale", "tdiff/core/tolerance.py",
      "scale=self.scale * factor, name=", "scale=self.scale, name=",
      "Tolerance.loosened widens rtol only, not the dataflow scale term",
      [C, V], ["test_loosened_widens_every_term"]),
    M("tolerance-dict-override-on-exact", "tdiff/core/tolerance.py",
      'base = default if not default.exact else Tolerance(name="custom")', "base = default",
      "a dict override on an exact default stays exact (the override's rtol/atol are ignored)",
      [C], ["test_a_dict_override_of_an_exact_default_is_a_float_tolerance"]),
    M("tolerance-unknown-ops-no-transcendental", "tdiff/core/tolerance.py",
      'classes = {"arith", "transcendental", "reduce", "dot"}', 'classes = {"arith", "reduce", "dot"}',
      "without an interpreter run, fast GPU approximations (transcendental floor) are not allowed for",
      [C], ["test_unknown_ops_allow_for_every_floating_class"]),

    # ------------------------------------------------------------------ verdict.py
    M("verdict-structure-before-integrity", "tdiff/judge/verdict.py",
      "lambda e: fault_verdicts.integrity_verdict(e, final), fault_verdicts.structure):",
      "fault_verdicts.structure, lambda e: fault_verdicts.integrity_verdict(e, final)):",
      "the order of judgement puts structure before what one outcome broke on its own",
      t("test_mistaken_and_hostile_declarations_fail")),
    M("verdict-integrity-before-errors", "tdiff/judge/verdict.py",
      "for step in (fault_verdicts.errors, fault_verdicts.compile_rejected,",
      "for step in (lambda e: fault_verdicts.integrity_verdict(e, final), fault_verdicts.errors, "
      "fault_verdicts.compile_rejected,",
      "the order of judgement puts integrity findings before a side's error",
      [V] + list(t("test_a_failing_reference_fails_on_the_first_case", "test_a_failing_grid_is_an_error")),
      ["test_an_error_is_judged_before_integrity_findings"]),
    M("verdict-guard-not-oob", "tdiff/judge/labels.py",
      "(GUARD, OUT_OF_BOUNDS)", "(GUARD, OUTSIDE_VIEW)",
      "guard-band damage is reported as a write outside the view, not out of bounds",
      t("test_out_of_bounds", file=V) + t("test_guard_band_damage_is_located", file=C),
      ["test_guard_band_damage_alone_is_out_of_bounds"]),
    M("verdict-third-opinion-100x", "tdiff/judge/value_verdicts.py",
      'tol = (m.tol or Tolerance.preset("reduce", ta.dtype)).loosened(4)',
      'tol = (m.tol or Tolerance.preset("reduce", ta.dtype)).loosened(400)',
      "'close to the third opinion' is 100x looser",
      [V], ["test_a_side_far_from_the_float64_run_is_blamed"]),
    M("verdict-rmse-ratio-one", "tdiff/judge/value_verdicts.py",
      "mult = 3.0 if ta.dtype.is_half else 2.0", "mult = 1.0",
      "a side is blamed when its RMSE to the third opinion is merely larger, not 2x (3x) larger",
      t("test_both_wrong", "test_compiled_wrong", "test_interpreter_wrong", file=V)),
    M("verdict-blame-swapped", "tdiff/judge/value_verdicts.py",
      'return Verdict(wrong(ev.role(p.b)), [f"{p.a} agrees with the reference, {p.b} does not"',
      'return Verdict(wrong(ev.role(p.a)), [f"{p.a} agrees with the reference, {p.b} does not"',
      "the side that agrees with the reference is blamed",
      t("test_slightly_off_compiled_side_is_blamed_by_the_reference", "test_compiled_wrong", "test_interpreter_wrong",
        file=V)),
    M("verdict-reference-unused", "tdiff/judge/value_verdicts.py",
      "pa, pb = (ev.pair(p.a, ref), ev.pair(p.b, ref)) if ref else (None, None)", "pa, pb = (None, None)",
      "between two backends the reference is ignored; only the float64 run decides",
      [V], ["test_the_reference_decides_between_backends"]),
    M("verdict-no-reruns", "tdiff/judge/value_verdicts.py",
      "    if not final:\n        return None\n    needs: list[Rerun] = []",
      "    return None\n    needs: list[Rerun] = []",
      "a final verdict never reruns the compiled side (nondeterminism) or the interpreter in other orders (races)",
      t("test_nondeterministic", file=V)),
    M("verdict-drop-shuffled-order", "tdiff/judge/value_verdicts.py",
      "keys = [Rerun(REVERSED, side), Rerun(SHUFFLED, side)]", "keys = [Rerun(REVERSED, side)]",
      "races are looked for in the reversed program order only, not in a shuffled one",
      [V] + list(RACES), ["test_a_race_only_another_order_shows[middle]"]),
    M("verdict-fp64-undecided-fails", "tdiff/judge/value_verdicts.py",
      '        if v.label == UNDECIDED:\n            return Verdict(PASSED, notes=[("undecided", f"{p.a} and '
      '{p.b} differ slightly, but each agrees with the "',
      '        if False:\n            return Verdict(PASSED, notes=[("undecided", f"{p.a} and '
      '{p.b} differ slightly, but each agrees with the "',
      "two backends each within tolerance of the float64 run fail as undecided instead of passing with a note",
      [V], ["test_undecided_against_the_float64_run_passes_with_a_note"]),
    M("verdict-blame-without-distance", "tdiff/judge/value_verdicts.py",
      "if worse_a and not worse_b and not close_a:", "if worse_a and not worse_b:",
      "a side within tolerance of the third opinion is still blamed when its RMSE is larger",
      [V], ["test_undecided_against_the_float64_run_passes_with_a_note"]),
    M("verdict-discard-if-any", "tdiff/judge/verdict.py",
      "if ev.pairs and all(p.classification.action == DISCARD for p in ev.pairs):",
      "if ev.pairs and any(p.classification.action == DISCARD for p in ev.pairs):",
      "a case is not judged when any pair (not every pair) hit an interpreter limitation",
      list(LIMITS), ["test_a_limitation_on_one_pair_still_judges_the_others"]),

    # ------------------------------------------------------------------ classify.py
    M("classify-limitation-on-any-side", "tdiff/judge/classify.py",
      'and o.role.kind == "interpreter" \\\n', "\\\n",
      "a 'limitation' error of the compiled backend or the reference sets the pair aside instead of failing",
      list(LIMITS), ["test_only_the_interpreter_has_limitations"]),
    M("classify-limitation-hides-crash", "tdiff/judge/classify.py",
      "    if hard:\n", "    if hard and len(hard) == len(errors):\n",
      "a crash on one side next to an interpreter limitation on the other sets the pair aside",
      t("test_a_limitation_next_to_a_crash_reports_the_crash")),

    # ------------------------------------------------------------------ integrity.py
    M("integrity-unlaunched-any-kernel", "tdiff/judge/integrity.py",
      "if not any(rec.kernel == kernel for rec in outcome.launches):", "if not outcome.launches:",
      "a launch that runs some other kernel counts as launching the declared one",
      t("test_mistaken_and_hostile_declarations_fail"), ["test_launching_another_kernel_is_never_launched"]),
    M("integrity-unwritten-off", "tdiff/judge/integrity.py",
      "never = (target.writers < 0) & is_fill(target)", "never = np.zeros(target.shape, bool)",
      "returned elements no program wrote (still torch.empty's fill) are not noticed",
      t("test_mistaken_and_hostile_declarations_fail"), ["test_returned_elements_no_program_wrote_are_unobserved"]),
    M("integrity-unobserved-off", "tdiff/judge/integrity.py",
      "if inputs_same and not returns_new:", "if False:",
      "work written only into tensors nobody compares passes",
      t("test_mistaken_and_hostile_declarations_fail")),
    M("integrity-gap-all-bytes", "tdiff/judge/integrity.py",
      "changed = mask & (now.reshape(n, -1) != before.reshape(n, -1)).any(axis=1)",
      "changed = mask & (now.reshape(n, -1) != before.reshape(n, -1)).all(axis=1)",
      "a byte outside the view counts as changed only when every byte of its element changed",
      t("test_writing_outside_the_view_shows_in_the_other_half_and_guard_bands", file=B)
      + t("test_writes_outside_the_view_have_their_own_verdict"), ["test_one_changed_byte_outside_the_view_is_seen"]),
    M("integrity-gap-writers-ignored", "tdiff/judge/integrity.py",
      "if stored.size > count:", "if False:",
      "a store outside the view that left the bytes unchanged (NaN poison written back) is not seen",
      t("test_writes_outside_the_view_have_their_own_verdict") + (B,)),
    M("integrity-guard-never-checked", "tdiff/judge/integrity.py",
      "        if band == pattern:\n            continue\n", "        continue\n",
      "guard bands are never checked",
      t("test_guard_band_damage_is_located", file=C)),
    M("integrity-races-always-notes", "tdiff/judge/integrity.py",
      "        if t.sync:\n", "        if True:\n",
      "data races are only noted, as if the programs always synchronized",
      t("test_race_is_found_by_program_order_alone", file=V)
      + t("test_an_inter_program_dependency_is_a_race_with_a_reference_and_no_gpu",
          "test_lost_update_is_a_race_in_one_run_without_a_gpu_or_reference")),
    M("integrity-gap-read-ignored", "tdiff/judge/integrity.py",
      "        if read is not None:\n", "        if False:\n",
      "loads outside the view (padding, the other half of a split) are not reported",
      t("test_loads_outside_the_view_have_their_own_verdict_and_reproducer")
      + ("tests/test_found.py::test_bug_only_on_split_halves",)),
    M("compare-tf32-for-every-pair", "tdiff/judge/compare.py",
      "    ops = as_run_by(asked, (a.role.kind, b.role.kind))\n", "    ops = asked\n",
      "a tf32 tl.dot brings its tf32 allowance to pairs neither side of which ran tf32 (an fp16 accumulator passes)",
      t("test_a_float16_accumulator_in_a_tf32_matmul_fails_where_no_side_ran_tf32")
      + t("test_an_error_of_tf32_size_fails_where_no_side_ran_tf32")),
    M("verdict-tf32-blames-ieee-side", "tdiff/judge/value_verdicts.py",
      "if other_c.ok and mine_c.within_tf32 and not other_c.ieee_dots:",
      "if False and other_c.ok and mine_c.within_tf32 and not other_c.ieee_dots:",
      "a backend is blamed for differing from the reference by what tf32's allowance, given to the other side, "
      "would forgive", t("test_agreeing_with_the_reference_only_within_tf32_blames_no_backend")),
    M("compare-near-ties-fail", "tdiff/judge/compare.py",
      "    if guide is not None and guide.fragile is not None and guide.fragile.shape == bad.shape:\n",
      "    if False:\n",
      "results decided by comparing computed values within tolerance (an argmax among near-ties) fail",
      t("test_an_argmax_among_near_ties_passes_and_an_exact_tie_rule_is_judged")),
    M("dataflow-loaded-comparisons-fragile", "tdiff/execute/interpreter/fragile.py",
      "    if allowed is None or not (eps_of(a) or eps_of(b)):\n", "    if allowed is None:\n",
      "comparisons of loaded values (exact on every backend) count as near-ties",
      t("test_an_argmax_among_near_ties_passes_and_an_exact_tie_rule_is_judged"),
      ["test_only_comparisons_of_computed_values_are_fragile"]),
    M("dataflow-loaded-maxima-fragile", "tdiff/execute/interpreter/fragile.py",
      "            or not eps_of(hi):\n", "            or False:\n",
      "a tie among loaded values (the same on every backend) makes a maximum fragile: a wrong tie rule passes",
      t("test_an_argmax_among_near_ties_passes_and_an_exact_tie_rule_is_judged"),
      ["test_only_comparisons_of_computed_values_are_fragile"]),
    M("integrity-ub-ignored", "tdiff/judge/integrity.py",
      "    for e in t.ub:\n", "    for e in t.ub[:0]:\n",
      "undefined behaviour the interpreter saw is not reported",
      t("test_undefined_float_to_int_cast", file=V)),

    # ------------------------------------------------------------------ evidence.py
    M("evidence-no-guide", "tdiff/judge/evidence.py",
      "rules = rules.for_case(guided, exact, measured, model, carry)",
      "rules = rules.for_case(None, exact, measured, model, carry)",
      "the interpreter's trace never guides the comparison of two sides without one (compiled vs reference)",
      t("test_a_bug_in_a_padded_view_fails_whatever_else_the_tensor_holds",
        "test_differences_at_the_range_edge_pass_with_a_note"),
      ["test_the_interpreter_guides_the_comparison_of_the_compiled_side_with_the_reference"]),
    M("evidence-fp64-not-used", "tdiff/judge/evidence.py",
      "rules = rules.for_case(guided, exact, measured, model, carry)",
      "rules = rules.for_case(guided, None, measured, model, carry)",
      "the float64 run is gathered but never used to decide range-edge differences",
      t("test_differences_at_the_range_edge_pass_with_a_note",
        "test_a_reference_that_overflows_where_the_kernel_does_not_asks_the_float64_run")),

    # ------------------------------------------------------------------ shrink.py
    M("shrink-any-divergence", "tdiff/record/shrink.py",
      "    if not got.failed or got.kind != want.kind:\n        return False\n"
      "    return not want.targets or bool(set(got.targets) & set(want.targets))",
      "    return got.failed",
      "the shrinker accepts any failing case, not the same divergence",
      [S], ["test_shrink_keeps_the_same_kind_of_divergence"]),
    M("shrink-any-targets", "tdiff/record/shrink.py",
      "return not want.targets or bool(set(got.targets) & set(want.targets))", "return True",
      "the shrinker accepts the same kind of divergence on other targets",
      [S], ["test_shrink_keeps_the_same_targets"]),
    M("shrink-no-halving", "tdiff/record/shrink.py",
      "            chunk = max(1, chunk // 2)\n", "            break\n",
      "values are zeroed all at once or not at all: zeroed chunks are never halved",
      [S], ["test_shrink_zeroes_in_halving_chunks"]),
    M("shrink-no-contiguous", "tdiff/record/shrink.py",
      "        if got is not None:\n            case, (verdict, evidence) = candidate, got\n"
      "            info.steps.append(f\"`{name}` made contiguous\")",
      "        if False:\n            case, (verdict, evidence) = candidate, got\n"
      "            info.steps.append(f\"`{name}` made contiguous\")",
      "layouts are never made contiguous",
      t("test_shrink_makes_layouts_contiguous_and_zeroes_what_does_not_matter", file=S)),
    M("shrink-budget-ignored", "tdiff/record/shrink.py",
      "time.perf_counter() - t0 + estimate[0] > budget:", "False:",
      "the shrink time budget is never enforced",
      [S], ["test_shrink_stops_at_its_budget"]),

    # ------------------------------------------------------------------ corpus.py
    M("corpus-ignores-check-name", "tdiff/record/corpus.py",
      'k.get("check", "tdiff") == check.name\n                and ', "",
      "corpus entries are matched to checks ignoring the check's name",
      list(CORPUS), ["test_corpus_entries_belong_to_their_own_check"]),
    M("corpus-ignores-module", "tdiff/record/corpus.py",
      '\n                and k.get("module", check.module) == check.module', "",
      "corpus entries are matched to checks ignoring the check's module",
      list(CORPUS), ["test_corpus_entries_belong_to_their_own_module"]),
    M("corpus-format-unchecked", "tdiff/record/corpus.py",
      'if meta.get("format") != FORMAT:', "if False:",
      "entries of an unsupported format are read anyway",
      t("test_corrupted_corpus_entries_give_readable_errors", file=S)),
    M("corpus-inputs-unchecked", "tdiff/record/corpus.py",
      "            if want != have:\n", "            if False:\n",
      "an entry whose inputs no longer match the check's is replayed anyway",
      list(CORPUS), ["test_an_entry_with_other_inputs_is_an_error"]),
    M("corpus-hidden-folders", "tdiff/record/corpus.py",
      'if p.is_dir() and not p.name.startswith(".") and any(p.iterdir())]', "if p.is_dir() and any(p.iterdir())]",
      "a writer's temporary folder (.tmp-*) is taken for an entry",
      list(CORPUS), ["test_temporary_folders_are_not_entries"]),

    # ------------------------------------------------------------------ runner.py
    M("runner-known-divergence-disabled", "tdiff/drive/runner.py",
      'known = entry.expected() == "divergence"', "known = False",
      "corpus entries marked as known divergences are failed like any other (and never flagged once fixed)",
      t("test_known_divergences_are_watched_not_failed", file=S)),
    M("runner-finding-known-passes", "tdiff/drive/status.py",
      'stale = "known" if facts.expects_failure else "fixed"', 'stale = "fixed"',
      "a finding's check (xfail) passes while its corpus entry still shows the finding (a strict xfail XPASSes "
      "on a search that drew no trigger)",
      t("test_a_finding_check_fails_on_its_known_divergence_and_passes_once_it_is_gone", file=S)),
    M("runner-final-verdict-ignored", "tdiff/drive/finish.py",
      "            if final.failed:\n", "            if False:\n",
      "the final verdict (with reruns) is computed and thrown away",
      t("test_nondeterministic", file=V)),
    M("runner-no-replay", "tdiff/drive/runner.py",
      "            if self.options.replay:\n", "            if False:\n",
      "the corpus is never replayed",
      t("test_corrupted_corpus_entries_give_readable_errors", file=S)),
    M("runner-no-shrink", "tdiff/drive/finish.py",
      'if source == "search" and steps.options.shrink_budget > 0', 'if False and steps.options.shrink_budget > 0',
      "divergences found by the search are never shrunk",
      t("test_planted_faulty_backend_is_shrunk_small", file=S)),
    M("runner-never-skipped", "tdiff/drive/status.py",
      '        return Status.SKIPPED, why\n', '        return Status.PASSED, why\n',
      "a check that judged nothing passes instead of being skipped",
      t("test_a_real_interpreter_limitation_skips_the_check_and_names_it")),

    # ------------------------------------------------------------------ judge.py, search.py
    M("judge-hang-budget-50x", "tdiff/drive/case_judge.py",
      "elif now - self.hung_at >= self.base / 2:", "elif now - self.hung_at >= self.base * 25:",
      "after a hang, the check goes on until hangs cost 50x more than the budget",
      t("test_a_hang_costs_about_twice_the_timeout_and_leaves_a_reproducer")),
    M("judge-timeout-not-reduced", "tdiff/drive/case_judge.py",
      "return min(self.base, max(HANG_FLOOR, HANG_FACTOR * self.slowest))", "return self.base",
      "after a hang, later runs still wait the full per-case timeout",
      t("test_a_hang_costs_about_twice_the_timeout_and_leaves_a_reproducer")),
    M("judge-fp64-not-regathered", "tdiff/drive/case_judge.py",
      "if any(n == FLOAT64_RUN or n.how in (PERTURBED, MODELLED, CARRIED) for n in needs):",
      "if any(n.how in (PERTURBED, MODELLED, CARRIED) for n in needs):",
      "after the float64 run the evidence is not compared again with it",
      t("test_differences_at_the_range_edge_pass_with_a_note",
        "test_a_reference_that_overflows_where_the_kernel_does_not_asks_the_float64_run")),
    M("judge-sampled-atomics-kept", "tdiff/drive/case_judge.py",
      "and o.trace.sampled and o.trace.atomics]", "and o.trace.sampled and o.trace.atomics and False]",
      "a sampled interpreter run of a kernel with atomics is compared as it is",
      t("test_atomics_under_sampling_fall_back_to_every_program", file=SAMPLING),
      ["test_a_sampled_run_with_atomics_interprets_every_program"]),
    M("judge-rerun-order-ignored", "tdiff/drive/case_judge.py",
      "        return spec.with_(order=need.order)\n", "        return spec\n",
      "the reversed and shuffled reruns run the programs in the forward order",
      [V] + list(RACES), ["test_a_race_only_another_order_shows"]),
    M("search-never-gives-up", "tdiff/drive/search.py",
      "GIVE_UP_AFTER = 10\n", "GIVE_UP_AFTER = 10**6\n",
      "a check whose cases are all set aside draws every example instead of stopping",
      t("test_cases_not_judged_for_other_reasons_stop_the_search_after_more", file="tests/test_search_bounds.py")),
    M("search-limitation-never-stops", "tdiff/drive/search.py",
      "SAME_LIMITATION_STOP = 3\n", "SAME_LIMITATION_STOP = 10**6\n",
      "a check whose cases all hit one interpreter limitation draws every example",
      t("test_cases_that_all_hit_one_limitation_stop_the_search_after_the_first_few",
        file="tests/test_search_bounds.py")),

    # ------------------------------------------------------------------ backends/memory.py
    M("memory-read-race-self", "tdiff/execute/interpreter/memory.py",
      "other = (w != NOBODY) & (w != program)", "other = (w != NOBODY) & (w == program)",
      "a read of an element another program wrote is not a race (reading one's own write is)",
      t("test_an_inter_program_dependency_is_a_race_with_a_reference_and_no_gpu")),
    M("memory-write-after-read-unseen", "tdiff/execute/interpreter/memory.py",
      "            hit = reader != NOBODY\n", "            hit = np.zeros(reader.shape, bool)\n",
      "a write of an element another program read earlier in the launch is not a race",
      [V] + list(RACES), ["test_a_write_after_another_programs_read_is_a_race"]),
    M("memory-races-across-launches", "tdiff/execute/interpreter/memory.py",
      "            r.w = r.r1 = r.r2 = r.aw = None\n", "            pass\n",
      "accesses in different launches (which are ordered) count as races",
      [V, B] + list(RACES), ["test_launches_are_ordered"]),
    M("memory-fast-path-one-past-end", "tdiff/execute/interpreter/memory.py",
      "if r.base <= lo and hi + itemsize <= r.base + r.nbytes:", "if r.base <= lo and hi <= r.base + r.nbytes:",
      "an access to the element just past an allocation is let through",
      t("test_guard_band_damage_is_located", file=C) + t("test_out_of_bounds", file=V)),
    M("memory-atomics-are-plain", "tdiff/execute/interpreter/memory.py",
      "            if not atomic:\n                prev = writers[a.idx]",
      "            if True:\n                prev = writers[a.idx]",
      "atomic updates are tracked like plain stores (and reported as races)",
      t("test_atomics_under_sampling_fall_back_to_every_program", file=SAMPLING)
      + t("test_differences_at_the_range_edge_pass_with_a_note")),
    M("memory-atomic-adds-uncounted", "tdiff/execute/interpreter/memory.py",
      'np.add.at(r.array("adds", 0, np.int32), a.idx, 1)', "pass",
      "the number of atomic updates per element is not counted (the scale of atomic sums does not grow)",
      [C, SAMPLING], ["test_the_scale_of_an_atomic_sum_grows_with_its_updates"]),

    # ------------------------------------------------------------------ dataflow.py, fragile.py, reductions.py
    M("dataflow-mul-max", "tdiff/execute/interpreter/dataflow.py",
      "prop = m[0] * v[1] + m[1] * v[0] + second\n", "prop = np.maximum(m[0], m[1])\n",
      "a product's error scale is its operands' largest scale, not propagated through the product",
      [C] + list(t("test_element_tolerance_follows_each_elements_inputs",
                   "test_differences_at_the_range_edge_pass_with_a_note",
                   "test_ordinary_kernel_bugs_fail_against_the_reference"))),
    M("dataflow-reduction-no-growth", "tdiff/execute/interpreter/reductions.py",
      "grow = math.sqrt(max(n, 1)) if terms_grow else 1.0", "grow = 1.0",
      "a sum's scale does not grow with the number of terms",
      [C], ["test_the_scale_of_a_sum_grows_with_its_terms"]),
    M("dataflow-dot-no-sqrt-k", "tdiff/execute/interpreter/reductions.py",
      "va.max(axis=-1)[..., :, None] * mb.max(axis=-2)[..., None, :]) * math.sqrt(k)",
      "va.max(axis=-1)[..., :, None] * mb.max(axis=-2)[..., None, :]) * 1.0",
      "a tl.dot output's scale does not grow with K",
      t("test_dot_tolerance_grows_with_the_products_not_the_result", file=C),
      ["test_the_scale_of_a_dot_grows_with_its_terms"]),
    M("dataflow-no-new-overflow", "tdiff/execute/interpreter/dataflow.py",
      "    new = bad & finite\n    return new if beyond is None else new | beyond",
      "    new = np.zeros(shape, bool)\n    return new if beyond is None else new | beyond",
      "an elementwise overflow (inf from finite operands) is not recorded",
      t("test_differences_at_the_range_edge_pass_with_a_note"), ["test_an_elementwise_overflow_is_recorded"]),
    M("dataflow-edge-ratio-vs-max", "tdiff/execute/interpreter/dataflow.py",
      "ratio = top / math.sqrt(limit) if limit else np.zeros_like(top)",
      "ratio = top / limit if limit else np.zeros_like(top)",
      "inputs count as near the dtype's limits only at its max, not where squaring them overflows",
      t("test_differences_at_the_range_edge_pass_with_a_note"), ["test_edge_ratio_is_relative_to_the_square_root"]),

    # ------------------------------------------------------------------ interpreter backend.py, hooks.py, session.py
    M("interp-ub-only-nonfinite", "tdiff/execute/interpreter/hooks.py",
      "bad = ~np.isfinite(vals) | (np.trunc(vals) < lo) | (np.trunc(vals) >= hi)", "bad = ~np.isfinite(vals)",
      "an undefined float-to-int cast is flagged only for NaN/inf, not for finite values out of range",
      t("test_undefined_float_to_int_cast", file=V), ["test_a_finite_out_of_range_cast_is_undefined"]),
    M("interp-no-reverse", "tdiff/execute/interpreter/backend.py",
      "        programs.reverse()\n", "        pass\n",
      "order='reversed' runs the programs forward",
      [V] + list(RACES), ["test_a_race_only_another_order_shows", "test_program_orders"]),
    M("interp-no-shuffle", "tdiff/execute/interpreter/backend.py",
      "        random.Random(s.options.seed).shuffle(programs)\n", "        pass\n",
      "order='shuffled' runs the programs forward",
      [V] + list(RACES), ["test_a_race_only_another_order_shows[middle]", "test_program_orders"]),
    M("interp-fp32-dot-is-ieee", "tdiff/execute/interpreter/hooks.py",
      'kind = "dot:ieee" if "ieee" in prec else "dot:tf32"', 'kind = "dot:ieee"',
      "an fp32 tl.dot at default precision is not recorded as tf32 (no tf32 tolerance)",
      [C] + list(t("test_differences_at_the_range_edge_pass_with_a_note")) + list(SUITES),
      ["test_the_interpreter_records_the_ops_behind_each_tolerance"]),
    M("interp-transcendental-as-arith", "tdiff/execute/interpreter/hooks.py",
      '_OP_TAGS = {f"create_{op}": "transcendental" for op in TRANSCENDENTAL}',
      '_OP_TAGS = {f"create_{op}": "farith" for op in TRANSCENDENTAL}',
      "exp, log, sin, sqrt... are recorded as plain arithmetic (no allowance for fast approximations)",
      [C] + list(t("test_differences_at_the_range_edge_pass_with_a_note")) + list(SUITES),
      ["test_the_interpreter_records_the_ops_behind_each_tolerance"]),
    M("interp-loads-unchecked", "tdiff/execute/interpreter/hooks.py",
      '        if check:\n            m, mask = _checked(session, "load"',
      '        if False:\n            m, mask = _checked(session, "load"',
      "loads outside every allocation are not stopped or reported",
      t("test_guard_band_damage_is_located", file=C)),
    M("interp-scratch-always-seen", "tdiff/execute/interpreter/backend.py",
      "trace.scratch.append((r.name, written, id(r) in returned_regions or r.read_back))",
      "trace.scratch.append((r.name, written, True))",
      "tensors launch made, wrote and dropped count as observed",
      t("test_mistaken_and_hostile_declarations_fail")),
    M("interp-atomic-scale-flat", "tdiff/execute/interpreter/backend.py",
      "scale = r.mag if r.adds is None else r.mag * np.sqrt(np.maximum(r.adds, 1))", "scale = r.mag",
      "the scale of an element updated by many atomic adds does not grow with them",
      [C, SAMPLING], ["test_the_scale_of_an_atomic_sum_grows_with_its_updates"]),
    M("interp-sample-no-tail-face", "tdiff/execute/interpreter/session.py",
      "                p[axis] = n - 1\n", "                p[axis] = 0\n",
      "sampling picks extra programs on the first face of each axis, not the last (which owns the tails)",
      [SAMPLING], ["test_sample_holds_programs_on_each_last_face"]),

    # ------------------------------------------------------------------ repro.py
    M("repro-verify-any-kind", "tdiff/record/repro/verify.py",
      "if proc.returncode != 1 or not same:", "if proc.returncode != 1:",
      "a reproducer is kept when it exits 1 whatever divergence it shows",
      t("test_an_out_of_bounds_reproducer_exits_1_then_0_once_fixed"),
      ["test_a_reproducer_showing_another_divergence_is_rejected"]),
    M("repro-verify-any-exit", "tdiff/record/repro/verify.py",
      "if proc.returncode != 1 or not same:", "if not same:",
      "a reproducer is kept when it prints the divergence but exits 0",
      t("test_an_out_of_bounds_reproducer_exits_1_then_0_once_fixed"),
      ["test_a_reproducer_that_exits_0_is_rejected"]),
    M("repro-verify-any-targets", "tdiff/record/repro/verify.py",
      'and (not verdict.targets or not s.get("targets") or set(s["targets"]) & set(verdict.targets))]', "]",
      "a reproducer showing the right kind of divergence on other targets is kept",
      t("test_an_out_of_bounds_reproducer_exits_1_then_0_once_fixed"),
      ["test_a_reproducer_showing_other_targets_is_rejected"]),
    M("tolerance-rtol-larger-side", "tdiff/core/tolerance.py",
      "atol + rtol * np.minimum(np.abs(a), np.abs(b))", "atol + rtol * np.maximum(np.abs(a), np.abs(b))",
      "the tolerance (comparison and reproducers alike) is relative to the larger side",
      (C, *t("test_a_kernel_updating_its_input_in_place_gets_a_reproducer")),
      ["test_the_reproducers_tolerance_is_tdiffs"]),
    # the batched interpreter (tdiff/execute/interpreter/batched.py): its differential test must see each
    M("batched-first-not-alone", "tdiff/execute/interpreter/backend.py",
      "batches = [programs[:1]] + [programs[i:i + BATCH] for i in range(1, len(programs), BATCH)]",
      "batches = [programs[i:i + BATCH] for i in range(0, len(programs), BATCH)]",
      "the first program runs in the batch: its comparisons get the tolerance of operations it has not run",
      ("tests/test_batched.py",)),
    M("batched-reduce-axis", "tdiff/execute/interpreter/reduction_hooks.py",
      "axis - ndim if axis >= 0 else axis, keep_dims", "axis, keep_dims",
      "a batch's reduction shadows (error scales, near-ties) are taken along the wrong axis",
      ("tests/test_batched.py",)),
    M("batched-widen-drops-shadows", "tdiff/execute/interpreter/batched.py",
      'if name.startswith("_tdiff_"):\n            if isinstance(v, np.ndarray)',
      'if name.startswith("_nothing_"):\n            if isinstance(v, np.ndarray)',
      "a value widened for a store (or flattened for a reduction) loses its error scale (its stored tolerance)",
      ("tests/test_batched.py",)),
    M("batched-atomics-any-order", "tdiff/execute/interpreter/memory.py",
      "        if (aw[idx] > programs).any():", "        if False:",
      "atomic updates of an element from several operations of a batch run in another order than program by "
      "program", ("tests/test_batched.py",)),
    M("batched-shared-read", "tdiff/execute/interpreter/memory.py",
      """        if _another(r.w, idx, programs):
            stop("programs share an element one of them writes")
        if _another(r.aw, idx, programs):
            stop("a program reads""", """        if False:
            stop("programs share an element one of them writes")
        if _another(r.aw, idx, programs):
            stop("a program reads""",
      "a batch reads what another program of the launch wrote (a race) without stopping",
      ("tests/test_batched.py",)),
]


# ------------------------------------------------------------------ running

IGNORE = shutil.ignore_patterns(".venv", ".git", "__pycache__", ".hypothesis", ".pytest_cache", ".ruff_cache",
                                "tdiff-out", "*.egg-info", "build")


@dataclass
class Result:
    mutant: Mutant
    status: str  # killed, survived, stale, timeout (counted killed), no tests
    by: str = ""
    seconds: float = 0.0
    tests: list[str] = field(default_factory=list)


def missing_tests(root: Path, m: Mutant) -> list[str]:
    """The mutant's tests in tests/test_mutants_killed.py that the file does not define."""
    path = root / NEW
    text = path.read_text() if path.exists() else ""
    return [x for x in m.new_tests if f"def {x.split('::')[1].split('[')[0]}(" not in text]


def occurrences(root: Path, m: Mutant) -> int:
    path = root / m.file
    return path.read_text().count(m.old) if path.exists() else 0


def pytest_cmd(tests: list[str]) -> list[str]:
    # serial: xdist's workers cost more to start than the parallelism saves on these selections, and
    # `-x` stops at the first failure at once
    return [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-rfE", *tests]


def env_for(copy: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["CI"] = "true"
    env["PYTHONPATH"] = os.pathsep.join([str(copy)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.pop("TRITON_INTERPRET", None)
    return env


def failing(output: str) -> list[str]:
    return [m.group(1) for m in re.finditer(r"^(?:FAILED|ERROR) (\S+)", output, re.M)]


def run_tests(copy: Path, tests: list[str], timeout: float) -> tuple[int | None, str, float]:
    t0 = time.perf_counter()
    try:
        p = subprocess.run(pytest_cmd(tests), cwd=copy, env=env_for(copy), capture_output=True, text=True,
                           timeout=timeout)
        return p.returncode, p.stdout + p.stderr, time.perf_counter() - t0
    except subprocess.TimeoutExpired as exc:
        out = (exc.stdout or b"").decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        return None, out, time.perf_counter() - t0


ONLY_NEW = False  # --only-new: each mutant's tests in tests/test_mutants_killed.py alone


def selection(m: Mutant, with_new: bool) -> list[str]:
    if ONLY_NEW:
        return list(m.new_tests)
    tests = list(m.new_tests if with_new else ()) + list(m.tests)  # the targeted tests first (-x)
    return list(dict.fromkeys(tests))


def narrow(tests: list[str], broken: set[str]) -> list[str]:
    """`tests` without the tests that fail on the unmutated copy (files become their passing ids)."""
    if not broken:
        return tests
    return [x for x in tests if x not in broken] + [
        f"--deselect={b}" for b in sorted(broken) if any(b.startswith(x.split("::")[0]) for x in tests)]


def run_one(copy: Path, m: Mutant, with_new: bool, broken: set[str], timeout: float) -> Result:
    n = occurrences(copy, m)
    if n != 1:
        return Result(m, "stale", "snippet not found" if n == 0 else f"snippet occurs {n} times")
    tests = narrow(selection(m, with_new), broken)
    if not [x for x in tests if not x.startswith("--")]:
        return Result(m, "no tests")
    path = copy / m.file
    original = path.read_text()
    try:
        path.write_text(original.replace(m.old, m.new))
        for cached in (path.parent / "__pycache__").glob(f"{path.stem}.*.pyc"):
            cached.unlink()
        code, out, secs = run_tests(copy, tests, timeout)
    finally:
        path.write_text(original)
        for cached in (path.parent / "__pycache__").glob(f"{path.stem}.*.pyc"):
            cached.unlink()
    if code is None:
        return Result(m, "timeout", f"no result in {timeout:.0f} s", secs, tests)
    if code == 0:
        return Result(m, "survived", "", secs, tests)
    if code == 5:
        return Result(m, "no tests", "", secs, tests)
    if code in (3, 4):  # pytest's own error (a test id that does not exist): not a kill
        tail = [line for line in out.strip().splitlines() if line.strip()][-1:] or [f"exit {code}"]
        return Result(m, "error", tail[0][:100], secs, tests)
    by = failing(out)
    if not by:
        tail = [line for line in out.strip().splitlines() if line.strip()][-1:] or [f"exit {code}"]
        by = [f"(exit {code}: {tail[0][:80]})"]
    return Result(m, "killed", ", ".join(by[:2]), secs, tests)


def baseline(copy: Path, mutants: list[Mutant], with_new: bool, timeout: float) -> tuple[set[str], float]:
    """The tests the mutants use, on the unmutated copy: the ids of those that fail there."""
    tests = list(dict.fromkeys(x for m in mutants for x in selection(m, with_new)))
    if not tests:
        return set(), 0.0
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rfE", "-n", "2", *tests]
    t0 = time.perf_counter()
    p = subprocess.run(cmd, cwd=copy, env=env_for(copy), capture_output=True, text=True, timeout=timeout * 4)
    return set(failing(p.stdout + p.stderr)), time.perf_counter() - t0


def short(test: str) -> str:
    return test.replace("tests/", "").replace(".py::", "::")


def table(results: list[Result]) -> str:
    lines = ["| mutation | module | result |", "|---|---|---|"]
    for r in results:
        m = r.mutant
        if r.status in ("killed", "timeout"):
            what = f"killed by `{short(r.by)}`" if r.status == "killed" else f"killed ({r.by})"
        elif r.status == "survived":
            what = "**survived**" + (f" (equivalent: {m.equivalent})" if m.equivalent else "")
        else:
            what = f"{r.status}" + (f" ({r.by})" if r.by else "")
        lines.append(f"| `{m.name}`: {m.bug} | {m.module} | {what} |")
    return "\n".join(lines)


def summary(results: list[Result]) -> str:
    counted = [r for r in results if r.status in ("killed", "timeout", "survived")]
    killed = [r for r in counted if r.status != "survived"]
    equivalent = [r for r in counted if r.status == "survived" and r.mutant.equivalent]
    stale = [r for r in results if r.status == "stale"]
    text = f"killed {len(killed)} of {len(counted)} mutants"
    if counted:
        text += f" ({100 * len(killed) / len(counted):.1f}%)"
    if equivalent:
        rest = len(counted) - len(equivalent)
        text += f"; {len(equivalent)} survivor(s) equivalent: {len(killed)} of {rest} non-equivalent killed"
        text += f" ({100 * len(killed) / rest:.1f}%)" if rest else ""
    if stale:
        text += f"; {len(stale)} stale (snippet no longer in the source): {', '.join(r.mutant.name for r in stale)}"
    broken = [r for r in results if r.status in ("error", "no tests")]
    if broken:
        text += f"; {len(broken)} not run (pytest error or no tests): {', '.join(r.mutant.name for r in broken)}"
    return text


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--list", action="store_true", help="list the mutants and whether each still applies")
    ap.add_argument("-k", action="append", default=[], metavar="NAME",
                    help="run the mutants whose name contains NAME (repeatable)")
    ap.add_argument("--before", action="store_true", help=f"leave out {NEW} (the kill rate without it)")
    ap.add_argument("--only-new", action="store_true",
                    help=f"run only each mutant's tests in {NEW} (to check that each kills its mutant)")
    ap.add_argument("--no-baseline", action="store_true", help="skip the run of the tests on the unmutated copy")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per mutant (default 600)")
    ap.add_argument("--json", type=Path, help="also write the results here")
    ap.add_argument("--keep", action="store_true", help="keep the temporary copy (its path is printed)")
    args = ap.parse_args(argv)

    names = [m.name for m in MUTANTS]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise SystemExit(f"duplicate mutant names: {sorted(dup)}")
    chosen = [m for m in MUTANTS if not args.k or any(k in m.name for k in args.k)]
    if not chosen:
        raise SystemExit(f"no mutant matches {args.k}")
    with_new = not args.before
    global ONLY_NEW
    ONLY_NEW = args.only_new
    if ONLY_NEW:
        chosen = [m for m in chosen if m.new_tests]

    if args.list:
        width = max(len(m.name) for m in chosen)
        for m in chosen:
            n = occurrences(ROOT, m)
            state = "ok" if n == 1 else ("STALE" if n == 0 else f"AMBIGUOUS ({n}x)")
            missing = missing_tests(ROOT, m)
            print(f"{m.name:<{width}}  {m.module:<20} {state:<6} {m.bug}"
                  + (f"  [MISSING TESTS: {', '.join(missing)}]" if missing else ""))
        modules = sorted({m.module for m in MUTANTS})
        print(f"\n{len(MUTANTS)} mutants over {len(modules)} modules: {', '.join(modules)}")
        return 0

    tmp = Path(tempfile.mkdtemp(prefix="tdiff-mutants-"))
    copy = tmp / "repo"
    t0 = time.perf_counter()
    try:
        shutil.copytree(ROOT, copy, ignore=IGNORE, symlinks=True)
        print(f"copied {ROOT} to {copy}", file=sys.stderr)
        broken: set[str] = set()
        if not args.no_baseline:
            broken, secs = baseline(copy, chosen, with_new, args.timeout)
            print(f"baseline: {secs:.0f} s" + (f"; failing without any mutation, left out: {sorted(broken)}"
                                                if broken else ", every test passes"), file=sys.stderr)
        results = []
        for i, m in enumerate(chosen, 1):
            r = run_one(copy, m, with_new, broken, args.timeout)
            results.append(r)
            print(f"[{i}/{len(chosen)}] {m.name}: {r.status}{' by ' + r.by if r.by else ''} ({r.seconds:.0f} s)",
                  file=sys.stderr)
        total = time.perf_counter() - t0
        print(table(results))
        print()
        print(summary(results) + f"; {total / 60:.1f} min on {os.cpu_count()} cores"
              + ("" if with_new else f" (without {NEW})"))
        if broken:
            print(f"\nleft out (failing without any mutation): {', '.join(sorted(broken))}")
        if args.json:
            args.json.write_text(json.dumps([{"name": r.mutant.name, "module": r.mutant.module, "status": r.status,
                                              "by": r.by, "seconds": round(r.seconds, 1), "tests": r.tests}
                                             for r in results], indent=1) + "\n")
    finally:
        if args.keep:
            print(f"kept {copy}", file=sys.stderr)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
