"""Backend identities end to end (issue 42): what users write is parsed once, where they write it, and a label is
read back only in tdiff/core/backend_spec.py; everything downstream holds a `BackendSpec`, an outcome's `Role` or a
worker's `Lane`."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from tdiff.core.backend_spec import BackendSpec, Lane, role_of
from tdiff.core.outcome import Outcome

ROOT = Path(__file__).resolve().parents[1]
#: the functions that parse what users write or read a label back (their one home: core/backend_spec.py)
READERS = {"parse_all", "role_of", "label_kind", "label_lane"}
#: where tdiff may call them, and how often: each a boundary where text comes in
ALLOWED = {
    "tdiff/options.py": 1,  # --tdiff-backends: the run's backends as the user wrote them
    "tdiff/declaration.py": 1,  # @check(backends=[...]): the check's
    "tdiff/core/settings.py": 1,  # RunOptions(backends=(...)): the public API takes strings
    "tdiff/record/corpus.py": 1,  # a recorded divergence's sides, stored as labels in the entry's JSON
}


def _readers_called(tree: ast.AST) -> int:
    n = 0
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
        if name in READERS or (name == "parse" and isinstance(f, ast.Attribute)
                               and isinstance(f.value, ast.Name) and f.value.id == "BackendSpec"):
            n += 1
    return n


def calls_outside_backend_spec() -> dict[str, int]:
    """Calls of the parsers and label readers in tdiff/, outside core/backend_spec.py, per file."""
    found = {}
    for path in sorted((ROOT / "tdiff").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel != "tdiff/core/backend_spec.py":
            n = _readers_called(ast.parse(path.read_text(), rel))
            if n:
                found[rel] = n
    return found


def test_labels_are_parsed_and_read_only_at_the_boundaries():
    assert calls_outside_backend_spec() == ALLOWED


def test_the_guard_sees_a_call():
    tree = ast.parse("kind = label_kind(o.backend)\nspec = BackendSpec.parse(text)\nx = backend_spec.role_of(s)\n")
    assert _readers_called(tree) == 3


@pytest.mark.parametrize("label, kind, base, lane, elsewhere, variant", [
    ("compiled", "compiled", "compiled", "compiled", False, False),
    ("compiled[num_warps=2]:cuda", "compiled", "compiled", "compiled[num_warps=2]", False, True),
    (f"interpreter@{sys.executable}:zero-fill", "interpreter", "interpreter", f"interpreter@{sys.executable}", True,
     False),
    ("interpreter:reversed:fp64", "interpreter", "interpreter", "interpreter", False, False),
    ("reference:fp32:faithful3", "reference", "reference", "reference", False, False),
    ("reference", "reference", "reference", "reference", False, False),
])
def test_a_role_is_built_from_its_spec_as_its_label_says(label, kind, base, lane, elsewhere, variant):
    r = BackendSpec.parse(label).role
    assert (r.label, r.kind, r.base, r.lane, r.elsewhere, r.variant) == (label, kind, base, lane, elsewhere, variant)
    assert r.is_reference == (kind == "reference") and r == role_of(label)  # (the corpus reads stored labels so)
    assert r.options == tuple(label.split(":")[1:])
    o = Outcome.of(BackendSpec.parse(label))
    assert (o.backend, o.role) == (label, r)


def test_a_primed_role_is_its_own_kind_unless_it_has_run_options():
    p = BackendSpec("compiled").role.primed()
    assert (p.label, p.kind, p.base, p.lane) == ("compiled'", "compiled'", "compiled", "compiled'")
    assert p == role_of("compiled'") and p.primed() == role_of("compiled''")
    q = BackendSpec.parse("interpreter:reversed").role.primed()
    assert (q.label, q.kind, q.options) == ("interpreter:reversed'", "interpreter", ("reversed'",))
    assert q == role_of("interpreter:reversed'")


def test_a_lane_keeps_its_parts():
    lane = BackendSpec.parse(f"interpreter@{sys.executable}").lane
    assert lane == f"cpu@{sys.executable}" and (lane.work, lane.python) == ("cpu", sys.executable)
    assert BackendSpec("compiled").lane == Lane("gpu") == "gpu" and Lane("gpu").python is None


def test_an_outcome_holds_the_role_its_backend_gave_it_and_a_relabel_replaces_it():
    fake = BackendSpec("compiled").role  # (a test backend playing the compiled side)
    o = Outcome("compiled", role=fake)
    assert o.role is fake
    o.relabel(fake.primed())  # the judge primes a repeated opinion
    assert (o.backend, o.role.kind, o.role.base) == ("compiled'", "compiled'", "compiled")
    with pytest.raises(TypeError, match="needs the role"):
        Outcome("compiled")  # (no role, no spec: nothing reads one from the label)
    assert Outcome("x", spec=BackendSpec("interpreter")).role.kind == "interpreter"


def test_the_judge_primes_a_repeated_opinion():
    import torch

    import tdiff
    from suites.vector_add import add_kernel
    from tdiff.core.case import Case
    from tdiff.strategies import tensor_arg

    check = add_kernel.__tdiff_checks__[0]
    runner = tdiff.Runner(tdiff.RunOptions(backends=("interpreter", "interpreter:reversed", "interpreter:reversed"),
                                           profile="ci", corpus_dir=None, repro_dir=None, isolation="none"))
    judge = runner.judge(check)
    x = torch.ones(5)
    case = Case({"x": tensor_arg(x), "y": tensor_arg(x), "n": 5})
    ev = judge.evidence(case)
    assert [(k, ev.role(k).kind) for k in ev.outcomes if k != "reference"] == [
        ("interpreter", "interpreter"), ("interpreter:reversed", "interpreter"),
        ("interpreter:reversed'", "interpreter")]
