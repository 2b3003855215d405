"""Kernel source for reproducers: a kernel and everything it refers to, as one module's text."""

from __future__ import annotations

import ast
import builtins
import inspect
import textwrap
import types
from typing import Any

from triton.runtime.jit import JITFunction

try:
    from triton.runtime.jit import ConstexprFunction
except ImportError:  # pragma: no cover
    ConstexprFunction = ()  # type: ignore[assignment,misc]


def _def_source(fn: Any) -> str:
    """Source of a function from its `def` line (decorators dropped), dedented."""
    lines, _ = inspect.getsourcelines(fn)
    for i, line in enumerate(lines):
        if line.lstrip().startswith("def "):
            return textwrap.dedent("".join(lines[i:]))
    raise ValueError(f"no def line in the source of {fn.__name__}")


def _names(src: str) -> list[str]:
    out: list[str] = []
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id not in out:
            out.append(node.id)
    return out


def _import_line(name: str, mod: types.ModuleType) -> str:
    return f"import {mod.__name__}" if name == mod.__name__ else f"import {mod.__name__} as {name}"


class Collector:
    """Gathers kernels, their device functions, constants and imports, in definition order."""

    def __init__(self) -> None:
        self.imports: list[str] = ["import triton", "import triton.language as tl"]
        self.blocks: list[str] = []
        self.done: set[int] = set()
        self.notes: list[str] = []

    def add(self, jit: JITFunction) -> None:
        if id(jit) in self.done:
            return
        self.done.add(id(jit))
        fn = jit.fn
        src = _def_source(fn)
        params = set(inspect.signature(fn).parameters)
        for name in _names(src):
            if name in params or hasattr(builtins, name):
                continue
            if name not in fn.__globals__:
                continue
            self._dependency(name, fn.__globals__[name])
        opts = []
        if getattr(jit, "do_not_specialize", None):
            opts.append(f"do_not_specialize={list(jit.do_not_specialize)!r}")
        self.blocks.append(f"@triton.jit({', '.join(opts)})\n{src}" if opts else f"@triton.jit\n{src}")

    def _dependency(self, name: str, value: Any) -> None:
        if isinstance(value, types.ModuleType):
            line = _import_line(name, value)
            if line not in self.imports:
                self.imports.append(line)
        elif isinstance(value, JITFunction):
            if value.fn.__module__.startswith("triton."):
                line = f"from {value.fn.__module__} import {value.fn.__name__} as {name}"
                if line not in self.imports:
                    self.imports.append(line)
            else:
                self.add(value)
        elif type(value).__name__ == "constexpr":
            self._const(f"{name} = tl.constexpr({value.value!r})")
        elif isinstance(value, (bool, int, float, str, type(None))):
            self._const(f"{name} = {value!r}")
        elif ConstexprFunction and isinstance(value, ConstexprFunction):
            self.blocks.append(f"@triton.constexpr_function\n{_def_source(value.fn)}")
        elif getattr(value, "__module__", "").startswith(("triton", "torch", "numpy")):
            mod = value.__module__
            line = f"from {mod} import {getattr(value, '__name__', name)} as {name}"
            if line not in self.imports:
                self.imports.append(line)
        else:
            self.notes.append(f"# NOTE: `{name}` ({type(value).__name__}) could not be inlined")

    def _const(self, line: str) -> None:
        if line not in self.blocks:
            self.blocks.insert(0, line)

    def text(self) -> str:
        return "\n".join(self.imports) + "\n\n" + "\n".join(self.notes) + "\n\n" + "\n\n".join(self.blocks)
