"""Passes over a function's names: a name bound once to another name or a constant replaced by it, a name
bound once and read once replaced by its value, a `def` over several lines written on one, the kernel's unused
parameters dropped."""

from __future__ import annotations

import ast
import re
import textwrap
from collections.abc import Callable
from functools import partial

from .text import Edit, Text, function_of, is_atom, last_line, operand, short


def _bindings(fn: ast.FunctionDef) -> tuple[set[str], dict[str, int], dict[str, list[ast.Name]]]:
    """The function's parameters, how often each name is bound (an augmented assignment counts twice: it reads
    the name too) and where each is read."""
    params = {a.arg for a in (*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs)}
    stores: dict[str, int] = {}
    reads: dict[str, list[ast.Name]] = {}
    for node in ast.walk(fn):
        if isinstance(node, ast.Name):
            if isinstance(node.ctx, ast.Load):
                reads.setdefault(node.id, []).append(node)
            else:
                stores[node.id] = stores.get(node.id, 0) + 1
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            stores[node.target.id] = stores.get(node.target.id, 0) + 2
    return params, stores, reads


def _assignments(fn: ast.FunctionDef) -> list[tuple[ast.Assign, str]]:
    """Assignments to one name (`x = ...`), with the name."""
    return [(node, node.targets[0].id) for node in ast.walk(fn) if isinstance(node, ast.Assign)
            and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)]


def aliases(t: Text) -> list[Edit]:
    """A name bound once to another name or a constant (`x_base = X_ptr`, `X_pow1 = X_row`, `eps = 1e-6`) replaced
    by it where it is read, its assignment dropped (the oracle judges each: a name rebound in a loop may not be
    the same value)."""
    fn = function_of(t.tree)
    params, stores, all_reads = _bindings(fn)
    out = []
    for node, name in _assignments(fn):
        value = node.value
        simple = isinstance(value, (ast.Name, ast.Constant)) or isinstance(value, ast.UnaryOp) and \
            isinstance(value.operand, ast.Constant)
        if not simple or name in params or stores.get(name) != 1 or not t.alone(node, node) or \
                isinstance(value, ast.Name) and value.id == name or "\n" in t.segment(value):
            continue
        reads = all_reads.get(name, [])
        text = t.segment(value) if not isinstance(value, ast.UnaryOp) else f"({t.segment(value)})"  # (`-1 ** 2`)
        out.append(Edit(f"line {node.lineno}: `{name}` replaced by `{short(text)}`",
                        partial(_inline, t, node, reads, text)))
    return out


def _inline(t: Text, node: ast.stmt, reads: list[ast.Name], text: str) -> str:
    src = t.src
    for a, b in sorted((t.span(n) for n in reads), reverse=True):
        src = src[:a] + text + src[b:]
    lines = src.splitlines(keepends=True)  # (the value has no newline: the assignment's lines are where they were)
    first, last = node.lineno, node.end_lineno
    return "".join(lines[:first - 1] + lines[last:])


#: a line an edit that joins code (`temporaries`, `signature`) makes may be this long (ruff's default for this project)
MAX_LINE = 120


def temporaries(t: Text) -> list[Edit]:
    """A name bound once and read once, after its binding (`w = tl.load(...)` ... `y = x * w`), replaced by its
    value where it is read (in parentheses only where they change what the code means), its assignment dropped;
    not where the line it lands in would pass `MAX_LINE` characters (the oracle judges each: a load moved past a
    store may read another value)."""
    fn = function_of(t.tree)
    params, stores, reads = _bindings(fn)
    out = []
    for node, name in _assignments(fn):
        used = reads.get(name, [])
        if name in params or stores.get(name) != 1 or len(used) != 1 or not t.alone(node, node) or \
                used[0].lineno <= last_line(node) or "\n" in t.segment(node.value):
            continue
        text = _substitute(t, node, used[0])
        if text is not None:  # (made here, once: whether it fits is known only from the text)
            out.append(Edit(f"line {node.lineno}: `{name}` inlined where it is read", partial(str, text)))
    return out


def _substitute(t: Text, node: ast.Assign, read: ast.Name) -> str | None:
    """The text with `node`'s value in place of `read` and `node` dropped; None where a line would pass
    `MAX_LINE`."""
    a, b = t.span(read)
    src = operand(t, a, b, t.segment(node.value), is_atom(node.value))
    lines = src.splitlines(keepends=True)
    if any(len(line.rstrip("\n")) > MAX_LINE for line in lines[read.lineno - 1:read.end_lineno]):
        return None
    return "".join(lines[:node.lineno - 1] + lines[node.end_lineno:])


def signature(t: Text) -> list[Edit]:
    """A `def` spread over several lines written on one, where it fits in `MAX_LINE` characters (as a formatter
    writes it once few parameters are left)."""
    fn = function_of(t.tree)
    args = fn.args
    if not fn.body or args.vararg or args.kwarg or args.kwonlyargs or args.posonlyargs:
        return []
    end = _header_end(t, fn)
    if end is None or end == fn.lineno:
        return []
    defaults = dict(zip([a.arg for a in args.args[len(args.args) - len(args.defaults):]], args.defaults))
    params = [t.segment(a) + ((" = " if a.annotation is not None else "=") + t.segment(defaults[a.arg])
                              if a.arg in defaults else "") for a in args.args]
    returns = f" -> {t.segment(fn.returns)}" if fn.returns is not None else ""
    line = f"{t.indent(fn.lineno)}def {fn.name}({', '.join(params)}){returns}:\n"
    if len(line) - 1 > MAX_LINE:
        return []
    return [Edit("the def written on one line", lambda: t.replace_lines(fn.lineno, end, [line]))]


def _header_end(t: Text, fn: ast.FunctionDef) -> int | None:
    """The line the `def`'s header ends on (its `:`)."""
    for end in range(fn.lineno, fn.body[0].lineno):
        head = textwrap.dedent("".join(t.lines[fn.lineno - 1:end]))
        try:
            ast.parse(head + "    pass\n")
        except SyntaxError:
            continue
        return end
    return None


def unused_parameters(t: Text) -> list[Edit]:
    """Parameters the body no longer reads dropped from the `def` (all at once first, then each): the kernel's
    launches still pass them, and the rebuilt kernel drops them from each launch (`build`)."""
    fn = function_of(t.tree)
    args = fn.args
    if args.vararg or args.kwarg or args.kwonlyargs or args.posonlyargs:
        return []
    read = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Store)}
    read |= {n.id for node in fn.body for n in ast.walk(node) if isinstance(n, ast.Name)}
    defaults = dict(zip([a.arg for a in args.args[len(args.args) - len(args.defaults):]], args.defaults))
    unused = [a for a in args.args if a.arg not in read]
    if not unused:
        return []

    def make(chosen: list[ast.arg]) -> Callable[[], str]:
        return lambda: _drop_parameters(t, fn, chosen, defaults)

    out = []
    if len(unused) > 1:
        out.append(Edit(f"unused parameters {', '.join(a.arg for a in unused)} dropped", make(unused)))
    out += [Edit(f"unused parameter {a.arg} dropped", make([a])) for a in unused]
    return out


def _drop_parameters(t: Text, fn: ast.FunctionDef, chosen: list[ast.arg], defaults: dict[str, ast.expr]) -> str:
    """The `def` with the `chosen` parameters (each with its annotation, default and the comma after it) cut
    out; lines of the signature left empty go."""
    src = t.src
    header_end = t.span(fn.body[0])[0] if fn.body else len(src)
    spans = []
    for a in chosen:
        start, end = t.span(a)
        if a.arg in defaults:
            end = t.span(defaults[a.arg])[1]
        j = end
        while j < header_end and src[j] in " \t":
            j += 1
        if j < header_end and src[j] == ",":
            end = j + 1
            while end < header_end and src[end] in " \t":
                end += 1
        line_start = src.rfind("\n", 0, start) + 1
        if end < header_end and src[end] == "#" and not src[line_start:start].strip():
            end = src.find("\n", end)  # (the parameter's line, its comment with it)
        spans.append((start, end))
    for start, end in sorted(spans, reverse=True):
        src = src[:start] + src[end:]
    # lines of the signature that held only a parameter go
    lines = src.splitlines(keepends=True)
    last = fn.body[0].lineno - 1 if fn.body else len(lines)
    header = [line.rstrip() + "\n" for i, line in enumerate(lines[:last]) if i == 0 or line.strip()]
    closing = re.compile(r"^\s*\).*:\s*(#.*)?$")
    if len(header) > 1 and closing.match(header[-1]) and not closing.match(t.lines[last - 1]):
        # (the parameters that shared the closing line are gone: `)` goes back to the line before, as it was)
        header[-2:] = [header[-2].rstrip().rstrip(",") + header[-1].strip() + "\n"]
    text = "".join(header)  # (`(a, )` -> `(a)`, `(, )` -> `()`)
    return re.sub(r"\(\s*,\s*\)", "()", re.sub(r",[ \t]*\)", ")", text)) + "".join(lines[last:])

