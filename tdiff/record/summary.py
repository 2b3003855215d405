"""Summaries of check results: a JSON-able record per check (it travels from xdist workers in the
test report), and the lines `pytest --tdiff` and `tdiff` print from it. Every case that was not
compared, every caveat a pass carries and every shim the interpreter needed is named and counted."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from ..execute.interpreter.shims import DESCRIPTIONS as SHIMS


def record(result: Any) -> dict:
    """A check result as plain data."""
    return {
        "id": result.check_id,
        "status": result.status,
        "opinions": list(result.opinions),
        "compared": result.compared,
        "cases": result.cases,
        "judged": result.judged,
        "discarded": dict(result.discarded),
        "caveats": result.caveat_lines(),
        "shims": dict(result.shims),
        "seconds": {k: round(v, 3) for k, v in result.seconds.items()},
        "compiles": result.compiles,
        "compile_seconds": round(result.compile_seconds, 3),
        "cache_loads": result.cache_loads,
        "ahead": result.ahead,
        "budget_skipped": result.budget_skipped,
        "budget_beyond": result.budget_beyond,
        "hang_timeout": result.hang_timeout,
        "wall": round(result.wall, 3),
        "replayed": [list(x) for x in result.replayed],
        "divergences": [{
            "verdict": d.verdict.label,
            "failed": d.verdict.failed,
            "shrunk": d.shrink.describe() if d.shrink else None,
            "repro": str(d.repro_path) if d.repro_path else None,
            "repro_note": d.repro_note or None,
            "corpus": str(d.corpus_path) if d.corpus_path else None,
            "source": d.source,
        } for d in result.divergences],
        "notes": result.notes,
        "pair_note": result.pair_note,
        "never_ran": result.uncovered(),
    }


def check_lines(s: dict) -> list[str]:
    """The summary of one check: a status line, then its divergences, caveats and notes."""
    verdicts: dict[str, int] = defaultdict(int)
    for d in s["divergences"]:
        verdicts[d["verdict"]] += 1
    vtext = ", ".join(f"{n} {v}" for v, n in verdicts.items()) or "no divergence"
    times = ", ".join(f"{k} {v:.2f}s" for k, v in s["seconds"].items())
    replay = f", replayed {len(s['replayed'])}" if s["replayed"] else ""
    comp = f", {s['compiles']} compiles ({s['compile_seconds']:.1f}s)" if s["compiles"] else ""
    if s.get("cache_loads"):
        comp += f", {s['cache_loads']} loaded from Triton's cache"
    ahead = s.get("ahead") or {}
    if ahead.get("compiles"):
        comp += (f", {ahead['compiles']} compiled ahead by {ahead['workers']} worker(s) beside the search "
                 f"({ahead['compile_seconds']:.1f}s of compiles)")
    judged = f"{s['judged']} judged" + (f", {sum(s['discarded'].values())} not judged" if s["discarded"] else "")
    lines = [f"{s['status'].upper():7} {s['id']}: {s['cases']} cases ({judged}){replay}; compared: {s['compared']}; "
             f"{vtext}; {s['wall']:.1f}s ({times}{comp})"]
    for d in s["divergences"]:
        if d["shrunk"]:
            lines.append(f"          shrunk: {d['shrunk']}")
        if d["repro"]:
            lines.append(f"          reproducer: {d['repro']}")
        elif d["repro_note"]:
            lines.append(f"          reproducer: not written ({d['repro_note']})")
        if d["corpus"]:
            lines.append(f"          corpus entry: {d['corpus']}")
    for reason, n in s["discarded"].items():
        lines.append(f"          not judged: {n} case(s): {reason}")
    for c in s["caveats"]:
        lines.append(f"          passed with a caveat: {c}")
    for name, n in s["shims"].items():
        lines.append(f"          interpreter: worked around {name} in {n} case(s): {SHIMS.get(name, name)}")
    for text in s.get("never_ran") or ():
        lines.append(f"          kernel code no case ran: {text}")
    if s.get("hang_timeout"):
        lines.append(f"          after a hang, runs of this check waited at most {s['hang_timeout']:.1f}s")
    for n in s["notes"]:
        lines.append(f"          note: {n}")
    errors = ahead.get("errors") or []
    for e in sorted(set(errors)):
        lines.append(f"          note: compiling ahead failed for {errors.count(e)} case(s) (the search compiled "
                     f"what it needed itself): {e}")
    return lines


def total_lines(summaries: list[dict]) -> list[str]:
    totals: dict[str, float] = defaultdict(float)
    cases = judged = compiles = loads = replayed = ahead = 0
    compile_seconds = 0.0
    shims: dict[str, int] = defaultdict(int)
    for s in summaries:
        cases += s["cases"]
        replayed += len(s.get("replayed") or ())
        judged += s["judged"]
        compiles += s["compiles"]
        loads += s.get("cache_loads", 0)
        ahead += (s.get("ahead") or {}).get("compiles", 0)
        compile_seconds += s["compile_seconds"]
        for k, v in s["seconds"].items():
            totals[k] += v
        for k, v in s["shims"].items():
            shims[k] += v
    t = ", ".join(f"{k} {v:.1f}s" for k, v in sorted(totals.items()))
    comp = f"; {compiles} specializations compiled in {compile_seconds:.1f}s" if compiles else ""
    if loads:
        comp += f", {loads} loaded from Triton's cache"
    if ahead:
        comp += f" ({ahead} of them compiled ahead of use by compile workers)"
    entries = f" and {replayed} corpus entries" if replayed else ""
    lines = [f"tdiff: {len({s['id'] for s in summaries})} checks, {cases} cases{entries} ({judged} judged); "
             f"time in backends: {t}{comp}"]
    if shims:
        lines.append("tdiff: stock TRITON_INTERPRET=1 would differ or fail where tdiff's interpreter used "
                     + ", ".join(f"{k} ({v} cases)" for k, v in sorted(shims.items())))
    for note in sorted({s.get("pair_note") for s in summaries if s.get("pair_note")}):
        lines.append(f"tdiff: {note}")
    return lines
