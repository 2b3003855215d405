"""Passes over a function's statements: comment lines dropped, constexprs specialised to the case's values,
statements deleted (ddmin over each block), compound statements replaced by a branch or one iteration, loops cut
to one iteration, keyword arguments dropped."""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from functools import partial
from typing import Any

from .text import Edit, Text, block_lines, blocks, function_of, is_range, last_line


def cleanup(t: Text) -> list[Edit]:
    """Comment-only and blank lines inside the function dropped (trailing comments stay)."""
    kept = [line for i, line in enumerate(t.lines) if i == 0 or (line.strip() and not line.strip().startswith("#"))]
    text = "".join(kept)
    return [Edit("comments and blank lines dropped", lambda: text)] if text != t.src else []


def specialise(t: Text, constexprs: dict[str, Any]) -> list[Edit]:
    """Each constexpr parameter's uses replaced by its value in the case (all at once first)."""
    fn = function_of(t.tree)
    params = {a.arg for a in (*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs)}
    uses: dict[str, list[ast.Name]] = {}
    for node in ast.walk(fn):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id in constexprs \
                and node.id in params:
            uses.setdefault(node.id, []).append(node)
    stored = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    names = [n for n in uses if n not in stored]

    def make(chosen: list[str]) -> Callable[[], str]:
        def apply() -> str:
            spans = sorted((t.span(node), repr(constexprs[node.id])) for name in chosen for node in uses[name])
            src = t.src
            for (a, b), text in reversed(spans):
                src = src[:a] + text + src[b:]
            return src
        return apply

    out = []
    if len(names) > 1:
        out.append(Edit(f"constexprs {', '.join(names)} specialised to the case's values", make(names)))
    out += [Edit(f"constexpr {n} specialised to {constexprs[n]!r}", make([n])) for n in names]
    return out


def deletions(t: Text) -> list[Edit]:
    """ddmin over every block, outermost first: chunks of half the block, then a quarter, ... one statement."""
    fn = function_of(t.tree)
    out: list[Edit] = []
    for block in blocks(fn):
        n = len(block)
        size = max(1, n // 2) if n > 1 else 1
        while True:
            for start in range(0, n, size):
                chunk = block[start:start + size]
                edit = _delete(t, block, chunk)
                if edit is not None:
                    out.append(edit)
            if size == 1:
                break
            size = max(1, size // 2)
    return [e for e in out if e is not None]


def _delete(t: Text, block: list[ast.stmt], chunk: list[ast.stmt]) -> Edit | None:
    if not t.alone(chunk[0], chunk[-1]):
        return None
    first, last = chunk[0].lineno, last_line(chunk[-1])
    whole = len(chunk) == len(block)
    indent = t.indent(first)
    what = f"line {first} deleted" if first == last else f"lines {first}-{last} deleted"
    return Edit(what, lambda: t.replace_lines(first, last, [indent + "pass\n"] if whole else []))


def compounds(t: Text) -> list[Edit]:
    """An `if` replaced by its body or its else; a loop by one pass of its body (`v = start`); a `with` by
    its body."""
    fn = function_of(t.tree)
    out: list[Edit] = []
    for node in ast.walk(fn):
        if node is fn or not isinstance(node, (ast.If, ast.For, ast.While, ast.With)) or not t.alone(node, node):
            continue
        first, last = node.lineno, node.end_lineno
        indent = t.indent(first)
        out.append(Edit(f"line {first}: {type(node).__name__.lower()} replaced by its body",
                        _branch(t, first, last, node, node.body, indent)))
        if isinstance(node, ast.If) and node.orelse:
            out.append(Edit(f"line {first}: if replaced by its else", _else(t, node, indent)))
        if isinstance(node, ast.For) and isinstance(node.target, ast.Name) and is_range(node.iter):
            args = node.iter.args
            start = t.segment(args[0]) if len(args) > 1 else "0"
            out.append(Edit(f"line {first}: loop replaced by its first iteration",
                            _branch(t, first, last, node, node.body, indent, f"{indent}{node.target.id} = {start}\n")))
    return out


def _branch(t: Text, first: int, last: Any, node: ast.stmt, body: list[ast.stmt], indent: str,
            prefix: str = "") -> Callable[[], str]:
    return lambda: t.replace_lines(first, last, ([prefix] if prefix else []) + block_lines(t, body, indent))


def _else(t: Text, node: ast.If, indent: str) -> Callable[[], str]:
    inner = node.orelse[0]
    if len(node.orelse) == 1 and isinstance(inner, ast.If) and t.lines[inner.lineno - 1].lstrip().startswith("elif"):
        def elif_() -> str:
            lines = t.lines[inner.lineno - 1:inner.end_lineno]
            lines[0] = re.sub(r"^(\s*)elif", r"\1if", lines[0], count=1)
            return t.replace_lines(node.lineno, last_line(node), lines)
        return elif_
    return lambda: t.replace_lines(node.lineno, last_line(node), block_lines(t, node.orelse, indent))


def one_iteration(t: Text) -> list[Edit]:
    """A `range` loop's stop set to its start plus one step (one iteration)."""
    out = []
    for node in ast.walk(function_of(t.tree)):
        if not (isinstance(node, ast.For) and is_range(node.iter)):
            continue
        call = node.iter
        args = call.args
        if not args:
            continue
        stop = args[1] if len(args) > 1 else args[0]
        start = t.segment(args[0]) if len(args) > 1 else "0"
        step = t.segment(args[2]) if len(args) > 2 else "1"
        a, b = t.span(stop)
        text = f"({start}) + ({step})" if len(args) > 1 else "1"
        if t.segment(stop) == text:
            continue
        out.append(Edit(f"line {node.lineno}: loop cut to one iteration",
                        partial(t.splice, a, b, text)))
    return out


def keywords(t: Text) -> list[Edit]:
    """A call's keyword argument dropped (`mask=`, `other=`, `eviction_policy=`, ...)."""
    out = []
    for node in ast.walk(function_of(t.tree)):
        if not isinstance(node, ast.Call) or not node.keywords:
            continue
        parts = [t.segment(a) for a in node.args] + [t.segment(k) for k in node.keywords]
        a, b = t.span(node)
        head = t.segment(node.func)
        for i, k in enumerate(node.keywords):
            rest = [p for j, p in enumerate(parts) if j != len(node.args) + i]
            text = f"{head}({', '.join(rest)})"
            name = k.arg or "**"
            out.append(Edit(f"line {node.lineno}: `{name}=` dropped", partial(t.splice, a, b, text)))
    return out

