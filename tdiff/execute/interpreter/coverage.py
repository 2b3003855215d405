"""Kernel coverage: which lines of a kernel and of its `@triton.jit` callees the interpreter ran.

The interpreter runs a kernel's own Python source, rewritten by Triton with its line numbers kept.
tdiff's rewrite (see interpret_scope) adds a probe before every statement of the kernel and of the
device functions it calls (Triton's own library functions excepted): a call that marks the
statement's line as run. A probe costs about a microsecond per statement and program, against a
millisecond or so for the program's tensor operations; a line tracer (`sys.settrace`) cost 65% more
time on the bundled suites, so it is not used. A check collects the lines over its cases; the lines
never run (a branch taken only for sizes the strategies never draw, a dtype path never drawn) are
named in its summary.
"""

from __future__ import annotations

import ast
import contextlib
import os
from collections.abc import Callable, Iterator
from functools import lru_cache

import triton

#: key "file:line:function" -> the lines of its statements (the probed lines)
_executable: dict[str, frozenset[int]] = {}
#: where probes record while a case is interpreted (None: nowhere)
current: dict[str, set[int]] | None = None

_TRITON = os.path.dirname(os.path.abspath(triton.__file__)) + os.sep


def hit(key: str, line: int) -> None:
    """A probe: the statement at `line` of `key` is about to run."""
    if current is not None:
        lines = current.get(key)
        if lines is None:
            lines = current[key] = set()
        lines.add(line)


def covered(fn: Callable) -> bool:
    """Whether a function's lines are recorded: kernels and device functions, not Triton's own."""
    filename = getattr(getattr(fn, "__code__", None), "co_filename", "")
    return bool(filename) and not os.path.abspath(filename).startswith(_TRITON)


def key_of(fn: Callable) -> str:
    code = fn.__code__
    return f"{code.co_filename}:{code.co_firstlineno}:{fn.__name__}"


def module_attr(module: str, attr: str) -> ast.expr:
    """The expression `__import__(module, fromlist=["_"]).attr`: how code that tdiff adds to a kernel's
    rewritten source reaches tdiff, whatever names the kernel's module defines."""
    imported = ast.Call(func=ast.Name("__import__", ast.Load()), args=[ast.Constant(module)],
                        keywords=[ast.keyword("fromlist", ast.List([ast.Constant("_")], ast.Load()))])
    return ast.Attribute(value=imported, attr=attr, ctx=ast.Load())


class _Probes(ast.NodeTransformer):
    """`hit(key, line)` before every statement in the function's bodies."""

    def __init__(self, key: str) -> None:
        self.key = key
        self.lines: set[int] = set()

    def _probe(self, line: int) -> ast.stmt:
        call = ast.Call(func=module_attr(__name__, "hit"), args=[ast.Constant(self.key), ast.Constant(line)],
                        keywords=[])
        return ast.copy_location(ast.Expr(call), ast.Pass(lineno=line, col_offset=0))

    def _body(self, stmts: list[ast.stmt]) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        for st in stmts:
            self.lines.add(st.lineno)
            out += [self._probe(st.lineno), self.visit(st)]
        return out

    def generic_visit(self, node: ast.AST) -> ast.AST:
        for field in ("body", "orelse", "finalbody"):
            stmts = getattr(node, field, None)
            if isinstance(stmts, list) and stmts and isinstance(stmts[0], ast.stmt):
                setattr(node, field, self._body(stmts))
        for h in getattr(node, "handlers", None) or ():
            h.body = self._body(h.body)
        return node


def instrument(tree: ast.Module, fn: Callable) -> ast.Module:
    """Add probes to the rewritten source of `fn` (a module holding its `def`), and register its lines."""
    key = key_of(fn)
    probes = _Probes(key)
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            node.body = probes._body(node.body)
    _executable[key] = frozenset(probes.lines)
    return ast.fix_missing_locations(tree)


def executable(key: str) -> frozenset[int]:
    return _executable.get(key, frozenset())


@contextlib.contextmanager
def recording(into: dict[str, set[int]]) -> Iterator[None]:
    """Record the kernel lines run inside the block into `into` (key -> lines)."""
    global current
    before = current
    current = into
    try:
        yield
    finally:
        current = before


# ------------------------------------------------------------------ reporting

def ranges(lines: set[int] | frozenset[int], executable_lines: frozenset[int]) -> list[tuple[int, int]]:
    """`lines` as (first, last) runs: consecutive executable lines all in `lines` form one run (blank
    and comment lines between them, which are not executable, do not break it)."""
    out: list[tuple[int, int]] = []
    order = sorted(executable_lines)
    start: int | None = None
    prev = 0  # (set with start)
    for line in order:
        if line in lines:
            if start is None:
                start = line
            prev = line
        elif start is not None:
            out.append((start, prev))
            start = None
    if start is not None:
        out.append((start, prev))
    return out


@lru_cache(maxsize=256)
def _blocks(filename: str) -> tuple[tuple[int, str], ...]:
    """(first line of a block, what the block is) for the branches and loops of a source file."""
    try:
        with open(filename, encoding="utf-8") as f:
            tree = ast.parse(f.read())
    except (OSError, SyntaxError, ValueError):
        return ()
    out: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.If):
            test = ast.unparse(node.test)
            test = test if len(test) <= 60 else test[:57] + "..."
            if node.body:
                out.append((node.body[0].lineno, f"the body of `if {test}` (line {node.lineno})"))
            if node.orelse:
                what = "elif" if len(node.orelse) == 1 and isinstance(node.orelse[0], ast.If) \
                    and node.orelse[0].lineno != node.orelse[0].body[0].lineno else "else"
                out.append((node.orelse[0].lineno, f"the {what} of `if {test}` (line {node.lineno})"))
        elif isinstance(node, (ast.For, ast.While)) and node.body:
            head = ast.unparse(node.iter if isinstance(node, ast.For) else node.test)
            head = head if len(head) <= 60 else head[:57] + "..."
            kind = "for ... in" if isinstance(node, ast.For) else "while"
            out.append((node.body[0].lineno, f"the body of `{kind} {head}` (line {node.lineno})"))
    return tuple(sorted(set(out)))


def describe(key: str, missed: list[tuple[int, int]]) -> str:
    """"suites/x.py: lines 39-60 (the else of `if N <= TILE` (line 38)), 71 of kernel_fn"."""
    filename, _, name = key.rsplit(":", 2)
    blocks = dict(_blocks(filename))
    parts = []
    for a, b in missed:
        span = f"{a}" if a == b else f"{a}-{b}"
        what = blocks.get(a)
        parts.append(f"{span} ({what})" if what else span)
    return f"{_short(filename)}: {'line' if len(missed) == 1 and missed[0][0] == missed[0][1] else 'lines'} " \
           f"{', '.join(parts)} of {name}"


def _short(filename: str) -> str:
    try:
        rel = os.path.relpath(filename)
    except ValueError:
        return filename
    return rel if not rel.startswith("..") else filename
