"""Kernel source for reproducers: each launched kernel and everything it refers to, as one module's text
that needs only triton, torch and numpy.

`Collector` gathers kernels, the device functions they call, constants and imports, in definition
order; `Inliner` also inlines the @triton.jit functions and constants a kernel reaches through a
library's module (FlagGems' `tle.program_id(0)`), replacing the module by a namespace holding them.
"""

from __future__ import annotations

import ast
import builtins
import inspect
import sys
import textwrap
import types
from typing import Any

from triton.runtime.jit import JITFunction

from ...core import kernels
from .errors import ReproError

try:
    from triton.runtime.jit import ConstexprFunction
except ImportError:  # pragma: no cover
    ConstexprFunction = ()


def def_source(fn: Any) -> str:
    """Source of a function from its `def` line (decorators dropped), dedented."""
    lines, _ = inspect.getsourcelines(fn)
    for i, line in enumerate(lines):
        if line.lstrip().startswith("def "):
            return textwrap.dedent("".join(lines[i:]))
    raise ValueError(f"no def line in the source of {fn.__name__}")


def loaded_names(src: str) -> list[str]:
    """The names `src` reads, in order of first use."""
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
        src = def_source(fn)
        params = set(inspect.signature(fn).parameters)
        for name in loaded_names(src):
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
            self.blocks.append(f"@triton.constexpr_function\n{def_source(value.fn)}")
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


#: modules a reproducer may import (everything else is inlined)
_IMPORTABLE = ("triton", "torch", "numpy", "math")


def _importable(mod: types.ModuleType) -> bool:
    return mod.__name__.split(".")[0] in _IMPORTABLE


class Inliner(Collector):
    """Kernel source that needs only triton, torch and numpy: besides what `Collector` inlines, the
    @triton.jit functions and constants a kernel reaches through a library's module (FlagGems'
    `tle.program_id(0)`, `flag_gems.utils.triton_lang_extension`) are inlined, and the module is
    replaced by a namespace module holding them. Importing the library instead would need it installed,
    and FlagGems cannot even be imported under TRITON_INTERPRET=1 (its LibEntry wraps the interpreter's
    kernels: `'function' object has no attribute 'fn'`) or on a machine without a GPU."""

    def __init__(self) -> None:
        super().__init__()
        self.attrs: list[dict[str, set[str]]] = []  # per function being added: module name -> attributes used
        self.spaces: dict[str, tuple[types.ModuleType, dict[str, str]]] = {}  # name -> (module, attr -> source)
        self.defined: dict[str, int] = {}  # inlined function name -> id of its JITFunction
        self.imported: set[str] = set()  # library modules imported after all (a member could not be inlined)

    def add(self, jit: Any) -> None:
        if id(jit) in self.done:
            return
        name = jit.fn.__name__
        if self.defined.setdefault(name, id(jit)) != id(jit):
            raise ReproError(f"two different @triton.jit functions named {name!r} would be inlined: "
                             "the reproducer cannot hold both")
        used: dict[str, set[str]] = {}
        for node in ast.walk(ast.parse(def_source(jit.fn))):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                used.setdefault(node.value.id, set()).add(node.attr)
        self.attrs.append(used)
        try:
            super().add(jit)
        finally:
            self.attrs.pop()

    def _dependency(self, name: str, value: Any) -> None:
        if not isinstance(value, types.ModuleType) or _importable(value) or name in self.imported:
            super()._dependency(name, value)
            return
        attrs = sorted(self.attrs[-1].get(name, ()))
        found: dict[str, Any] = {}
        for attr in attrs:
            member: Any = getattr(value, attr, None)  # a Triton library's attribute (Triton ships no types)
            if isinstance(member, JITFunction):
                found[attr] = member
            elif type(member).__name__ == "constexpr":
                found[attr] = f"tl.constexpr({member.value!r})"
            elif isinstance(member, (bool, int, float, str, type(None))):
                found[attr] = repr(member)
            else:  # not inlinable: import the library as the kernel does (it must be installed where this runs)
                self.notes.append(f"# NOTE: `{name}.{attr}` ({type(member).__name__}) could not be inlined: "
                                  f"{value.__name__} is imported")
                self.imported.add(name)
                self.spaces.pop(name, None)
                super()._dependency(name, value)
                return
        module, members = self.spaces.setdefault(name, (value, {}))
        if module is not value:
            raise ReproError(f"`{name}` names two different modules in the kernels: the reproducer cannot inline both")
        for attr, member in found.items():
            if isinstance(member, JITFunction):
                self.add(member)
                member = member.fn.__name__
            members[attr] = member

    def text(self) -> str:
        out = super().text()
        if self.spaces:
            lines = ["", "", "# library modules the kernels use, with what they use of them (inlined above)",
                     "import types as _types", ""]
            for name, (module, members) in self.spaces.items():
                lines.append(f"{name} = _types.ModuleType({('inlined:' + module.__name__)!r})")
                lines += [f"{name}.{attr} = {src}" for attr, src in sorted(members.items())]
            out += "\n".join(lines)
        return out


def find_jit(check: Any, name: str, module: str) -> Any:
    jit = kernels.jit_function(check.kernel)
    if jit.fn.__name__ == name:
        return jit
    mod = sys.modules.get(module)
    for obj in vars(mod).values() if mod else ():
        if kernels.is_kernel(obj) and kernels.jit_function(obj).fn.__name__ == name:
            return kernels.jit_function(obj)
    raise ReproError(f"kernel {name!r} launched by the check was not found in module {module!r}")
