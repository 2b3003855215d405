"""Steering a case strategy's draws toward planned classes, without changing what the draws mean.

A planned case is drawn by the check's own case strategy, on a hypothesis `ConjectureData` whose
primitive draws (integers, booleans, floats) are steered: the result is an ordinary choice sequence, which
hypothesis replays, judges and shrinks like any case it drew itself (`tdiff.generate.plan.build`).

Two kinds of choice point are steered:
- tdiff's own (a side, a dtype, a layout, a tensor's value class): the strategy declares the point with
  `choose(name, classes)`, gets the value the plan wants (or None), and `script`s the primitive choices
  that realize it in its own draws; `saw(name, value)` records the class it drew.
- a user's (a dimension or input drawn by `st.integers`, `st.sampled_from`, a composite in `inputs=`):
  inside `opaque(label)`, each primitive draw is a point of its own, keyed by the label, its ordinal and
  its bounds, with classes from those bounds (`classes.int_classes`).

Outside a steered draw every helper here is a no-op.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from contextvars import ContextVar
from typing import Any

from .classes import BOOLS, CATEGORICAL, SIZE_NOMINAL, Klass, Point, float_classes, int_classes

#: in a script: leave this primitive draw to hypothesis
FREE = object()


class Steering:
    """The state of one steered draw: what the plan wants, what the draw declared and what it saw."""

    def __init__(self, wants: dict[str, Any] | None = None) -> None:
        self.wants = dict(wants or {})
        self.points: dict[str, Point] = {}
        self.seen: dict[str, str] = {}
        self.labels: list[str] = []
        self.opaque_depth = 0
        self.semantic_depth = 0
        self.ordinals: dict[str, int] = {}
        self.queue: list[Any] = []
        self.broken: list[str] = []  # scripts a draw did not accept (hypothesis drew other primitives)
        self.unplanned: dict[str, str] = {}  # a user's draws the plan cannot class (slot -> why)
        self.inside = False  # a draw of the provider's own, inside one of ours

    def key(self, name: str) -> str:
        return ".".join([*self.labels, name]) if name else ".".join(self.labels)

    # -- the provider side: every primitive draw of the steered ConjectureData comes here first

    def primitive(self, kind: str, constraints: dict[str, Any], delegate: Any) -> Any:
        if self.inside:  # the provider drawing for itself (a draw of hypothesis's own inside one of ours)
            return delegate(**constraints)
        self.inside = True
        try:
            return self._primitive(kind, constraints, delegate)
        finally:
            self.inside = False

    def _primitive(self, kind: str, constraints: dict[str, Any], delegate: Any) -> Any:
        if self.queue:
            want = self.queue.pop(0)
            if want is FREE:
                return delegate(**constraints)
            if _permitted(kind, want, constraints):
                return want
            self.broken.append(f"{self.key('')}: {want!r} not a {kind} in {_bounds(kind, constraints)}")
            self.queue.clear()
            return delegate(**constraints)
        if self.opaque_depth and not self.semantic_depth:
            return self._opaque(kind, constraints, delegate)
        return delegate(**constraints)

    def _opaque(self, kind: str, constraints: dict[str, Any], delegate: Any) -> Any:
        label = self.key("")
        n = self.ordinals.get(label, 0)
        self.ordinals[label] = n + 1
        slot = f"{label}#{n}"
        classes: tuple[Klass, ...] | None = None
        nominal: tuple[str, ...] = ()
        what = {"boolean": "flag"}.get(kind, kind)
        if kind == "integer":
            lo, hi = constraints.get("min_value"), constraints.get("max_value")
            if lo is not None and hi is not None:
                classes = int_classes(int(lo), int(hi))
                key = f"{slot}[{lo}..{hi}]"
                # the ordinary values: a size away from its boundaries; a choice's, those between its first and last
                nominal = SIZE_NOMINAL if hi - lo + 1 > CATEGORICAL else tuple(str(v) for v in range(lo + 1, hi))
        elif kind == "boolean":
            p = constraints.get("p", 0.5)
            classes = BOOLS if 0 < p < 1 else None
            key = f"{slot}?"
        elif kind == "float":
            lo, hi = constraints.get("min_value", -math.inf), constraints.get("max_value", math.inf)
            classes = float_classes(lo, hi, bool(constraints.get("allow_nan", False)),
                                    float(constraints.get("smallest_nonzero_magnitude", 5e-324)))
            key = f"{slot}[{lo:g}..{hi:g}]"
        if not classes:
            self.unplanned.setdefault(slot, f"a {kind} drawn over {_bounds(kind, constraints)}")
            return delegate(**constraints)
        point = self.points.setdefault(key, Point(key, classes, slot, nominal=nominal, kind=what))
        want = self.wants.get(key, FREE)
        value = want if want is not FREE and _permitted(kind, want, constraints) else delegate(**constraints)
        got = point.class_of(value)
        if got is not None:
            self.seen[key] = got
        return value


def _bounds(kind: str, c: dict[str, Any]) -> str:
    if kind == "boolean":
        return f"p={c.get('p')}"
    return f"[{c.get('min_value')}, {c.get('max_value')}]"


def _permitted(kind: str, v: Any, c: dict[str, Any]) -> bool:
    if kind == "boolean":
        p = c.get("p", 0.5)
        return isinstance(v, bool) and (p > 0 if v else p < 1)
    if kind == "integer":
        if isinstance(v, bool) or not isinstance(v, int):
            return False
        lo, hi = c.get("min_value"), c.get("max_value")
        return (lo is None or v >= lo) and (hi is None or v <= hi)
    if kind == "float":
        if not isinstance(v, float):
            return False
        if math.isnan(v):
            return bool(c.get("allow_nan", False))
        lo, hi = c.get("min_value", -math.inf), c.get("max_value", math.inf)
        small = c.get("smallest_nonzero_magnitude", 0.0)
        return lo <= v <= hi and (v == 0 or abs(v) >= small)
    return False


_CURRENT: ContextVar[Steering | None] = ContextVar("tdiff_steering", default=None)


def current() -> Steering | None:
    return _CURRENT.get()


@contextmanager
def steering(s: Steering) -> Iterator[Steering]:
    token = _CURRENT.set(s)
    try:
        yield s
    finally:
        _CURRENT.reset(token)


@contextmanager
def _pushed(s: Steering, label: str, opaque: bool) -> Iterator[None]:
    s.labels.append(label)
    s.opaque_depth += opaque
    try:
        yield
    finally:
        s.labels.pop()
        s.opaque_depth -= opaque


def point(label: str) -> Any:
    """Name the choice points drawn inside (`x`, then `x.shape[0]`, ...)."""
    s = _CURRENT.get()
    return nullcontext() if s is None else _pushed(s, label, False)


def opaque(label: str) -> Any:
    """A user's strategy is drawn inside: plan its primitive draws one by one."""
    s = _CURRENT.get()
    return nullcontext() if s is None else _pushed(s, label, True)


@contextmanager
def _semantic(s: Steering) -> Iterator[None]:
    s.semantic_depth += 1
    try:
        yield
    finally:
        s.semantic_depth -= 1


def semantic() -> Any:
    """tdiff's own strategy draws inside: its primitives are steered only by its `script`."""
    s = _CURRENT.get()
    return nullcontext() if s is None else _semantic(s)


def choose(name: str, classes: tuple[Klass, ...], weight: int = 2, nominal: tuple[str, ...] = (),
           kind: str = "") -> Any:
    """Declare tdiff's choice point `name` (under the current labels) and return the value the plan wants for
    it, or None (not steered, or no wish). `weight`, `nominal`, `kind`: see `Point`."""
    s = _CURRENT.get()
    if s is None or not classes:
        return None
    key = s.key(name)
    s.points.setdefault(key, Point(key, classes, key, weight, nominal, kind))
    return s.wants.get(key)


def script(values: list[Any]) -> None:
    """The primitive choices the next draws take (`FREE`: hypothesis's own), realizing a wanted value."""
    s = _CURRENT.get()
    if s is not None:
        s.queue[:] = list(values)


def refused(name: str, want: Any, allowed: tuple) -> None:
    """The plan wants `want` at tdiff's choice point `name`, which this draw does not offer (its options depend on
    earlier draws: a layout another dtype or shape rules out): counted as a script the draw did not accept."""
    s = _CURRENT.get()
    if s is not None:
        s.broken.append(f"{s.key(name)}: {want!r} not among this draw's {allowed}")


def saw(name: str, value: Any) -> None:
    """Record the class of the value drawn at tdiff's choice point `name`; ends any script left."""
    s = _CURRENT.get()
    if s is not None:
        p = s.points.get(s.key(name))
        saw_class(name, p.class_of(value) if p is not None else None)


def saw_class(name: str, cls: str | None) -> None:
    """Record the class drawn at tdiff's choice point `name` directly; ends any script left."""
    s = _CURRENT.get()
    if s is None:
        return
    s.queue.clear()
    key = s.key(name)
    if cls is not None and key in s.points and cls in s.points[key].names():
        s.seen[key] = cls


def active() -> bool:
    return _CURRENT.get() is not None
