"""Which checks run, and in what order: the checks of other shards are deselected (--tdiff-shard), and
the checks that took longest last time run first (shortest makespan under xdist), checks never timed
first of all; other items keep their places. Each check's wall time goes into pytest's cache."""

from __future__ import annotations

from collections.abc import Callable

import pytest

DURATIONS_KEY = "tdiff/durations"


def keep_shard(config: pytest.Config, items: list[pytest.Item], in_shard: Callable[[pytest.Item], bool]) -> None:
    """Deselect the items `in_shard` refuses, telling pytest (its "deselected" count)."""
    keep = [it for it in items if in_shard(it)]
    if len(keep) != len(items):
        kept = set(map(id, keep))
        config.hook.pytest_deselected(items=[it for it in items if id(it) not in kept])
        items[:] = keep


def slowest_first(config: pytest.Config, items: list[pytest.Item], is_check: Callable[[pytest.Item], bool]) -> None:
    """Reorder the checks among their own places, by their wall time last run, longest first."""
    cache = getattr(config, "cache", None)
    if cache is None:
        return
    known = cache.get(DURATIONS_KEY, {})
    slots = [i for i, it in enumerate(items) if is_check(it)]
    if not known or len(slots) < 2:
        return
    ordered = sorted((items[i] for i in slots), key=lambda it: -known.get(it.nodeid, float("inf")))
    for i, it in zip(slots, ordered):
        items[i] = it


def save_durations(config: pytest.Config, durations: dict[str, float]) -> None:
    """Add this run's wall times to pytest's cache (the controller's, or a run's without xdist)."""
    cache = getattr(config, "cache", None)
    if cache is None or hasattr(config, "workerinput") or not durations:
        return
    known = cache.get(DURATIONS_KEY, {})
    known.update(durations)
    cache.set(DURATIONS_KEY, known)
