"""Judging one case: run every opinion, gather the evidence, decide, and run whatever reruns the
verdict asks for. Also the per-check timeout policy: after a hang, later runs wait less.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ..core.backend_spec import BackendSpec
from ..core.case import Case
from ..core.outcome import Outcome
from ..core.rerun import (
    AGAIN,
    ALT_UNSPECIFIED,
    CARRIED,
    FLOAT64_RUN,
    FP64,
    MODELLED,
    PERTURBED,
    REFERENCE,
    ROUNDED,
    ZERO_FILL,
    Rerun,
)
from ..core.settings import RunOptions
from ..execute.workers import InProcess, Job
from ..judge.evidence import Evidence, gather
from ..judge.opinions import Opinions
from ..judge.rules import Declared, Rules
from ..judge.sensitivity import faithful, flushed, native, perturbed_case
from ..judge.verdict import NOT_JUDGED, UNDEFINED, UNSPECIFIED, Verdict, decide
from ..record.tally import Tally

#: after a hang, runs of the check wait this many times its slowest good run (at least HANG_FLOOR s)
HANG_FACTOR = 10.0
HANG_FLOOR = 2.0


class HangBudgetSpent(BaseException):
    """A check's runs have waited on hangs for as long as its per-case timeout: stop searching."""


@dataclass
class Timeouts:
    """Per-check timeouts. Until a run hangs, every run may take `base` seconds. After the first
    hang, runs wait `HANG_FACTOR` times the slowest good run (at least `HANG_FLOOR`, at most `base`),
    and a run that hangs once `base / 2` seconds have passed since the first hang stops the check's
    search, shrinking and reruns: with worker restarts and the reproducer, a hanging kernel costs a
    check about twice its per-case timeout."""

    base: float
    slowest: float = 0.0
    hung_at: float | None = None  # when the first hang was seen (monotonic seconds)
    spent: bool = False  # hangs have cost their budget: run nothing more for this check

    @property
    def hung(self) -> bool:
        return self.hung_at is not None

    def current(self) -> float:
        if self.hung_at is None:
            return self.base
        return min(self.base, max(HANG_FLOOR, HANG_FACTOR * self.slowest))

    def observe(self, outcomes: Iterable[Outcome], waited: float) -> None:
        timed_out = False
        for o in outcomes:
            if o.error is not None and o.error.kind == "timeout":
                timed_out = True
            elif o.error is None:
                self.slowest = max(self.slowest, o.seconds)
        if not timed_out:
            return
        now = time.monotonic()
        if self.hung_at is None:
            self.hung_at = now
        elif now - self.hung_at >= self.base / 2:
            self.spent = True
            raise HangBudgetSpent()


@dataclass
class CaseJudge:
    """Runs a check's opinions on cases and decides each case."""

    executor: Any
    check: Any
    opinions: Opinions
    options: RunOptions
    tally: Tally = field(default_factory=Tally)  # what its cases and runs add up to
    timeouts: Timeouts = field(init=False)
    roles: dict[str, BackendSpec] = field(default_factory=dict)  # outcome label -> the spec that made it
    _rules: Rules | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self.timeouts = Timeouts(self.check.timeout or self.options.timeout)

    # -- running -----------------------------------------------------------------
    def spec(self, spec: BackendSpec) -> BackendSpec:
        """`spec` as this check runs it (the interpreter with the check's pointer checks, masked loads, sampling)."""
        if spec.kind == "interpreter":
            spec = spec.with_(check_pointers=self.check.check_pointers, masked=self.check.masked_loads)
            size = self.check.sample_programs if self.check.sample_programs is not None else self.options.sample_size
            if spec.programs is None and not spec.upcast and spec.sample is None and size > 0:
                threshold = self.options.batched_threshold if spec.batched else self.options.sample_threshold
                spec = spec.with_(sample=(threshold, size, 0))
        return spec

    def target(self) -> Any:
        return self.check if isinstance(self.executor, InProcess) else self.check.ref()

    def run(self, case: Case, specs: list[BackendSpec], cases: list[Case] | None = None) -> list[Outcome]:
        """Run each spec on the case (or on its own of `cases`: a perturbed rerun's inputs)."""
        timeout = self.timeouts.current()
        jobs = [Job(self.target(), s, c) for s, c in zip(specs, cases or [case] * len(specs))]
        t0 = time.perf_counter()
        outcomes = self.executor.run_many(jobs, timeout)
        self.tally.spent["waiting on reruns" if cases else "waiting on opinions"] += time.perf_counter() - t0
        self.timeouts.observe(outcomes, timeout)
        if self.timeouts.hung:
            self.tally.hang_timeout = self.timeouts.current()
        self.tally.ran(outcomes)
        return outcomes

    def _outcomes(self, case: Case, opinions: Opinions) -> dict[str, Outcome]:
        specs = [self.spec(s) for s in opinions.backends]
        outs = self.run(case, specs)
        redo = [i for i, o in enumerate(outs) if o.trace is not None and o.trace.sampled and o.trace.atomics]
        if redo:  # atomics accumulate over every program: a sample cannot be compared, interpret them all
            for i, o in zip(redo, self.run(case, [specs[i].with_(sample=None) for i in redo])):
                outs[i], specs[i] = o, specs[i].with_(sample=None)
        setup = [(o.backend, o.error) for o in outs if o.error is not None and o.error.kind == "setup"]
        if setup:
            backend, error = setup[0]
            raise SetupError(f"{backend} could not run the case: {error.message}")
        labelled: dict[str, Outcome] = {}
        for spec, o in zip(specs, outs):
            role = o.role
            while role.label in labelled:
                role = role.primed()
            o.relabel(role)
            o.spec = spec
            label = role.label
            labelled[label] = o
            self.roles[label] = spec
        return labelled

    def evidence(self, case: Case, opinions: Opinions | None = None) -> Evidence:
        opinions = opinions or self.opinions
        outcomes = self._outcomes(case, opinions)
        labels = list(outcomes)
        pairs = [(labels[a], labels[b]) for a, b in opinions.pairs]
        t0 = time.perf_counter()
        ev = gather(case, self.check.kernel_name, outcomes, self.rules(), pairs)
        ev.reference_on_divergence = opinions.reference_on_divergence
        self.tally.spent["judging"] += time.perf_counter() - t0
        return ev

    def rules(self) -> Rules:
        """The check's rules, built once: each target's tolerance is then resolved once per check."""
        if self._rules is None:
            self._rules = Rules(Declared(self.check.tolerance, self.check.tolerances,
                                         measurable=getattr(self.check, "reference", None) is not None))
        return self._rules

    def rerun_spec(self, need: Rerun) -> BackendSpec:
        """The backend spec of a rerun a verdict asks for: the spec of the opinion it reruns, changed."""
        if need.how == FP64:
            return self.spec(BackendSpec("interpreter", upcast=True))
        if need.how == REFERENCE:
            return self.spec(BackendSpec("reference"))
        if need.how == PERTURBED:  # on `sensitivity.perturbed_case`'s inputs: float64, or the case's own dtypes
            # (native: the reference's own float64 arithmetic in float32, the precision a kernel accumulates in)
            return self.spec(BackendSpec("reference", upcast=not native(need.k), demote=native(need.k),
                                         faithful=faithful(need.k), flushed=flushed(need.k)))
        if need.how == ROUNDED:  # one run of the random-rounding ensemble (k=0: rounded to nearest)
            return self.spec(BackendSpec("interpreter", rounding=need.k))
        if need.how == CARRIED:  # the kernel's stores moved within their admissible rounding
            return self.spec(BackendSpec("interpreter", nudge=need.k))
        if need.how == MODELLED:  # the GPU's arithmetic (k=0: rounded to nearest, else at random)
            return self.spec(BackendSpec("interpreter", gpu_arith=True, rounding=need.k))
        assert need.of is not None  # (the rest rerun an opinion: `Rerun` has them name it)
        spec = self.roles[need.of]
        if need.how == AGAIN:
            return spec
        if need.how == ZERO_FILL:
            return spec.with_(masked="zero")
        if need.how == ALT_UNSPECIFIED:
            return spec.with_(unspecified="alternate")
        return spec.with_(order=need.order)

    def verdict(self, case: Case, final: bool = False, opinions: Opinions | None = None) -> tuple[Verdict, Evidence]:
        """Judge a case; with `final`, gather every rerun a verdict can use (for the report).

        A check declared `unspecified="note"` does not fail a case whose divergence depends on results
        Triton leaves unspecified (the verdict reruns show it): the case is not judged, with the reason."""
        ev = self.evidence(case, opinions)
        v, ev = self._settle(case, ev, final)
        if v.failed and self.check.unspecified == "note" and _computes_unspecified(ev):
            if not final:
                v, ev = self._settle(case, ev, True)
            if v.label in (UNSPECIFIED, UNDEFINED):
                return Verdict(NOT_JUDGED, [f"{v.label} (unspecified='note'): {_unspecified_ops(ev)}"]), ev
        return v, ev

    def _settle(self, case: Case, ev: Evidence, final: bool) -> tuple[Verdict, Evidence]:
        v = decide(ev, final)
        while v.needs:
            needs = [n for n in v.needs if n not in ev.extra]
            if not needs:
                break
            specs = [self.rerun_spec(n) for n in needs]
            cases = [perturbed_case(case, n.k) if n.how == PERTURBED else case for n in needs]
            for n, spec, o in zip(needs, specs, self.run(case, specs, cases)):
                o.spec, o.rerun = spec, n
                ev.add(n, o)
            if any(n == FLOAT64_RUN or n.how in (PERTURBED, MODELLED, CARRIED) for n in needs):
                # the float64 run decides differences at the range edge, the perturbed reference runs flagged
                # elements, the modelled runs NaNs and infinities on one side: compare again
                pairs = [(p.a, p.b) for p in ev.pairs]
                extra = ev.extra
                third = ev.reference_on_divergence
                t0 = time.perf_counter()
                ev = gather(case, self.check.kernel_name, ev.outcomes, self.rules(), pairs, extra.get(FLOAT64_RUN),
                            extra)
                self.tally.spent["judging"] += time.perf_counter() - t0
                ev.extra.update(extra)
                ev.reference_on_divergence = third
            v = decide(ev, final)
        return v, ev


def _computes_unspecified(ev: Evidence) -> bool:
    return any(o.trace is not None and (o.trace.unspecified or o.trace.ub) for o in ev.outcomes.values())


def _unspecified_ops(ev: Evidence) -> str:
    """The unspecified operations the interpreter ran, without lane counts (a stable reason)."""
    found = sorted({k for o in ev.outcomes.values() if o.trace is not None
                    for k in (*o.trace.unspecified, *(f"{u.what} at {u.line}" for u in o.trace.ub))})
    return "; ".join(found[:2]) + ("; ..." if len(found) > 2 else "")


class SetupError(Exception):
    """tdiff could not run a case at all (not a divergence)."""


def error_text(exc: BaseException) -> str:
    """The message of a check run's own error, which errors the check: tdiff could not run a case, hangs spent its
    time, or tdiff itself or the declaration failed."""
    if isinstance(exc, SetupError):
        return str(exc)
    if isinstance(exc, HangBudgetSpent):
        return "hangs cost more than the per-case timeout and no failing case was kept"
    return f"{type(exc).__name__}: {exc}"
