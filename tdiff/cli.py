"""The `tdiff` console script: run the checks, replay corpus entries, show the environment."""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path
from typing import Any

from . import corpus as corpus_mod
from .declaration import _import, checks_of
from .errors import CorpusError


def _find_check(meta: dict) -> Any:
    k = meta["kernel"]
    file = k.get("file")
    if file and not Path(file).exists():
        file = None
    sys.path.insert(0, str(Path.cwd()))
    mod = _import(k["module"], str(Path(file).resolve()) if file else None)
    for obj in vars(mod).values():
        for c in checks_of(obj):
            if c.kernel_name == k["name"] and c.name == k.get("check", "tdiff"):
                return c
    raise CorpusError(f"kernel {k['name']!r} (check {k.get('check')!r}) no longer exists in {k['module']}")


def replay(args: argparse.Namespace) -> int:
    from .runner import CheckResult, Runner, default_pair
    from .settings import RunOptions

    opts = RunOptions(isolation=args.isolation, timeout=args.timeout, corpus_dir=None,
                      repro_dir=Path(args.repro_dir) if args.repro_dir else None, shrink_budget=0)
    if args.backends:
        a, b = (p.strip() for p in args.backends.split(","))
        opts = opts.with_(backends=(a, b))
    runner = Runner(opts)
    counts = {"passed": 0, "failed": 0, "error": 0, "known": 0}
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
        pair = opts.backends or default_pair(check)[0]
        result = CheckResult(check.id, check.item_name, pair)
        status = runner.replay_entry(check, pair, entry, result)
        counts[status] += 1
        print(f"{status.upper():7} {entry.path} ({check.id}, {pair[0]} vs {pair[1]})")
        if status != "passed":
            print("\n".join("        " + line for line in result.report().splitlines()))
    runner.executor.close()
    print(f"tdiff replay: {counts['passed']} passed, {counts['failed']} failed, {counts['known']} known, "
          f"{counts['error']} unreadable")
    return 0 if counts["failed"] == counts["error"] == 0 else 1


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
    p.add_argument("--backends", help="two backends, e.g. compiled,interpreter (default: as pytest --tdiff)")
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
