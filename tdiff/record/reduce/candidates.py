"""Candidate edits of one function's source, found on its AST and applied to its text (so what is kept
keeps its formatting and comments). Each pass lists its edits in the order to try them; an edit is
applied lazily and may give text that does not parse (the loop then skips it).

Passes, in order: comment lines dropped, constexpr specialisation (a constexpr parameter's uses replaced by
the case's value), compound statements replaced by a branch or by one iteration of their loop, statement
deletion (ddmin over each block: halves, quarters, ... single statements), a name bound once to another name
or a constant replaced by it, a name bound once and read once replaced by its value, the kernel's unused
parameters dropped, a `def` over several lines written on one, loops cut to one iteration, keyword arguments
dropped, expressions replaced by one of their operands or a condition by a constant.
"""

from __future__ import annotations

import ast
import re
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


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
        return (self.offset(node.lineno, node.col_offset),  # type: ignore[attr-defined]
                self.offset(node.end_lineno, node.end_col_offset))  # type: ignore[attr-defined]

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
        tail = self.src[b:self.starts[last.end_lineno]]  # type: ignore[index]
        return not head.strip() and (not tail.strip() or tail.strip().startswith("#"))

    def replace_lines(self, first: int, last: int, new: list[str]) -> str:
        """Lines `first`..`last` (1-based, inclusive) replaced by `new` (each ending in a newline)."""
        return "".join(self.lines[:first - 1] + new + self.lines[last:])


# ------------------------------------------------------------------ helpers

def _function(tree: ast.Module) -> ast.FunctionDef:
    fn = tree.body[0]
    if not isinstance(fn, ast.FunctionDef):
        raise ValueError("the source is not a function definition")
    return fn


def _blocks(node: ast.AST) -> list[list[ast.stmt]]:
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


def _dedent(lines: list[str], by: int) -> list[str]:
    out = []
    for line in lines:
        strip = min(by, len(line) - len(line.lstrip(" \t"))) if line.strip() else len(line) - 1
        out.append(line[strip:] if line.strip() else "\n")
    return out


def _block_lines(t: Text, block: list[ast.stmt], indent: str) -> list[str]:
    """The lines of `block`, re-indented to `indent`."""
    lines = t.lines[block[0].lineno - 1:block[-1].end_lineno]  # type: ignore[misc]
    have = len(t.indent(block[0].lineno))
    return [indent + line if line.strip() else line for line in _dedent(lines, have)]


def _is_range(call: ast.AST) -> bool:
    if not isinstance(call, ast.Call):
        return False
    f = call.func
    name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
    return name in ("range", "static_range")


def _atom(node: ast.AST) -> bool:
    return isinstance(node, (ast.Name, ast.Constant, ast.Attribute, ast.Call, ast.Subscript))


# ------------------------------------------------------------------ passes

def cleanup(t: Text) -> list[Edit]:
    """Comment-only and blank lines inside the function dropped (trailing comments stay)."""
    kept = [line for i, line in enumerate(t.lines) if i == 0 or (line.strip() and not line.strip().startswith("#"))]
    text = "".join(kept)
    return [Edit("comments and blank lines dropped", lambda: text)] if text != t.src else []


def specialise(t: Text, constexprs: dict[str, Any]) -> list[Edit]:
    """Each constexpr parameter's uses replaced by its value in the case (all at once first)."""
    fn = _function(t.tree)
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
    fn = _function(t.tree)
    out: list[Edit] = []
    for block in _blocks(fn):
        n = len(block)
        size = max(1, n // 2) if n > 1 else 1
        while True:
            for start in range(0, n, size):
                chunk = block[start:start + size]
                out.append(_delete(t, block, chunk))
            if size == 1:
                break
            size = max(1, size // 2)
    return [e for e in out if e is not None]


def _delete(t: Text, block: list[ast.stmt], chunk: list[ast.stmt]) -> Edit | None:
    if not t.alone(chunk[0], chunk[-1]):
        return None
    first, last = chunk[0].lineno, chunk[-1].end_lineno
    whole = len(chunk) == len(block)
    indent = t.indent(first)
    what = f"line {first} deleted" if first == last else f"lines {first}-{last} deleted"
    return Edit(what, lambda: t.replace_lines(first, last, [indent + "pass\n"] if whole else []))  # type: ignore[arg-type]


def compounds(t: Text) -> list[Edit]:
    """An `if` replaced by its body or its else; a loop by one pass of its body (`v = start`); a `with` by
    its body."""
    fn = _function(t.tree)
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
        if isinstance(node, ast.For) and isinstance(node.target, ast.Name) and _is_range(node.iter):
            args = node.iter.args  # type: ignore[attr-defined]
            start = t.segment(args[0]) if len(args) > 1 else "0"
            out.append(Edit(f"line {first}: loop replaced by its first iteration",
                            _branch(t, first, last, node, node.body, indent, f"{indent}{node.target.id} = {start}\n")))
    return out


def _branch(t: Text, first: int, last: Any, node: ast.stmt, body: list[ast.stmt], indent: str,
            prefix: str = "") -> Callable[[], str]:
    return lambda: t.replace_lines(first, last, ([prefix] if prefix else []) + _block_lines(t, body, indent))


def _else(t: Text, node: ast.If, indent: str) -> Callable[[], str]:
    inner = node.orelse[0]
    if len(node.orelse) == 1 and isinstance(inner, ast.If) and t.lines[inner.lineno - 1].lstrip().startswith("elif"):
        def elif_() -> str:
            lines = t.lines[inner.lineno - 1:inner.end_lineno]  # type: ignore[misc]
            lines[0] = re.sub(r"^(\s*)elif", r"\1if", lines[0], count=1)
            return t.replace_lines(node.lineno, node.end_lineno, lines)  # type: ignore[arg-type]
        return elif_
    return lambda: t.replace_lines(node.lineno, node.end_lineno, _block_lines(t, node.orelse, indent))  # type: ignore[arg-type]


def one_iteration(t: Text) -> list[Edit]:
    """A `range` loop's stop set to its start plus one step (one iteration)."""
    out = []
    for node in ast.walk(_function(t.tree)):
        if not (isinstance(node, ast.For) and _is_range(node.iter)):
            continue
        call: ast.Call = node.iter  # type: ignore[assignment]
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
                        lambda a=a, b=b, text=text: t.splice(a, b, text)))
    return out


def keywords(t: Text) -> list[Edit]:
    """A call's keyword argument dropped (`mask=`, `other=`, `eviction_policy=`, ...)."""
    out = []
    for node in ast.walk(_function(t.tree)):
        if not isinstance(node, ast.Call) or not node.keywords:
            continue
        parts = [t.segment(a) for a in node.args] + [t.segment(k) for k in node.keywords]
        a, b = t.span(node)
        head = t.segment(node.func)
        for i, k in enumerate(node.keywords):
            rest = [p for j, p in enumerate(parts) if j != len(node.args) + i]
            text = f"{head}({', '.join(rest)})"
            name = k.arg or "**"
            out.append(Edit(f"line {node.lineno}: `{name}=` dropped", lambda a=a, b=b, text=text: t.splice(a, b, text)))
    return out


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
    fn = _function(t.tree)
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
        out.append(Edit(f"line {node.lineno}: `{name}` replaced by `{_short(text)}`",
                        lambda node=node, reads=reads, text=text: _inline(t, node, reads, text)))
    return out


def _inline(t: Text, node: ast.stmt, reads: list[ast.Name], text: str) -> str:
    src = t.src
    for a, b in sorted((t.span(n) for n in reads), reverse=True):
        src = src[:a] + text + src[b:]
    lines = src.splitlines(keepends=True)  # (the value has no newline: the assignment's lines are where they were)
    first, last = node.lineno, node.end_lineno
    return "".join(lines[:first - 1] + lines[last:])  # type: ignore[index]


#: a line an edit that joins code (`temporaries`, `signature`) makes may be this long (ruff's default for this project)
MAX_LINE = 120


def temporaries(t: Text) -> list[Edit]:
    """A name bound once and read once, after its binding (`w = tl.load(...)` ... `y = x * w`), replaced by its
    value where it is read (in parentheses only where they change what the code means), its assignment dropped;
    not where the line it lands in would pass `MAX_LINE` characters (the oracle judges each: a load moved past a
    store may read another value)."""
    fn = _function(t.tree)
    params, stores, reads = _bindings(fn)
    out = []
    for node, name in _assignments(fn):
        used = reads.get(name, [])
        if name in params or stores.get(name) != 1 or len(used) != 1 or not t.alone(node, node) or \
                used[0].lineno <= node.end_lineno or "\n" in t.segment(node.value):  # type: ignore[operator]
            continue
        text = _substitute(t, node, used[0])
        if text is not None:  # (made here, once: whether it fits is known only from the text)
            out.append(Edit(f"line {node.lineno}: `{name}` inlined where it is read", lambda text=text: text))
    return out


def _substitute(t: Text, node: ast.Assign, read: ast.Name) -> str | None:
    """The text with `node`'s value in place of `read` and `node` dropped; None where a line would pass
    `MAX_LINE`."""
    a, b = t.span(read)
    src = _operand(t, a, b, t.segment(node.value), _atom(node.value))
    lines = src.splitlines(keepends=True)
    if any(len(line.rstrip("\n")) > MAX_LINE for line in lines[read.lineno - 1:read.end_lineno]):  # type: ignore[misc]
        return None
    return "".join(lines[:node.lineno - 1] + lines[node.end_lineno:])  # type: ignore[index]


def signature(t: Text) -> list[Edit]:
    """A `def` spread over several lines written on one, where it fits in `MAX_LINE` characters (as a formatter
    writes it once few parameters are left)."""
    fn = _function(t.tree)
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
    fn = _function(t.tree)
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


def _operands(node: ast.AST) -> list[ast.AST]:
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
    fn = _function(t.tree)
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
            text, atom = t.segment(child), _atom(child)
            out.append(Edit(f"line {node.lineno}: `{_short(t.segment(node))}` -> `{_short(text)}`",
                            lambda a=a, b=b, text=text, atom=atom: _operand(t, a, b, text, atom)))
        condition = isinstance(node, (ast.Compare, ast.BoolOp)) or \
            isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not)
        if condition:
            for value in ("True", "False"):
                out.append(Edit(f"line {node.lineno}: `{_short(t.segment(node))}` -> {value}",
                                lambda a=a, b=b, value=value: t.splice(a, b, value)))
    return out


def _operand(t: Text, a: int, b: int, text: str, atom: bool) -> str:
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
        if _same_meaning(outer, meaning):
            return outer
    return bare if atom or _same_meaning(bare, meaning) else wrapped


def _same_meaning(src: str, meaning: str) -> bool:
    try:
        return ast.dump(ast.parse(src)) == meaning
    except SyntaxError:
        return False


def _short(text: str, n: int = 40) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[:n - 3] + "..."


#: the passes, in the order the loop runs them (constexpr specialisation takes the case's values)
PASSES: list[tuple[str, Callable[..., list[Edit]]]] = [
    ("cleanup", cleanup),
    ("specialise", specialise),
    ("compound", compounds),  # (first: specialised constexprs leave `if True:` / `if False:`)
    ("delete", deletions),
    ("alias", aliases),
    ("temporary", temporaries),
    ("parameters", unused_parameters),  # (the kernel's own only: its launches are rewritten by `build`)
    ("signature", signature),
    ("loop", one_iteration),
    ("keyword", keywords),
    ("expression", expressions),
]


def edits(pass_name: str, src: str, constexprs: dict[str, Any]) -> list[Edit]:
    """The edits of one pass on `src` (none where it does not parse)."""
    try:
        t = Text(src)
    except SyntaxError:
        return []
    fn = dict(PASSES)[pass_name]
    return fn(t, constexprs) if pass_name == "specialise" else fn(t)
