"""`--tdiff-localize` wiring: after a `compiled wrong` verdict the runner asks the localizer which pass, and
hands it a GPU run and an agreement test built from the verdict's own opinions (the localizer itself:
tests/test_stages.py; on a GPU: bench/gpu/stages_gpu.py)."""

from __future__ import annotations

import pytest

import tdiff
from tdiff.core.backend_spec import BackendSpec
from tdiff.core.outcome import Outcome
from tdiff.drive import localize as loc_mod
from tdiff.execute.stages import StageUnsupported
from tdiff.judge.verdict import Verdict
from tests.test_budget import twice


class _Found:
    def __init__(self, text: str, snapshot: str | None = None) -> None:
        self.text = text
        self.found = type("Loc", (), {"snapshot": snapshot, "before": None})() if snapshot else None

    def sentence(self) -> str:
        return self.text


def _opts(**more):
    return tdiff.RunOptions(profile="ci", max_examples=5, corpus_dir=None, repro_dir=None, isolation="none",
                            backends=("tests.faulty:FakeCompiledWrong", "interpreter"), shrink_budget=5, **more)


def test_a_compiled_wrong_verdict_names_the_pass_the_localizer_found(monkeypatch):
    calls = []

    def fake_localize(check, case, *, run, agrees, spec):
        wrong = run(spec)  # the compiled lane as it was: still wrong
        right = run(BackendSpec("tests.faulty:FakeCompiledExact"))  # a snapshot that agrees
        calls.append((spec.kind, agrees(wrong), agrees(right)))
        return _Found("first diverging after TritonGPUPlanted (make_ttgir)", snapshot="/tmp/k-after.ttgir")

    monkeypatch.setattr(loc_mod, "localize", fake_localize)
    with pytest.raises(tdiff.DivergenceError) as err:
        tdiff.verify(twice, options=_opts(localize=True))
    assert calls == [("tests.faulty:FakeCompiledWrong", False, True)]
    assert "which pass: first diverging after TritonGPUPlanted (make_ttgir)" in str(err.value)
    assert "the IR after it: /tmp/k-after.ttgir (replay it with --tdiff-backends 'compiled[ir=/tmp/k-after.ttgir]')" \
        in str(err.value)


def test_without_the_option_the_localizer_is_not_asked(monkeypatch):
    monkeypatch.setattr(loc_mod, "localize", lambda *a, **k: pytest.fail("localize ran without --tdiff-localize"))
    with pytest.raises(tdiff.DivergenceError) as err:
        tdiff.verify(twice, options=_opts())
    assert "which pass" not in str(err.value)


def test_a_localizer_that_cannot_run_says_why_and_the_divergence_stands(monkeypatch):
    def unsupported(*a, **k):
        raise StageUnsupported("localize needs the GPU's compute capability: no CUDA GPU here")

    monkeypatch.setattr(loc_mod, "localize", unsupported)
    with pytest.raises(tdiff.DivergenceError) as err:
        tdiff.verify(twice, options=_opts(localize=True))
    assert "which pass: not localized (localize needs the GPU's compute capability: no CUDA GPU here)" \
        in str(err.value)
    assert "compiled wrong" in str(err.value)


def test_only_a_compiled_lane_compiled_from_source_is_localized():
    roles = {label: Outcome(label, spec=spec) for label, spec in (
        ("compiled", BackendSpec("compiled")), ("interpreter", BackendSpec("interpreter")),
        ("compiled[from=ttgir]", BackendSpec("compiled", stage="ttgir")))}
    assert loc_mod.wrong_compiled_role(Verdict("compiled wrong", ["x"], pair=("compiled", "interpreter"),
                                               kind="values"), roles) == "compiled"
    assert loc_mod.wrong_compiled_role(Verdict("interpreter wrong", ["x"], pair=("compiled", "interpreter"),
                                               kind="values"), roles) is None
    assert loc_mod.wrong_compiled_role(Verdict("compiled[from=ttgir] wrong", ["x"],
                                               pair=("compiled[from=ttgir]", "interpreter"), kind="values"),
                                       roles) is None
    assert loc_mod.wrong_compiled_role(Verdict("passed"), roles) is None


def test_the_option_parses():
    from tdiff.options import build

    given = {"localize": "on"}
    assert build(given.get, __import__("pathlib").Path(".")).localize is True
    with pytest.raises(ValueError, match="on or off"):
        build({"localize": "yes"}.get, __import__("pathlib").Path("."))
