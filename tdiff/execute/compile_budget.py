"""The compile budget: compiles are spent on specialization classes first, and a drawn case that
would need a compile past the budget still runs every opinion that needs none.

Triton compiles a kernel once per specialization: each argument's class (an integer equal to 1, a
multiple of 16, or other; a pointer's dtype and 16-byte alignment), the constexprs and the launch
options. The classes are where bugs live (a size of 1, a misaligned view), so a case that brings a
class this check has never compiled is always compiled. The budget only limits *new combinations*
of classes already compiled: once the check has spent `seconds` compiling (or compiled `limit`
variants, if a count is set), such cases run without the compiled backend (the interpreter against
the reference, or against itself) instead of being thrown away. Loads from Triton's on-disk cache
cost almost nothing and hardly count.

A layout's first decision stands for the rest of the search: hypothesis replays draws and needs
the same answer every time.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from ..core.case import Case, TensorArg

Feature = tuple  # (kernel name, parameter index or "options", class)

#: what Triton's specialization tells apart, by argument kind (see tdiff.execute.launch_keys)
INT_CLASSES = {"1": "equal to 1", "D": "a multiple of 16", "": "other"}
POINTER_CLASSES = {"D": "16-byte aligned", "": "misaligned"}


def layout_of(case: Case) -> tuple:
    """What a case's launch keys depend on: everything but tensor values."""
    return (case.config, tuple(case.dims.items()),
            tuple((k, (v.dtype, v.shape, v.strides, v.offset) if isinstance(v, TensorArg) else repr(v))
                  for k, v in case.inputs.items()))


def features(keys: Iterable[tuple]) -> set[Feature]:
    out: set[Feature] = set()
    for name, classes, options in keys:
        out.update((name, i, c) for i, c in enumerate(classes))
        out.add((name, "options", options))
    return out


@dataclass
class CompileBudget:
    """One check's compiles: the classes and specializations it compiled, and the budget left for
    new combinations of them. `seconds` / `limit` None or 0: no limit."""

    seconds: float | None = None
    limit: int | None = None
    compiles: int = 0
    compile_seconds: float = 0.0
    skipped: int = 0  # drawn cases run without the compiled backend
    for_classes: int = 0  # cases compiled past the budget because they brought a class never compiled
    reached_after: int | None = None  # cases run when the budget was reached
    classes: set = field(default_factory=set)  # features compiled
    drawn: set = field(default_factory=set)  # features seen in drawn cases' keys
    # (kernel, argument index) -> how the launches passed it: "input" (into a drawn tensor's storage), "tensor"
    # (a buffer `launch` allocated), a scalar's kind
    arg_kinds: dict = field(default_factory=dict)
    _seen: set = field(default_factory=set)
    _runs: int = 0
    _decided: dict = field(default_factory=dict)

    @property
    def active(self) -> bool:
        return bool(self.seconds) or bool(self.limit)

    @property
    def exhausted(self) -> bool:
        return (bool(self.limit) and self.compiles >= (self.limit or 0)) or (
            bool(self.seconds) and self.compile_seconds >= (self.seconds or 0.0))

    def admits(self, keys: Iterable | None) -> bool:
        """Whether a case with these launch keys runs compiled; counts it as skipped when not."""
        ok = self._admits(keys)
        if not ok:
            self.skipped += 1
        return ok

    def _admits(self, keys: Iterable | None) -> bool:
        if keys is None:
            return True
        keys = tuple(keys)
        new = features(keys)
        self.drawn |= new
        if not self.exhausted or all(k in self._seen for k in keys):
            return True
        if new - self.classes:
            self.for_classes += 1
            return True
        return False

    def decide(self, layout: Any, keys: Callable[[], Iterable | None]) -> tuple[bool, Iterable | None]:
        """Whether cases of this layout run compiled, and their keys if they had to be found (`keys()` is
        called only past the budget, for a layout's first decision, which stands). Counts nothing as
        skipped: whoever runs a case without compiling says so (`skip`)."""
        if layout in self._decided:
            return self._decided[layout], None
        if not self.exhausted:
            self._decided[layout] = True
            return True, None
        found = keys()
        self._decided[layout] = self._admits(found)
        return self._decided[layout], found

    def skip(self) -> None:
        """Count a drawn case that ran without the compiled backend."""
        self.skipped += 1

    def ran(self, keys: Iterable | None, compiles: int, seconds: float = 0.0) -> None:
        """Record a case that ran compiled and the compiles it caused."""
        keys = tuple(keys or ())
        self._seen.update(keys)
        self.classes |= features(keys)
        self.drawn |= features(keys)
        self._runs += 1
        self.compiles += compiles
        self.compile_seconds += seconds
        if self.reached_after is None and self.exhausted:
            self.reached_after = self._runs

    def saw(self, launches: Iterable[Any]) -> None:
        """Record how a case's launches (`LaunchRecord`s) passed each positional argument."""
        for rec in launches:
            for i, arg in enumerate(rec.args):
                if isinstance(arg, dict):
                    self.arg_kinds.setdefault((rec.kernel, i), set()).add(arg.get("kind"))

    def describe(self) -> str | None:
        """A line for the report once the budget was reached, else None."""
        if self.reached_after is None:
            return None
        what = (f"{self.seconds:g} s of compiles" if self.seconds and self.compile_seconds >= self.seconds
                else f"{self.limit} compiles")
        return (f"compile budget ({what}) reached after {self.reached_after} case(s); past it, "
                f"{self.for_classes} case(s) were compiled because they brought a class never compiled, and "
                f"{self.skipped} drawn case(s) combining classes already compiled ran without the compiled backend "
                "(--tdiff-compile-budget / --tdiff-max-compiles change the budget, 0 lifts it)")

    def coverage(self, reachable: bool = True) -> list[str]:
        """Per kernel argument: the specialization classes it could take that no drawn case compiled
        (`reachable`), or those no case can reach, with why (not `reachable`: a pointer into a buffer the
        check's `launch` allocates)."""
        by_param: dict[tuple, set] = defaultdict(set)
        for name, index, cls in self.classes:
            if index != "options" and isinstance(cls, tuple) and len(cls) == 2:
                if cls == ("constexpr", 1):  # an integer argument equal to 1 is compiled in as a constant
                    cls = ("int", "1")
                by_param[(name, index)].add(cls)
        lines = []
        for (name, index), compiled in sorted(by_param.items(), key=lambda kv: (kv[0][0], str(kv[0][1]))):
            kinds = {c[0] for c in compiled}
            if any(k == "constexpr" for k in kinds):
                continue
            pointer = any(str(k).startswith("*") for k in kinds)
            table = POINTER_CLASSES if pointer else INT_CLASSES
            got = {c[1] for c in compiled if isinstance(c, tuple) and len(c) == 2}
            if not got & set(table):
                continue  # not a pointer or an integer Triton specializes (a float scalar)
            missing = [text for flag, text in table.items() if flag not in got]
            if not missing:
                continue
            how = self.arg_kinds.get((name, index), set())
            if pointer and how == {"tensor"}:  # (the caching allocator aligns every buffer it hands out)
                if not reachable:
                    lines.append(f"{name} argument {index}: {' or '.join(missing)} cannot be reached: a buffer "
                                 "`launch` allocates, never a drawn tensor")
                continue
            if reachable:
                lines.append(f"{name} argument {index}: never compiled {' or '.join(missing)} "
                             f"(compiled: {', '.join(text for flag, text in table.items() if flag in got)})")
        return lines
