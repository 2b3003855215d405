"""How long each check's boundary plan takes to build, and a fingerprint of the plan (the rows' choice
sequences and coverage), so that a faster build is shown to plan the very same cases.

    PYTHONPATH=. python -m bench.speed.plan_time suites/semantics/conversions.py [more modules or folders] [--json F]

Rows as the search asks (`tdiff.drive.search.plan_budget`: at most half the check's examples under the profile,
`--profile`, else as a run picks it, `ci` where CI=true, else `dev`; `--plan N` as `--tdiff-plan N`), seeded as a
derandomized search seeds them (the check id).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import sys
import time
from pathlib import Path

from tdiff.core.settings import PROFILES, RunOptions, default_profile, hypothesis_settings
from tdiff.declaration import declared_in
from tdiff.drive.pipeline import drawn_cases
from tdiff.drive.search import plan_budget, stable_seed
from tdiff.generate.plan.build import boundary_plan


def modules(paths: list[str]) -> list[str]:
    files: list[Path] = []
    for p in map(Path, paths):
        files += sorted(p.rglob("*.py")) if p.is_dir() else [p]
    return [".".join(f.with_suffix("").parts) for f in files if f.name != "__init__.py"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("paths", nargs="+")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--profile", choices=PROFILES, default=None)
    ap.add_argument("--plan", type=int, default=None, help="the most planned cases, as --tdiff-plan")
    args = ap.parse_args(argv)
    opts = RunOptions(profile=args.profile or default_profile(), plan=args.plan)
    print(f"profile {opts.profile}")
    out = {}
    total = 0.0
    for name in modules(args.paths):
        try:
            importlib.import_module(name)
        except Exception as exc:  # (an optional suite whose library is missing)  # noqa: BLE001
            print(f"{name}: not imported ({type(exc).__name__})", file=sys.stderr)
            continue
        for check in declared_in(name):
            examples = hypothesis_settings(opts, check.max_examples).max_examples
            t0 = time.perf_counter()
            try:
                rows, least = plan_budget(opts, examples)
                plan = boundary_plan(drawn_cases(check, opts), rows, stable_seed(check.id), least=least)
            except Exception as exc:  # noqa: BLE001 - as the search does: the plan is not built
                dt = time.perf_counter() - t0
                out[check.id] = {"seconds": round(dt, 3), "error": f"{type(exc).__name__}: {exc}"}
                print(f"{dt:7.2f} s  not built ({type(exc).__name__}: {exc})  {check.id}", flush=True)
                total += dt
                continue
            dt = time.perf_counter() - t0
            total += dt
            digest = hashlib.sha256(repr((plan.choices, plan.coverage.as_dict())).encode()).hexdigest()[:12]
            cov = plan.coverage
            out[check.id] = {"seconds": round(dt, 3), "plan": digest, "rows": len(plan.choices),
                             "pairs": cov.pairs, "covered": cov.covered, "triples": cov.triples,
                             "triples_covered": cov.triples_covered, "points": cov.points}
            print(f"{dt:7.2f} s  {digest}  rows {len(plan.choices):3d}  points {cov.points:4d}  "
                  f"triples {cov.triples_covered:5d} of {cov.triples:6d}  pairs {cov.covered:5d} of {cov.pairs:7d}  "
                  f"{check.id}", flush=True)
    print(f"{total:.1f} s in all, {len(out)} checks")
    if args.json:
        args.json.write_text(json.dumps(out, indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
