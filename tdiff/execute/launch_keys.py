"""Which specializations a case's launches would compile, found without compiling anything.

The check's launch function runs on CPU copies of the case's inputs with every kernel launch
intercepted; each launch's arguments are classified the way Triton's JIT classifies them for its
cache key (`native_specialize_impl`: pointer dtype and 16-byte alignment, integer width, 1 and
divisibility by 16), with its constexprs and launch options.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ..core import kernels
from ..core.case import Case
from ..core.outcome import LaunchRecord
from .plan import LaunchPlan, deterministic_empty, grid3, launch_record, route_launches

if TYPE_CHECKING:
    from .backends.base import Target

try:  # Triton 3.5+
    from triton._C.libtriton import native_specialize_impl
    from triton.backends.compiler import BaseBackend
except ImportError:  # pragma: no cover - older Triton: no dry launches, so no compile budget
    native_specialize_impl = None

LaunchKey = tuple  # (kernel name, per-parameter classes, launch options)


def _classify(param: Any, value: Any) -> Any:
    if param.is_constexpr:
        return ("constexpr", repr(value))
    return native_specialize_impl(BaseBackend, value, param.is_const, not param.do_not_specialize,
                                  not param.do_not_specialize_on_alignment)


def key_of(jit: Any, arguments: Mapping[str, Any], options: Mapping[str, Any]) -> LaunchKey:
    """The specialization of one launch of `jit`: its bound arguments (defaults applied) and the
    launch options (num_warps, ...)."""
    classes = tuple(_classify(p, arguments[p.name]) for p in jit.params)
    return (jit.fn.__name__, classes, tuple(sorted((k, repr(v)) for k, v in options.items())))


def launch_key(jit: Any, args: tuple, kwargs: dict) -> LaunchKey:
    """The specialization of one launch of `jit` with these arguments."""
    names = kernels.arg_names(jit)
    bound = kernels.signature(jit.fn).bind(*args, **{k: v for k, v in kwargs.items() if k in names})
    bound.apply_defaults()
    return key_of(jit, bound.arguments, {k: v for k, v in kwargs.items() if k not in names})


def dry_launches(target: Target, case: Case, then: Callable[..., None] | None = None,
                 failed: list[BaseException] | None = None
                 ) -> tuple[tuple[LaunchKey, ...] | None, list[LaunchRecord]]:
    """Run `target.launch` on CPU copies of the case's inputs with every kernel launch intercepted
    (no kernel runs): the launches' keys (None when they cannot be told: the launch function failed
    on CPU tensors, or this Triton is too old) and their records. `then(jit, original, args, grid, kwargs,
    key)`, if given, sees each launch after it is recorded (key None on a Triton too old to tell it).
    `failed`, if given, receives the exception the launch function raised."""
    keys: list[LaunchKey] = []
    records: list[LaunchRecord] = []
    plan = None

    def handler(jit: Any, original: Any, args: tuple, grid: Any, warmup: bool, kwargs: dict) -> None:
        if warmup:
            return
        names = kernels.arg_names(jit)
        call = {k: v for k, v in kwargs.items() if k in names}
        options = {k: v for k, v in kwargs.items() if k not in names}
        try:
            bound = kernels.signature(jit.fn).bind(*args, **call)
            bound.apply_defaults()
            g = grid3(grid(dict(bound.arguments)) if callable(grid) else grid)
        except Exception:
            g = (0, 0, 0)
        records.append(launch_record(jit, g, args, call, plan, options))
        key = launch_key(jit, args, kwargs) if native_specialize_impl is not None else None
        if key is not None:
            keys.append(key)
        if then is not None:
            then(jit, original, args, grid, kwargs, key)

    try:
        plan = LaunchPlan(case, "cpu")
        kernel = kernels.rebuild(target.kernel, kernels.jit_function(target.kernel), case.config)
        with deterministic_empty(), route_launches(handler):
            target.launch(kernel, **plan.inputs)
    except Exception as exc:
        if failed is not None:
            failed.append(exc)
        return None, records
    return (tuple(keys) if native_specialize_impl is not None else None), records


def launch_keys(target: Target, case: Case) -> tuple[LaunchKey, ...] | None:
    """The keys of every launch `target.launch` makes for `case`, or None when that cannot be told
    without running kernels (the launch function failed on CPU tensors, or this Triton is too old)."""
    return dry_launches(target, case)[0]
