"""What a pass and a failure mean, on kernels with known truths (tests/hostile.py): ordinary kernel
bugs, mistaken declarations, races, the range edge. Prints one line per check: status, verdicts,
cases, seconds. Run it from the repository root; to compare another tdiff (e.g. an older checkout's), put it first
on PYTHONPATH and keep the working directory off the front of sys.path with `python -P`:

    python -m bench.trust.trust [--examples N] [--json out.json]
    PYTHONPATH=/other/checkout:$PWD python -P -m bench.trust.trust
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import tdiff
from tests import hostile as H

BUGS = ["softmax_no_max", "row_sum_drops_tail", "row_max_zero_fill", "rms_eps_outside", "tiled_swapped_ids",
        "lost_update", "block_prefix_sum", "nan_into_finite", "writes_padding", "add_one_ignores_row_stride",
        "inplace_returned"]
CORRECT = ["atomic_sum", "layer_norm", "small_matmul", "locked_sum"]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--examples", type=int, default=None)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    rows = []
    checks = [(n, c) for n in BUGS + CORRECT for c in tdiff.checks_of(getattr(H, n))]
    checks += [(f"scale_kernel[{c.name}]", c) for c in tdiff.checks_of(H.scale_kernel) if c.name != "bad-grid"]
    for name, check in checks:
        opts = tdiff.RunOptions(profile="ci", corpus_dir=None, repro_dir=None, shrink_budget=5,
                                max_examples=args.examples)
        t0 = time.perf_counter()
        try:
            r = tdiff.Runner(opts).run_check(check)
            labels = [d.verdict.label if d.verdict else "divergence" for d in r.failures]
            row = {"check": name, "status": r.status, "verdicts": labels, "cases": r.cases,
                   "seconds": round(time.perf_counter() - t0, 2), "should_fail": name not in CORRECT}
        except Exception as exc:  # a tdiff that cannot run the check at all
            row = {"check": name, "status": f"crash: {type(exc).__name__}: {exc}"[:120], "verdicts": [], "cases": 0,
                   "seconds": round(time.perf_counter() - t0, 2), "should_fail": name not in CORRECT}
        rows.append(row)
        ok = (row["status"] == "failed") == row["should_fail"]
        print(f"{'ok ' if ok else 'BAD'} {name:42} {row['status']:8} {', '.join(row['verdicts']):30} "
              f"{row['cases']:4} cases {row['seconds']:6.1f}s", flush=True)
    right = sum((r["status"] == "failed") == r["should_fail"] for r in rows)
    print(f"tdiff {getattr(tdiff, '__file__', '?')}: {right} of {len(rows)} checks judged right "
          f"({sum(r['should_fail'] for r in rows)} should fail, {sum(not r['should_fail'] for r in rows)} should pass)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
