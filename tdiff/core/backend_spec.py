"""Which backend, with which options: `BackendSpec`, parsed once from what users write (`compiled`,
`interpreter:reversed`, `compiled[num_warps=2]`, `interpreter@/venv/bin/python`, `pkg.mod:Factory`); the worker
`Lane` a spec runs on; the `Role` an outcome plays, built from its spec; and the one place that reads a display
label back (`role_of`: a corpus entry's stored sides). No other module splits a label."""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

ORDERS = ("forward", "reversed", "shuffled")


#: `--tdiff-backends metamorphic`: not one backend but a profile, compiled variants of each kernel against each other
METAMORPHIC = "metamorphic"
#: the compile-only opinion (tdiff.execute.backends.compile_only): the specializations a case launches, compiled
#: for a GPU without one and not run; compared with nothing, it fails a case the compiler rejects
COMPILE_ONLY = "compile-only"
#: the GPU it compiles for: sm_90 (an H100 / H200), and the last stage of Triton's pipeline it runs
COMPILE_ONLY_ARCH = 90
COMPILE_ONLY_STAGE = "ttgir"


def default_backends(gpu: bool) -> tuple[BackendSpec, ...]:
    """The backends every case runs on when neither the run nor the check names any: the compiled kernel and
    the interpreter with a GPU, the interpreter alone without (a check's reference joins either)."""
    return (BackendSpec("compiled"), BackendSpec("interpreter")) if gpu else (BackendSpec("interpreter"),)


def parse_all(texts: Any) -> tuple[BackendSpec, ...]:
    """Each of `texts` (strings as users write them, or specs) as a `BackendSpec`: the one parse of a run's or a
    check's backends (a ValueError names a bad one; `metamorphic`, a profile, stands alone)."""
    specs = tuple(BackendSpec.parse(t) for t in texts)
    if len(specs) > 1 and any(s.kind == METAMORPHIC for s in specs):
        raise ValueError("metamorphic stands alone (it picks compiled variants per check)")
    return specs


def labels(specs: Any) -> tuple[str, ...]:
    """The display labels of specs (strings are shown as written)."""
    return tuple(s.label if isinstance(s, BackendSpec) else str(s) for s in specs)


@dataclass(frozen=True)
class BackendSpec:
    """Which backend, with which options. Written `kind[:option[:option]]`, e.g. `interpreter:reversed`.

    kind is `compiled`, `interpreter`, `reference`, `compile-only`, or `module:attr` naming a factory
    `(spec) -> Backend` importable in worker processes.
    """

    kind: str
    order: str = "forward"
    upcast: bool = False
    # a reference whose float64 arithmetic runs in float32 (`reference:fp32`, backends.float32_arithmetic): the
    # problem computed at the precision a correct kernel accumulates in (judge.sensitivity's native runs)
    demote: bool = False
    # ... and rounded faithfully at random, the k-th such run (`reference:fp32:faithful2`; 0: rounded to nearest)
    faithful: int = 0
    # ... with the math functions' subnormal operands and results flushed to zero, as Triton's compiled libdevice
    # calls give them (`reference:fp32:ftz`)
    flushed: bool = False
    device: str | None = None
    programs: tuple[tuple[int, int, int], ...] | None = None  # interpret only these programs
    check_pointers: bool = True
    sample: tuple[int, int, int] | None = None  # (threshold, random programs, seed): sample large grids
    masked: str = "undefined"  # masked-out lanes of a load without other=: "undefined" (poisoned) or "zero"
    # results Triton leaves unspecified (integer division by zero, ...): as the interpreter computes them
    # ("default") or another value ("alternate", for a verdict rerun; see backends.unspecified)
    unspecified: str = "default"
    # the interpreter runs a launch's programs in batches where they agree (see execute.interpreter.batched),
    # or, `interpreter:sequential`, one by one as Triton does
    batched: bool = True
    # an ensemble run of the interpreter (`interpreter:rr3`): every floating result rounded up or down at random,
    # the k-th such run (see execute.interpreter.rounding); 0: rounded to nearest, as Triton does
    rounding: int = 0
    # a modelled run of the interpreter (`interpreter:gpu`): the GPU's documented arithmetic (tf32 `tl.dot` operands,
    # contracted multiply-adds, float32 division as `div.full`, math functions that flush subnormals; see
    # execute.interpreter.gpu_arith)
    gpu_arith: bool = False
    # a carried run (`interpreter:nudge3`): each value the kernel computes moved within its admissible rounding where
    # it is stored, the k-th such run (see execute.interpreter.carry)
    nudge: int = 0
    # compiled variants, written `compiled[num_warps=2,num_stages=1]`: launch options that replace the launch's
    # (as Triton spells them), and an autotune config index that replaces the case's
    launch: tuple[tuple[str, Any], ...] = ()
    config: int | None = None
    # stage variants (see tdiff.execute.stages): `compiled[from=ttgir]` recompiles each launch from its own
    # stage text; `compiled[ir=path/to/kernel.ttgir]` runs a user's IR file (an absolute path) for the launches
    # of its specialization
    stage: str | None = None
    ir: str | None = None
    # another Python environment (`interpreter@/venv/bin/python`): its worker runs this backend there
    python: str | None = None

    @property
    def plain_compiled(self) -> bool:
        """A compiled opinion of the case's own launches, in this environment: what compile workers compile ahead
        (a stage or IR variant compiles its own way; launch options or a config change the specializations)."""
        return (self.kind == "compiled" and not self.stage and not self.ir and self.python is None and not self.launch
                and self.config is None)

    @classmethod
    def parse(cls, text: str | BackendSpec) -> BackendSpec:
        if isinstance(text, BackendSpec):
            return text
        written = text = text.strip()
        if text == METAMORPHIC:
            return cls(kind=METAMORPHIC)
        inner = None
        if "[" in text:  # a compiled variant: its [options] may hold a path (ir=...): set them apart first
            start = text.index("[")
            end = text.find("]", start)
            if end < 0:
                raise ValueError(f"backend {written!r}: [options] are not closed")
            text, inner = text[:start] + "[]" + text[end + 1:], text[start + 1:end]
        if "." in text.split(":")[0].split("@")[0]:  # module path: "pkg.mod:Factory[:opt]"
            mod, _, rest = text.partition(":")
            attr, _, opts = rest.partition(":")
            return cls(kind=f"{mod}:{attr}", **_parse_opts(opts, written))
        kind, _, opts = text.partition(":")
        variant: dict[str, Any] = {}
        if "@" in kind:
            kind, _, python = kind.partition("@")
            if kind not in ("compiled", "interpreter", "compiled[]"):
                raise ValueError(f"backend {written!r}: only compiled and interpreter run in another environment, "
                                 "written interpreter@/path/to/venv/bin/python")
            check_exists(python, written)
            variant["python"] = python
        if inner is not None:
            if kind != "compiled[]":
                raise ValueError(f"backend {written!r}: only compiled takes [options], written "
                                 "compiled[num_warps=2,num_stages=1]")
            kind = "compiled"
            variant.update(_parse_variant(inner, written))
        if kind not in ("compiled", "interpreter", "reference", COMPILE_ONLY):
            raise ValueError(f"unknown backend {written!r}: use compiled, interpreter, reference, {COMPILE_ONLY} or "
                             "module:Factory")
        return cls(kind=kind, **variant, **_parse_opts(opts, written))

    def with_(self, **changes: Any) -> BackendSpec:
        return replace(self, **changes)

    def _parts(self) -> list[str]:
        """The label's parts: the lane (kind, variant, other Python), then the run options in order."""
        parts = [self.kind + self.variant + (f"@{self.python}" if self.python else "")]
        if self.order != "forward":
            parts.append(self.order)
        if self.upcast:
            parts.append("fp64")
        if self.demote and self.kind == "reference":
            parts.append("fp32")
            if self.faithful:
                parts.append(f"faithful{self.faithful}")
            if self.flushed:
                parts.append("ftz")
        if self.masked != "undefined" and self.kind == "interpreter":
            parts.append("zero-fill")
        if self.unspecified != "default" and self.kind == "interpreter":
            parts.append("alt-unspecified")
        if not self.batched and self.kind == "interpreter":
            parts.append("sequential")
        if self.gpu_arith and self.kind == "interpreter":
            parts.append("gpu")
        if self.rounding and self.kind == "interpreter":
            parts.append(f"rr{self.rounding}")
        if self.nudge and self.kind == "interpreter":
            parts.append(f"nudge{self.nudge}")
        if self.device:
            parts.append(self.device)
        return parts

    @property
    def label(self) -> str:
        return ":".join(self._parts())

    @property
    def role(self) -> Role:
        """What an outcome of this spec plays in the judge, built from the spec's own fields (no label read)."""
        parts = self._parts()
        return Role(":".join(parts), self.kind, self.kind, parts[0], tuple(parts[1:]))

    @property
    def variant(self) -> str:
        """`[num_warps=2,config=1]` for a compiled variant, else ''."""
        items = [f"from={self.stage}"] if self.stage else []
        items += [f"ir={short_path(self.ir)}"] if self.ir else []
        items += [f"{VARIANT_NAMES.get(k, k)}={_show(k, v)}" for k, v in self.launch]
        items += [f"config={self.config}"] if self.config is not None else []
        return f"[{','.join(items)}]" if items else ""

    @property
    def factory(self) -> tuple[str, str]:
        """(module, attribute) of a `pkg.mod:Factory` backend's factory."""
        mod, _, attr = self.kind.partition(":")
        if not attr:
            raise ValueError(f"{self.kind!r} is a built-in backend, not a factory")
        return mod, attr

    @property
    def uses_gpu(self) -> bool:
        return self.kind in ("compiled", METAMORPHIC) or (self.device or "").startswith("cuda")

    @property
    def lane(self) -> Lane:
        """Which worker process runs this spec: GPU work and CPU work run side by side."""
        # dry launches (and the compile-only opinion's) run user code on CPU tensors, like the reference: beside
        # the interpreter's lane
        return Lane("gpu" if self.uses_gpu else ("ref" if self.kind in ("reference", "specialize", COMPILE_ONLY)
                                                 else "cpu"), self.python)


class Lane(str):
    """A worker's key (`BackendSpec.lane`), as a string `work` or `work@python` (`cpu@/venv/bin/python`), that
    keeps its parts: `work`, the kind of work its worker does (`gpu`, `cpu`, `ref`, `compile0`), and `python`,
    another environment's Python (None: this one)."""

    work: str
    python: str | None

    def __new__(cls, work: str, python: str | None = None) -> Lane:
        self = super().__new__(cls, f"{work}@{python}" if python else work)
        self.work, self.python = work, python
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        return Lane, (self.work, self.python)

    @property
    def sees_gpu(self) -> bool:
        """Whether its worker may use the GPU: the GPU lane, and compile lanes (which ask the GPU's driver)."""
        return self.work == "gpu" or self.work.startswith("compile")


#: launch options a compiled variant may set: as written in a spec -> as Triton's launch takes them
VARIANT_OPTIONS = {"num_warps": "num_warps", "num_stages": "num_stages", "num_ctas": "num_ctas",
                   "maxnreg": "maxnreg", "fp_fusion": "enable_fp_fusion"}
VARIANT_NAMES = {v: k for k, v in VARIANT_OPTIONS.items()}


def _show(key: str, value: Any) -> str:
    if key == "enable_fp_fusion":
        return "on" if value else "off"
    return str(value)


#: the stages `compiled[from=...]` recompiles from (tdiff.execute.stages.support.FROM_STAGES)
FROM_STAGES = ("ttir", "ttgir", "llir", "ptx")
#: the file types `compiled[ir=...]` runs (what Triton's ir_override takes)
IR_STAGES = ("ttir", "ttgir", "llir", "ptx", "cubin")


def _parse_variant(inner: str, text: str) -> dict[str, Any]:
    launch: list[tuple[str, Any]] = []
    config = None
    stage = ir = None
    for item in filter(None, (p.strip() for p in inner.split(","))):
        name, eq, value = item.partition("=")
        name, value = name.strip(), value.strip()
        if not eq or not value:
            raise ValueError(f"backend {text!r}: write each option as name=value, got {item!r}")
        if name == "from":
            if value not in FROM_STAGES:
                raise ValueError(f"backend {text!r}: from= takes a stage the kernel is recompiled from: "
                                 f"{', '.join(FROM_STAGES)}; got {value!r}")
            stage = value
        elif name == "ir":
            suffix = Path(value).suffix.lstrip(".")
            if suffix not in IR_STAGES:
                raise ValueError(f"backend {text!r}: ir= names an IR file ending in "
                                 f"{', '.join('.' + s for s in IR_STAGES)}; got {value!r}")
            if not Path(value).is_file():
                raise ValueError(f"backend {text!r}: no IR file at {value!r}")
            ir = os.path.abspath(value)
        elif name == "config":
            if not value.isdigit():
                raise ValueError(f"backend {text!r}: config is an autotune config index, got {value!r}")
            config = int(value)
        elif name == "fp_fusion":
            if value not in ("on", "off"):
                raise ValueError(f"backend {text!r}: fp_fusion is on or off, got {value!r}")
            launch.append(("enable_fp_fusion", value == "on"))
        elif name in VARIANT_OPTIONS:
            if not value.isdigit() or int(value) < 1:
                raise ValueError(f"backend {text!r}: {name} must be a positive integer, got {value!r}")
            launch.append((VARIANT_OPTIONS[name], int(value)))
        else:
            raise ValueError(f"backend {text!r}: unknown option {name!r}; a compiled variant takes "
                             f"{', '.join(sorted(VARIANT_OPTIONS))}, config, from or ir")
    if stage and ir:
        raise ValueError(f"backend {text!r}: from= and ir= do not go together (ir= is a stage's IR already)")
    return {"launch": tuple(launch), "config": config, "stage": stage, "ir": ir}


def _parse_opts(opts: str, text: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for opt in filter(None, opts.split(":")):
        if opt in ORDERS:
            out["order"] = opt
        elif opt == "fp64":
            out["upcast"] = True
        elif opt == "fp32":
            out["demote"] = True
        elif opt.startswith("faithful") and opt[8:].isdigit() and int(opt[8:]) > 0:
            out["faithful"] = int(opt[8:])
        elif opt == "ftz":
            out["flushed"] = True
        elif opt == "zero-fill":
            out["masked"] = "zero"
        elif opt == "alt-unspecified":
            out["unspecified"] = "alternate"
        elif opt == "sequential":
            out["batched"] = False
        elif opt.startswith("nudge") and opt[5:].isdigit() and int(opt[5:]) > 0:
            out["nudge"] = int(opt[5:])
        elif opt == "gpu":
            out["gpu_arith"] = True
        elif opt.startswith("rr") and opt[2:].isdigit() and int(opt[2:]) > 0:
            out["rounding"] = int(opt[2:])
        elif opt == "cpu" or opt.startswith("cuda"):
            out["device"] = opt
        else:
            raise ValueError(f"backend {text!r}: unknown option {opt!r}")
    return out


def check_exists(python: str, spec: str) -> None:
    """A ValueError naming the spec if `python` is not an executable file."""
    if not os.path.isfile(python) or not os.access(python, os.X_OK):
        raise ValueError(f"backend {spec!r}: {python} is not an executable Python (write the path to a "
                         "venv's bin/python)")


def short_path(path: str) -> str:
    """A path relative to the working directory where it lies below it, else as given."""
    try:
        rel = os.path.relpath(path)
        return rel if not rel.startswith("..") else path
    except ValueError:  # pragma: no cover
        return path


# ------------------------------------------------------------------ reading a label back

@dataclass(frozen=True)
class Role:
    """What an outcome plays in a case: built from the spec that made it (`BackendSpec.role`), or declared by a
    backend that plays another's part (the test backend `tests.faulty:FakeCompiledWrong` plays `compiled`); the
    judge primes a repeated opinion (`primed`: `compiled'`, the second `compiled`)."""

    label: str
    kind: str  # compiled, interpreter, reference, or the label's own (a repeated `compiled'` is its own kind)
    base: str  # the kind, a repeated opinion's too (`compiled'` -> compiled)
    lane: str  # the opinion without its run options (`compiled[num_warps=2]:cuda` -> `compiled[num_warps=2]`)
    options: tuple[str, ...]  # its run options, in order (`interpreter:reversed:fp64` -> reversed, fp64)

    @property
    def is_reference(self) -> bool:
        return self.kind == "reference"

    def primed(self) -> Role:
        """The role of a second outcome of the same opinion in one case, labelled with a prime (`compiled'`); a
        prime after run options (`interpreter:reversed'`) leaves the kind as it was."""
        if self.options:
            return replace(self, label=self.label + "'", options=(*self.options[:-1], self.options[-1] + "'"))
        return replace(self, label=self.label + "'", kind=self.kind + "'", lane=self.lane + "'")

    @property
    def elsewhere(self) -> bool:
        """Run by another Python (`interpreter@/venv/bin/python`)."""
        return "@" in self.lane

    @property
    def variant(self) -> bool:
        """A compiled variant (`compiled[num_warps=2]`)."""
        return "[" in self.lane


@lru_cache(maxsize=1024)
def role_of(label: str) -> Role:
    """The role a display label names, where one comes in as text (a divergence's sides stored in a corpus entry)."""
    return Role(label, label_kind(label), label_kind(label, unprimed=True), label_lane(label),
                tuple(label.split(":")[1:]))


def label_lane(label: str) -> str:
    """The opinion a label names, without its run options: `compiled[num_warps=2]:cuda` ->
    `compiled[num_warps=2]`; the prime of a repeated opinion stays (`compiled'`: the second `compiled`)."""
    return label.split(":")[0]


def label_kind(label: str, unprimed: bool = False) -> str:
    """`compiled`, `interpreter`, `reference` or the label itself (other backends). A repeated opinion's label
    (`compiled'`) is its own kind unless `unprimed` (then `compiled`)."""
    lane = label_lane(label)
    return (lane.rstrip("'") if unprimed else lane).split("[")[0].split("@")[0]
