"""What the reproducer modules share: the error, and the line a reproducer prints for a divergence."""

from __future__ import annotations

MARK = "TDIFF-DIVERGENCE"  # the line a reproducer prints for each divergence it shows
#: divergence kinds a replay of the recorded launches can show
REPRODUCIBLE = ("values", "error", "oob", "guard", "gap", "gap-read", "race", "ub")


class ReproError(RuntimeError):
    """The reproducer could not be written, or did not reproduce."""
