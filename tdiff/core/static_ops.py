"""What a kernel's source says about its `tl.dot`s and its order of operations, for tolerances where
no interpreter ran.

Without the interpreter's trace (a compiled variant compared with compiled, or an interpreter
limitation), tdiff does not know which operations a kernel ran and assumes every floating class
but tf32. A float32 `tl.dot` at its default precision runs in tf32 on the GPU, whose rounding
(2^-11) is far beyond that assumption: read from the source of the kernel and of the `@triton.jit`
functions it calls whether it has such a dot; and whether it sums, scans, dots or adds atomically,
whose results another block size or warp count may round differently: two compiled variants of a
kernel that does none of these are compared bit for bit.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from functools import lru_cache
from typing import Any

from triton.runtime.jit import JITFunction


def _dot_kind(call: ast.Call) -> str:
    for kw in call.keywords:
        if kw.arg == "input_precision" and isinstance(kw.value, ast.Constant):
            return "dot:ieee" if str(kw.value.value).lower() == "ieee" else "dot:tf32"
        if kw.arg == "allow_tf32" and isinstance(kw.value, ast.Constant) and kw.value.value is False:
            return "dot:ieee"
    return "dot:tf32"  # the default precision, or one the source does not fix


#: calls whose float result depends on an order of operations a launch option or config may change
#: (the block size, the warps a reduction is split over): not bit for bit between compiled variants
#: (a max or min reduction too: its value is order-free, but which of -0.0 and 0.0 it returns is not)
ORDER_DEPENDENT = frozenset({"sum", "reduce", "cumsum", "cumprod", "associative_scan", "dot", "dot_scaled",
                             "atomic_add", "xor_sum", "histogram", "max", "min", "atomic_max", "atomic_min"})
ORDER_TAG = "order:dependent"


@lru_cache(maxsize=256)
def _scan(fn: Any) -> tuple[frozenset[str], tuple[Any, ...]]:
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError, SyntaxError):
        return frozenset({"dot:tf32", ORDER_TAG}), ()  # unreadable: assume the loosest
    kinds: set[str] = set()
    callees: list[Any] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
            if name == "dot":
                kinds.add(_dot_kind(node))
            if name in ORDER_DEPENDENT:
                kinds.add(ORDER_TAG)
        if isinstance(node, ast.Name) and isinstance(fn.__globals__.get(node.id), JITFunction):
            callees.append(fn.__globals__[node.id])
    return frozenset(kinds), tuple(callees)


@lru_cache(maxsize=256)
def dot_kinds(jit: JITFunction) -> frozenset[str]:
    """"dot:tf32" / "dot:ieee" for the dots in `jit` and the jit functions it reaches, and
    "order:dependent" where they sum, scan, dot or add atomically (see `ORDER_DEPENDENT`)."""
    seen: set[int] = set()
    out: set[str] = set()
    todo = [jit]
    while todo:
        j = todo.pop()
        if id(j) in seen or j.fn.__module__.startswith("triton."):
            continue
        seen.add(id(j))
        kinds, callees = _scan(j.fn)
        out |= kinds
        todo += callees
    return frozenset(out)
