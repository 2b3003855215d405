"""Where in the user's kernel Triton's compiler stopped, as a user reads it: `file:line: code`.

Triton's frontend raises `CompilationError` (its subclasses `UnsupportedLanguageConstruct`,
`CompileTimeAssertionFailure`) with the failing function's source and AST node (line 1: its `def`), and wraps an
error inside a called `@triton.jit` function in another one at the call (Triton 3.4 to 3.9). The line named is
the innermost one in user code (a call of `tl.sum` that fails inside Triton's library names the call).
"""

from __future__ import annotations

import inspect
import linecache
import os
import traceback
import types
from typing import Any

from ..core.backend_spec import short_path
from ..core.outcome import ErrorInfo


def _chain(exc: BaseException) -> list[BaseException]:
    """`exc` and the exceptions behind it (causes, then contexts), outermost first."""
    out: list[BaseException] = []
    e: BaseException | None = exc
    while e is not None and e not in out:
        out.append(e)
        e = e.__cause__ or e.__context__
    return out


def _is_compilation_error(e: BaseException) -> bool:
    return any(c.__name__ == "CompilationError" for c in type(e).__mro__)


def _jit_functions(jit: Any, limit: int = 200) -> list[Any]:
    """`jit` and the `@triton.jit` functions it can reach: through its globals (also one module deep:
    `lib.helper`) and closures, then theirs."""
    from triton.runtime.jit import JITFunction

    seen: dict[int, Any] = {}
    todo = [jit]
    while todo and len(seen) < limit:
        f = todo.pop()
        if id(f) in seen:
            continue
        seen[id(f)] = f
        fn = getattr(f, "fn", None)
        values = list(getattr(fn, "__globals__", {}).values())
        values += [c.cell_contents for c in getattr(fn, "__closure__", None) or () if _filled(c)]
        for v in values:
            if isinstance(v, JITFunction):
                todo.append(v)
            elif isinstance(v, types.ModuleType):
                todo += [x for x in vars(v).values() if isinstance(x, JITFunction)]
    return list(seen.values())


def _filled(cell: Any) -> bool:
    try:
        cell.cell_contents  # noqa: B018
    except ValueError:
        return False
    return True


def _def_line(f: Any) -> tuple[str, int] | None:
    """The file of a `@triton.jit` function and the line of its `def` (Triton's `src` starts there)."""
    try:
        lines, first = inspect.getsourcelines(f.fn)
        file = inspect.getsourcefile(f.fn)
    except (OSError, TypeError):
        return None
    if file is None:
        return None
    offset = next((i for i, line in enumerate(lines) if line.lstrip().startswith("def ")), 0)
    return file, first + offset


def where(exc: BaseException, jit: Any) -> str:
    """`file:line: code` of the innermost user-code line a compile error of `jit` names ('' where none is known).
    (Triton trims its own frames from the traceback: each error's function is found by its source among those
    `jit` reaches.)"""
    by_src: dict[str, Any] = {}
    for f in _jit_functions(jit):
        src = getattr(f, "src", None)
        if isinstance(src, str):
            by_src.setdefault(src, f)
    places = []
    for e in _chain(exc):
        node, src = getattr(e, "node", None), getattr(e, "src", None)
        lineno = getattr(node, "lineno", None)
        if not _is_compilation_error(e) or not isinstance(src, str) or src not in by_src or not isinstance(lineno,
                                                                                                          int):
            continue
        found = _def_line(by_src[src])
        if found is not None:
            places.append((found[0], found[1] + lineno - 1))
    user = [p for p in places if not _library(p[0])]
    if not (user or places):
        return ""
    file, line = (user or places)[-1]
    return f"{short_path(file)}:{line}: {linecache.getline(file, line).strip()}"


def _library(path: str) -> bool:
    import triton

    return os.path.abspath(path).startswith(os.path.dirname(os.path.abspath(triton.__file__)))


def message(exc: BaseException) -> str:
    """What the compiler said: the innermost compile error's own message (the wrapping ones at each call carry
    none; one that only repeats the exception behind it gives that exception), else the exception."""
    chain = _chain(exc)
    for i in range(len(chain) - 1, -1, -1):
        e = chain[i]
        text = getattr(e, "error_message", None) if _is_compilation_error(e) else None
        if not text:
            continue
        behind = chain[i + 1] if i + 1 < len(chain) else None
        if behind is not None and text == repr(behind):
            return f"{type(behind).__name__}: {behind}"
        return f"{type(e).__name__}: {text}"
    inner = next((e for e in reversed(chain) if not _is_compilation_error(e)), None)
    if inner is not None and len(chain) > 1:
        return f"{type(inner).__name__}: {inner}"
    first = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {first[-1] if first else ''}"


def compile_error(exc: BaseException, jit: Any, specialization: str = "") -> ErrorInfo:
    """An `ErrorInfo` (kind "compile") for a compile of `jit` that failed: the compiler's message, the user's line,
    and the specialization it was compiling."""
    text = message(exc)
    if specialization:
        text += f" (compiling {specialization})"
    details = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))[-6000:]
    return ErrorInfo(kind="compile", message=text[:2000], where=where(exc, jit), details=details)


def describe_key(jit: Any, key: tuple | None, arch: int) -> str:
    """A specialization as a user reads it, from its launch key (`tdiff.execute.launch_keys`):
    `kernel(x_ptr: *fp32 (16-byte aligned), n=1, BLOCK=64) for sm_90`; the kernel's name where the key is unknown."""
    name = jit.fn.__name__
    if key is None:
        return f"{name} for sm_{arch}"
    _, classes, options = key
    parts = []
    for p, cls in zip(jit.params, classes):
        if not (isinstance(cls, tuple) and len(cls) == 2):
            parts.append(f"{p.name}: {cls}")
            continue
        ty, flag = cls
        if ty == "constexpr":
            parts.append(f"{p.name}={flag}")
            continue
        how = ""
        if str(ty).startswith("*"):
            how = "16-byte aligned" if flag == "D" else "misaligned"
        elif str(ty).startswith(("i", "u")):
            how = "a multiple of 16" if flag == "D" else "other"
        parts.append(f"{p.name}: {ty}" + (f" ({how})" if how else ""))
    opts = ", ".join(f"{k}={v}" for k, v in options)
    return f"{name}({', '.join(parts)}){' ' + opts if opts else ''} for sm_{arch}"
