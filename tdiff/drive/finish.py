"""A failing case's divergence, step by step: shrink -> confirm (the final verdict) -> localize -> write (the
kernel reduced for the reproducer, the reproducer, pictures; the corpus entry) -> report.

Each step returns a frozen value: what it produced and the report lines it adds. `Runner.finish` composes them
and builds the `Divergence` once, from those values (`divergence`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core.case import Case
from ..core.outcome import Outcome
from ..core.settings import RunOptions, prepare_run_dir
from ..judge.evidence import Evidence
from ..judge.verdict import Verdict
from ..record import corpus as corpus_mod
from ..record import repro
from ..record.report import _comparisons, render, save_pictures
from ..record.results import Divergence
from ..record.shrink import ShrinkInfo, shrink
from .case_judge import CaseJudge, HangBudgetSpent
from .localize import which_pass
from .pipeline import CaseRecord
from .reduce_kernel import KernelReduction, reduce_kernel

if TYPE_CHECKING:
    from ..declaration import Check


@dataclass(frozen=True)
class Steps:
    """What every step reads: the run's options, the check's judge, and where each step says it started."""

    options: RunOptions
    judge: CaseJudge
    phase: Callable[[str], None]
    known: tuple[tuple[Any, dict[str, Any]], ...] = ()  # replayed entries' known divergences still showing

    @property
    def spent(self) -> bool:
        """Whether hangs spent the check's time: no step that reruns the case runs then."""
        return bool(self.judge.timeouts.spent)


@dataclass(frozen=True)
class Shrunk:
    """The case as shrunk (as found where it was not shrunk), its verdict and evidence."""

    case: Case
    verdict: Verdict
    evidence: Evidence
    info: ShrinkInfo | None = None
    lines: tuple[str, ...] = ()


@dataclass(frozen=True)
class Confirmed:
    """The shrunk case with its final verdict (`--tdiff-verdict`), where that rerun still fails; else as shrunk."""

    case: Case
    verdict: Verdict
    evidence: Evidence


@dataclass(frozen=True)
class Localized:
    """The report's line naming the compiler pass (`--tdiff-localize`), if any."""

    lines: tuple[str, ...] = ()


@dataclass(frozen=True)
class Reduced:
    """The kernel reduced for the reproducer (None: off, or nothing smaller) and what reduction did, or why not."""

    reduction: KernelReduction | None = None
    note: str = ""
    lines: tuple[str, ...] = ()


@dataclass(frozen=True)
class Written:
    """The reproducer (or why none), what reducing its kernel did, its pictures, and the corpus entry."""

    repro_path: Path | None = None
    repro_note: str = ""
    kernel_reduced: str = ""
    pictures: tuple[Path, ...] = ()
    corpus_path: Path | None = None
    lines: tuple[str, ...] = ()


def same_divergence(recorded: dict, verdict: Any) -> bool:
    """Whether a failure is the one a known-divergence entry recorded: the same kind, in a target it named."""
    kind, targets = recorded.get("kind"), set(recorded.get("targets") or ())
    if kind and verdict.kind and kind != verdict.kind:
        return False
    return not (targets and verdict.targets and not targets & set(verdict.targets))


def known_entry(known: Sequence[tuple[Any, dict[str, Any]]], verdict: Verdict) -> Any:
    """The replayed corpus entry that records `verdict`'s divergence as known (still showing: `known`, entry path
    and recorded divergence), or None."""
    return next((path for path, rec in known if same_divergence(rec, verdict)), None)


def confirming(steps: Steps) -> bool:
    """Whether the check expects its failure (an xfail: a known finding) and its first divergence only confirms it:
    not shrunk, no reproducer (`RunOptions.shrink_expected` off, as in pytest runs without --runxfail)."""
    return steps.judge.check.expects_failure() and not steps.options.shrink_expected


def shrink_found(steps: Steps, found: CaseRecord, source: str, known: Any) -> Shrunk:
    """A search's failing case shrunk within the shrink budget; any other (a fuzz run's: its engine shrinks; a
    replayed entry's; a known divergence's: its entry is its minimal case) as found."""
    case, verdict, ev, info = found.case, found.verdict, found.evidence, None
    if source == "search" and steps.options.shrink_budget > 0 and not steps.spent and known is None \
            and not confirming(steps):
        steps.phase("shrinking")
        with contextlib.suppress(HangBudgetSpent):  # hangs cost enough: keep the case as found
            case, verdict, ev, info = shrink(case, verdict, ev, lambda c: steps.judge.verdict(c),
                                             steps.options.shrink_budget)
    return Shrunk(case, verdict, ev, info, (f"shrunk: {info.describe()}",) if info is not None else ())


def confirm(steps: Steps, shrunk: Shrunk) -> Confirmed:
    """The final verdict of the shrunk case, where it still fails."""
    verdict, ev = shrunk.verdict, shrunk.evidence
    if steps.options.verdict and not steps.spent:
        with contextlib.suppress(HangBudgetSpent):
            final, final_ev = steps.judge.verdict(shrunk.case, final=True)
            if final.failed:
                verdict, ev = final, final_ev
    return Confirmed(shrunk.case, verdict, ev)


def localize(steps: Steps, confirmed: Confirmed) -> Localized:
    """The compiler pass a `compiled wrong` case goes wrong after (`--tdiff-localize`)."""
    if not steps.options.localize or steps.spent:
        return Localized()
    steps.phase("localizing the compiler pass")
    line = which_pass(steps.judge, confirmed.case, confirmed.verdict, confirmed.evidence)
    return Localized((line,) if line is not None else ())


def reduce(steps: Steps, confirmed: Confirmed) -> Reduced:
    """The kernel reduced on the case for the reproducer (`--tdiff-reduce-budget`), with a line saying how much,
    or why not."""
    if steps.options.reduce_budget <= 0 or steps.spent:
        return Reduced()
    if steps.judge.check.expects_failure() and not steps.options.reduce_expected:
        # (a known finding: pytest's xfail expects it; its reduction would cost every run the budget)
        why = ("the check expects this failure (xfail): kernels of expected failures are not reduced in a "
               "pytest run; `tdiff replay --repro-dir DIR ENTRY` reduces it")
        return Reduced(None, why, (f"kernel not reduced: {why}",))
    steps.phase("reducing the kernel")
    try:
        got = reduce_kernel(steps.judge, confirmed.case, confirmed.verdict, confirmed.evidence,
                            steps.options.reduce_budget)
    except HangBudgetSpent:
        got = "hangs spent the check's budget"
    except Exception as exc:  # tdiff's own failure: the reproducer carries the whole kernel, and says why
        got = f"tdiff failed: {type(exc).__name__}: {exc}"
    if isinstance(got, str):
        return Reduced(None, got, (f"kernel not reduced: {got}",))
    return Reduced(got, got.describe(), (got.describe(),))


def write_reproducer(steps: Steps, check: Check, confirmed: Confirmed, known: Any,
                     dry_launch: Callable[[Case], Outcome]) -> Written:
    """The reproducer (with the reduced kernel where there is one) and the pictures, in the repro folder; or, for
    a known divergence, why none. `dry_launch` records a case's launches where no opinion did."""
    options = steps.options
    if options.repro_dir is None:
        return Written()
    if known is not None:
        return Written(lines=(f"reproducer: not written (the known divergence of {known}, its minimal case; "
                              f"`tdiff replay --repro-dir DIR {known}` writes one)",))
    if confirming(steps):
        return Written(lines=("reproducer: not written (an expected divergence, as found: pytest --runxfail "
                              "shrinks it and writes one)",))
    case, verdict, ev = confirmed.case, confirmed.verdict, confirmed.evidence
    reduced = reduce(steps, confirmed)
    lines = list(reduced.lines)
    steps.phase("writing the reproducer")
    prepare_run_dir(options.run_dir, options.repro_dir)
    folder = Path(options.repro_dir) / corpus_mod.case_folder(check, case)
    path, note = None, ""
    try:
        dry = None if any(o.launches for o in ev.outcomes.values()) else dry_launch(case)
        path = _write(folder, check, confirmed, dry, steps.judge, reduced.reduction, lines)
        lines.append(f"reproducer: {path} (run: python {path})")
    except Exception as exc:
        note = f"{type(exc).__name__}: {exc}"
        lines.append(f"reproducer: not written ({note})")
    pictures = tuple(save_pictures(_comparisons(ev, verdict), folder))
    lines += [f"picture: {p}" for p in pictures]
    return Written(path, note, reduced.note, pictures, lines=tuple(lines))


def _write(folder: Path, check: Check, confirmed: Confirmed, dry: Outcome | None, judge: CaseJudge,
           reduced: KernelReduction | None, lines: list[str]) -> Path:
    """The reproducer, with the reduced kernel where there is one and it reproduces in a fresh process; else with
    the whole kernel (a line of `lines` says why)."""
    case = confirmed.case
    if reduced is not None and reduced.verdict is not None and reduced.evidence is not None:  # (set together)
        try:
            return repro.write(folder, reduced.check, case, reduced.verdict, reduced.evidence, dry=dry,
                               case_timeout=judge.timeouts.current(),
                               reduced=reduced.describe() + "\n\n" + reduced.diff)
        except Exception as exc:
            lines.append(f"the reduced kernel's reproducer was not kept ({type(exc).__name__}: {exc}): "
                         "it carries the whole kernel")
    return repro.write(folder, check, case, confirmed.verdict, confirmed.evidence, dry=dry,
                       case_timeout=judge.timeouts.current())


def write_entry(steps: Steps, check: Check, confirmed: Confirmed, source: str) -> Written:
    """The corpus entry of a search's or fuzz run's divergence (none for a known divergence: its entry exists)."""
    options = steps.options
    if options.corpus_dir is None or source not in ("search", "fuzz"):
        return Written()
    same = known_entry(steps.known, confirmed.verdict)
    if same is not None:
        return Written(lines=(f"corpus entry: not written (the known divergence of {same})",))
    try:
        prepare_run_dir(options.run_dir, options.corpus_dir)
        path = corpus_mod.write(Path(options.corpus_dir), check, confirmed.case, confirmed.verdict,
                                confirmed.evidence)
    except Exception as exc:
        return Written(lines=(f"corpus entry: not written ({type(exc).__name__}: {exc})",))
    return Written(corpus_path=path, lines=(f"corpus entry: {path}",))


def divergence(check: Check, source: str, shrunk: Shrunk, confirmed: Confirmed, localized: Localized,
               reproducer: Written, entry: Written) -> Divergence:
    """The divergence the steps produced, with its report: the steps' lines in order, then where it came from."""
    lines = [*shrunk.lines, *localized.lines, *reproducer.lines, *entry.lines]
    if source not in ("search", "fuzz"):
        lines.append(f"replayed from {source}")
    return Divergence(check.id, confirmed.case, confirmed.verdict, confirmed.evidence,
                      report=render(check.id, confirmed.case, confirmed.verdict, confirmed.evidence, lines),
                      shrink=shrunk.info, repro_path=reproducer.repro_path, corpus_path=entry.corpus_path,
                      pictures=list(reproducer.pictures), source=source, repro_note=reproducer.repro_note,
                      kernel_reduced=reproducer.kernel_reduced)
