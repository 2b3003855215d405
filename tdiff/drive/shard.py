"""A deterministic split of checks across CI jobs (`--tdiff-shard K/N`).

A check belongs to shard `1 + sha256(check id) mod N`: its id (`module::kernel[check]`) is all it
depends on, so every machine, Python and collection order puts each check in exactly one shard.
"""

from __future__ import annotations

import hashlib

# `"K/N"` -> (K, N): parsed where the option's table checks it
from ..core.option_table import parse_shard as parse  # noqa: F401


def shard_of(check_id: str, n: int) -> int:
    """The shard (1..n) a check belongs to."""
    digest = hashlib.sha256(check_id.encode()).digest()
    return int.from_bytes(digest[:8], "big") % n + 1


def in_shard(check_id: str, shard: tuple[int, int] | None) -> bool:
    """Whether a check runs in this job (every check does without a shard)."""
    return shard is None or shard_of(check_id, shard[1]) == shard[0]
