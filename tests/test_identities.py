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
    "tdiff/core/outcome.py": 1,  # an Outcome's role, read once when it is made from the label its backend gave it
    "tdiff/judge/evidence.py": 1,  # Evidence.role: a side it holds no outcome of (a verdict's from another run)
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
    ("compiled'", "compiled'", "compiled", "compiled'", False, False),  # a repeated opinion is its own kind
    ("compiled[num_warps=2]:cuda", "compiled", "compiled", "compiled[num_warps=2]", False, True),
    ("interpreter@/venv/bin/python:zero-fill", "interpreter", "interpreter", "interpreter@/venv/bin/python", True,
     False),
    ("reference", "reference", "reference", "reference", False, False),
])
def test_a_role_is_what_its_label_says(label, kind, base, lane, elsewhere, variant):
    r = role_of(label)
    assert (r.kind, r.base, r.lane, r.elsewhere, r.variant) == (kind, base, lane, elsewhere, variant)
    assert r.is_reference == (kind == "reference") and Outcome(label).role == r


def test_a_lane_keeps_its_parts():
    lane = BackendSpec.parse(f"interpreter@{sys.executable}").lane
    assert lane == f"cpu@{sys.executable}" and (lane.work, lane.python) == ("cpu", sys.executable)
    assert BackendSpec("compiled").lane == Lane("gpu") == "gpu" and Lane("gpu").python is None


def test_an_outcome_reads_its_role_once_and_a_relabel_replaces_it(monkeypatch):
    from tdiff.core import outcome as outcome_module

    o = Outcome("compiled")
    assert o.role.kind == "compiled"
    monkeypatch.setattr(outcome_module, "role_of", lambda label: pytest.fail("the label read again"))
    assert o.role.base == "compiled" and o.role.label == "compiled"  # (held, not read from the label again)
    o.relabel("compiled'")  # the judge primes a repeated opinion
    assert (o.backend, o.role.kind, o.role.base) == ("compiled'", "compiled'", "compiled")
