"""Where compile time goes, read off Triton's on-disk cache after a run: how many specializations each kernel
compiled, and how many of them are byte-identical binaries (the same cubin compiled for another specialization
key: a class that changed no code).

    TRITON_CACHE_DIR=/tmp/fresh pytest --tdiff suites -n 8 --tdiff-json run.json
    python -m bench.speed.compile_cache_profile /tmp/fresh [--json run.json] > bench/speed/compile_profile.md

Each cache entry is a directory holding one compiled specialization (`<name>.json` metadata, `<name>.cubin`, the
IR stages). With `--json` (tdiff's `--tdiff-json` report) the per-check compile counts and seconds are added.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections import defaultdict
from pathlib import Path


def entries(cache: Path) -> list[tuple[str, str, int]]:
    """(kernel name, cubin sha256, cubin bytes) for every compiled entry of the cache."""
    out = []
    for d in sorted(p for p in cache.iterdir() if p.is_dir()):
        cubins = list(d.glob("*.cubin"))
        if not cubins:
            continue
        data = cubins[0].read_bytes()
        out.append((cubins[0].stem, hashlib.sha256(data).hexdigest(), len(data)))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("cache", type=Path)
    ap.add_argument("--json", type=Path, default=None, help="tdiff's --tdiff-json report of the same run")
    ap.add_argument("--top", type=int, default=25)
    args = ap.parse_args(argv)
    found = entries(args.cache)
    by_kernel: dict[str, list[str]] = defaultdict(list)
    for name, digest, _ in found:
        by_kernel[name].append(digest)
    total = len(found)
    distinct = len({d for _, d, _ in found})
    print(f"# Compiled specializations in {args.cache}\n")
    print(f"- entries (specializations compiled): {total}")
    print(f"- distinct binaries (cubin sha256): {distinct} ({total - distinct} entries, "
          f"{(total - distinct) / max(total, 1):.0%}, repeat a binary another entry has)")
    print(f"- kernels: {len(by_kernel)}\n")
    print("| kernel | specializations | distinct binaries | repeats |")
    print("|---|---:|---:|---:|")
    rows = sorted(by_kernel.items(), key=lambda kv: -len(kv[1]))
    for name, digests in rows[:args.top]:
        print(f"| {name} | {len(digests)} | {len(set(digests))} | {len(digests) - len(set(digests))} |")
    if args.json is not None and args.json.is_file():
        report = json.loads(args.json.read_text())
        checks = report.get("checks", report if isinstance(report, list) else [])
        rows2 = []
        for c in checks:
            r = c.get("record", c)
            rows2.append((r.get("id", "?"), r.get("compiles", 0), r.get("compile_seconds", 0.0)))
        rows2.sort(key=lambda r: -float(r[2] or 0))
        print("\n| check | compiles | compile s |")
        print("|---|---:|---:|")
        for cid, n, s in rows2[:args.top]:
            print(f"| {cid} | {n} | {float(s or 0):.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
