"""The case strategy of a check: dims, then inputs in dependency order, then the autotune config."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import torch
from hypothesis import event, reject
from hypothesis import strategies as st

from ..core import dtypes, kernels
from ..core.case import Case, TensorArg
from ..core.declared import DeclaredCheck
from ..errors import DeclarationError
from . import hints
from .plan import steer
from .sizes import specialization
from .tensors import TensorStrategy


def tensor_arg(t: torch.Tensor | np.ndarray, layout: str | None = None) -> TensorArg:
    """A `TensorArg` from a torch tensor (its storage and exact layout) or a numpy array."""
    if isinstance(t, np.ndarray):
        t = torch.from_numpy(np.ascontiguousarray(t))
    dt = dtypes.dtype(t.dtype)
    n = t.untyped_storage().nbytes() // t.element_size()
    base = torch.empty(0, dtype=t.dtype, device=t.device).set_(t.untyped_storage(), 0, (n,), (1,))
    kind = layout or ("contiguous" if t.is_contiguous() and t.storage_offset() == 0 else "strided")
    return TensorArg(dt.name, tuple(t.shape), tuple(t.stride()), int(t.storage_offset()),
                     dtypes.from_torch(base), kind)


def _resolve(strategy: Any, env: Mapping[str, Any]) -> st.SearchStrategy:
    if isinstance(strategy, tuple) and len(strategy) == 2 and strategy[0] in ("choices", "const"):
        kind, value = strategy
        return st.sampled_from(value) if kind == "choices" else st.just(value)
    build = getattr(strategy, "build", None)
    if build is not None:
        return build(env)
    return strategy


def _normalize(value: Any) -> Any:
    if isinstance(value, (torch.Tensor, np.ndarray)):
        return tensor_arg(value)
    return value


def _order(strategies: Mapping[str, Any], known: set[str]) -> list[str]:
    done: list[str] = []
    pending = dict(strategies)
    while pending:
        ready = [n for n, s in pending.items()
                 if all(d in known or d in done for d in getattr(s, "depends_on", lambda: ())())]
        if not ready:
            raise DeclarationError(f"inputs {sorted(pending)} depend on each other in a cycle (like= / named sides)")
        for n in ready:
            done.append(n)
            del pending[n]
    return done


def _tensor_spec(strategy: Any) -> TensorStrategy | None:
    if isinstance(strategy, TensorStrategy):
        return strategy
    return getattr(strategy, "tensor_spec", None)


def case_strategy(check: DeclaredCheck, admit: Callable[[Case], bool] | None = None,
                  thresholds: Sequence[hints.Hint] = ()) -> st.SearchStrategy[Case]:
    """Draw a `Case` for a check.

    Tensors drawn by `tst.tensors` get their dtype, shape and layout first and their values last;
    `admit`, if given, sees the case before its values are drawn (every tensor element poison) and
    may reject it, which costs little of a draw. `thresholds` (`tdiff.generate.thresholds`) are the sizes and
    dtypes the kernel branches on: the size strategies also draw them, and where there are any, a
    case is drawn aimed at them or not (see `tdiff.generate.hints`).
    """
    n_configs = len(kernels.configs(check.kernel))
    indices = list(check.configs) if check.configs else list(range(n_configs))
    order = _order(check.strategies, set(check.dims))

    @st.composite
    def draw_case(draw: st.DrawFn) -> Case:
        with hints.kernel_hints(thresholds):
            with steer.opaque("aimed"):
                aimed = bool(thresholds) and draw(st.booleans())
            if aimed:
                event("tdiff: case aimed at the thresholds")
            with hints.aiming(aimed):
                return _draw_case(draw)

    def _draw_case(draw: st.DrawFn) -> Case:
        with steer.opaque("config"):
            config = draw(st.sampled_from(indices)) if indices else None
        if config is not None:
            event(f"tdiff: config #{config}")
        env: dict[str, Any] = {}
        dims: dict[str, int] = {}
        for name, s in check.dims.items():
            with steer.opaque(name):
                dims[name] = env[name] = draw(_resolve(s, env))
        inputs: dict[str, Any] = {}
        skeletons: dict[str, TensorStrategy] = {}
        for name in order:
            spec = _tensor_spec(check.strategies[name])
            if spec is not None:
                skeletons[name] = spec
                with steer.point(name):
                    inputs[name] = env[name] = spec.draw_skeleton(draw, env)
            else:
                with steer.opaque(name):
                    inputs[name] = env[name] = _normalize(draw(_resolve(check.strategies[name], env)))
        if check.inputs is not None:
            with steer.opaque("inputs"):
                extra = draw(check.inputs)
            if not isinstance(extra, Mapping):
                raise DeclarationError(f"{check.id}: inputs= must draw a dict, drew {type(extra).__name__}")
            for k, v in extra.items():
                inputs[k] = _normalize(v)
        if admit is not None and not admit(Case(inputs=dict(inputs), config=config, dims=dims)):
            reject()
        for name, spec in skeletons.items():
            with steer.point(name):
                inputs[name] = spec.fill(draw, inputs[name])
        for v in inputs.values():
            if isinstance(v, bool) or not isinstance(v, int):
                continue
            event(f"tdiff: int {specialization(v)}")
        return Case(inputs=inputs, config=config, dims=dims)

    return draw_case()
