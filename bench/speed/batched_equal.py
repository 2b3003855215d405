"""The batched interpreter against program by program on every check of the suites: the same cases run
both ways must give identical results bit for bit and identical findings (`tests/batched_equality.py`).

    python -m bench.speed.batched_equal [--suites bundled,semantics,liger,flaggems,mutants] [--examples 5] [--seed 0]

Prints one line per check (cases, seconds each way, programs batched, fallbacks) and every difference;
exits 1 if there was one."""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
import time
from collections import Counter

from tdiff.declaration import declared_in
from tests.batched_equality import both, differences, draw_cases

GROUPS = {"bundled": "suites", "semantics": "suites.semantics", "liger": "suites.liger",
          "flaggems": "suites.flaggems", "mutants": "bench.power.mutants"}


def modules(group: str) -> list[str]:
    pkg = importlib.import_module(GROUPS[group])
    if not hasattr(pkg, "__path__"):  # a module (the power benchmark's mutants)
        return [pkg.__name__]
    names = [f"{pkg.__name__}.{m.name}" for m in pkgutil.iter_modules(pkg.__path__)
             if not m.ispkg and not m.name.startswith("_")]
    return sorted(names)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--suites", default="bundled,semantics,liger,flaggems,mutants")
    ap.add_argument("--examples", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--only", default="", help="run checks whose id contains this")
    args = ap.parse_args()
    bad = 0
    total = Counter()
    for group in args.suites.split(","):
        for name in modules(group):
            try:
                importlib.import_module(name)
            except Exception as exc:  # an optional library not installed
                print(f"{name}: skipped ({type(exc).__name__}: {exc})")
                continue
            for check in declared_in(name):
                if args.only and args.only not in check.id:
                    continue
                t_one = t_many = 0.0
                batched = 0
                fallbacks: Counter = Counter()
                t0 = time.perf_counter()
                cases = draw_cases(check, args.examples, args.seed)
                for i, case in enumerate(cases):
                    one, many = both(check, case)
                    t_one += one.seconds
                    t_many += many.seconds
                    if many.trace is not None:
                        batched += many.trace.batched
                        fallbacks.update(many.trace.unbatched)
                    for d in differences(one, many):
                        bad += 1
                        print(f"  DIFFERENCE {check.id} case {i}: {d[:400]}")
                total.update({"checks": 1, "cases": len(cases)})
                total["one"] += t_one
                total["many"] += t_many
                why = "; ".join(f"{k} x{v}" for k, v in fallbacks.items())
                print(f"{check.id}: {len(cases)} cases, one by one {t_one:.2f} s, batched {t_many:.2f} s, "
                      f"{batched} programs batched{', fell back: ' + why if why else ''} "
                      f"({time.perf_counter() - t0:.1f} s)", flush=True)
    print(f"{total['checks']} checks, {total['cases']} cases: one by one {total['one']:.1f} s, batched "
          f"{total['many']:.1f} s; {bad} differences")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
