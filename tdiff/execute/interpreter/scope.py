"""Selective interpretation: Triton's numpy interpreter switched on for a scope, then fully undone.

Triton only interprets when `TRITON_INTERPRET=1` is set before kernels are decorated. Inside
`interpreting()` the language is patched the way the interpreter patches it, calls to other
`@triton.jit` functions (`tl.sum`, user device functions) run interpreted, and on exit every
patched attribute is restored, so the same kernel objects compile normally afterwards.

Two Triton defects are handled here:
- its device-function path (`InterpretedFunction.__call__`) patches `triton.language` and never
  restores it, which breaks every later compile in the process; we never use that path;
- with numpy >= 2.4, Triton 3.4 to 3.6 convert 1-element arrays with `int()`, which numpy rejects, so
  `range(0, tl.cdiv(K, BK))` over a runtime bound fails; we install the conversion of Triton 3.7+
  (`tdiff.compat`).

Shims act here (`shims`): `constexpr-args` in device calls; `tensor-and-or`, `constexpr-is` and `int-methods` in
the rewrite; `builtin-aliases` on the globals of each kernel's and device function's module (`bind_globals`: a
module-level name bound to a builtin, `cast = tl.cast`, calls the patched builtin while the scope lasts).
"""

from __future__ import annotations

import ast
import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any

import triton.language as tl
from triton.language import core  # noqa: F401  (makes tl.core visible to the patcher)
from triton.runtime import interpreter as _interp
from triton.runtime.jit import JITFunction

from ... import compat
from . import coverage, shims

try:  # triton >= 3.3
    from triton import knobs as _knobs
except ImportError:  # pragma: no cover
    _knobs = None

_MISSING = object()
_lock = threading.RLock()
_depth = 0
_knob_saved: Any = _MISSING
# (object, attribute, patched value, original value or _MISSING): computed once, replayed per scope
_patches: list[tuple[object, str, Any, Any]] | None = None
# id(original builtin) -> (builtin, object, attribute) for the builtins among the patches (`shims.alias_targets`)
_alias_targets: dict[int, tuple[Any, object, str]] = {}
# module globals rebound in this scope (`bind_globals`): (globals, name, original value); the ids of those dicts
_bound: list[tuple[dict[str, Any], str, Any]] = []
_bound_dicts: set[int] = set()


def _anchor() -> None:
    """A function whose globals hold `tl` and `tl.core`, for Triton's patcher."""


def _targets() -> list[object]:
    targets: list[object] = [tl, tl.core, tl.math, tl.core.tensor, tl.core.dtype, JITFunction,
                             _interp.interpreter_builder]
    desc = getattr(tl.core, "tensor_descriptor_base", None)
    if desc is not None:
        targets.append(desc)
    return targets


def _snapshot(obj: object) -> dict[str, Any]:
    return dict(vars(obj))


def _restore(obj: object, snap: dict[str, Any]) -> None:
    import types

    current = dict(vars(obj))
    for name, value in current.items():
        if name not in snap and not isinstance(value, types.ModuleType):
            delattr(obj, name)
    for name, value in snap.items():
        if current.get(name, _MISSING) is not value:
            setattr(obj, name, value)


_rewritten: dict[tuple[Callable, bool, bool, bool], Callable] = {}


class _Rewriter(_interp.FunctionRewriter):
    def _transform_ast(self, src: str) -> Any:
        tree = super()._transform_ast(src)
        if shims.ENABLED[shims.BOOL_OPS]:
            tree = ast.fix_missing_locations(shims.BoolOps(shims.__name__).visit(tree))
        if shims.ENABLED[shims.CONSTEXPR_IS]:
            tree = ast.fix_missing_locations(shims.IsOps(shims.__name__).visit(tree))
        if shims.ENABLED[shims.INT_METHODS]:
            tree = ast.fix_missing_locations(shims.IntMethods(shims.__name__).visit(tree))
        if coverage.covered(self.fn):
            tree = coverage.instrument(tree, self.fn)
        return tree


def rewritten(fn: Callable) -> Callable:
    """The interpreter's rewrite of a raw kernel function (cached per function), with tensor
    `and`/`or` made elementwise."""
    key = (fn, shims.ENABLED[shims.BOOL_OPS], shims.ENABLED[shims.CONSTEXPR_IS], shims.ENABLED[shims.INT_METHODS])
    out = _rewritten.get(key)
    if out is None:
        out = _Rewriter(fn).rewrite_ast()
        _rewritten[key] = out
    return out


def _device_call(self: JITFunction, *args: Any, **kwargs: Any) -> Any:
    kwargs.pop("_semantic", None)
    args, kwargs = shims.constexpr_args(args, kwargs)  # the compiler wraps dtype arguments in constexpr
    bind_globals(self.fn)
    return rewritten(self.fn)(*args, **kwargs)


def bind_globals(fn: Callable) -> None:
    """In the scope, the module-level names of `fn`'s module bound to a Triton builtin call the patched builtin
    (`builtin-aliases`); undone when the scope ends."""
    g = getattr(fn, "__globals__", None)
    if g is None or id(g) in _bound_dicts or not _depth:
        return
    _bound_dicts.add(id(g))

    def put(d: dict[str, Any], name: str, value: Any) -> None:
        _bound.append((d, name, d[name]))
        d[name] = value

    shims.bind_aliases(g, _alias_targets, put)


def _compute_patches() -> list[tuple[object, str, Any, Any]]:
    """Let Triton patch the language once, record every change, and undo it."""
    before = [(obj, _snapshot(obj)) for obj in _targets()]
    try:
        _interp._patch_lang(_anchor)
        if compat.index_needs_patch():
            tl.core.tensor.__index__ = compat.tensor_index
        JITFunction.__call__ = _device_call
        patches = []
        for obj, snap in before:
            for name, value in vars(obj).items():
                old = snap.get(name, _MISSING)
                if old is not value:
                    patches.append((obj, name, value, old))
        return patches
    finally:
        for obj, snap in reversed(before):
            _restore(obj, snap)


def _current(obj: object, name: str) -> Any:
    return vars(obj).get(name, _MISSING)


def _enter() -> None:
    global _patches, _knob_saved, _alias_targets
    if _patches is None or any(_current(obj, name) is not old for obj, name, _, old in _patches[::16]):
        _patches = _compute_patches()  # first use, or someone else changed the language since
        _alias_targets = shims.alias_targets(_patches)
    if _knobs is not None:
        _knob_saved = _knobs.runtime.__dict__.get("interpret", _MISSING)
        _knobs.runtime.__dict__["interpret"] = True  # no env change: child processes are unaffected
    for obj, name, new, _ in _patches:
        setattr(obj, name, new)


def _exit() -> None:
    global _knob_saved
    for g, name, old in reversed(_bound):
        if hasattr(g.get(name), "__tdiff_alias_of__"):  # (unless the module rebound it meanwhile)
            g[name] = old
    _bound.clear()
    _bound_dicts.clear()
    for obj, name, _, old in reversed(_patches or []):
        if old is _MISSING:
            if name in vars(obj):
                delattr(obj, name)
        else:
            setattr(obj, name, old)
    if _knobs is not None:
        if _knob_saved is _MISSING:
            _knobs.runtime.__dict__.pop("interpret", None)
        else:
            _knobs.runtime.__dict__["interpret"] = _knob_saved
        _knob_saved = _MISSING


@contextlib.contextmanager
def interpreting() -> Iterator[None]:
    """Run the body with Triton's language patched for interpretation; re-entrant, one thread at a time."""
    global _depth
    with _lock:
        if _depth == 0:
            _enter()
        _depth += 1
        try:
            yield
        finally:
            _depth -= 1
            if _depth == 0:
                _exit()


def active() -> bool:
    return _depth > 0
