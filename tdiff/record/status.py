"""A check's status (`Status`): what its run found, decided once at its end (`tdiff.drive.status.decide_status`).
Plain data, without torch or Triton: an xdist controller reads it back from a record."""

from __future__ import annotations

from enum import Enum


class Status(str, Enum):
    """A check's status; its value is what a record (`--tdiff-json`) holds, and it compares equal to it (and
    prints as it: `enum.StrEnum` is Python 3.11's, tdiff runs on 3.10)."""

    PASSED = "passed"
    FAILED = "failed"
    SKIPPED = "skipped"
    ERROR = "error"

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)

    @property
    def bad(self) -> bool:
        """Whether it fails the run (failed or error)."""
        return self in (Status.FAILED, Status.ERROR)
