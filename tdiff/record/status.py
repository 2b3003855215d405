"""A check's status (`Status`): what its run found, decided once at its end (`tdiff.drive.status.decide_status`).
Plain data, without torch or Triton: an xdist controller reads it back from a record."""

from __future__ import annotations

from enum import StrEnum


class Status(StrEnum):
    """A check's status; its value is what a record (`--tdiff-json`) holds, and it compares equal to it."""

    PASSED = "passed"
    FAILED = "failed"
    SKIPPED = "skipped"
    ERROR = "error"

    @property
    def bad(self) -> bool:
        """Whether it fails the run (failed or error)."""
        return self in (Status.FAILED, Status.ERROR)
