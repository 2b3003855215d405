"""A kernel's reducible source: the kernel's function and the `@triton.jit` functions it calls by a global
name of its module (the user's device functions; Triton's own library and functions reached through another
module's attribute stay as they are), each as the text of its `def`."""

from __future__ import annotations

import difflib
import inspect
from dataclasses import dataclass, field
from typing import Any

from triton.runtime.jit import JITFunction

from ...core import kernels
from ..repro.inline import def_source, loaded_names


@dataclass
class Function:
    """One function of a kernel's source: its key (`module:qualname`), name, original jit object, the text
    of its `def` (decorators dropped, dedented) and which of its global names call other collected functions
    (global name -> key)."""

    key: str
    name: str
    jit: Any
    source: str
    calls: dict[str, str] = field(default_factory=dict)


def key_of(jit: Any) -> str:
    return f"{jit.fn.__module__}:{jit.fn.__qualname__}"


def _own(value: Any) -> bool:
    """A user's @triton.jit function (not Triton's library)."""
    return isinstance(value, JITFunction) and not value.fn.__module__.startswith("triton.")


def collect(kernel: Any) -> dict[str, Function]:
    """The kernel's function first, then the device functions it calls (depth first), by key."""
    out: dict[str, Function] = {}

    def add(jit: Any) -> None:
        key = key_of(jit)
        if key in out:
            return
        src = def_source(jit.fn)
        fn = out[key] = Function(key, jit.fn.__name__, jit, src)
        params = set(inspect.signature(jit.fn).parameters)
        for name in loaded_names(src):
            value = jit.fn.__globals__.get(name) if name not in params else None
            if _own(value):
                fn.calls[name] = key_of(value)
                add(value)

    add(kernels.jit_function(kernel))
    return out


def code_lines(src: str) -> int:
    """Lines that hold code: neither blank nor only a comment."""
    return sum(1 for line in src.splitlines() if line.strip() and not line.strip().startswith("#"))


def used(sources: dict[str, str], functions: dict[str, Function]) -> list[str]:
    """The keys of the functions the kernel (the first) still calls, directly or not, in `sources`."""
    first = next(iter(functions))
    seen: list[str] = []
    todo = [first]
    while todo:
        key = todo.pop()
        if key in seen:
            continue
        seen.append(key)
        names = set(loaded_names(sources[key]))
        todo += [k for n, k in functions[key].calls.items() if n in names]
    return [k for k in functions if k in seen]


def total_lines(sources: dict[str, str], functions: dict[str, Function]) -> int:
    return sum(code_lines(sources[k]) for k in used(sources, functions))


def unified_diff(functions: dict[str, Function], sources: dict[str, str]) -> str:
    """The reduced functions against the originals, one unified diff per function that changed."""
    kept = set(used(sources, functions))
    parts = []
    for key, fn in functions.items():
        after = sources[key] if key in kept else ""
        if after == fn.source:
            continue
        parts.append("".join(difflib.unified_diff(
            fn.source.splitlines(keepends=True), after.splitlines(keepends=True),
            fromfile=f"{fn.name} (original)", tofile=f"{fn.name} (reduced)" if after else "(removed)")))
    return "".join(p if p.endswith("\n") else p + "\n" for p in parts)
