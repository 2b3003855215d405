"""One line from a `--tdiff-json` file: cases, seconds in each backend (summed over workers) and the cases
whose launches ran program by program (a batch stopped), with the most common reasons.

    python -m bench.speed.backend_seconds run.json
"""

from __future__ import annotations

import json
import sys
from collections import Counter


def main(path: str) -> str:
    with open(path) as f:
        data = json.load(f)
    t = data["totals"]
    secs = ", ".join(f"{k} {v:.1f} s" for k, v in t["seconds"].items())
    why: Counter = Counter()
    for c in data["checks"]:
        record = c.get("record", c)
        why.update(record.get("unbatched") or {})
    top = "; ".join(f"{n}x {w[:90]}" for w, n in why.most_common(3))
    return (f"{t['cases']} cases; {secs}; {sum(why.values())} case-launches ran one by one"
            + (f" (most: {top})" if top else ""))


if __name__ == "__main__":
    print(main(sys.argv[1]))
