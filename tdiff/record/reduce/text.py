"""A function's source text with its AST (`Text`: positions as character offsets), the candidate edit
(`Edit`), and the helpers the passes share."""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeGuard


@dataclass
class Edit:
    """One candidate: what it does, and the text it makes."""

    what: str
    make: Callable[[], str]


class Text:
    """A source text with its AST, and positions converted to character offsets."""

    def __init__(self, src: str) -> None:
        self.src = src
        self.tree = ast.parse(src)
        self.lines = src.splitlines(keepends=True)
        self.starts = [0]
        for line in self.lines:
            self.starts.append(self.starts[-1] + len(line))

    def offset(self, lineno: int, col: int) -> int:
        """Character offset of (1-based line, UTF-8 byte column)."""
        line = self.lines[lineno - 1]
        return self.starts[lineno - 1] + len(line.encode()[:col].decode(errors="ignore"))

    def span(self, node: ast.AST) -> tuple[int, int]:
        # (a parsed node with a position, an expression or statement: ast.AST declares none)
        return (self.offset(node.lineno, node.col_offset),  # type: ignore[attr-defined]
                self.offset(node.end_lineno, node.end_col_offset))  # type: ignore[attr-defined]  # (as above)

    def segment(self, node: ast.AST) -> str:
        a, b = self.span(node)
        return self.src[a:b]

    def splice(self, a: int, b: int, text: str) -> str:
        return self.src[:a] + text + self.src[b:]

    def indent(self, lineno: int) -> str:
        line = self.lines[lineno - 1]
        return line[:len(line) - len(line.lstrip())]

    def alone(self, first: ast.stmt, last: ast.stmt) -> bool:
        """Whether statements `first`..`last` fill their lines (no `;` neighbours)."""
        a, b = self.span(first)[0], self.span(last)[1]
        head = self.src[self.starts[first.lineno - 1]:a]
        tail = self.src[b:self.starts[last_line(last)]]
        return not head.strip() and (not tail.strip() or tail.strip().startswith("#"))

    def replace_lines(self, first: int, last: int, new: list[str]) -> str:
        """Lines `first`..`last` (1-based, inclusive) replaced by `new` (each ending in a newline)."""
        return "".join(self.lines[:first - 1] + new + self.lines[last:])



# ------------------------------------------------------------------ helpers

def function_of(tree: ast.Module) -> ast.FunctionDef:
    fn = tree.body[0]
    if not isinstance(fn, ast.FunctionDef):
        raise ValueError("the source is not a function definition")
    return fn


def blocks(node: ast.AST) -> list[list[ast.stmt]]:
    """Every statement list under `node`, outermost first (pre-order)."""
    out: list[list[ast.stmt]] = []

    def visit(n: ast.AST) -> None:
        for name in ("body", "orelse", "finalbody"):
            block = getattr(n, name, None)
            if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                out.append(block)
        for name in ("body", "orelse", "finalbody"):
            for child in getattr(n, name, None) or []:
                if isinstance(child, ast.stmt):
                    visit(child)

    visit(node)
    return out


def dedent(lines: list[str], by: int) -> list[str]:
    out = []
    for line in lines:
        strip = min(by, len(line) - len(line.lstrip(" \t"))) if line.strip() else len(line) - 1
        out.append(line[strip:] if line.strip() else "\n")
    return out


def block_lines(t: Text, block: list[ast.stmt], indent: str) -> list[str]:
    """The lines of `block`, re-indented to `indent`."""
    lines = t.lines[block[0].lineno - 1:block[-1].end_lineno]
    have = len(t.indent(block[0].lineno))
    return [indent + line if line.strip() else line for line in dedent(lines, have)]


def last_line(node: ast.stmt | ast.expr) -> int:
    """The last line of a parsed node (`ast.parse` sets it on every statement and expression)."""
    assert node.end_lineno is not None, f"line {node.lineno}: a node without its end (not parsed)"
    return node.end_lineno


def is_range(call: ast.AST) -> TypeGuard[ast.Call]:
    if not isinstance(call, ast.Call):
        return False
    f = call.func
    name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
    return name in ("range", "static_range")


def is_atom(node: ast.AST) -> bool:
    return isinstance(node, (ast.Name, ast.Constant, ast.Attribute, ast.Call, ast.Subscript))


def short(text: str, n: int = 40) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[:n - 3] + "..."


def operand(t: Text, a: int, b: int, text: str, atom: bool) -> str:
    """`text` in place of the span, in parentheses only where they change what the code means (those around
    the span too: `a * (b + c)` -> `a * b`)."""
    wrapped = t.splice(a, b, f"({text})")
    try:
        meaning = ast.dump(ast.parse(wrapped))
    except SyntaxError:
        return wrapped
    bare = t.splice(a, b, text)
    if t.src[a - 1:a] == "(" and t.src[b:b + 1] == ")" and (a < 2 or not (t.src[a - 2].isalnum() or
                                                                          t.src[a - 2] in "_)]")):
        outer = t.splice(a - 1, b + 1, text)  # (not the parentheses of a call)
        if same_meaning(outer, meaning):
            return outer
    return bare if atom or same_meaning(bare, meaning) else wrapped


def same_meaning(src: str, meaning: str) -> bool:
    try:
        return ast.dump(ast.parse(src)) == meaning
    except SyntaxError:
        return False
