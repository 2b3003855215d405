"""A deterministic split of checks across CI jobs (`--tdiff-shard K/N`).

A check belongs to shard `1 + sha256(check id) mod N`: its id (`module::kernel[check]`) is all it
depends on, so every machine, Python and collection order puts each check in exactly one shard.
"""

from __future__ import annotations

import hashlib
import re


def parse(text: str) -> tuple[int, int]:
    """`"K/N"` -> (K, N), 1 <= K <= N. Raises ValueError naming --tdiff-shard."""
    m = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", str(text))
    if not m:
        raise ValueError(f"--tdiff-shard must be K/N (this job's shard K of N, counted from 1), not {text!r}")
    k, n = int(m.group(1)), int(m.group(2))
    if n < 1 or not 1 <= k <= n:
        raise ValueError(f"--tdiff-shard {text!r}: K must be between 1 and N (N at least 1)")
    return k, n


def shard_of(check_id: str, n: int) -> int:
    """The shard (1..n) a check belongs to."""
    digest = hashlib.sha256(check_id.encode()).digest()
    return int.from_bytes(digest[:8], "big") % n + 1


def in_shard(check_id: str, shard: tuple[int, int] | None) -> bool:
    """Whether a check runs in this job (every check does without a shard)."""
    return shard is None or shard_of(check_id, shard[1]) == shard[0]
