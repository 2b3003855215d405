"""Kernel reduction of a divergence (after its case is shrunk): the oracle that judges a candidate kernel on
the case, and the reduction run under the time budget (`record.reduce` holds the candidates and the loop).

A candidate is kept only if the case, judged again with it in place of the kernel, gives the same verdict
(label, kind, targets and pair of backends: a kernel bug that turns into a crash, or another output
diverging, is rejected) on the same outputs (each kernel-side backend's diverging targets bit for bit, or
for an error the same kind of error), and computes what the original computes on a guard case (the shrunk
case with fresh values: shrinking zeroed most of them). Where the verdict involves the compiled backend and
it cannot run here (no GPU), the case must be judged as the original is by the opinions that run here (an
interpreter-side finding such as a race may not appear), with the interpreter's outputs on the verdict's
targets bit for bit, and the candidate must still compile to PTX; the report says the compiled verdict was
not rechecked.
"""

from __future__ import annotations

import dataclasses
import textwrap
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..core import dtypes, kernels
from ..core.backend_spec import COMPILE_ONLY, BackendSpec
from ..core.case import Case
from ..core.outcome import Outcome
from ..execute.workers import InProcess
from ..judge.evidence import Evidence
from ..judge.rules import Rules
from ..judge.targets import unchanged, view
from ..judge.verdict import Verdict
from ..record.reduce import Reduction, collect, reduce, unified_diff
from ..record.reduce.build import ReducedRef, build
from ..record.repro import REPRODUCIBLE
from ..record.tally import Tally
from .case_judge import CaseJudge, HangBudgetSpent, SetupError

#: verdicts not reduced: a run that may not repeat, or a crash or hang each candidate would pay for again
_NOT_REDUCED = ("nondeterministic",)
#: a candidate's runs may take this many times the original's (at least MIN_TIMEOUT s) before it is dropped
TIMEOUT_FACTOR, MIN_TIMEOUT = 10.0, 2.0
#: a candidate whose runs take more than this many times the original's (and over SLOWER_FLOOR s) is rejected: a
#: reduction is smaller, not slower (every program looping over all rows once its share is cut passes on the case,
#: then times out in the final verdict's reruns)
SLOWER, SLOWER_FLOOR = 3.0, 0.5
#: the architecture a candidate compiles for where the compiled verdict cannot be rechecked (an H100)
PTX_ARCH = 90


@dataclass
class CandidateJudge(CaseJudge):
    """A case judge whose jobs run a candidate kernel: the check itself in this process, else a reference
    that rebuilds it in the worker."""

    candidate: Any = None
    focus: frozenset[str] | None = None  # the targets judged (None: all)

    def target(self) -> Any:
        return self.candidate

    def rules(self) -> Rules:
        if self._rules is None:
            self._rules = dataclasses.replace(super().rules(), focus=self.focus)
        return self._rules


@dataclass
class KernelReduction:
    """A reduced kernel: the check carrying it, its final verdict and evidence on the case (None where the
    compiled verdict could not be rechecked here), the loop's record and the diff against the original."""

    check: Any
    verdict: Verdict | None
    evidence: Evidence | None
    reduction: Reduction
    diff: str
    compiled_unchecked: bool = False
    focus: tuple[str, ...] = ()  # the outputs it was judged on, where the kernel has others

    def describe(self) -> str:
        r = self.reduction
        text = (f"kernel reduced from {r.before} to {r.after} lines in {r.seconds:.1f} s ({r.kept} of {r.tried} "
                f"candidates kept")
        if r.out_of_time:
            text += "; stopped at the time budget"
        if self.focus:
            text += f"; judged on {', '.join(f'`{t}`' for t in self.focus)} alone: its other outputs may differ"
        if self.compiled_unchecked:
            text += ("; the compiled verdict was not rechecked here (no GPU): the reduced kernel gives the same "
                     "interpreter outputs and compiles to PTX")
        return text + ")"


def _same(got: Verdict, want: Verdict) -> bool:
    return (got.label == want.label and got.kind == want.kind and tuple(got.targets) == tuple(want.targets)
            and tuple(got.pair or ()) == tuple(want.pair or ()))


def same_outputs(got: dict[str, Outcome], want: dict[str, Outcome], case: Case,
                 targets: tuple[str, ...] | None, written: bool = False) -> bool:
    """Each kernel-side outcome of `want` (by label) has its twin in `got` with the same `targets` (None: every
    target), bit for bit (the same kind of error where it failed); with `written`, the interpreter's trace also
    shows the kernel storing the same elements of them (an output that holds what it held before the kernel ran
    is the same bit for bit from a kernel that no longer writes it)."""
    for label, w in want.items():
        if w.role.base == "reference":  # (not a run of the kernel)
            continue
        g = got.get(label)
        if g is None or (g.error is None) != (w.error is None):
            return False
        if w.error is not None and g.error is not None:  # (both failed: an error on one side only returned above)
            if g.error.kind != w.error.kind or g.error.message.split(":")[0] != w.error.message.split(":")[0]:
                return False
            if w.error.kind == "compile" and _compiler_said(g.error.message) != _compiler_said(w.error.message):
                return False  # (the same compile error, whatever the specialization)
            continue
        if w.role.base == COMPILE_ONLY:  # (it compiled: no results to compare)
            continue
        gv, wv = view(g, case), view(w, case)
        for t in (sorted(set(gv.targets) | set(wv.targets)) if targets is None else targets):
            a, b = gv.targets.get(t), wv.targets.get(t)
            if (a is None) != (b is None):
                return False
            if a is None or b is None:  # (neither side has it: one side only returned above)
                continue
            if a.raw.shape != b.raw.shape or a.raw.dtype != b.raw.dtype or _bytes(a.raw) != _bytes(b.raw):
                return False
            if written and (a.writers is None) != (b.writers is None):
                return False
            if written and a.writers is not None and b.writers is not None and \
                    not np.array_equal(a.writers >= 0, b.writers >= 0):
                return False
    return True


def _compiler_said(message: str) -> str:
    """A compile error's message without the specialization it names (`compile_errors.compile_error`)."""
    return message.split(" (compiling ")[0]


def _bytes(a: np.ndarray) -> bytes:
    return np.ascontiguousarray(a).tobytes()


def constexpr_values(kernel: Any, ev: Evidence) -> dict[str, Any]:
    """The values the case's launches gave the kernel's constexpr parameters, where every launch gave the
    same literal (autotune configs and heuristics included: they reach the kernel as arguments)."""
    jit = kernels.jit_function(kernel)
    names = kernels.arg_names(jit)
    wanted = set(kernels.constexpr_names(jit))
    seen: dict[str, set] = {}
    launches = [rec for o in ev.outcomes.values() for rec in o.launches if rec.kernel == jit.fn.__name__]
    for rec in launches:
        given = {**{names[i]: a for i, a in enumerate(rec.args) if i < len(names)}, **rec.kwargs}
        for name in wanted:
            a = given.get(name)
            value: Any = _literal(a) if a is not None else _default(jit, name)
            seen.setdefault(name, set()).add(value)
    return {n: next(iter(v)) for n, v in seen.items() if len(v) == 1 and next(iter(v)) is not _NO}


_NO = object()


def _literal(a: dict) -> Any:
    if a.get("kind") == "scalar" and isinstance(a.get("value"), (bool, int, str, type(None))):
        return a["value"]
    if a.get("kind") == "float":
        return float.fromhex(a["value"])
    return _NO


def _default(jit: Any, name: str) -> Any:
    p = kernels.signature(jit.fn).parameters[name]
    d = p.default
    return d if isinstance(d, (bool, int, float, str, type(None))) and d is not p.empty else _NO


def varied(case: Case, seed: int = 0) -> Case | None:
    """The case with the values of its floating-point tensors drawn again, uniform in [-1, 1) (other inputs
    kept); None if it has none. A candidate must compute on it what the original computes: shrinking zeroed
    most of the case's values, and a kernel that drops the code those values make irrelevant would still
    match the original there."""
    rng = np.random.default_rng(seed)
    changed = {}
    for name, arg in case.tensors().items():
        dt = dtypes.dtype(arg.dtype)
        if dt.is_float and arg.numel:
            drawn = rng.uniform(-1.0, 1.0, size=arg.shape)
            changed[name] = arg.with_values(dtypes.from_float64(drawn, dt).reshape(arg.shape))
    return Case({**case.inputs, **changed}, case.config, case.dims) if changed else None


class Oracle:
    """Whether a candidate kernel (its functions' sources) fails the case as the original did, and computes
    what the original computes on the guard cases (`varied`)."""

    def __init__(self, judge: CaseJudge, case: Case, want: Verdict, base: dict[str, Outcome], timeout: float,
                 interpreter_only: bool = False, targets: tuple[str, ...] | None = None, final: bool = False) -> None:
        self.judge, self.case, self.want, self.base = judge, case, want, base
        self.final = final  # judge each candidate with the reruns its verdict asks for (see `reduce_kernel`)
        # the outputs compared bit for bit: those that diverged; a verdict that names outputs is judged on them
        # alone (the others may change), one that names none (out of bounds) on every output
        self.targets = want.targets if targets is None else targets
        self.functions = collect(judge.check.kernel)
        self.timeout = timeout
        self.interpreter_only = interpreter_only
        self.guards: list[tuple[Case, dict[str, Outcome]]] = []

    def kernel_specs(self, cj: CaseJudge) -> list[BackendSpec]:
        """The opinions that run the kernel (not the reference; only the interpreter where the compiled
        backend cannot run here)."""
        return [cj.spec(s) for s in self.judge.opinions.backends if s.kind != "reference"]

    def outputs(self, cj: CaseJudge, case: Case) -> dict[str, Outcome]:
        specs = self.kernel_specs(cj)
        return {f"{s.label}#{i}": o for i, (s, o) in enumerate(zip(specs, cj.run(case, specs)))}

    def guard(self, case: Case) -> None:
        """Also require the original kernel's outputs on `case`."""
        self.guards.append((case, self.outputs(self.candidate({}), case)))

    def same_on_guards(self, cj: CaseJudge) -> bool:
        return all(same_outputs(self.outputs(cj, case), outs, case, self.targets or None) for case, outs in self.guards)

    def candidate(self, sources: dict[str, str]) -> CandidateJudge:
        check = dataclasses.replace(self.judge.check, kernel=build(self.judge.check.kernel, sources,
                                                                   self.functions))
        target = check if isinstance(self.judge.executor, InProcess) else \
            ReducedRef(self.judge.check.ref(), tuple(sources.items()))
        # (a tally of its own: a candidate's runs are not the check's)
        cj = CandidateJudge(self.judge.executor, check, self.judge.opinions, self.judge.options, Tally(),
                            candidate=target, focus=frozenset(self.targets) or None)
        cj.timeouts.base = self.timeout
        return cj

    def __call__(self, sources: dict[str, str]) -> bool:
        try:
            cj = self.candidate(sources)
        except Exception:  # noqa: BLE001 - it does not even build (a name it needs was deleted, ...)
            return False
        try:
            if not self.same_on_guards(cj):
                return False
            got, ev = cj.verdict(self.case, final=self.final)
        except (SetupError, HangBudgetSpent):
            return False
        # (where the compiled verdict cannot be rechecked, the kernel must still store what it stored)
        if not (_same(got, self.want) and same_outputs(ev.outcomes, self.base, self.case, self.targets,
                                                       written=self.interpreter_only)):
            return False
        if _slowest(ev.outcomes) > max(SLOWER * _slowest(self.base), SLOWER_FLOOR):
            return False
        # where the compiled verdict cannot be rechecked: the case judged here as before, and a compile
        return not self.interpreter_only or compiles(cj.check, self.case)


def compiles(check: Any, case: Case) -> bool:
    """Whether every launch of the case compiles for `sm_90` here (no GPU needed)."""
    from ..execute.stages.localizer import StageUnsupported, capture_jobs

    try:
        return bool(capture_jobs(check, case, BackendSpec("compiled"), PTX_ARCH))
    except (StageUnsupported, Exception):  # noqa: BLE001 - it does not compile
        return False


def reduce_kernel(judge: CaseJudge, case: Case, verdict: Verdict, ev: Evidence,
                  budget: float) -> KernelReduction | str:
    """The kernel reduced on `case` while it fails as `verdict` says, within `budget` seconds; or why not (a
    sentence)."""
    t0 = time.perf_counter()
    if verdict.label in _NOT_REDUCED:
        return f"a {verdict.label} verdict may not repeat on every run"
    if any(o.error is not None and o.error.kind in ("timeout", "crash") for o in ev.outcomes.values()):
        return "each candidate would run into the crash or hang again"
    if verdict.kind not in REPRODUCIBLE:
        return f"no reproducer replays a divergence of this kind ({verdict.label})"
    if not any(o.launches for o in ev.outcomes.values()):
        return "no kernel was launched: the divergence is in `launch`, before the kernel runs"
    compiled = any(verdict.role(s, ev).base == "compiled" for s in verdict.pair or ())
    interpreter_only = compiled and "compiled" not in judge.opinions.kinds
    # (the reruns too: a verdict they decide is judged with them on every candidate, and a random-rounding run of
    # the interpreter is slower than the plain one)
    slowest = max([o.seconds for o in (*ev.outcomes.values(), *ev.extra.values())] or [0.0])
    timeout = min(judge.timeouts.current(), max(MIN_TIMEOUT, TIMEOUT_FACTOR * slowest))
    try:
        functions = collect(judge.check.kernel)
    except (OSError, TypeError, ValueError, SyntaxError) as exc:
        return f"its source cannot be read ({type(exc).__name__}: {exc})"
    original = {k: f.source for k, f in functions.items()}
    # the original kernel, judged as each candidate will be: what the candidates must match
    cj = Oracle(judge, case, verdict, {}, timeout, interpreter_only).candidate(original)
    want, again = cj.verdict(case)  # (without a GPU and with a compiled verdict: the opinions that run here)
    # a verdict only reruns decide (numerically unstable, undefined masked lanes, ...): each candidate is judged
    # with its reruns, else a reduction may keep the first verdict and lose the final one
    final = not interpreter_only and want.label != verdict.label
    if final:
        want, again = cj.verdict(case, final=True)
    base = again.outcomes
    if not interpreter_only and not (want.failed and want.kind == verdict.kind):
        return f"judged again, the case gives {want.label}, not {verdict.label}"
    oracle = Oracle(judge, case, want, base, timeout, interpreter_only, verdict.targets, final)
    guard = varied(case)
    if guard is not None:
        oracle.guard(guard)
    values = constexpr_values(judge.check.kernel, ev)
    first = next(iter(functions))
    spent = time.perf_counter() - t0
    red = reduce(functions, oracle, max(0.0, budget - spent), {first: values}, estimate=spent / 2)
    red.seconds += spent
    if red.errors:
        return f"tdiff's oracle failed: {red.errors[0]}"
    if not red.reduced:
        return (f"no smaller kernel fails the same way ({red.tried} candidates in {red.seconds:.1f} s"
                + ("; stopped at the time budget" if red.out_of_time else "") + ")")
    best = oracle.candidate(red.sources)
    diff = unified_diff(functions, red.sources)
    focus = tuple(verdict.targets) if verdict.targets and _outputs(base, case) - set(verdict.targets) else ()
    if interpreter_only:
        return KernelReduction(best.check, None, None, red, diff, compiled_unchecked=True, focus=focus)
    got, got_ev = best.verdict(case, final=True)
    if not _same(got, verdict):
        why = f" ({textwrap.shorten(got.reasons[0], 160)})" if got.reasons else ""
        return (f"the reduced kernel's final verdict is {got.label}, not {verdict.label}{why}: the whole kernel is "
                "kept")
    return KernelReduction(best.check, got, got_ev, red, diff, focus=focus)


def _outputs(outcomes: dict[str, Outcome], case: Case) -> set[str]:
    """The targets the kernel's runs changed or returned (its outputs)."""
    out: set[str] = set()
    inputs = case.tensors()
    for o in outcomes.values():
        if o.role.base not in ("reference", COMPILE_ONLY) and o.error is None:
            v = view(o, case)
            out |= {p for p in v.targets
                    if p not in inputs or p in o.storages and not unchanged(o.storages[p], inputs[p])}
    return out


def _slowest(outcomes: dict[str, Outcome]) -> float:
    """The longest run of the kernel among `outcomes` (the reference's aside)."""
    return max([o.seconds for o in outcomes.values() if o.role.base != "reference"] or [0.0])
