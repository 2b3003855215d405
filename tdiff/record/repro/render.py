"""A reproducer's text: the header, the kernels, the case (inputs, launches, tolerances, recorded results)
as constants, then the runtime and, where the interpreter runs, the shim library (`library`), both
rendered from tdiff's own source.
"""

from __future__ import annotations

import ast
import datetime
import math
import os
import platform
import sys
import textwrap
from typing import Any

import numpy as np
import torch
import triton
import triton.language as tl

from ...core import dtypes, kernels
from ...core.backend_spec import COMPILE_ONLY, COMPILE_ONLY_ARCH
from ...core.case import Case
from ...core.outcome import GUARD_BYTES, Outcome
from ...core.rerun import AGAIN, Rerun
from ...execute.interpreter import shims
from ...execute.interpreter.shim_names import DESCRIPTIONS as SHIM_DESCRIPTIONS
from ...judge.evidence import Evidence
from ...judge.targets import view
from ...judge.verdict import Verdict
from . import library
from .errors import REPRODUCIBLE, ReproError
from .inline import Inliner, find_jit

INLINE_LIMIT = 512  # elements; larger arrays go to the sidecar file

#: the start of every reproducer, after its header
PRELUDE = """
from __future__ import annotations

import sys

nan, inf = float("nan"), float("inf")  # (in the case's values)

"""


def versions() -> dict[str, str]:
    return {"triton": triton.__version__, "torch": torch.__version__, "numpy": np.__version__,
            "python": platform.python_version()}


def _literal(x: Any) -> str:
    """A Python literal; floats may be nan/inf (the file defines those names)."""
    if isinstance(x, float):
        if math.isnan(x):
            return "nan"
        if math.isinf(x):
            return "inf" if x > 0 else "-inf"
        return repr(x)
    if isinstance(x, (list, tuple)):
        inner = ", ".join(_literal(v) for v in x)
        return f"[{inner}]" if isinstance(x, list) else f"({inner}{',' if len(x) == 1 else ''})"
    if isinstance(x, dict):
        return "{" + ", ".join(f"{_literal(k)}: {_literal(v)}" for k, v in x.items()) + "}"
    return repr(x)


class _Data:
    """Arrays for the file: small ones inline as values, large ones in the sidecar."""

    def __init__(self) -> None:
        self.sidecar: dict[str, np.ndarray] = {}

    def encode(self, key: str, raw: np.ndarray, dt_name: str) -> dict[str, Any]:
        dt = dtypes.dtype(dt_name)
        raw = np.ascontiguousarray(raw).reshape(-1)
        if raw.size > INLINE_LIMIT:
            self.sidecar[key] = raw
            return {"dtype": dt.name, "sidecar": key}
        if dt.is_float:
            values = [float(v) for v in dtypes.as_float64(raw, dt)]
        elif dt.kind == "bool":
            values = [bool(v) for v in raw]
        else:
            values = [int(v) for v in raw]
        return {"dtype": dt.name, "values": values}


def _opaque(a: dict[str, Any], what: str) -> dict[str, Any]:
    """A launch argument recorded only by its repr, as the reproducer can rebuild it: a Triton dtype
    (`dtype=tl.float32`, e.g. liger's group norm backward) or a `tl.constexpr` of a literal."""
    text = str(a.get("value", ""))
    name = dtypes.triton_dtype_named(text)
    if name is not None and isinstance(getattr(tl, name, None), tl.dtype):
        return {"kind": "tl_dtype", "value": name}
    if text.startswith("constexpr[") and text.endswith("]"):
        try:
            return {"kind": "scalar", "value": ast.literal_eval(text[len("constexpr["):-1])}
        except (ValueError, SyntaxError):
            pass
    raise ReproError(f"{what} ({text}) is an object a reproducer cannot rebuild")


def _launch_args(outcome: Outcome, data: _Data, names: dict[str, list[str]]) -> list[dict[str, Any]]:
    out = []
    for i, rec in enumerate(outcome.launches):
        arg_names = names.get(rec.kernel, [])

        def enc(a: dict[str, Any], key: str, _i: int = i, _names: list[str] = arg_names,
                _kernel: str = rec.kernel) -> dict[str, Any]:
            if a.get("kind") == "tensor":
                d = data.encode(f"launch{_i}_{key}", a["storage"], a["dtype"])
                return {"kind": "tensor", **d, "offset": a["offset"], "shape": a["shape"], "strides": a["strides"]}
            if a.get("kind") == "tuple":
                return {"kind": "tuple", "items": [enc(x, f"{key}.{j}") for j, x in enumerate(a["items"])]}
            if a.get("kind") == "opaque":
                top = key.split(".")[0]
                label = _names[int(top)] if top.isdigit() and int(top) < len(_names) else top
                return _opaque(a, f"argument `{label}` of launch {_i} of {_kernel}")
            return {k: v for k, v in a.items() if k != "storage"}

        out.append({
            "kernel": rec.kernel,
            "names": names.get(rec.kernel, []),
            "grid": list(rec.grid),
            "args": [enc(a, str(j)) for j, a in enumerate(rec.args)],
            "kwargs": {k: enc(a, k) for k, a in rec.kwargs.items()},
            "options": {k: v for k, v in (rec.config or {}).items() if isinstance(v, (int, bool, str, float))},
        })
    return out


def _target_places(case: Case, runner: Outcome, names: list[str]) -> dict[str, dict[str, Any]]:
    tensors = case.tensors()
    out: dict[str, dict[str, Any]] = {}
    for t in dict.fromkeys(names):
        if t in tensors:
            a = tensors[t]
            out[t] = {"kind": "input", "name": t, "offset": a.offset, "shape": list(a.shape),
                      "strides": list(a.strides)}
        elif t in runner.returned_args:
            where = runner.returned_args[t]
            if "input" in where:
                out[t] = {"kind": "input", "name": where["input"], "offset": where["offset"],
                          "shape": where["shape"], "strides": where["strides"]}
            else:
                out[t] = {"kind": "arg", **where}
    return out


def _recorded(o: Outcome, case: Case, targets: dict[str, dict[str, Any]], data: _Data) -> dict[str, Any]:
    if o.error is not None:
        return {"error": o.error.summary()}
    v = view(o, case)
    out: dict[str, Any] = {}
    for target in targets:
        t = v.targets.get(target)
        if t is not None:
            out[target] = {**data.encode(f"{o.backend}_{target}", t.raw, t.dtype.name), "shape": list(t.shape)}
    return out


def _tolerances(ev: Evidence, verdict: Verdict, targets: dict[str, dict[str, Any]],
                data: _Data) -> dict[str, dict[str, Any]]:
    """The run's own tolerance for each target: its constants, each element's dataflow scale, and
    where the range edge may differ."""
    out = {}
    p = ev.pair(*verdict.pair) if verdict.pair else None
    cmp = p.comparison if p is not None else None
    guide = ev.rules.guide
    for t in targets:
        m = next((m for m in (cmp.mismatches if cmp else []) if m.target == t and m.tol is not None), None)
        tol = m.tol if m else None
        entry: dict[str, Any] = ({"exact": tol.exact, "rtol": tol.rtol, "atol": tol.atol, "scale": tol.scale,
                                  "signed_zero": tol.signed_zero} if tol else
                                 {"exact": True, "rtol": 0.0, "atol": 0.0, "scale": 0.0, "signed_zero": False})
        if m is not None and m.narrowing:
            entry["narrowed"] = True
        if m is not None and m.scale is not None:
            scale = np.asarray(m.scale, np.float64)
            if m.mask is not None and scale.shape != m.mask.shape:
                scale = np.broadcast_to(scale, m.mask.shape)
            beyond = cmp.beyond_problem.get(t) if cmp is not None else None
            if beyond is not None and beyond.shape == scale.shape:
                # elements the problem's measured scale decided (beyond what one rounding of the inputs moves the
                # answer): the reproducer judges them by the strict tolerance, which they are beyond too
                scale = np.where(beyond, 0.0, scale)
            entry["scales"] = data.encode(f"scale_{t}", np.ascontiguousarray(scale), "float64")
        gt = guide.targets.get(t) if guide is not None else None
        if gt is not None and gt.overflow is not None and gt.edge is not None:
            legit = gt.overflow & (gt.edge >= 1)
            if m is not None and m.mask is not None and m.mask.shape == legit.shape:
                legit &= ~m.mask  # (elements the run failed: an overflow on the way no longer forgives them)
            if legit.any():
                entry["legit"] = data.encode(f"legit_{t}", legit, "bool")
        out[t] = entry
    return out


def _variants(sides: tuple[str, ...], ev: Evidence) -> dict[str, dict[str, Any] | None]:
    """For each compiled-variant side, the launch options it sets on every launch; None for a variant
    the recorded launches cannot replay (another autotune config changes constexprs and grids)."""
    out: dict[str, dict[str, Any] | None] = {}
    for s in sides:
        o = ev.outcomes.get(s)
        spec = o.spec if o is not None else None
        if spec is not None and spec.kind == "compiled" and spec.variant and s not in out:
            out[s] = None if spec.config is not None else dict(spec.launch)
    return out


def _side_of(verdict: Verdict, ev: Evidence) -> str:
    """The backend whose own behaviour the verdict is about (errors, integrity findings)."""
    if verdict.kind == "error":
        if verdict.targets:
            return verdict.targets[0]
        assert verdict.pair is not None  # (an error verdict names its pair: `fault_verdicts`)
        return verdict.pair[0]
    return verdict.pair[0] if verdict.pair else next(iter(ev.outcomes))




def _live_entry(jit: Any) -> list[str] | None:
    """Where `--live` imports a kernel from: [module, qualified name, the folder on sys.path it was
    imported from]; None for a kernel no import reaches (defined in a function or in __main__)."""
    fn = jit.fn
    module, qualname = fn.__module__, fn.__qualname__
    if getattr(jit, "dropped", None):  # (a reduced kernel without some parameters: its launches fit no other)
        return None
    if "<locals>" in qualname or module == "__main__" or module not in sys.modules:
        return None
    path = getattr(sys.modules[module], "__file__", None)
    root = ""
    if path:
        root = os.path.dirname(os.path.abspath(path))
        for _ in range(module.count(".") + (os.path.basename(path) == "__init__.py")):
            root = os.path.dirname(root)
    return [module, qualname, root]


def _shims_used(outcomes: list[Outcome]) -> dict[str, int]:
    used: dict[str, int] = {}
    for o in outcomes:
        for n, count in (o.trace.shims.items() if o.trace is not None else ()):
            if count:
                used[n] = used.get(n, 0) + count
    return used


def _header(check: Any, case: Case, verdict: Verdict, kind: str, pair: tuple[str, ...], side: str, device: str,
            used: dict[str, int], live: dict[str, list[str] | None], compiles_here: bool = False) -> list[str]:
    v = versions()
    importable = {n: e for n, e in live.items() if e is not None}
    roots = sorted({e[2] for e in importable.values() if e[2] and "-packages" not in e[2]})
    fixed = ", ".join(f"{m}.{q}" for m, q, _ in importable.values())
    return [
        f'"""tdiff reproducer for {check.id}',
        "",
        f"Verdict: {verdict.label}",
        *(f"  {r}" for r in verdict.reasons[:3]),
        f"Shows: {kind} divergence" + (f" in {', '.join(verdict.targets)}" if verdict.targets else "")
        + f" ({' vs '.join(pair) if kind == 'values' else side})",
        f"Case: {case.describe()}",
        f"Found {datetime.date.today().isoformat()} with triton {v['triton']}, torch {v['torch']}, "
        f"numpy {v['numpy']}, python {v['python']}" + (f", {device}" if device else ""),
        "",
        "Run:  python repro.py   (exit status 1 while the divergence is present, 0 once it is gone,",
        "      2 when nothing can run here)",
        *(["After fixing the kernel, run:  python repro.py --live"]
          + textwrap.wrap(f"It launches {fixed} as its module defines it now, instead of the copy below. The module "
                          "must be importable where this runs: the reproducer adds "
                          + (f"{' and '.join(roots)} (where tdiff imported it from) and " if roots else "")
                          + "the current folder to sys.path; elsewhere, set PYTHONPATH.", 100,
                          initial_indent="      ", subsequent_indent="      ")
          if importable and len(importable) == len(live) else
          ["(--live is not available: a launched kernel cannot be imported from its module)"]),
        "The compiled side runs where a CUDA GPU is present; Triton's interpreter runs everywhere",
        "(TRITON_INTERPRET=1, in a subprocess). A side that cannot run here is replaced by its",
        "recorded result. Inputs are rebuilt inside guard bands with their exact strides and offsets.",
        *([f"The compile-only side compiles each launch for sm_{COMPILE_ONLY_ARCH} here (Triton compiles without a "
           "GPU) and runs nothing."] if compiles_here else []),
        *([f"tdiff's interpreter used its shims {', '.join(sorted(used))}: the interpreter side installs",
           "tdiff's shims and prints what they worked around (stock TRITON_INTERPRET=1 would fail or differ)."]
          if used else []),
        '"""',
    ]


def _reduced_comment(reduced: str) -> str:
    """`reduced` (what kernel reduction says, then the unified diff against the original) as comment lines."""
    return "".join(f"# {line}".rstrip() + "\n" for line in reduced.splitlines()) + "\n"


def render(check: Any, case: Case, verdict: Verdict, ev: Evidence, dry: Outcome | None = None,
           timeout: float = 60.0, reduced: str = "") -> tuple[str, dict[str, np.ndarray]]:
    """The reproducer's text and its sidecar arrays. `dry`: an outcome recording the launches,
    for divergences where no backend finished (a hang). `reduced`: the check's kernel is a reduced one; this
    text (how it was reduced, and its diff against the original) goes above it, as a comment."""
    if verdict.kind not in REPRODUCIBLE or (verdict.kind == "error" and all(
            verdict.role(s, ev).is_reference for s in verdict.targets)):
        raise ReproError(f"the divergence ({verdict.label}) is in `launch`, the reference or the declaration, "
                         "which a replay of the recorded kernel launches cannot show: rerun the check instead")
    outcomes = list(ev.outcomes.values()) + list(ev.extra.values()) + ([dry] if dry is not None else [])
    runners = [o for o in outcomes if o.launches]
    # the plain compiled run's launches first: a compiled variant's own launch options are applied on top
    runner = next((o for o in runners if o.backend == "compiled"),
                  next((o for o in runners if o.role.base == "compiled"), runners[0] if runners else None))
    if runner is None:
        raise ReproError("no backend recorded a kernel launch: there is nothing to replay")
    kind = verdict.kind
    a, b = verdict.pair or (_side_of(verdict, ev), _side_of(verdict, ev))
    side = _side_of(verdict, ev)
    data = _Data()
    inputs = {name: data.encode(f"input_{name}", arg.storage, arg.dtype) for name, arg in case.tensors().items()}
    views = {name: {"offset": arg.offset, "shape": list(arg.shape), "strides": list(arg.strides)}
             for name, arg in case.tensors().items()}
    names = list(verdict.targets) if kind == "values" else []
    if kind == "error":
        names = list(case.tensors()) + [t for t in runner.returned_args]
    targets = _target_places(case, runner, names)
    if kind == "values" and not targets:
        raise ReproError("the divergence is not in a tensor the reproducer can rebuild")
    col = Inliner()
    kernels_by_name: dict[str, Any] = {}
    for rec in runner.launches:
        jit = find_jit(check, rec.kernel, rec.module)
        kernels_by_name[rec.kernel] = jit
        col.add(jit)
    launches = _launch_args(runner, data, {n: kernels.arg_names(j) for n, j in kernels_by_name.items()})
    both = [o for o in (ev.outcomes.get(a), ev.outcomes.get(b), ev.extra.get(Rerun(AGAIN, a))) if o is not None]
    recorded = {o.backend: _recorded(o, case, targets, data) for o in both}
    used = _shims_used(outcomes)
    device = next((o.device for o in outcomes if o.device), "")
    pair = (a, a) if verdict.label == "nondeterministic" else (a, b)
    live = {n: _live_entry(j) for n, j in kernels_by_name.items()}
    kinds = {x: verdict.role(x, ev).base for x in (*pair, side)}
    interpreted = "interpreter" in kinds.values()
    compiles_here = COMPILE_ONLY in kinds.values()  # (its side needs tdiff.compat's compile_only)
    poisoned = interpreted and any(o.trace is not None and o.trace.poisoned and o.trace.undefined for o in both)
    shim_names = [n for n in shims.ENABLED if shims.ENABLED[n]] if interpreted else None
    case_values = {
        "KIND": kind, "PAIR": tuple(pair), "KINDS": kinds,
        "VARIANTS": _variants((*pair, side), ev), "SIDE": side, "EXPECT_TARGETS": list(verdict.targets),
        "TIMEOUT": float(timeout), "GUARD": GUARD_BYTES, "SIDECAR": "inputs.npz" if data.sidecar else None,
        "INPUTS": inputs, "VIEWS": views, "LAUNCHES": launches, "TARGETS": targets,
        "TOLERANCE": _tolerances(ev, verdict, targets, data), "RECORDED": recorded,
        "LIVE": {n: e for n, e in live.items() if e is not None}, "SHIM_NAMES": shim_names, "POISON": poisoned,
        "SHIMS": {n: SHIM_DESCRIPTIONS.get(n, n) for n in shim_names or ()},
        "SHIMS_MISSING": [n for n in sorted(used) if n not in shims.ENABLED or not shims.ENABLED[n]],
        "COMPILE_ARCH": COMPILE_ONLY_ARCH,
    }
    if set(case_values) | {"KERNELS"} != set(library.case_names()):
        raise ReproError(f"the case's names {sorted(case_values)} are not runtime.py's case block's")
    header = _header(check, case, verdict, kind, pair, side, device, used, live, compiles_here)
    body = "\n".join(header) + "\n" + PRELUDE
    body += "# ------------------------------------------------------------------ kernels\n"
    body += (_reduced_comment(reduced) if reduced else "") + col.text() + "\n\n"
    body += "KERNELS = {" + ", ".join(f"{n!r}: {n}" for n in kernels_by_name) + "}\n\n"
    body += "# ------------------------------------------------------------------ the case\n"
    if poisoned:
        body += ("# Triton leaves the masked-out lanes of `tl.load` without `other=` undefined. tdiff's interpreter,\n"
                 "# and the interpreter side here, fill them with a poison value (NaN; integers 0x5A bytes; booleans\n"
                 "# True), so a result that depends on them shows; stock TRITON_INTERPRET=1 and the NVIDIA backend\n"
                 "# fill them with 0.\n")
    if shim_names:
        body += ("# The interpreter side installs tdiff's interpreter shims (SHIM_NAMES, the library at the end of\n"
                 "# this file): each acts only where stock TRITON_INTERPRET=1 would fail or compute differently, and\n"
                 "# the side reports its uses. tdiff's run used: " + (", ".join(sorted(used)) or "none") + "\n")
    body += "".join(f"{name} = {_literal(value)}\n" for name, value in case_values.items()) + "\n\n"
    body += library.runtime_source() + "\n\n"
    if shim_names is not None or compiles_here:
        body += "# ================================================================== tdiff's interpreter shims\n\n"
        body += library.shim_library() + "\n\n"
    body += 'if __name__ == "__main__":\n    sys.exit(main())\n'
    return body, data.sidecar
