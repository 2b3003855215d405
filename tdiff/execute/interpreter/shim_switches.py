"""Which of the interpreter's shims are on (`ENABLED`), where the shims called from kernel code count their uses
(`counting`, `count_into`, `count_use`), and a builder's current method (`current`). Standalone: the standard
library and `shim_names` (a reproducer's interpreter side embeds this module's source: `record.repro.library`)."""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

from .shim_names import (
    BF16_ARITH,
    BF16_ATOMICS,
    BF16_CONSTANTS,
    BOOL_OPS,
    BOOL_SPLAT,
    BUILTIN_ALIASES,
    CONSTEXPR_ARGS,
    CONSTEXPR_IS,
    FLOAT_ARGS,
    FMA_ROUNDING,
    INT_METHODS,
    LIBDEVICE,
    NAN_MINMAX,
)

#: each shim can be switched off (tests show what stock TRITON_INTERPRET=1 does without it)
ENABLED = {FLOAT_ARGS: True, BF16_CONSTANTS: True, BF16_ARITH: True, LIBDEVICE: True, BF16_ATOMICS: True,
           CONSTEXPR_ARGS: True, BOOL_OPS: True, NAN_MINMAX: True, FMA_ROUNDING: True, BUILTIN_ALIASES: True,
           BOOL_SPLAT: True, INT_METHODS: True, CONSTEXPR_IS: True}

_COUNTER: list[Counter | None] = [None]  # where shims called from kernel code count (`counting`)


@contextlib.contextmanager
def counting(used: Counter) -> Iterator[None]:
    """Shims applied from kernel code (`bool_op`, `constexpr_args`) count into `used` in the body."""
    saved = _COUNTER[0]
    _COUNTER[0] = used
    try:
        yield
    finally:
        _COUNTER[0] = saved


def count_into(used: Counter | None) -> None:
    """Shims applied from kernel code count into `used` from now on (a reproducer's interpreter side)."""
    _COUNTER[0] = used


def count_use(name: str) -> None:
    if _COUNTER[0] is not None:
        _COUNTER[0][name] += 1


def current(builder: Any, name: str) -> Callable:
    """`builder.<name>` as it is now: an instance attribute a layer set, or the class's method, bound."""
    if name in vars(builder):
        return vars(builder)[name]
    cls = type(builder)
    return getattr(cls, name).__get__(builder, cls)
