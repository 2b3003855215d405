"""The expression pass: an expression replaced by one of its operands, a condition by a constant (in
parentheses only where they change what the code means)."""

from __future__ import annotations

import ast
from functools import partial

from .text import Edit, Text, function_of, is_atom, operand, short


def _operands(node: ast.AST) -> list[ast.expr]:
    if isinstance(node, ast.BinOp):
        return [node.left, node.right]
    if isinstance(node, ast.UnaryOp):  # (not `-1.0` -> `1.0`, `-float("inf")` -> `float("inf")`: no simpler)
        literal = isinstance(node.operand, ast.Constant) or isinstance(node.operand, ast.Call) and \
            isinstance(node.operand.func, ast.Name) and node.operand.func.id == "float"
        return [] if literal else [node.operand]
    if isinstance(node, ast.BoolOp):
        return list(node.values)
    if isinstance(node, ast.IfExp):
        return [node.body, node.orelse]
    if isinstance(node, ast.Call):
        out = [a for a in node.args if not isinstance(a, ast.Starred)]
        if isinstance(node.func, ast.Attribute) and not isinstance(node.func.value, ast.Name):
            out.insert(0, node.func.value)  # `x.to(tl.float32)` -> `x` (not `tl.load(...)` -> `tl`)
        elif isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name) \
                and node.func.value.id not in ("tl", "triton", "libdevice", "math", "tle"):
            out.insert(0, node.func.value)
        return out
    return []


def expressions(t: Text) -> list[Edit]:
    """An expression replaced by one of its operands (`a * b` -> `a`, `x.to(t)` -> `x`, `tl.where(c, a, b)`
    -> `a`); a condition by True or False."""
    fn = function_of(t.tree)
    out = []
    skip: set[int] = set()
    for node in ast.walk(fn):  # never the names a call calls, nor targets of assignments
        if isinstance(node, ast.Call):
            skip.add(id(node.func))
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.For)):
            for target in ast.walk(node.targets[0] if isinstance(node, ast.Assign) else node.target):
                skip.add(id(target))
        if isinstance(node, ast.arguments):
            for sub in ast.walk(node):
                skip.add(id(sub))
    for node in ast.walk(fn):
        if not isinstance(node, ast.expr) or id(node) in skip or not hasattr(node, "lineno"):
            continue
        a, b = t.span(node)
        for child in _operands(node):
            text, atom = t.segment(child), is_atom(child)
            out.append(Edit(f"line {node.lineno}: `{short(t.segment(node))}` -> `{short(text)}`",
                            partial(operand, t, a, b, text, atom)))
        condition = isinstance(node, (ast.Compare, ast.BoolOp)) or \
            isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not)
        if condition:
            for value in ("True", "False"):
                out.append(Edit(f"line {node.lineno}: `{short(t.segment(node))}` -> {value}",
                                partial(t.splice, a, b, value)))
    return out
