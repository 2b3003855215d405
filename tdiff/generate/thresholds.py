"""The integer thresholds and the dtypes a kernel branches on, read from its source and its launch code.

A boundary bug lives where a size crosses a constant the code compares it with: `if N <= 2048`
(one-pass against looped), `if K % 16 == 0` (an EVEN_K fast path), `BLOCK = 1024 if n > 4096 else
256`. A size strategy drawing from a wide range rarely lands on such a value, so tdiff reads them
off: every comparison of an expression with an integer constant (C - 1, C and C + 1 are drawn) and
every `x % M == r` (multiples of M, plus r), in the kernel, the `@triton.jit` functions it calls, the
check's `launch` and the plain Python functions `launch` calls (two levels down, outside torch,
triton, numpy and the standard library). A name bound to an int in the function's module counts as
its value. The size strategies of `tdiff.strategies` then draw these values within their own bounds
(`tdiff.generate.hints`). Every dtype compared with (`x.dtype == tl.float16`, `dt in (torch.float16,
torch.bfloat16)`) is read off too: a case aimed at the thresholds draws those dtypes.
"""

from __future__ import annotations

import ast
import inspect
import sys
import textwrap
import types
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, TypeGuard

import torch
import triton.language as tl
from triton.runtime.jit import JITFunction

from ..core import dtypes

#: constants below this are already among every size strategy's edges (1, small primes)
MIN_CONSTANT = 3
#: and above this they are not sizes a case can reach
MAX_CONSTANT = 1 << 24
#: multiples of a modulus drawn per threshold
MULTIPLES = 12
_SKIP_MODULES = ("torch", "triton", "numpy", "tdiff", "hypothesis", "builtins")


@dataclass(frozen=True)
class Threshold:
    """One constant the code compares with: `kind` "compare" (a size: C - 1, C, C + 1), "modulus"
    (a size: k*C + r) or "dtype" (`x.dtype == tl.float16`: `dtype` names it)."""

    kind: str
    constant: int = 0
    remainder: int = 0
    where: str = ""  # "file:line"
    dtype: str = ""
    level: float = 0.0  # kind "value": a float constant the kernel compares a value with (`x > 20.0`)

    @property
    def key(self) -> tuple[str, int, int, str, float]:
        return self.kind, self.constant, self.remainder, self.dtype, self.level

    def values(self, lo: int, hi: int) -> list[int]:
        """The sizes within [lo, hi] that sit on this threshold (none for a dtype or a value)."""
        if self.kind in ("dtype", "value"):
            return []
        if self.kind == "compare":
            return [v for v in (self.constant - 1, self.constant, self.constant + 1) if lo <= v <= hi]
        m, r = self.constant, self.remainder
        first = max(1, (lo - r + m - 1) // m)
        last = (hi - r) // m
        if last < first:
            return []
        ks = list(range(first, last + 1))
        if len(ks) > MULTIPLES:  # the smallest few and an even spread of the rest
            step = (len(ks) - 4) / (MULTIPLES - 4)
            ks = ks[:4] + [ks[4 + int(i * step)] for i in range(MULTIPLES - 4)]
        return [k * m + r for k in ks]

    def describe(self) -> str:
        what = {"modulus": f"% {self.constant} == {self.remainder}", "dtype": f"dtype {self.dtype}",
                "value": f"value {self.level:g}"}.get(self.kind, f"{self.constant}")
        return f"{what} ({self.where})" if self.where else what


def _int_value(node: ast.expr, env: dict[str, Any]) -> int | None:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        v = _int_value(node.operand, env)
        return None if v is None else -v
    if isinstance(node, ast.Name):
        v = env.get(node.id)
        v = getattr(v, "value", v)  # tl.constexpr(64) at module level
        if type(v) is int:
            return v
    return None


def _float_value(node: ast.expr) -> float | None:
    if isinstance(node, ast.Constant) and type(node.value) is float:
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        v = _float_value(node.operand)
        return None if v is None else -v
    return None


def _in_range(c: int | None) -> TypeGuard[int]:
    return c is not None and MIN_CONSTANT <= abs(c) <= MAX_CONSTANT


def _dtype_name(node: ast.expr, env: dict[str, Any]) -> str | None:
    """The tdiff name of the dtype `node` names (`tl.float16`, `torch.bfloat16`), if it names one."""
    value = _resolve(node, env)
    if isinstance(value, tl.dtype):
        value = value.name
    elif not isinstance(value, torch.dtype):
        return None
    try:
        return dtypes.dtype(value).name
    except dtypes.UnsupportedDType:
        return None


def _scan_tree(tree: ast.AST, env: dict[str, Any], where: Callable[[int], str],
               kernel: bool = False) -> list[Threshold]:
    """The thresholds in one function's tree; in kernel code (`kernel`) also the float constants a value is
    compared with (`x > 20.0`: a softplus threshold, a clamp)."""
    out: list[Threshold] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Compare):
            continue
        sides = [node.left, *node.comparators]
        for side in sides:
            for named in side.elts if isinstance(side, (ast.Tuple, ast.List, ast.Set)) else [side]:
                name = _dtype_name(named, env)
                if name is not None:
                    out.append(Threshold("dtype", where=where(node.lineno), dtype=name))
        for a, b in zip(sides, sides[1:]):
            for x, c in ((a, b), (b, a)):
                level = _float_value(c) if kernel else None
                if level is not None and _float_value(x) is None and 0 < abs(level) < 1e30:
                    out.append(Threshold("value", where=where(node.lineno), level=level))
                    continue
                value = _int_value(c, env)
                if value is None or _int_value(x, env) is not None:
                    continue
                if isinstance(x, ast.BinOp) and isinstance(x.op, ast.Mod):
                    m = _int_value(x.right, env)
                    if _in_range(m) and 0 <= value < m:
                        out.append(Threshold("modulus", m, value, where(node.lineno)))
                    continue
                if _in_range(value) and value > 0:
                    out.append(Threshold("compare", value, 0, where(node.lineno)))
    return out


def _source(fn: Any) -> tuple[ast.AST, str, int] | None:
    try:
        lines, start = inspect.getsourcelines(fn)
        tree = ast.parse(textwrap.dedent("".join(lines)))
    except (OSError, TypeError, SyntaxError):
        return None
    return tree, inspect.getsourcefile(fn) or "?", start


def _user_module(fn: Any) -> bool:
    mod = getattr(fn, "__module__", None) or ""
    root = mod.split(".")[0]
    return bool(mod) and root not in _SKIP_MODULES and root not in sys.stdlib_module_names


def _resolve(node: ast.expr, env: dict[str, Any]) -> Any:
    if isinstance(node, ast.Name):
        return env.get(node.id)
    if isinstance(node, ast.Attribute):
        base = _resolve(node.value, env)
        if isinstance(base, (types.ModuleType, type)):
            return getattr(base, node.attr, None)
    return None


@lru_cache(maxsize=512)
def _scan(fn: Any, python: bool) -> tuple[tuple[Threshold, ...], tuple[Any, ...]]:
    """The thresholds in one function's source, and the functions it calls that are scanned next:
    `@triton.jit` callees of a kernel, or plain Python callees of a launch function (`python`)."""
    found = _source(fn)
    if found is None:
        return (), ()
    tree, filename, start = found
    env = dict(getattr(fn, "__globals__", {}))
    closure = getattr(fn, "__closure__", None) or ()
    env.update({n: c.cell_contents for n, c in zip(fn.__code__.co_freevars, closure)
                if not _empty_cell(c)} if hasattr(fn, "__code__") else {})
    short = filename.rsplit("/", 1)[-1]
    out = _scan_tree(tree, env, lambda line: f"{short}:{start + line - 1}", kernel=not python)
    callees: list[Any] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        target = _resolve(node.func, env)
        jit = isinstance(target, JITFunction) and not target.fn.__module__.startswith("triton.")
        if jit or (python and isinstance(target, types.FunctionType) and _user_module(target)):
            callees.append(target)
    return tuple(out), tuple(callees)


def _empty_cell(cell: Any) -> bool:
    try:
        cell.cell_contents  # noqa: B018
    except ValueError:
        return True
    return False


def thresholds(kernel: JITFunction | None, launch: Callable | None = None, depth: int = 2) -> tuple[Threshold, ...]:
    """The thresholds in `kernel` (and the jit functions it calls) and in `launch` (and the Python
    functions it calls, `depth` levels down), without repeats."""
    seen: set[int] = set()
    out: dict[tuple[str, int, int, str, float], Threshold] = {}
    todo: list[tuple[Any, bool, int]] = []
    if kernel is not None:
        todo.append((kernel, False, 0))
    if launch is not None:
        todo.append((launch, True, 0))
    while todo:
        fn, python, level = todo.pop()
        if id(fn) in seen:
            continue
        seen.add(id(fn))
        if isinstance(fn, JITFunction):
            if fn.fn.__module__.startswith("triton."):
                continue
            found, callees = _scan(fn.fn, False)
            nxt = [(c, False, level) for c in callees]
        else:
            found, callees = _scan(fn, True)
            nxt = [(c, isinstance(c, types.FunctionType), level + 1) for c in callees
                   if isinstance(c, JITFunction) or level < depth]
        for t in found:
            out.setdefault(t.key, t)
        todo += nxt
    return tuple(sorted(out.values(), key=lambda t: t.key))

