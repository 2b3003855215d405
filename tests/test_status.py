"""A check's status is decided in one place, `tdiff.drive.status.decide_status`, from the facts its run found;
`Runner.run_check` calls it once, at the end, and nothing else sets the status."""

from __future__ import annotations

import tdiff
from tdiff.drive import runner as runner_mod
from tdiff.drive.status import Facts, Replayed, coverage_note, decide_status
from tests.test_budget import twice

KNOWN = Replayed("known", "corpus entry e1 still shows its known divergence")
FIXED = Replayed("fixed", "corpus entry e2 recorded a known divergence that no longer shows")


def test_an_error_beats_every_failure():
    facts = Facts(error="SetupError: no launch", failures=2, replays=(FIXED, Replayed("conflict", "two copies")),
                  never_ran=("k: line 3",), judged=5)
    assert decide_status(facts) == ("error", "SetupError: no launch")
    assert decide_status(Facts(error="")) == ("error", "")  # (an error without a message is still one)


def test_a_corpus_conflict_or_an_unreadable_entry_is_an_error_named_by_the_first_note():
    conflict, unreadable = Replayed("conflict", "two copies disagree"), Replayed("error", "entry.json: bad json")
    assert decide_status(Facts(replays=(Replayed("passed"), unreadable, conflict), failures=1, judged=3)) \
        == ("error", "entry.json: bad json")
    # a stale entry met first names it: the notes are taken in the order the replay met them
    assert decide_status(Facts(replays=(FIXED, conflict), judged=3)) == ("error", FIXED.note)
    assert decide_status(Facts(replays=(Replayed("error", ""), conflict), judged=3)) == ("error", conflict.note)


def test_a_finding_fails_on_its_known_divergence_and_passes_once_it_is_gone():
    assert decide_status(Facts(expects_failure=True, replays=(KNOWN,), judged=4)) == ("failed", KNOWN.note)
    assert decide_status(Facts(expects_failure=True, replays=(FIXED,), judged=4)) == ("passed", "")
    # any other check: the opposite
    assert decide_status(Facts(replays=(KNOWN,), judged=4)) == ("passed", "")
    assert decide_status(Facts(replays=(FIXED,), judged=4)) == ("failed", FIXED.note)


def test_a_divergence_fails_the_check():
    assert decide_status(Facts(failures=1, judged=1)) == ("failed", "")
    assert decide_status(Facts(failures=1)) == ("failed", "")  # (a replayed entry's, with no case searched)


def test_nothing_judged_is_skipped_unless_an_entry_passed():
    assert decide_status(Facts()) == ("skipped", "")
    assert decide_status(Facts(replays=(Replayed("not judged"),))) == ("skipped", "")
    assert decide_status(Facts(replays=(Replayed("passed"),))) == ("passed", "")
    assert decide_status(Facts(judged=1)) == ("passed", "")


def test_kernel_code_that_never_ran_fails_a_coverage_require_run():
    never = ("k.py:4:k: line 9",)
    assert decide_status(Facts(never_ran=never, judged=3)) == ("failed", coverage_note(never))
    assert decide_status(Facts(never_ran=never)) == ("failed", coverage_note(never))  # (not skipped)
    # a stale entry's note names the failure first
    assert decide_status(Facts(never_ran=never, replays=(FIXED,), judged=3)) == ("failed", FIXED.note)


def _opts(**more):
    return tdiff.RunOptions(profile="ci", max_examples=5, corpus_dir=None, repro_dir=None, isolation="none",
                            backends=("tests.faulty:FakeCompiledWrong", "interpreter"), shrink_budget=0, **more)


def test_run_check_takes_the_status_from_one_decision_at_its_end(monkeypatch):
    seen = []

    def spy(facts):
        seen.append(facts)
        return decide_status(facts)

    monkeypatch.setattr(runner_mod, "decide_status", spy)
    (check,) = tdiff.checks_of(twice)
    result = tdiff.Runner(_opts()).run_check(check)
    assert len(seen) == 1 and seen[0].failures == len(result.failures) == 1 and seen[0].error is None
    assert (result.status, result.why) == decide_status(seen[0]) == ("failed", "")
    # whatever the decision says is the status: nothing else sets it
    monkeypatch.setattr(runner_mod, "decide_status", lambda facts: ("skipped", "decided"))
    result = tdiff.Runner(_opts()).run_check(check)
    assert (result.status, result.why) == ("skipped", "decided") and result.failures


def test_a_run_that_errors_records_the_error_as_a_fact(monkeypatch):
    seen = []
    monkeypatch.setattr(runner_mod, "decide_status", lambda facts: seen.append(facts) or decide_status(facts))
    monkeypatch.setattr(runner_mod, "search", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("boom")))
    (check,) = tdiff.checks_of(twice)
    result = tdiff.Runner(_opts(coverage="require")).run_check(check)
    assert [f.error for f in seen] == ["RuntimeError: boom"] and not seen[0].never_ran
    assert (result.status, result.why) == ("error", "RuntimeError: boom") and result.notes[-1] == "RuntimeError: boom"
