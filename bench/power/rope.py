"""How often the liger RoPE decode bug (FINDINGS.md liger 1) is found from RoPE's inputs declared as a user
declares them (`suites/liger/rope.py`, the `generic` check), one run per seed.

    PYTHONPATH=. python -m bench.power.rope --seeds 10 --examples 50      # the dev example count
    PYTHONPATH=. python -m bench.power.rope --seeds 5 --examples 30 --plan 0

A seed counts as found when the check fails on a case that can show the bug (seq 1, batch > 1, heads > 1, q and
k head-major: `triggered`); the real kernel has no fixed original, so a failure on any other case is reported
as such, not counted. Runs as `bench/power/power.py` does: hypothesis's constants frozen, no corpus, tdiff's shrinking
off, in this process (`--isolation process` for workers; on a GPU machine the compiled kernel runs too).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from bench.power import power


def triggered(case: Any) -> bool:
    q = case.inputs["q"]
    head_major = bool(case.inputs["head_major"])
    b, h, s, _ = q.shape if head_major else (q.shape[0], q.shape[2], q.shape[1], q.shape[3])
    return head_major and s == 1 and b > 1 and h > 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--examples", type=int, default=50)
    ap.add_argument("--plan", type=int, default=None, help="as --tdiff-plan (default: tdiff's)")
    ap.add_argument("--isolation", default="none", choices=("none", "process"))
    args = ap.parse_args(argv)
    power.PLAN[0] = args.plan
    power.freeze_local_constants()
    import tdiff
    from suites.liger import rope

    (check,) = [c for c in tdiff.checks_of(rope.lib._triton_rope) if c.name == "generic"]
    found = 0
    for seed in range(args.seeds):
        run = power.run_one(check, seed, args.examples, args.isolation, None, triggered)
        hit = run.status == "failed" and bool(run.triggering) and run.triggering[0] == run.first_failure
        found += hit
        print(f"seed {seed}: {run.status} {run.label or ''} at case {run.first_failure} of {run.cases}"
              f"{' (the decode bug)' if hit else ''}; {run.wall:.1f} s", flush=True)
    print(f"found in {found} of {args.seeds} seeds ({args.examples} examples, plan {args.plan or 'default'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
