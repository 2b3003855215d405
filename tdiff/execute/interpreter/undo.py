"""Undoing a launch a batch could not finish: the memory it may have written (every allocation the
interpreter lets it touch), what the instrumentation recorded about that memory, and the trace."""

from __future__ import annotations

import copy
import ctypes
import dataclasses
from typing import Any

import numpy as np

from .session import Session


class Saved:
    """The state of a session before a launch: `restore` puts it back."""

    def __init__(self, s: Session) -> None:
        self.bytes = [(r.base, ctypes.string_at(r.base, r.nbytes)) for r in s.regions if r.nbytes > 0]
        self.regions = [(r, {k: _copy(v) for k, v in vars(r).items()}) for r in s.regions]
        self.count = len(s.regions)
        self.races = list(s.memory.races)
        self.trace = {f.name: copy.deepcopy(getattr(s.trace, f.name)) for f in dataclasses.fields(s.trace)}

    def restore(self, s: Session) -> None:
        for base, data in self.bytes:
            ctypes.memmove(base, data, len(data))
        for r, state in self.regions:
            vars(r).update({k: _copy(v) for k, v in state.items()})
        del s.regions[self.count:]
        s.memory.races[:] = self.races
        for name, value in self.trace.items():
            _put_back(s.trace, name, copy.deepcopy(value))


def _copy(v: Any) -> Any:
    return v.copy() if isinstance(v, (np.ndarray, list)) else v


def _put_back(obj: Any, name: str, value: Any) -> None:
    """Set `obj.name` to `value`, in place for containers (others may hold them: coverage writes `lines`)."""
    now = getattr(obj, name)
    if isinstance(now, dict) and isinstance(value, dict):
        now.clear()
        now.update(value)
    elif isinstance(now, (list, set)) and type(now) is type(value):
        now.clear()
        now.update(value) if isinstance(now, set) else now.extend(value)
    else:
        setattr(obj, name, value)
