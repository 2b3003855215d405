"""The `tdiff` console script: run the checks, replay corpus entries, show the environment."""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path
from typing import Any

from . import corpus as corpus_mod
from .declaration import _import
from .errors import CorpusError


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
    from . import options as options_mod
    from .runner import Runner

    given = {"backends": args.backends, "isolation": args.isolation, "timeout": args.timeout,
             "repro-dir": args.repro_dir or "none", "corpus": "none"}
    try:
        opts = options_mod.build(given.get, Path.cwd()).with_(shrink_budget=0)
    except ValueError as exc:
        print(f"tdiff replay: {exc}")
        return 2
    runner = Runner(opts)
    counts = {"passed": 0, "failed": 0, "error": 0, "known": 0, "fixed": 0, "not judged": 0}
    entries = [e for p in args.paths for e in corpus_mod.all_entries(Path(p))]
    if not entries:
        print(f"tdiff replay: no corpus entries under {', '.join(args.paths)}")
        return 2
    for entry in entries:
        try:
            check = _find_check(entry.meta())
        except (CorpusError, ImportError, KeyError, OSError) as exc:
            counts["error"] += 1
            print(f"ERROR   {entry.path}: {exc}")
            continue
        result = runner.new_result(check)
        status = runner.replay_entry(check, entry, result)
        counts[status] += 1
        label = "STALE" if status == "fixed" else status.upper()
        print(f"{label:10} {entry.path} ({check.id}; compared: {result.compared})")
        if status not in ("passed",):
            text = result.report() or "\n".join(result.notes)
            print("\n".join("        " + line for line in text.splitlines()))
    runner.executor.close()
    print(f"tdiff replay: {counts['passed']} passed, {counts['failed']} failed, {counts['known']} known, "
          f"{counts['fixed']} known but no longer diverging, {counts['not judged']} not judged here, "
          f"{counts['error']} unreadable")
    return 0 if counts["failed"] == counts["error"] == counts["fixed"] == counts["not judged"] == 0 else 1


def info(_: argparse.Namespace) -> int:
    import numpy
    import torch
    import triton

    from .backends.base import gpu_available

    gpu = torch.cuda.get_device_name() if gpu_available() else None
    print(f"tdiff {importlib.metadata.version('tdiff')}")
    print(f"triton {triton.__version__}, torch {torch.__version__}, numpy {numpy.__version__}")
    print(f"GPU: {gpu or 'none'}")
    print("default comparison: " + ("compiled vs interpreter" if gpu else
                                    "interpreter vs reference (the compiled backend needs a CUDA GPU)"))
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
    p.add_argument("--backends", help="backends, e.g. compiled,interpreter (default: as pytest --tdiff)")
    p.add_argument("--isolation", default="process", choices=["process", "none"])
    p.add_argument("--timeout", type=float, default=60.0)
    p.add_argument("--repro-dir", default=None, help="write reproducers of entries that still fail here")
    p.set_defaults(func=replay)
    p = sub.add_parser("info", help="versions, GPU, and what would be compared")
    p.set_defaults(func=info)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
