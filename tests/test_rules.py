"""A check's tolerances are resolved once per target per check (`judge.rules.Declared`), and each compared target is
judged by one `TargetRule` resolved when its comparison starts. CPU only."""

import torch

import tdiff
from tdiff.core import dtypes
from tdiff.core.case import Case
from tdiff.core.tolerance import Tolerance
from tdiff.judge import rules as R
from tdiff.strategies import tensor_arg
from tests import sensitivity_kernels as S

OPTS = tdiff.RunOptions(profile="ci", corpus_dir=None, repro_dir=None, shrink_budget=5)


def test_a_declared_tolerance_overrides_per_path_and_is_resolved_once():
    d = R.Declared(tolerance="transcendental", tolerances={"y": Tolerance(rtol=0.5, atol=0.0)})
    first = d.tolerance_for("y", "float32", {"farith"})
    assert first.rtol == 0.5
    assert d.tolerance_for("y", "float32", {"farith"}) is first
    assert d.tolerance_for("x", "float32", {"farith"}).rtol == Tolerance.preset("transcendental", "float32").rtol
    assert d.of("y") is d.tolerances["y"] and d.of("x") == "transcendental" and d.declares("x")
    assert not R.Declared().declares("x")


def test_target_rule_waits_for_the_measured_scale_only_where_tdiff_chose_the_tolerance():
    f32 = dtypes.dtype("float32")
    measurable = R.Rules(R.Declared(measurable=True))
    assert measurable.target("y", f32, {"farith"}, reference=True).measured
    assert not measurable.target("y", f32, {"farith"}, reference=False).measured  # two backends: no reference
    assert not measurable.target("y", f32, {"dot:tf32"}, reference=True).measured  # tf32: the kernel's choice
    assert not measurable.target("y", dtypes.dtype("int32"), {"iarith"}, reference=True).measured
    declared = R.Rules(R.Declared(tolerances={"y": "arith"}, measurable=True))
    assert not declared.target("y", f32, {"farith"}, reference=True).measured
    assert declared.target("z", f32, {"farith"}, reference=True).measured
    loose = measurable.target("y", f32, {"farith"}, True, tf32_ops={"farith", "dot:tf32"})
    assert loose.tf32 is not None and loose.tf32.rtol > loose.tolerance.rtol


def test_judging_many_cases_resolves_each_target_once(monkeypatch):
    calls = []
    real = R.from_ops
    monkeypatch.setattr(R, "from_ops", lambda *a, **k: calls.append(a) or real(*a, **k))
    check = S.offset_roundtrip.__tdiff_checks__[0]
    runner = tdiff.Runner(OPTS.with_(isolation="none"))
    judge = runner.judge(check)
    for i in range(4):
        x = torch.arange(8, dtype=torch.float32) + i
        judge.verdict(Case({"x": tensor_arg(x)}))
    resolved = judge.rules().declared._resolved
    assert resolved and len(calls) == len(resolved), (len(calls), list(resolved))
