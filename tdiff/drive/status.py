"""A check's status, decided once, at the end of its run, from what the run found (`Facts`): `decide_status`.

Nothing else sets a check's status: the search, the replay of the corpus and the run's own errors only record
facts (a replayed entry's state, a corpus conflict, the message of an error).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..record.results import Divergence
from ..record.status import Status

#: the states of a replayed corpus entry (`Replayed.state`); "conflict": copies of an entry that disagree
REPLAY_STATES = ("passed", "failed", "known", "fixed", "not judged", "error", "conflict")


@dataclass(frozen=True)
class Replayed:
    """What replaying one corpus entry found: its state, and the note that says why it fails (or errors) the
    check where it does ("" if none); the entry's id (None: a conflict, replayed from none of its copies), the
    notes replaying it made, in order, the other Triton it was recorded under, its known divergence still showing
    (entry path, recorded divergence), and the divergence it failed with."""

    state: str
    note: str = ""
    entry: str | None = None
    notes: tuple[str, ...] = ()
    recorded_under: str | None = None
    known: tuple[Any, dict[str, Any]] | None = None
    divergence: Divergence | None = None


@dataclass(frozen=True)
class Facts:
    """What a check's run found, from which its status is decided."""

    expects_failure: bool = False  # a finding's check (xfail): its known divergences still showing fail it
    error: str | None = None  # the run's own error (a setup error, hangs, an exception): its message
    replays: Sequence[Replayed] = ()  # corpus conflicts and replayed entries, in the order they were met
    failures: int = 0  # divergences that fail the check
    judged: int = 0  # cases judged by the search
    never_ran: Sequence[str] = ()  # kernel code no case ran, under `--tdiff-coverage require`


def coverage_note(never_ran: Sequence[str]) -> str:
    """The note of a check that failed `--tdiff-coverage require`."""
    return "--tdiff-coverage require: kernel code no case ran: " + "; ".join(never_ran)


def decide_status(facts: Facts) -> tuple[Status, str]:
    """The check's status (passed, failed, skipped or error: `Status`) and why (the note that failed or errored it
    where no divergence did; "" if none).

    An error (the run's own, an unreadable corpus entry, a corpus conflict) beats everything. Otherwise the check
    fails on a divergence, on kernel code that never ran (`--tdiff-coverage require`), or on a stale entry: a
    finding's check (xfail) fails on its known divergences still showing (so a strict xfail says XPASS once they
    are gone), any other check on a known divergence that no longer shows. With nothing judged (no case, no
    entry passed) it is skipped."""
    if facts.error is not None:
        return Status.ERROR, facts.error
    stale = "known" if facts.expects_failure else "fixed"
    why = next((r.note for r in facts.replays if r.state in ("conflict", "error", stale) and r.note), "")
    if any(r.state in ("conflict", "error") for r in facts.replays):
        return Status.ERROR, why
    if facts.never_ran:
        why = why or coverage_note(facts.never_ran)
    if facts.failures or facts.never_ran or any(r.state == stale for r in facts.replays):
        return Status.FAILED, why
    if facts.judged <= 0 and not any(r.state == "passed" for r in facts.replays):
        return Status.SKIPPED, why
    return Status.PASSED, why
