"""Power benchmark: how often tdiff finds planted bugs, and how often it cries wolf.

    python -m bench.power.power                 # 10 seeds per mutant + the originals -> bench/power/power.md
    python -m bench.power.power --quick         # 3 seeds per mutant, 1 per original
    python -m bench.power.power --only softmax  # mutants (and originals) whose name contains "softmax"

(from the repository root; worker processes get it on PYTHONPATH.)

Mutants (`bench/power/mutants.py`) are copies of the bundled suite kernels with one planted bug
each, declared with the original check's launch, strategies and reference. Each mutant's check
runs once per seed (hypothesis seeds 0..N-1 through `RunOptions(seed=s)`, profile "ci": 20 examples
unless `--examples`). A seed finds the bug when the check fails and the original (unmutated) check
passes the case it failed on; when the original fails it too, the seed is counted as spurious. The
verdict labels tdiff gave are tallied, and for each run the searched cases that could show the bug
at all (the mutant's trigger, `TRIGGERS` in bench/power/mutants.py): a bug missed although such cases
were drawn is hidden by a tolerance or a verdict, one missed without them by the strategies.

The original suite checks run with `--fa-examples` examples (default 100) over `--fa-seeds` seeds
(default 3); any failed or error status is a false alarm, reported per 1,000 cases drawn.

Checks run in this process (`isolation="none"`, `--isolation process` for workers); nothing is
written to the corpus or to tdiff-out, and tdiff's shrinking is off (hypothesis still shrinks the
failing case it found, as in a normal run).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
os.environ.setdefault("PYTHONPATH", str(ROOT))  # worker processes import bench.power.mutants

import tdiff  # noqa: E402
from tdiff.declaration import Check, declared_in  # noqa: E402

SUITES = ("add_one", "atomic_sum", "autotuned", "cross_entropy", "device_fn", "flash_attention", "layer_norm",
          "matmul", "quantize", "rms_norm", "rotary", "softmax", "swiglu", "vector_add")

#: mutants that need worker processes (hangs or crashes); none of the current ones do
NEEDS_PROCESS: set[str] = set()


@dataclass
class Run:
    seed: int
    status: str
    label: str = ""  # the verdict of the failure, if any
    cases: int = 0
    first_failure: int | None = None
    wall: float = 0.0
    case: str = ""  # the failing case (as hypothesis shrank it)
    report: str = ""
    notes: list[str] = field(default_factory=list)
    original: str = ""  # the original check's verdict on the failing case ("passed": the planted bug)
    searched: int = 0  # cases drawn by the search (up to and including the first failing one)
    triggering: list[int] = field(default_factory=list)  # searched cases that could show the bug (1-based)
    triggering_passed: list[int] = field(default_factory=list)  # ... and passed


TARGETING = [False]  # --targeting: hypothesis's target phase (tdiff.drive.pipeline.guide) on or off
THRESHOLDS = [True]  # --thresholds: size strategies draw the constants the kernel compares sizes with
PLAN: list = [None]  # --plan: planned cases per check, on top of the examples (None: tdiff's default; 0: none)
BUDGET: dict = {}  # --compile-budget / --max-compiles: the compile budget policy (with a GPU)


def options(seed: int, examples: int | None, isolation: str) -> tdiff.RunOptions:
    return tdiff.RunOptions(profile="ci", seed=seed, max_examples=examples, corpus_dir=None, repro_dir=None,
                            shrink_budget=0, isolation=isolation, targeting=TARGETING[0], thresholds=THRESHOLDS[0],
                            plan=PLAN[0], **BUDGET)


class RecordingRunner(tdiff.Runner):
    """A Runner that keeps each searched case and its verdict label (for the trigger columns)."""

    def __init__(self, options: tdiff.RunOptions) -> None:
        super().__init__(options)
        self.log: list[tuple[Any, str]] = []

    def judge(self, check: Check, result: Any, opinions: Any = None) -> Any:
        j = super().judge(check, result, opinions)
        plain, log = j.verdict, self.log

        def verdict(case: Any, final: bool = False, opinions: Any = None) -> Any:
            v, ev = plain(case, final=final, opinions=opinions)
            if not final:
                log.append((case, v.label))
            return v, ev

        j.verdict = verdict
        return j


def run_one(check: Check, seed: int, examples: int | None, isolation: str, original: Check | None = None,
            triggered: Any = None) -> Run:
    opts = options(seed, examples, isolation)
    runner = RecordingRunner(opts)
    t0 = time.perf_counter()
    try:
        res = runner.run_check(check)
    except Exception as exc:  # tdiff itself failed: count as an error, keep going
        return Run(seed, "crash", label=type(exc).__name__, wall=time.perf_counter() - t0,
                   report=traceback.format_exc())
    run = Run(seed, res.status, cases=res.cases, first_failure=res.first_failure, wall=time.perf_counter() - t0,
              notes=list(res.notes))
    # the searched cases: up to the first failure (later ones are hypothesis shrinking it)
    searched = runner.log[: res.first_failure] if res.first_failure else runner.log
    run.searched = len(searched)
    if triggered is not None:
        hits = []
        for i, (case, label) in enumerate(searched):
            try:
                ok = bool(triggered(case))
            except Exception:
                ok = False
            if ok:
                hits.append((i + 1, label))
        run.triggering = [i for i, _ in hits]
        run.triggering_passed = [i for i, label in hits if label == "passed"]
    if res.failures:
        div = res.failures[0]
        run.label = div.verdict.label
        run.case = describe_case(div.case)
        run.report = div.report
        if original is not None:
            run.original = original_verdict(tdiff.Runner(opts), original, div.case)
            if run.original != "passed":
                run.status = "spurious"  # the original kernel fails the same case: not the planted bug
    elif res.status == "error":
        run.label = "error"
        run.report = res.report()
    return run


def original_verdict(runner: Any, original: Check, case: Any) -> str:
    """The original (unmutated) check's verdict on a case a mutant failed."""
    try:
        verdict, _ = runner.judge(original).verdict(case)
    except Exception as exc:
        return f"error: {type(exc).__name__}: {exc}"
    return verdict.label


def describe_case(case: Any) -> str:
    try:
        return case.describe()
    except Exception:
        parts = []
        for k, v in case.inputs.items():
            if hasattr(v, "shape"):
                parts.append(f"{k}={v.dtype}{list(v.shape)} {v.layout} strides={v.strides}")
            else:
                parts.append(f"{k}={v!r}")
        return ", ".join(parts)


def originals() -> list[Check]:
    import importlib

    out = []
    for name in SUITES:
        mod = f"suites.{name}"
        importlib.import_module(mod)
        out += declared_in(mod)
    from bench.power import mutants as power_mutants  # the blind-spot classes' originals, declared beside their mutants

    for kernel in power_mutants.ORIGINALS:  # (and those of the generic declarations, bench/power/generic.py)
        out += [c for c in tdiff.checks_of(kernel) if c.module in (power_mutants.__name__, "bench.power.generic")]
    return out


def fmt_labels(runs: list[Run]) -> str:
    c = Counter(r.label for r in runs if r.status in ("failed", "error", "crash"))
    c.update(f"{r.label} (original fails too)" for r in runs if r.status == "spurious")
    return ", ".join(f"{label} ×{n}" if n > 1 else label for label, n in c.most_common()) or "—"


def tdiff_state() -> str:
    """tdiff's commit and a digest of its working tree (tdiff/ is edited while benchmarks run)."""
    import hashlib
    import subprocess

    h = hashlib.sha256()
    for f in sorted((ROOT / "tdiff").rglob("*.py")):
        h.update(str(f.relative_to(ROOT)).encode())
        h.update(f.read_bytes())
    try:
        commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True, timeout=10).stdout.strip() or "?"
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--", "tdiff"], capture_output=True,
                               text=True, timeout=10).stdout.strip()
    except Exception:
        commit, dirty = "?", ""
    return f"{commit}{' + uncommitted changes' if dirty else ''} (tdiff/ digest {h.hexdigest()[:12]})"


def freeze_local_constants() -> bool:
    """Stop hypothesis from drawing constants scraped from this repository's source.

    hypothesis (6.1xx) draws about 5% of its integers from constants it collects in the source of
    the local modules in sys.modules (tdiff/, suites/, bench/, the running script; tests/ is
    skipped). Any edit that adds or removes an integer anywhere in those files then changes what
    every seed draws (seen: adding `_X = 4000` to a driver script turned a found seed of
    matmul_even_k_unmasked into a missed one). With the pool empty, a seed draws the same cases
    whatever the repository's code, so runs before and after a tdiff change are comparable.
    Returns False where this hypothesis has no such pool (nothing to freeze)."""
    try:
        from hypothesis.internal.conjecture import providers
    except ImportError:
        return False
    if not hasattr(providers, "_get_local_constants") or not hasattr(providers, "Constants"):
        return False
    empty = providers.Constants()
    providers._get_local_constants = lambda: empty
    cache = getattr(providers, "CONSTANTS_CACHE", None)
    with contextlib.suppress(Exception):
        cache.cache.clear()
    return True


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, default=10, help="seeds per mutant (0..N-1)")
    ap.add_argument("--examples", type=int, default=None, help="examples per mutant run (default: ci's 20)")
    ap.add_argument("--only", default=None, help="only mutants / original checks whose name contains this (or "
                                                 "one of these, comma-separated)")
    ap.add_argument("--quick", action="store_true", help="3 seeds per mutant, 1 seed for the originals")
    ap.add_argument("--out", default=str(ROOT / "bench" / "power" / "power.md"))
    ap.add_argument("--fa-examples", type=int, default=100, help="examples per original check and seed")
    ap.add_argument("--fa-seeds", type=int, default=3, help="seeds per original check")
    ap.add_argument("--no-mutants", action="store_true")
    ap.add_argument("--no-originals", action="store_true")
    ap.add_argument("--isolation", default="none", choices=("none", "process"))
    ap.add_argument("--targeting", default="off", choices=("on", "off"),
                    help="hypothesis's target phase climbing each case's closeness and kernel lines (default off, "
                         "as in tdiff)")
    ap.add_argument("--thresholds", default="on", choices=("on", "off"),
                    help="size strategies also draw the sizes on the constants the kernel and its launch compare "
                         "sizes with (default on, as in tdiff)")
    ap.add_argument("--plan", type=int, default=None,
                    help="the most planned cases per check, run before the random search's examples (default: "
                         "tdiff's, at most half the examples; "
                         "0: none, the search before boundary plans)")
    ap.add_argument("--compile-budget", type=float, default=None,
                    help="compile seconds per check on new combinations of classes (tdiff's default: 30)")
    ap.add_argument("--max-compiles", type=int, default=None,
                    help="the compile budget as a count, e.g. 8 for the old policy (with --compile-budget 0)")
    ap.add_argument("--json", default=None, help="also write the raw runs as JSON here")
    ap.add_argument("--hypothesis-local-constants", action="store_true",
                    help="let hypothesis draw constants from the repository's source, as in a plain tdiff run "
                         "(default: off, so that seeds draw the same cases whatever the code; see "
                         "freeze_local_constants)")
    args = ap.parse_args(argv)
    seeds = 3 if args.quick else args.seeds
    fa_seeds = 1 if args.quick else args.fa_seeds
    TARGETING[0] = args.targeting == "on"
    THRESHOLDS[0] = args.thresholds == "on"
    PLAN[0] = args.plan
    if args.compile_budget is not None:
        BUDGET["compile_budget"] = args.compile_budget
    if args.max_compiles is not None:
        BUDGET["max_compiles"] = args.max_compiles

    from bench.power import mutants as power_mutants

    frozen = freeze_local_constants() if not args.hypothesis_local_constants else False
    originals()  # import every suite now
    state_before = tdiff_state()
    t_start = time.perf_counter()
    mutant_rows, raw = [], {"mutants": {}, "originals": {}}
    if not args.no_mutants:
        only = args.only.split(",") if args.only else []
        todo = [m for m in power_mutants.MUTANTS if not only or any(o in m.name for o in only)]
        for m in todo:
            iso = "process" if m.name in NEEDS_PROCESS else args.isolation
            runs = [run_one(m.check, s, args.examples, iso, m.original, m.triggered) for s in range(seeds)]
            found = sum(r.status == "failed" for r in runs)
            spurious = sum(r.status == "spurious" for r in runs)
            drawn = sum(bool(r.triggering) for r in runs)
            trig = sum(len(r.triggering) for r in runs)
            trig_passed = sum(len(r.triggering_passed) for r in runs)
            searched = sum(r.searched for r in runs)
            firsts = [r.first_failure for r in runs if r.first_failure]
            row = dict(name=m.name, original=m.original.kernel_name, kind=m.kind, bug=m.bug, trigger=m.trigger,
                       found=found, spurious=spurious, seeds=seeds, drawn=drawn, trig=trig, trig_passed=trig_passed,
                       searched=searched, labels=fmt_labels(runs),
                       first=statistics.median(firsts) if firsts else None,
                       cases=sum(r.cases for r in runs), wall=sum(r.wall for r in runs), runs=runs)
            mutant_rows.append(row)
            raw["mutants"][m.name] = [r.__dict__ for r in runs]
            print(f"{m.name:34s} {found}/{seeds}  trigger drawn {drawn}/{seeds}, {trig} triggering case(s) of "
                  f"{searched}, {trig_passed} passed  {row['labels']}"
                  + (f"  [{spurious} spurious]" if spurious else "") + f"  ({row['wall']:.1f} s)", flush=True)

    orig_rows = []
    if not args.no_originals:
        for c in originals():
            only = args.only.split(",") if args.only else []
            if only and not any(o in c.kernel_name or o in c.module for o in only):
                continue
            runs = [run_one(c, s, args.fa_examples, args.isolation) for s in range(fa_seeds)]
            alarms = [r for r in runs if r.status in ("failed", "error", "crash")]
            # a run stops at its first failure (then hypothesis shrinks it): the cases drawn are the cases
            # searched up to and including the first failing one
            drawn = sum(r.first_failure if r.status == "failed" and r.first_failure else r.cases for r in runs)
            row = dict(name=c.item_name, module=c.module, cases=sum(r.cases for r in runs), drawn=drawn,
                       alarms=len(alarms),
                       labels=fmt_labels(runs), wall=sum(r.wall for r in runs), runs=runs,
                       skipped=sum(r.status == "skipped" for r in runs))
            orig_rows.append(row)
            raw["originals"][c.id] = [r.__dict__ for r in runs]
            print(f"original {c.item_name:34s} {drawn} cases drawn ({row['cases']} run), {len(alarms)} alarm(s) "
                  f"{row['labels']} "
                  f"({row['wall']:.1f} s)", flush=True)
    total = time.perf_counter() - t_start
    state_after = tdiff_state()
    if state_after == state_before:
        state = state_before
    elif state_after.split("digest")[-1] == state_before.split("digest")[-1]:
        state = f"{state_before}; the commit moved to {state_after.split()[0]} during the run, tdiff/ unchanged"
    else:
        state = f"{state_before} at the start, CHANGED during the run to {state_after}"
    state += ("; hypothesis's constants from local source: " + ("off (frozen)" if frozen else "on"))

    text = render(mutant_rows, orig_rows, args, seeds, fa_seeds, total, state)
    print()
    print(text)
    Path(args.out).write_text(text)
    if args.json:
        Path(args.json).write_text(json.dumps(raw, indent=1, default=str))
    return 0


def render(mutant_rows: list[dict], orig_rows: list[dict], args: Any, seeds: int, fa_seeds: int,
           total: float, state: str = "") -> str:
    import platform

    import triton

    lines = ["# tdiff power benchmark", ""]
    ex = args.examples or 20
    lines.append(f"Profile `ci` ({ex} examples per run), hypothesis seeds 0..{seeds - 1}, isolation "
                 f"`{args.isolation}`, targeting {args.targeting}, thresholds {args.thresholds}, compile budget "
                 f"{BUDGET or 'default'}, no corpus, no tdiff shrinking; triton "
                 f"{triton.__version__}, "
                 f"{'GPU' if _gpu() else 'no GPU (interpreter vs reference)'}, {os.cpu_count()} CPU(s), "
                 f"Python {platform.python_version()}.")
    lines.append("")
    if state:
        lines += [f"tdiff: {state}.", ""]
    if mutant_rows:
        good = sum(r["found"] >= round(0.9 * r["seeds"]) for r in mutant_rows)
        lines += [f"## Mutants: found in at least 90% of seeds: {good} of {len(mutant_rows)}", "",
                  "A seed counts as found when the check failed and the original, unmutated check passes the "
                  "failing case (else it is spurious: tdiff flagged something the original kernel does too).", "",
                  "Trigger: the seeds in which the search drew at least one case that can show the bug (a "
                  "necessary condition, `TRIGGERS` in bench/power/mutants.py); triggering cases: how many of the "
                  "cases searched could show it, and how many of those passed (a bug hidden by the tolerance or "
                  "the verdict, not by the strategy). Median case found: the searched case that first failed.", "",
                  f"| mutant | kernel | bug kind | planted bug | found /{seeds} | trigger drawn /{seeds} "
                  "| triggering cases (passed) / searched | verdicts | median case found | time |",
                  "|---|---|---|---|---:|---:|---:|---|---:|---:|"]
        for r in mutant_rows:
            first = f"{r['first']:g}" if r["first"] is not None else "—"
            sp = f" (+{r['spurious']} spurious)" if r["spurious"] else ""
            lines.append(f"| {r['name']} | {r['original']} | {r['kind']} | {r['bug']} | {r['found']}/{r['seeds']}{sp} "
                         f"| {r['drawn']}/{r['seeds']} | {r['trig']} ({r['trig_passed']}) / {r['searched']} "
                         f"| {r['labels']} | {first} | {r['wall']:.1f} s |")
        lines.append("")
    if orig_rows:
        cases = sum(r["cases"] for r in orig_rows)
        drawn = sum(r["drawn"] for r in orig_rows)
        alarms = sum(r["alarms"] for r in orig_rows)
        per = 1000 * alarms / drawn if drawn else float("nan")
        lines += [f"## Originals: {alarms} false alarm(s) in {drawn} cases drawn = {per:.2f} per 1,000 cases", "",
                  f"Each original check: {args.fa_examples} examples × {fa_seeds} seed(s); a false alarm is any "
                  "run whose status is failed or error. A run stops searching at its first failure, so the cases "
                  "drawn are all of a passing run's cases and a failing run's cases up to its first failure; "
                  f"with hypothesis's shrinking of the failures, {cases} cases were run in all.", "",
                  "| check | module | cases drawn | cases run | false alarms | verdicts | time |",
                  "|---|---|---:|---:|---:|---|---:|"]
        for r in orig_rows:
            lines.append(f"| {r['name']} | {r['module']} | {r['drawn']} | {r['cases']} | {r['alarms']} "
                         f"| {r['labels']} | {r['wall']:.1f} s |")
        lines.append("")
    lines.append(f"Total time: {total:.0f} s ({total / 60:.1f} min).")
    lines.append("")
    if mutant_rows:
        lines += ["## Per-seed results", "",
                  "`seed: verdict @ case number` (the searched case that first failed); `-` = not found in the "
                  "run's cases.", ""]
        for r in mutant_rows:
            bits = []
            for run in r["runs"]:
                if run.status == "failed":
                    bits.append(f"{run.seed}: {run.label} @{run.first_failure}")
                elif run.status == "spurious":
                    bits.append(f"{run.seed}: SPURIOUS {run.label} @{run.first_failure} (the original gives "
                                f"{run.original!r} on the case: {run.case})")
                elif run.status in ("error", "crash"):
                    bits.append(f"{run.seed}: ERROR {run.label}")
                else:
                    bits.append(f"{run.seed}: - ({run.cases} cases)")
                if run.triggering:
                    shown = ",".join(map(str, run.triggering[:6])) + ("…" if len(run.triggering) > 6 else "")
                    missed = ",".join(map(str, run.triggering_passed[:6]))
                    bits[-1] += f" [triggering: #{shown}" + (f"; passed: #{missed}" if missed else "") + "]"
            lines.append(f"- **{r['name']}** ({r['trigger']}): " + "; ".join(bits))
        lines.append("")
    alarms_runs = [(r, run) for r in orig_rows for run in r["runs"] if run.status in ("failed", "error", "crash")]
    if alarms_runs:
        lines += ["## False alarms", ""]
        for r, run in alarms_runs:
            lines += [f"### {r['name']} seed {run.seed}: {run.label} (first failing case: #{run.first_failure})", "",
                      "```", run.report.strip() or
                      "\n".join(run.notes), "```", ""]
    return "\n".join(lines)


def _gpu() -> bool:
    from tdiff.execute.backends.base import gpu_available

    return gpu_available()


if __name__ == "__main__":
    sys.exit(main())
