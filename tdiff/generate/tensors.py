"""`tensors(...)`: tensors with drawn shape, dtype, layout and dense values."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from hypothesis import event
from hypothesis import strategies as st

from ..core.case import TensorArg
from ..core.dtypes import DType, dtype
from . import hints
from .cached import choice
from .layouts import LAYOUTS, WRITABLE, draw_layout
from .plan import steer
from .plan.classes import categorical
from .sizes import sides
from .values import DEFAULT, Values, poison, values_of

FLOATS = ("float32", "float16", "bfloat16")
INTS = ("int32", "int8", "int16", "int64", "uint8")

ShapeEntry = int | str | st.SearchStrategy | Callable[[Mapping[str, Any]], int] | None


class TensorStrategy:
    """The recipe `tensors(...)` returns; `build(env)` gives the hypothesis strategy.

    `env` holds the inputs and named dimensions already drawn, for `like=` and named sides.
    """

    def __init__(self, shape: Sequence[ShapeEntry] | None, ndim: int | None, min_side: int,
                 max_side: int | None, max_numel: int, dtypes: tuple[Any, ...], layouts: tuple[str, ...],
                 values: Values, like: str | None) -> None:
        self.shape = None if shape is None else tuple(shape)
        self.ndim = ndim
        self.min_side = min_side
        self.max_side = max_side
        self.max_numel = max_numel
        self.dtypes = dtypes
        self.layouts = layouts
        self.values = values
        self.like = like

    def depends_on(self) -> tuple[str, ...]:
        deps = [self.like] if self.like else []
        deps += [s for s in (self.shape or ()) if isinstance(s, str)]
        return tuple(deps)

    def validate(self) -> None:
        for d in self.dtypes:
            dtype(d)
        bad = [x for x in self.layouts if x not in LAYOUTS]
        if bad:
            raise ValueError(f"unknown layout(s) {bad}; choose from {', '.join(LAYOUTS)}")
        if self.shape is None and self.ndim is None and self.like is None:
            raise ValueError("give shape=, ndim= or like=")

    def _dtype(self, draw: st.DrawFn, env: Mapping[str, Any]) -> DType:
        if self.dtypes:
            names = [dtype(d).name for d in self.dtypes]
            if "float32" in names:  # shrink towards float32
                names.remove("float32")
                names.insert(0, "float32")
            if hints.aimed():  # a case aimed at what the kernel branches on: the dtypes it compares with
                names = [n for n in names if n in hints.dtypes()] or names
            if len(names) == 1:
                return dtype(names[0])
            if steer.active():
                return dtype(_planned_choice(draw, "dtype", tuple(names)))
            return dtype(draw(choice(tuple(names))))
        if self.like:
            return dtype(env[self.like].dtype)
        return dtype("float32")

    def _shape(self, draw: st.DrawFn, env: Mapping[str, Any]) -> tuple[int, ...]:
        if self.shape is None and self.like:
            return tuple(env[self.like].shape)
        entries: Sequence[ShapeEntry] = self.shape if self.shape is not None else [None] * (self.ndim or 1)
        fixed = 1
        for e in entries:
            if isinstance(e, int):
                fixed *= max(e, 1)
        budget = max(1, self.max_numel // fixed)
        out: list[int] = []
        for i, e in enumerate(entries):
            if isinstance(e, int):
                n = e
            elif isinstance(e, str):
                n = env[e]
                if isinstance(n, TensorArg) or not isinstance(n, (int, np.integer)):
                    raise TypeError(f"shape refers to `{e}`, which is not an integer input or dimension")
                n = int(n)
            elif isinstance(e, st.SearchStrategy):
                with steer.opaque(f"shape[{i}]"):  # a user's strategy (tdiff's own plan themselves)
                    n = draw(e)
            elif callable(e):  # computed from the named dims, e.g. lambda d: 2 * d["H"]
                n = int(e(env))
            else:
                hi = min(self.max_side or 64, max(self.min_side, budget))
                with steer.point(f"shape[{i}]"):
                    n = draw(sides(self.min_side, max(self.min_side, hi)))
                budget = max(1, budget // max(n, 1))
            out.append(int(n))
        return tuple(out)

    def build(self, env: Mapping[str, Any] | None = None) -> st.SearchStrategy[TensorArg]:
        self.validate()
        env = env or {}
        return _draw_tensor(self, env)

    def draw_skeleton(self, draw: st.DrawFn, env: Mapping[str, Any]) -> TensorArg:
        """Dtype, shape and layout, with every element poison: all a launch needs to choose its
        specialization, drawn before (and without) the values."""
        self.validate()
        dt = self._dtype(draw, env)
        shape = self._shape(draw, env)
        with steer.point("layout"):
            lay = draw_layout(draw, shape, dt.itemsize, self.layouts)
        storage = np.repeat(poison(dt), lay.storage_size)
        return TensorArg(dt.name, shape, lay.strides, lay.offset, storage, lay.kind)

    def fill(self, draw: st.DrawFn, skeleton: TensorArg) -> TensorArg:
        """The skeleton with values drawn for its view's elements (written into its storage)."""
        dt, storage = skeleton.dt, skeleton.storage
        where = view_positions(skeleton)
        with steer.point("values"):
            vals, specials = values_of(draw, int(where.size), dt, self.values, rows_of(skeleton, where))
        storage[where] = vals
        aligned = "aligned" if (skeleton.offset * dt.itemsize) % 16 == 0 else "misaligned"
        tags = (skeleton.layout, aligned, dt.name, *specials)
        for tag in tags:
            event(f"tdiff: {tag}")
        return TensorArg(dt.name, skeleton.shape, skeleton.strides, skeleton.offset, storage, skeleton.layout, tags)


def _planned_choice(draw: st.DrawFn, name: str, options: tuple[str, ...]) -> str:
    """`draw(choice(options))` at a planned case: the option the plan wants, if any."""
    with steer.semantic():
        want = steer.choose(name, categorical(options), nominal=options[:1], kind=name)
        if want in options:
            steer.script([options.index(want)])
        elif want is not None:  # (this draw's options are not those the plan learnt the point's classes from)
            steer.refused(name, want, options)
        value = draw(choice(options))
        steer.saw(name, value)
        return value


def view_positions(arg: TensorArg) -> np.ndarray:
    """The storage positions of the view's elements, sorted, each once (`np.unique` of the view's index, in
    linear time: numpy's hash-based unique took 0.4 s on a 65,536-element view)."""
    held = np.zeros(arg.storage.size, bool)
    held[arg.view_index().reshape(-1)] = True
    return np.flatnonzero(held)


def rows_of(arg: TensorArg, where: np.ndarray) -> np.ndarray | None:
    """The row (along the last dimension) of each storage element in `where` (the view's, sorted), for
    a tensor of two or more dimensions with elements; None otherwise."""
    if len(arg.shape) < 2 or not arg.numel or not arg.dt.is_float:
        return None
    index = arg.view_index().reshape(-1)
    row_of = np.zeros(arg.storage.size, np.int64)
    row_of[index] = np.repeat(np.arange(arg.numel // arg.shape[-1]), arg.shape[-1])
    return row_of[where]


@st.composite
def _draw_tensor(draw: st.DrawFn, spec: TensorStrategy, env: Mapping[str, Any]) -> TensorArg:
    return spec.fill(draw, spec.draw_skeleton(draw, env))


def tensors(
    shape: Sequence[ShapeEntry] | None = None,
    *,
    ndim: int | None = None,
    dtype: str | Sequence[str] | None = None,
    min_side: int = 1,
    max_side: int | None = None,
    max_numel: int = 4096,
    layouts: Sequence[str] | None = None,
    readonly: bool = False,
    values: Values | None = None,
    like: str | None = None,
) -> Any:
    """Tensors with drawn shape, dtype, layout and values.

    shape: sides as ints, hypothesis strategies, names of other integer inputs or dims, functions of
    the dims (`lambda d: 2 * d["H"]`), or None (drawn); or give `ndim` and side bounds.
    dtype: one name or a list (shrinks towards float32).
    layouts: the layout classes to draw (default: all; `expanded`, with stride 0, only when
    `readonly=True`). values: `tst.values(...)` to narrow values. like: another input's name; this
    tensor gets its shape and dtype (unless given) and a layout and values of its own.
    """
    if isinstance(dtype, str):
        dtypes_: tuple[Any, ...] = (dtype,)
    elif dtype is None:
        dtypes_ = () if like else ("float32",)
    else:
        dtypes_ = tuple(dtype)
    allowed = tuple(layouts) if layouts is not None else (LAYOUTS if readonly else WRITABLE)
    if ndim is None and shape is None and like is None:
        ndim = 1
    spec = TensorStrategy(shape, ndim, min_side, max_side, max_numel, dtypes_, allowed, values or DEFAULT, like)
    if spec.depends_on():
        return spec
    try:
        spec.validate()
    except ValueError:
        return spec  # `@tdiff.check` reports it, naming the kernel and the input
    strategy = spec.build({})
    # (what a TensorStrategy answers, hung on the hypothesis strategy built from it: `@tdiff.check` and
    # generate.cases ask either; hypothesis's SearchStrategy declares none of them, and its own `validate`)
    strategy.depends_on = spec.depends_on  # type: ignore[attr-defined]
    strategy.build = spec.build  # type: ignore[attr-defined]  # (as above)
    strategy.validate = spec.validate  # type: ignore[method-assign]  # (as above)
    strategy.tensor_spec = spec  # type: ignore[attr-defined]  # (as above)
    return strategy
