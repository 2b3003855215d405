"""The `tdiff` console script: run the checks, replay and merge corpora, show a fuzz campaign, show the
environment."""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path
from typing import Any

from . import options as options_mod
from .core.settings import TRACKED_CORPUS
from .declaration import _import
from .errors import CorpusError
from .record import corpus_union


def _find_check(meta: dict) -> Any:
    from .declaration import _registered

    k = meta["kernel"]
    file = k.get("file")
    if file and not Path(file).exists():
        file = None
    sys.path.insert(0, str(Path.cwd()))
    _import(k["module"], str(Path(file).resolve()) if file else None)
    found = _registered(k["module"], k["name"], k.get("check", "tdiff"))
    if found is None:
        raise CorpusError(f"kernel {k['name']!r} (check {k.get('check')!r}) is no longer declared in {k['module']}")
    return found


def replay(args: argparse.Namespace) -> int:
    from .drive.runner import Runner, opinions_for

    given = {"backends": args.backends, "isolation": args.isolation, "timeout": args.timeout,
             "repro-dir": args.repro_dir or "none", "corpus": "none",
             "reduce-budget": args.reduce_budget}  # (nothing else: the defaults of pytest --tdiff)
    try:
        opts = options_mod.build(given.get, Path.cwd()).with_(shrink_budget=0, reduce_expected=True,
                                                              shrink_expected=True)
    except ValueError as exc:
        print(f"tdiff replay: {exc}")
        return 2
    counts = {"passed": 0, "failed": 0, "error": 0, "known": 0, "fixed": 0, "not judged": 0}
    found = corpus_union.union_of([Path(p) for p in args.paths])
    if not found.entries and not found.conflicts:
        print(f"tdiff replay: no corpus entries under {', '.join(args.paths)}")
        return 2
    total = len(found.entries) + found.duplicates + sum(len(c.entries) for c in found.conflicts)
    print(f"tdiff replay: {total} entries in {len(args.paths)} path(s): {len(found.entries)} to replay, "
          f"{found.duplicates} duplicate(s) skipped, {len(found.conflicts)} conflict(s)")
    for conflict in found.conflicts:
        print(f"CONFLICT   {conflict.key}: {conflict.describe()}")
    runner = Runner(opts)
    for entry in found.entries:
        try:
            check = _find_check(entry.meta())
        except (CorpusError, ImportError, KeyError, OSError) as exc:
            counts["error"] += 1
            print(f"ERROR   {entry.path}: {exc}")
            continue
        replayed = runner.replay_entry(check, entry, reproduce_known=True)
        status = replayed.state
        counts[status] += 1
        label = "STALE" if status == "fixed" else status.upper()
        print(f"{label:10} {entry.path} ({check.id}; compared: {opinions_for(check, opts).describe()})")
        if status not in ("passed",):
            # (each entry's own replay, not a check's run: an unreadable entry's notes read as an error's)
            div = replayed.divergence
            parts = [div.report] if div is not None and div.verdict.failed else []
            parts += [f"tdiff: {n}" for n in replayed.notes] if status == "error" else []
            text = "\n\n".join(parts) or "\n".join(replayed.notes)
            print("\n".join("        " + line for line in text.splitlines()))
    runner.executor.close()
    print(f"tdiff replay: {counts['passed']} passed, {counts['failed']} failed, {counts['known']} known, "
          f"{counts['fixed']} known but no longer diverging, {counts['not judged']} not judged here, "
          f"{counts['error']} unreadable, {found.duplicates} duplicate(s) skipped, "
          f"{len(found.conflicts)} conflict(s) not replayed")
    bad = counts["failed"] + counts["error"] + counts["fixed"] + counts["not judged"] + len(found.conflicts)
    return 0 if bad == 0 else 1


def corpus_merge(args: argparse.Namespace) -> int:
    try:
        report = corpus_union.merge([Path(p) for p in args.sources], Path(args.into))
    except CorpusError as exc:
        print(f"tdiff corpus merge: {exc}")
        return 2
    return _corpus_report("merge", args.into, report, [("COPIED", report.copied)])


def corpus_promote(args: argparse.Namespace) -> int:
    try:
        report = corpus_union.promote([Path(p) for p in args.entries], Path(args.into), args.expect)
    except CorpusError as exc:
        print(f"tdiff corpus promote: {exc}")
        return 2
    return _corpus_report("promote", args.into, report, [("MOVED", report.moved), ("ALREADY", report.already)])


def _corpus_report(verb: str, into: str, report: Any, done: list[tuple[str, list]]) -> int:
    """One line per entry (what happened to it), conflicts and unreadable entries, then the totals; the exit status."""
    for label, paths in done:
        for path in paths:
            print(f"{label:<10} {path}")
    for conflict in report.conflicts:
        print(f"CONFLICT   {conflict.key}: {conflict.describe()}")
    for text in report.unreadable:
        print(f"UNREADABLE {text}")
    print(f"tdiff corpus {verb} into {into}: {report.describe()}")
    return 0 if report.ok else 1


def campaign(args: argparse.Namespace) -> int:
    import json

    from .record import campaign as campaign_mod

    if not Path(args.dir).is_dir():
        print(f"tdiff campaign: {args.dir} is not a directory")
        return 2
    found = campaign_mod.aggregate(Path(args.dir))
    if not found.checks:
        print(f"tdiff campaign: no campaign records under {args.dir} (run fuzz targets with --tdiff-campaign DIR)")
        return 2
    if args.json:
        print(json.dumps({"processes": found.processes, "checks": [c.as_json() for c in found.checks.values()],
                          "problems": found.problems}, indent=2))
        return 0
    print(f"tdiff campaign {args.dir}: {len(found.processes)} process(es), {len(found.checks)} check(s)")
    for line in campaign_mod.table(found):
        print(line)
    if any(c.divergences for c in found.checks.values()):
        # HypoFuzz never runs hypothesis's final replay of a failure, where a fuzz target writes its reproducer
        print("reproducers: a fuzz run under `hypothesis fuzz` writes corpus entries but no reproducers; "
              "`tdiff replay --repro-dir DIR CORPUS` writes one for each entry that still fails")
    if args.details:
        for line in campaign_mod.details(found):
            print(line)
    for problem in found.problems:
        print(f"note: {problem}")
    return 0


def info(_: argparse.Namespace) -> int:
    import numpy
    import torch
    import triton

    from .core.backend_spec import default_backends, labels
    from .execute.backends.base import gpu_available

    gpu = torch.cuda.get_device_name() if gpu_available() else None
    print(f"tdiff {importlib.metadata.version('tdiff')}")
    print(f"triton {triton.__version__}, torch {torch.__version__}, numpy {numpy.__version__}")
    print(f"GPU: {gpu or 'none'}")
    print("default comparison: " + " vs ".join(labels(default_backends(gpu is not None))) + (
        "" if gpu else " vs reference (the compiled backend needs a CUDA GPU)"))
    return 0


def run(args: argparse.Namespace) -> int:
    import subprocess

    # a fresh interpreter: pytest must import hypothesis and tdiff itself (for assertion rewriting)
    return subprocess.call([sys.executable, "-m", "pytest", "--tdiff", *args.pytest_args])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tdiff", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("run", help="run every @tdiff.check (pytest --tdiff; extra arguments go to pytest)")
    p.add_argument("pytest_args", nargs=argparse.REMAINDER)
    p.set_defaults(func=run)
    p = sub.add_parser("replay", help="replay corpus entries (a corpus folder, a kernel's folder or one entry)")
    p.add_argument("paths", nargs="+")
    # (pytest's --tdiff-NAME options, without the prefix: the same table, choices, defaults and checks)
    options_mod.add_arguments(p, ("backends", "isolation", "timeout", "reduce-budget"))
    p.add_argument("--repro-dir", default=None, help="write reproducers of entries that still fail here "
                   "(default: none)")
    p.set_defaults(func=replay)
    p = sub.add_parser("corpus", help="corpus maintenance: merge corpora from several machines, promote reviewed "
                                      "entries into the corpus under version control")
    csub = p.add_subparsers(dest="corpus_command", required=True)
    m = csub.add_parser("merge", help="copy the entries DEST lacks from each SRC; identical ones are skipped, "
                                      "conflicting ones reported (exit 1)")
    m.add_argument("sources", nargs="+", metavar="SRC")
    m.add_argument("--into", required=True, metavar="DEST")
    m.set_defaults(func=corpus_merge)
    m = csub.add_parser("promote", help="move reviewed entries (from the run directory's corpus, .tdiff/corpus) into "
                                        "the corpus CI replays; an entry already there is not copied again, a "
                                        "different one is a conflict (exit 1)")
    m.add_argument("entries", nargs="+", metavar="ENTRY", help="an entry folder, a kernel's folder or a corpus")
    m.add_argument("--into", default=TRACKED_CORPUS, metavar="DEST", help="default: corpus")
    m.add_argument("--expect", choices=["pass", "divergence"], default=None,
                   help="set the entries' \"expect\": pass (a regression test: it fails while the case diverges) "
                        "or divergence (a known bug outside the kernel, watched)")
    m.set_defaults(func=corpus_promote)
    p = sub.add_parser("campaign", help="the table of a fuzz campaign's records (--tdiff-campaign DIR)")
    p.add_argument("dir")
    p.add_argument("--json", action="store_true", help="everything, as JSON")
    p.add_argument("--details", action="store_true", help="also list each check's classes and value classes")
    p.set_defaults(func=campaign)
    p = sub.add_parser("info", help="versions, GPU, and what would be compared")
    p.set_defaults(func=info)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
