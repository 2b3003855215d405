"""What the kernel branches on, as the strategies see it while a case is drawn.

`tdiff.generate.thresholds` reads the constants a kernel and its launch compare sizes and dtypes with. While a
case is drawn under `kernel_hints(found)`, the size strategies also draw the sizes on those
thresholds (a third branch beside their edges and plain draws). A bug behind two such conditions at
once (`if x.dtype == tl.float16:` then `if n > 72:`) is a product of independent draws, so a case
may also be *aimed* (`aiming`): each tensor whose dtype choices hold a dtype the code compares with
draws one of those, and each size strategy with a threshold in range draws a value on its thresholds
half the time (a third of the time otherwise), each on its own: a bug may need one size on its
threshold and another off it (an EVEN_K path that drops the M and N masks too). The case strategy
draws whether a case is aimed, as one boolean that shrinks to not aimed.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from functools import lru_cache
from typing import Protocol


class Hint(Protocol):
    @property
    def kind(self) -> str: ...
    @property
    def dtype(self) -> str: ...
    @property
    def level(self) -> float: ...

    def values(self, lo: int, hi: int) -> list[int]: ...


_FOUND: ContextVar[tuple[Hint, ...]] = ContextVar("tdiff_kernel_hints", default=())
_AIMED: ContextVar[bool] = ContextVar("tdiff_aimed", default=False)


@contextmanager
def kernel_hints(found: Sequence[Hint]) -> Iterator[None]:
    """While drawing, the strategies know these thresholds (`tdiff.generate.thresholds`)."""
    token = _FOUND.set(tuple(found))
    try:
        yield
    finally:
        _FOUND.reset(token)


@contextmanager
def aiming(aimed: bool) -> Iterator[None]:
    """While drawing, whether this case is aimed at the thresholds (see the module's docstring)."""
    token = _AIMED.set(aimed)
    try:
        yield
    finally:
        _AIMED.reset(token)


def aimed() -> bool:
    return _AIMED.get()


def near(lo: int, hi: int) -> tuple[int, ...]:
    """The sizes within [lo, hi] on the current thresholds, sorted."""
    found = _FOUND.get()
    return _near(found, lo, hi) if found else ()


@lru_cache(maxsize=1024)
def _near(found: tuple[Hint, ...], lo: int, hi: int) -> tuple[int, ...]:
    return tuple(sorted({v for t in found for v in t.values(lo, hi)}))


def dtypes() -> frozenset[str]:
    """The dtype names the code compares with (`x.dtype == tl.float16`)."""
    return frozenset(t.dtype for t in _FOUND.get() if t.kind == "dtype")


def levels() -> tuple[float, ...]:
    """The float constants the kernel compares values with (`x > 20.0`), sorted."""
    return tuple(sorted({t.level for t in _FOUND.get() if t.kind == "value"}))
