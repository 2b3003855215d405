"""The compile budget: once a check has compiled its budget of specializations, drawn cases that
would compile new ones are skipped, and the search goes on among those already compiled.

Skipping is not free: hypothesis draws another case (a few ms, against 45-550 ms for a compile).
After `SKIPS_PER_COMPILE` skipped draws since the last compile, the next new specialization is
compiled after all, so a check whose draws rarely fit its compiled variants still makes progress.
The rule counts draws rather than timing them: a derandomized (CI) run decides the same way every
time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from .case import Case, TensorArg

SKIPS_PER_COMPILE = 40


def layout_of(case: Case) -> tuple:
    """What a case's launch keys depend on: everything but tensor values."""
    return (case.config, tuple(case.dims.items()),
            tuple((k, (v.dtype, v.shape, v.strides, v.offset) if isinstance(v, TensorArg) else repr(v))
                  for k, v in case.inputs.items()))


@dataclass
class CompileBudget:
    """Counts one check's compiles and the launch keys it has run (see `specialization`).

    `limit` None or 0: no limit. Cases whose keys are unknown (None) always run.
    """

    limit: int | None
    compiles: int = 0
    skipped: int = 0
    reached_after: int | None = None  # cases run when the budget was reached
    _seen: set = field(default_factory=set)
    _runs: int = 0
    _skips: int = 0  # skipped draws since the last compile
    _decided: dict = field(default_factory=dict)

    @property
    def beyond(self) -> int:
        """Compiles past the limit (after `SKIPS_PER_COMPILE` skipped draws each)."""
        return max(0, self.compiles - self.limit) if self.limit else 0

    @property
    def exhausted(self) -> bool:
        return bool(self.limit) and self.compiles >= self.limit  # type: ignore[operator]

    def admits(self, keys: Iterable | None) -> bool:
        """Whether a case with these launch keys may run; counts it as skipped when not."""
        if keys is None or not self.exhausted or all(k in self._seen for k in keys):
            return True
        if self._skips >= SKIPS_PER_COMPILE:
            return True
        self.skipped += 1
        self._skips += 1
        return False

    def decide(self, layout: Any, keys: Callable[[], Iterable | None]) -> tuple[bool, Iterable | None]:
        """Whether drawn cases of this layout (see `layout_of`) may run, and their keys if they had
        to be found (`keys()` is called only past the limit). A layout's first decision stands for
        the rest of the search: hypothesis replays draws and needs the same answer every time."""
        if layout in self._decided:
            if not self._decided[layout]:
                self.skipped += 1
                self._skips += 1
            return self._decided[layout], None
        if not self.exhausted:
            self._decided[layout] = True
            return True, None
        found = keys()
        self._decided[layout] = self.admits(found)
        return self._decided[layout], found

    def ran(self, keys: Iterable | None, compiles: int) -> None:
        """Record a case that ran and the compiles it caused."""
        self._seen.update(keys or ())
        self._runs += 1
        self.compiles += compiles
        if compiles:
            self._skips = 0
        if self.reached_after is None and self.exhausted:
            self.reached_after = self._runs

    def describe(self) -> str | None:
        """A line for the report once the budget was reached, else None."""
        if self.reached_after is None:
            return None
        beyond = f"; {self.beyond} more were compiled, one per {SKIPS_PER_COMPILE} skipped" if self.beyond else ""
        return (f"compile budget of {self.limit} reached after {self.reached_after} case(s); "
                f"{self.skipped} drawn case(s) needing new specializations were skipped{beyond} "
                f"(--tdiff-max-compiles or max_compiles= raises it, 0 lifts it)")
