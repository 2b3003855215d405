"""Kernel reduction measured: the corpus entries of FINDINGS.md (`corpus/`) and the planted bugs of
bench/power/mutants.py (with bench/power/generic.py's), each reduced within the budget; writes bench/reduce/reduce.md.

For a corpus entry the case is judged here (interpreter and reference, in this process), and its kernel reduced
with `tdiff.drive.reduce_kernel` on the entry's case (a minimal case already); an entry whose recorded verdict
is the compiled backend's is reduced conservatively (no GPU here: interpreter outputs and a PTX compile). The
reduced kernel's reproducer is then written and verified in a fresh process (as `Runner.finish` does). For a
mutant, the check runs as `pytest --tdiff` would (search, shrink, reduce, reproducer: `Runner.run_check`, seed
0, then 1 and 2 if seed 0 finds nothing), and the table says whether the planted line (`# BUG:`) is still in
the reduced kernel.

    PYTHONPATH=. python -m bench.reduce.reduce [--budget 30] [--only NAME ...] [--no-corpus] [--no-mutants]
        [--save DIR] [--out bench/reduce/reduce.md]

`--save DIR` keeps each reduced kernel (and its diff) as DIR/<name>.py. Lines are code lines (neither blank nor
comment-only) of the kernel and the device functions it calls.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import json
import re
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

import tdiff  # noqa: E402
from tdiff.declaration import _import, _registered  # noqa: E402
from tdiff.drive.reduce_kernel import reduce_kernel  # noqa: E402
from tdiff.drive.runner import Runner  # noqa: E402
from tdiff.judge.verdict import Verdict  # noqa: E402
from tdiff.record import repro  # noqa: E402
from tdiff.record.corpus import Entry, recorded_sides  # noqa: E402
from tdiff.record.reduce import collect  # noqa: E402

DESCRIBED = re.compile(r"kernel reduced from (\d+) to (\d+) lines in ([\d.]+) s \((\d+) of (\d+) candidates kept")


def _row(name: str, kind: str, **kw: object) -> dict:
    return {"name": name, "kind": kind, **kw}


class Rows(list):
    """The rows so far, written to `path` (JSON) as each comes (a run stopped by a timeout keeps them)."""

    def __init__(self, path: Path | None) -> None:
        super().__init__()
        self.path = path

    def append(self, row: dict) -> None:
        super().append(row)
        if self.path is not None:
            self.path.write_text(json.dumps(self, indent=1, default=str))


def statements(sources: object) -> int:
    """Statements of the functions (each `def` one; docstrings not counted): a count the formatting does not
    change, beside code lines."""
    texts = sources.values() if isinstance(sources, dict) else [sources]
    n = 0
    for text in texts:
        for node in ast.walk(ast.parse(textwrap.dedent(str(text)))):
            doc = isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value,
                                                                                                   str)
            n += isinstance(node, ast.stmt) and not doc
    return n


def _original(kernel: object) -> dict[str, str]:
    return {k: f.source for k, f in collect(kernel).items()}


def corpus_rows(budget: float, only: list[str], save: Path | None, rows: list[dict]) -> list[dict]:
    for path in sorted(ROOT.glob("corpus/*/*/entry.json")):
        entry = Entry(path.parent)
        meta = entry.meta()
        k = meta["kernel"]
        name = f"{k['name']}[{k.get('check', 'tdiff')}]"
        if only and not any(o in name for o in only):
            continue
        print(f"corpus {name} ...", flush=True)
        t0 = time.perf_counter()
        try:
            _import(k["module"], str(ROOT / k["file"]) if k.get("file") else None)
            check = _registered(k["module"], k["name"], k.get("check", "tdiff"))
            runner = Runner(tdiff.RunOptions(isolation="none", corpus_dir=None, repro_dir=None, shrink_budget=0))
            judge = runner.judge(check)
            case = entry.load_case(check)
            verdict, ev = judge.verdict(case, final=True)
        except Exception as exc:  # noqa: BLE001 - a row saying why
            rows.append(_row(name, "corpus", note=f"could not be judged here: {type(exc).__name__}: {exc}"))
            continue
        recorded = meta.get("divergence") or {}
        pair = tuple(recorded.get("pair") or ())
        if any(p.startswith("compiled") for p in pair) and "compiled" not in judge.opinions.kinds:
            verdict = Verdict(meta.get("verdict", ""), pair=pair, kind=recorded.get("kind", ""),
                              targets=tuple(recorded.get("targets") or ()),
                              sides=dict(zip(pair, recorded_sides(meta))))
        elif not verdict.failed:
            rows.append(_row(name, "corpus", note=f"the entry does not fail here ({verdict.label})"))
            continue
        got = reduce_kernel(judge, case, verdict, ev, budget)
        dry = runner.dry_launch(check, case) if not any(o.launches for o in ev.outcomes.values()) else None
        rows.append(_finish(name, "corpus", verdict, got, check, case, save, time.perf_counter() - t0, dry))
    return rows


def _finish(name: str, kind: str, verdict: Verdict, got: object, check: object, case: object, save: Path | None,
            wall: float, dry: object = None) -> dict:
    if isinstance(got, str):
        return _row(name, kind, verdict=verdict.label, note=f"not reduced: {got}", wall=wall)
    r = got.reduction  # type: ignore[attr-defined]
    row = _row(name, kind, verdict=verdict.label, before=r.before, after=r.after, seconds=r.seconds,
               kept=r.kept, tried=r.tried, out_of_time=r.out_of_time, wall=wall,
               unchecked=got.compiled_unchecked,  # type: ignore[attr-defined]
               statements=(statements(_original(check.kernel)), statements(r.sources)),  # type: ignore[attr-defined]
               focus=list(got.focus))  # type: ignore[attr-defined]
    kernel = next(iter(r.sources.values()))
    if got.verdict is not None:  # type: ignore[attr-defined]
        with tempfile.TemporaryDirectory() as tmp:
            try:
                repro.write(Path(tmp) / "r", got.check, case, got.verdict, got.evidence,  # type: ignore[attr-defined]
                            dry=dry, reduced=got.describe() + "\n\n" + got.diff)  # type: ignore[attr-defined]
                row["repro"] = "verified"
            except Exception as exc:  # noqa: BLE001
                row["repro"] = f"not kept: {type(exc).__name__}: {str(exc)[:120]}"
    if save is not None:
        save.mkdir(parents=True, exist_ok=True)
        text = "\n\n".join(r.sources[k] for k in r.sources) + "\n\n" + "".join(
            f"# {line}\n" for line in got.diff.splitlines())  # type: ignore[attr-defined]
        (save / f"{re.sub(r'[^A-Za-z0-9_.-]+', '_', name)}.py").write_text(text)
    row["bug_kept"] = "# BUG" in kernel if kind == "mutant" else None
    return row


def mutant_rows(budget: float, only: list[str], save: Path | None, rows: list[dict]) -> list[dict]:
    from bench.power import mutants as pm

    for m in pm.MUTANTS:
        if only and not any(o in m.name for o in only):
            continue
        print(f"mutant {m.name} ...", flush=True)
        t0 = time.perf_counter()
        found = None
        for seed in (0, 1, 2):
            with tempfile.TemporaryDirectory() as tmp:
                opts = tdiff.RunOptions(profile="ci", seed=seed, isolation="none", corpus_dir=None,
                                        repro_dir=Path(tmp), shrink_budget=10, reduce_budget=budget)
                result = Runner(opts).run_check(m.check)
                if result.divergences:
                    d = result.divergences[0]
                    text = Path(d.repro_path).read_text() if d.repro_path else ""
                    found = (seed, d, text)
                    break
        wall = time.perf_counter() - t0
        if found is None:
            rows.append(_row(m.name, "mutant", note="no divergence at seeds 0-2", wall=wall))
            continue
        seed, d, text = found
        row = _row(m.name, "mutant", verdict=d.verdict.label, seed=seed, wall=wall,
                   repro="verified" if d.repro_path else f"not written: {d.repro_note[:120]}")
        match = DESCRIBED.search(d.kernel_reduced)
        if match is None:
            row["note"] = d.kernel_reduced or "(no reduction)"
        else:
            b, a, s, kept, tried = match.groups()
            row.update(before=int(b), after=int(a), seconds=float(s), kept=int(kept), tried=int(tried),
                       out_of_time="stopped at the time budget" in d.kernel_reduced)
            start = text.find("@triton.jit")
            kernel = text[start:text.find("KERNELS = ")] if start >= 0 else ""
            row["bug_kept"] = "# BUG" in kernel
            row["focus"] = "alone: its other outputs may differ" in d.kernel_reduced
            with contextlib.suppress(SyntaxError):  # (the table then shows no statement count)
                row["statements"] = (statements(_original(m.check.kernel)), statements(kernel))
            if save is not None:
                save.mkdir(parents=True, exist_ok=True)
                (save / f"{m.name}.py").write_text(kernel + "\n" + text[text.find("# kernel reduced"):start])
        rows.append(row)
    return rows


def table(rows: list[dict], budget: float) -> str:
    out = ["| entry | verdict | lines before -> after | statements before -> after | reduction time (s) | "
           "candidates kept / tried | notes |",
           "|---|---|---:|---:|---:|---:|---|"]
    for r in rows:
        if "before" not in r:
            out.append(f"| {r['name']} | {r.get('verdict', '')} | - | - | - | - | {r.get('note', '')} |")
            continue
        st = r.get("statements")
        st_text = f"{st[0]} -> {st[1]}" if st else "-"
        notes = []
        if r.get("out_of_time"):
            notes.append(f"stopped at the budget ({budget:g} s)")
        if r.get("unchecked"):
            notes.append("compiled verdict not rechecked (no GPU): interpreter outputs + PTX compile")
        if r.get("bug_kept") is not None:
            notes.append("planted line kept" if r["bug_kept"] else "planted line NOT in the reduced kernel")
        if r.get("focus"):
            notes.append("judged on the diverging outputs alone")
        if r.get("repro"):
            notes.append(f"reproducer {r['repro']}")
        if r.get("seed"):
            notes.append(f"seed {r['seed']}")
        out.append(f"| {r['name']} | {r.get('verdict', '')} | {r['before']} -> {r['after']} | {st_text} | "
                   f"{r['seconds']:.1f} | "
                   f"{r['kept']} / {r['tried']} | {'; '.join(notes)} |")
    return "\n".join(out)


def summary(rows: list[dict]) -> str:
    """How many entries reduced to at most a quarter of their lines (the issue's acceptance: 80% of the findings
    and planted bugs), counted over every entry that fails here (one not reduced, or reduced without its compiled
    verdict rechecked, counts as not reduced), and the lines before and after over the reduced ones."""
    failing = [r for r in rows if r.get("verdict")]
    # (a reduction whose compiled verdict could not be rechecked here counts as not reduced)
    reduced = [r for r in failing if "before" in r and not r.get("unchecked")]
    quarter = [r for r in reduced if 4 * r["after"] <= r["before"]]
    unchecked = len([r for r in failing if r.get("unchecked")])
    before, after = sum(r["before"] for r in reduced), sum(r["after"] for r in reduced)
    share = len(quarter) / len(failing) if failing else 0.0
    st = [r for r in reduced if r.get("statements")]
    st_quarter = [r for r in st if 4 * r["statements"][1] <= r["statements"][0]]
    return (f"{len(quarter)} of {len(failing)} entries that fail here ({share:.0%}) reduced to at most a quarter "
            f"of their lines; {len(reduced)} reduced at all ({before} code lines before, {after} after); "
            f"{len(rows) - len(failing)} entries do not fail here (not counted); {unchecked} reduced with the "
            f"compiled verdict not rechecked (no GPU) count as not reduced. By statements (formatting "
            f"aside): {len(st_quarter)} of {len(failing)} at most a quarter "
            f"({sum(r['statements'][0] for r in st)} statements before, {sum(r['statements'][1] for r in st)} after)")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--budget", type=float, default=30.0)
    p.add_argument("--only", nargs="*", default=[])
    p.add_argument("--no-corpus", action="store_true")
    p.add_argument("--no-mutants", action="store_true")
    p.add_argument("--save", type=Path, default=None)
    p.add_argument("--json", type=Path, default=None, help="also write the rows as JSON")
    p.add_argument("--out", type=Path, default=None, help="write the table here (markdown)")
    args = p.parse_args(argv)
    rows = Rows(args.json)
    if not args.no_corpus:
        corpus_rows(args.budget, args.only, args.save, rows)
    if not args.no_mutants:
        mutant_rows(args.budget, args.only, args.save, rows)
    text = table(rows, args.budget) + "\n\n" + summary(rows)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
