"""A kernel built from reduced source: each function's text executed in a copy of its module's globals (so
`tl`, constants and helpers resolve as in the original), wrapped in `@triton.jit` with the original's
options, the reduced device functions bound in place of the originals, and the kernel's autotune /
heuristics layers put back around it. `ReducedRef` finds a check again in a worker process with its kernel
so rebuilt."""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import inspect
import linecache
import warnings
from dataclasses import dataclass
from typing import Any

from triton.runtime.autotuner import Autotuner, Heuristics
from triton.runtime.interpreter import InterpretedFunction
from triton.runtime.jit import JITFunction

from ...core import kernels
from .source import Function, collect

#: the options of `@triton.jit` a rebuilt function keeps
_JIT_OPTIONS = ("version", "do_not_specialize", "do_not_specialize_on_alignment", "debug", "noinline",
                "launch_metadata")


def filename(name: str, src: str) -> str:
    """The pseudo file a reduced function's code comes from (its text is registered in `linecache`, where
    `inspect`, Triton and the reproducer's inliner read it)."""
    return f"<tdiff-reduced {name} {hashlib.sha1(src.encode()).hexdigest()[:10]}>"


class DroppingJIT(JITFunction):  # type: ignore[misc]  # Triton ships no types: JITFunction is Any
    """A reduced kernel that lost parameters its body no longer reads: launched as the original is (its
    launch, autotune configs and heuristics still pass every original argument), it drops the arguments of
    the parameters it lost and launches with the rest, so what runs, and what a launch records (the
    reproducer's launches), is the reduced kernel with its own arguments."""

    def __init__(self, fn: Any, original: list[str], **opts: Any) -> None:
        super().__init__(fn, **opts)
        self.original_names = list(original)
        self.dropped = frozenset(original) - set(kernels.arg_names(self))

    def without_dropped(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
        if len(args) > len(self.original_names):
            raise TypeError(f"{self.fn.__name__} takes {len(self.original_names)} arguments, not {len(args)}")
        kept = tuple(a for name, a in zip(self.original_names, args) if name not in self.dropped)
        return kept, {k: v for k, v in kwargs.items() if k not in self.dropped}

    def run(self, *args: Any, grid: Any, warmup: bool = False, **kwargs: Any) -> Any:
        args, kwargs = self.without_dropped(args, kwargs)
        return JITFunction.run(self, *args, grid=grid, warmup=warmup, **kwargs)  # (the routed run, if any)


def _jit(original: Any, fn: Any) -> Any:
    if isinstance(original, InterpretedFunction):
        return InterpretedFunction(fn, **getattr(original, "kwargs", {}))
    opts = {k: getattr(original, k) for k in _JIT_OPTIONS if getattr(original, k, None) is not None}
    if getattr(original, "_repr", None) is not None:
        opts["repr"] = original._repr
    names, now = kernels.arg_names(original), list(inspect.signature(fn).parameters)
    if names == now:
        return JITFunction(fn, **opts)
    for key in ("do_not_specialize", "do_not_specialize_on_alignment"):  # (indices name the original's order)
        if key in opts:
            named = [names[i] if isinstance(i, int) else i for i in opts[key]]
            opts[key] = [n for n in named if n in now]
    return DroppingJIT(fn, names, **opts)


def function(fn: Function, src: str, bound: dict[str, Any]) -> Any:
    """`src` (a `def`) executed in a copy of `fn`'s module globals with `bound` names replaced, as a jit
    function. Raises what compiling or executing the text raises."""
    path = filename(fn.name, src)
    linecache.cache[path] = (len(src), None, src.splitlines(keepends=True), path)
    namespace = dict(fn.jit.fn.__globals__)
    namespace.update(bound)
    with warnings.catch_warnings():  # (a candidate such as `2[:, None]` warns, then fails: no noise)
        warnings.simplefilter("ignore", SyntaxWarning)
        code = compile(src, path, "exec")
    exec(code, namespace)  # noqa: S102 - the kernel's own (reduced) source
    made = namespace[fn.name]
    made.__qualname__ = fn.jit.fn.__qualname__
    return _jit(fn.jit, made)


def rewrap(kernel: Any, leaf: Any) -> Any:
    """A copy of the kernel's autotune / heuristics layers around `leaf` (configs unchanged)."""
    outer, _ = kernels.layers(kernel)
    inner = leaf
    for layer in reversed(outer):
        c = copy.copy(layer)
        c.fn = inner
        inner = c
    return inner


def build(kernel: Any, sources: dict[str, str], functions: dict[str, Function] | None = None) -> Any:
    """The kernel with its functions replaced by `sources` (key -> `def` text; keys left out stay)."""
    functions = functions or collect(kernel)
    made: dict[str, Any] = {}

    def make(key: str) -> Any:
        if key in made:
            return made[key]
        fn = functions[key]
        if key not in sources or sources[key] == fn.source and not _calls_changed(fn, sources, functions):
            made[key] = fn.jit
            return fn.jit
        bound = {name: make(callee) for name, callee in fn.calls.items()}
        made[key] = function(fn, sources.get(key, fn.source), bound)
        return made[key]

    leaf = make(next(iter(functions)))
    if isinstance(leaf, DroppingJIT) and any(not isinstance(layer, (Autotuner, Heuristics))
                                             for layer in kernels.layers(kernel)[0]):
        # (a wrapper such as FlagGems' LibEntry may relaunch with the arguments it recorded: not rewritten)
        raise ValueError("parameters are dropped only from kernels launched directly or through autotune / "
                         "heuristics")
    return rewrap(kernel, leaf)


def _calls_changed(fn: Function, sources: dict[str, str], functions: dict[str, Function],
                   seen: frozenset[str] = frozenset()) -> bool:
    for callee in fn.calls.values():
        if callee in seen:
            continue
        other = functions[callee]
        if sources.get(callee, other.source) != other.source or \
                _calls_changed(other, sources, functions, seen | {callee}):
            return True
    return False


@dataclass(frozen=True)
class ReducedRef:
    """A check found again in a worker (`base`, a `TargetRef`), its kernel rebuilt from `sources`."""

    base: Any
    sources: tuple[tuple[str, str], ...]

    def resolve(self) -> Any:
        check = self.base.resolve()
        return dataclasses.replace(check, kernel=build(check.kernel, dict(self.sources)))
