"""The code a reproducer embeds, rendered from the source of tdiff's own modules, so it cannot drift.

`shim_library()`: `tdiff.compat` and the interpreter's shim modules (`undefined`, `shim_names`, `shim_switches`,
`bf16_shims`, `rewrite_shims`, `shims`, `libdevice`, `stock`), one after the other, for the interpreter side;
`runtime_source()`: the tolerance formula (`tdiff.core.tolerance.allowed`, `within`), `tracer` and `runtime`
without its case block. Each module is taken
whole, less its docstring (a comment names it), `from __future__` and its imports of tdiff; the names
those imports bring must be defined by what comes before (checked here), and no two modules may
define the same name.
"""

from __future__ import annotations

import ast
import importlib
import inspect
from functools import lru_cache
from typing import TypeGuard

from ...core import tolerance
from . import runtime, tracer

#: the interpreter side's library, in dependency order (each imports only numpy, triton, the standard
#: library and the modules before it)
LIBRARY = ("tdiff.compat", "tdiff.execute.interpreter.undefined", "tdiff.execute.interpreter.shim_names",
           "tdiff.execute.interpreter.shim_switches", "tdiff.execute.interpreter.bf16_shims",
           "tdiff.execute.interpreter.rewrite_shims", "tdiff.execute.interpreter.shims",
           "tdiff.execute.interpreter.libdevice", "tdiff.execute.interpreter.stock")
CASE_START = "# ------------------------------------------------------------------ the case ("
CASE_END = "# ------------------------------------------------------------------ end of the case"


class RenderError(RuntimeError):
    """tdiff's own source does not fit a reproducer (a tdiff import nothing before provides, a clash)."""


def _is_tdiff_import(node: ast.stmt) -> TypeGuard[ast.ImportFrom]:
    return isinstance(node, ast.ImportFrom) and (node.level > 0 or (node.module or "").split(".")[0] == "tdiff")


def _bound(node: ast.stmt) -> tuple[set[str], dict[str, str]]:
    """Top-level names a statement defines, and those it imports (name -> what is imported)."""
    defined: set[str] = set()
    imported: dict[str, str] = {}
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        defined.add(node.name)
    elif isinstance(node, ast.Import):
        for a in node.names:
            imported[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
    elif isinstance(node, ast.ImportFrom):
        for a in node.names:
            imported[a.asname or a.name] = f"{node.module}.{a.name}"
    else:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, (ast.AnnAssign, ast.AugAssign, ast.For)) else []
        for t in targets:
            defined |= {n.id for n in ast.walk(t) if isinstance(n, ast.Name)}
    return defined, imported


class Bundle:
    """Module sources concatenated into one namespace, checked as they are added."""

    def __init__(self, provided: set[str] | None = None) -> None:
        self.parts: list[str] = []
        self.defined: set[str] = set(provided or ())
        self.imported: dict[str, str] = {}

    def add_source(self, source: str, label: str, docstring: bool = True) -> None:
        tree = ast.parse(source)
        self.own: set[str] = set()  # names this source defined so far (it may assign one again)
        lines = source.splitlines(True)
        drop: list[tuple[int, int]] = []
        body = list(tree.body)
        header = f"# ------------------------------------------------------------------ {label}\n"
        if docstring and body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                and isinstance(body[0].value.value, str):
            summary = body[0].value.value.strip().split("\n\n")[0]
            header += "".join(f"# {line.strip()}\n" for line in summary.splitlines())
            drop.append((body[0].lineno, body[0].end_lineno or body[0].lineno))
            body = body[1:]
        for node in body:
            if isinstance(node, ast.ImportFrom) and node.module == "__future__" or _is_tdiff_import(node):
                if _is_tdiff_import(node):
                    for a in node.names:
                        if a.asname not in (None, a.name) or a.name not in self.defined:
                            raise RenderError(f"{label}: `{a.name}` (imported from tdiff) is not defined before it")
                drop.append((node.lineno, node.end_lineno or node.lineno))
                continue
            defined, imported = _bound(node)
            for name in defined - self.own:
                if name in self.defined or name in self.imported:
                    raise RenderError(f"{label}: `{name}` is defined by an earlier module too")
            for name, what in imported.items():
                if name in self.defined or self.imported.get(name, what) != what:
                    raise RenderError(f"{label}: `{name}` names another object in an earlier module")
            self.defined |= defined
            self.own |= defined
            self.imported.update(imported)
        kept = "".join(line for i, line in enumerate(lines, 1) if not any(a <= i <= b for a, b in drop))
        while "\n\n\n\n" in kept:  # (where a statement was left out)
            kept = kept.replace("\n\n\n\n", "\n\n\n")
        self.parts.append(header + kept.strip("\n") + "\n")

    def add_module(self, name: str) -> None:
        module = importlib.import_module(name)
        self.add_source(inspect.getsource(module), f"{name.replace('.', '/')}.py")

    def text(self) -> str:
        return "\n\n".join(self.parts)


@lru_cache(maxsize=1)
def shim_library() -> str:
    """The interpreter side's library: compat, the masked-lane poison and the shims, and `stock.install`."""
    bundle = Bundle()
    for name in LIBRARY:
        bundle.add_module(name)
    return bundle.text()


def _without_case(source: str) -> str:
    start, end = source.find(CASE_START), source.find(CASE_END)
    if start < 0 or end < start or source.count(CASE_START) != 1:
        raise RenderError("runtime.py: the case block's markers are missing")
    end = source.index("\n", end) + 1
    return source[:start] + source[end:]


@lru_cache(maxsize=1)
def runtime_source() -> str:
    """The tolerance formula, the tracer and the runtime, whose case block the reproducer's header replaces
    (`install`, `current` and `compile_only` come from the shim library, which a reproducer with an interpreter
    or a compile-only side embeds)."""
    bundle = Bundle(provided={"install", "current", "compile_only"})
    formula = inspect.getsource(tolerance.allowed) + "\n\n" + inspect.getsource(tolerance.within)
    bundle.add_source("import numpy as np\n\n\n" + formula, "tdiff/core/tolerance.py: the one tolerance formula",
                      docstring=False)
    bundle.add_source(inspect.getsource(tracer), "tdiff/record/repro/tracer.py")
    bundle.add_source(_without_case(inspect.getsource(runtime)), "tdiff/record/repro/runtime.py")
    return bundle.text()


def case_names() -> list[str]:
    """The names the case block of `runtime` defines (a reproducer's header sets each)."""
    source = inspect.getsource(runtime)
    block = source[source.index(CASE_START):source.index(CASE_END)]
    names: list[str] = []
    for node in ast.parse(block).body:
        names += sorted(_bound(node)[0])
    return names

