"""Standalone reproducers: one Python file (plus an .npz for large arrays) that shows a divergence.

The file needs only triton, torch and numpy. It rebuilds every input inside guard bands with its
exact strides and storage offset, replays the recorded launches, and shows the divergence of the
kind tdiff found: values that differ beyond the run's own per-element tolerance, a side that fails
or hangs, a guard band or a gap between views written (or a gap read), an access outside every allocation, a data
race or an undefined cast (the interpreter side runs under a small tracer for those). The compiled
side runs where a GPU is present, the interpreter everywhere (TRITON_INTERPRET=1, in a subprocess,
with standalone copies of the tdiff interpreter shims the run used, which print what they worked
around); a side that cannot run here (the reference, or the GPU on a CPU machine) is replaced by its
recorded result. Kernels are inlined with the device functions they call, also those they reach
through a library's module (FlagGems' `tle.program_id`), so no library is imported; Triton dtypes
passed as launch arguments are rebuilt. The file exits 1 while
the divergence is present, 0 once it is gone, 2 when nothing can run here. tdiff keeps a reproducer
only after it showed the same kind of divergence on the same targets in a fresh process.
"""

from __future__ import annotations

import ast
import datetime
import inspect
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import types
from pathlib import Path
from typing import Any

import numpy as np
import torch
import triton
import triton.language as tl
from triton.runtime.jit import JITFunction

from ...core import dtypes, kernels
from ...core.case import Case
from ...core.outcome import GUARD_BYTES, Outcome
from ...execute.backends.base import BackendSpec
from ...execute.interpreter import shims, undefined
from ...judge.evidence import Evidence
from ...judge.targets import view
from ...judge.verdict import Verdict
from .kernel_source import Collector, _def_source

INLINE_LIMIT = 512  # elements; larger arrays go to the sidecar file
MARK = "TDIFF-DIVERGENCE"  # the line a reproducer prints for each divergence it shows
#: divergence kinds a replay of the recorded launches can show
REPRODUCIBLE = ("values", "error", "oob", "guard", "gap", "gap-read", "race", "ub")


class ReproError(RuntimeError):
    """The reproducer could not be written, or did not reproduce."""


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

    def encode(self, key: str, raw: np.ndarray, dt_name: str) -> dict:
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


def _opaque(a: dict, what: str) -> dict:
    """A launch argument recorded only by its repr, as the reproducer can rebuild it: a Triton dtype
    (`dtype=tl.float32`, e.g. liger's group norm backward) or a `tl.constexpr` of a literal."""
    text = str(a.get("value", ""))
    if text.startswith("triton.language."):
        name = text[len("triton.language."):]
        if isinstance(getattr(tl, name, None), tl.dtype):
            return {"kind": "tl_dtype", "value": name}
    if text.startswith("constexpr[") and text.endswith("]"):
        try:
            return {"kind": "scalar", "value": ast.literal_eval(text[len("constexpr["):-1])}
        except (ValueError, SyntaxError):
            pass
    raise ReproError(f"{what} ({text}) is an object a reproducer cannot rebuild")


def _launch_args(outcome: Outcome, data: _Data, names: dict[str, list[str]]) -> list[dict]:
    out = []
    for i, rec in enumerate(outcome.launches):
        arg_names = names.get(rec.kernel, [])

        def enc(a: dict, key: str, _i: int = i, _names: list = arg_names, _kernel: str = rec.kernel) -> dict:
            if a.get("kind") == "tensor":
                d = data.encode(f"launch{_i}_{key}", a.get("storage"), a["dtype"])
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


def _target_places(case: Case, runner: Outcome, names: list[str]) -> dict[str, dict]:
    tensors = case.tensors()
    out: dict[str, dict] = {}
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


def _recorded(o: Outcome, case: Case, targets: dict[str, dict], data: _Data) -> dict:
    if o.error is not None:
        return {"error": o.error.summary()}
    v = view(o, case)
    out: dict[str, Any] = {}
    for target in targets:
        t = v.targets.get(target)
        if t is not None:
            out[target] = {**data.encode(f"{o.backend}_{target}", t.raw, t.dtype.name), "shape": list(t.shape)}
    return out


def _tolerances(ev: Evidence, verdict: Verdict, targets: dict[str, dict], data: _Data) -> dict[str, dict]:
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
        if m is not None and m.scale is not None:
            entry["scales"] = data.encode(f"scale_{t}", m.scale.astype(np.float64), "float64")
        gt = guide.targets.get(t) if guide is not None else None
        if gt is not None and gt.overflow is not None and gt.edge is not None:
            legit = gt.overflow & (gt.edge >= 1)
            if legit.any():
                entry["legit"] = data.encode(f"legit_{t}", legit, "bool")
        out[t] = entry
    return out


#: modules a reproducer may import (everything else is inlined)
_IMPORTABLE = ("triton", "torch", "numpy", "math")


def _importable(mod: types.ModuleType) -> bool:
    return mod.__name__.split(".")[0] in _IMPORTABLE


class _Inliner(Collector):
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
        for node in ast.walk(ast.parse(_def_source(jit.fn))):
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
            member = getattr(value, attr, None)
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


def _find_jit(check: Any, name: str, module: str) -> Any:
    jit = kernels.jit_function(check.kernel)
    if jit.fn.__name__ == name:
        return jit
    mod = sys.modules.get(module)
    for obj in vars(mod).values() if mod else ():
        if kernels.is_kernel(obj) and kernels.jit_function(obj).fn.__name__ == name:
            return kernels.jit_function(obj)
    raise ReproError(f"kernel {name!r} launched by the check was not found in module {module!r}")


def _variants(sides: tuple[str, ...]) -> dict[str, dict | None]:
    """For each compiled-variant side, the launch options it sets on every launch; None for a variant
    the recorded launches cannot replay (another autotune config changes constexprs and grids)."""
    out: dict[str, dict | None] = {}
    for s in sides:
        base = s.split(":")[0].rstrip("'")
        if base.startswith("compiled[") and s not in out:
            spec = BackendSpec.parse(base)
            out[s] = None if spec.config is not None else dict(spec.launch)
    return out


def _side_of(verdict: Verdict, ev: Evidence) -> str:
    """The backend whose own behaviour the verdict is about (errors, integrity findings)."""
    if verdict.kind == "error":
        return verdict.targets[0] if verdict.targets else verdict.pair[0]  # type: ignore[index]
    return verdict.pair[0] if verdict.pair else next(iter(ev.outcomes))


def render(check: Any, case: Case, verdict: Verdict, ev: Evidence, dry: Outcome | None = None,
           timeout: float = 60.0) -> tuple[str, dict]:
    """The reproducer's text and its sidecar arrays. `dry`: an outcome recording the launches,
    for divergences where no backend finished (a hang)."""
    if verdict.kind not in REPRODUCIBLE or (verdict.kind == "error" and all(
            s.split(":")[0] == "reference" for s in verdict.targets)):
        raise ReproError(f"the divergence ({verdict.label}) is in `launch`, the reference or the declaration, "
                         "which a replay of the recorded kernel launches cannot show: rerun the check instead")
    outcomes = list(ev.outcomes.values()) + list(ev.extra.values()) + ([dry] if dry is not None else [])
    runners = [o for o in outcomes if o.launches]
    # the plain compiled run's launches first: a compiled variant's own launch options are applied on top
    runner = next((o for o in runners if o.backend == "compiled"),
                  next((o for o in runners if o.backend.startswith("compiled")), runners[0] if runners else None))
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
    col = _Inliner()
    kernels_by_name: dict[str, Any] = {}
    for rec in runner.launches:
        jit = _find_jit(check, rec.kernel, rec.module)
        kernels_by_name[rec.kernel] = jit
        col.add(jit)
    launches = _launch_args(runner, data, {n: kernels.arg_names(j) for n, j in kernels_by_name.items()})
    both = [o for o in (ev.outcomes.get(a), ev.outcomes.get(b), ev.extra.get(f"again:{a}")) if o is not None]
    recorded = {o.backend: _recorded(o, case, targets, data) for o in both}
    used: dict[str, int] = {}
    for o in outcomes:
        for n, count in (o.trace.shims.items() if o.trace is not None else ()):
            if count:
                used[n] = used.get(n, 0) + count
    device = next((o.device for o in outcomes if o.device), "")
    v = versions()
    pair = (a, a) if verdict.label == "nondeterministic" else (a, b)
    header = [
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
        "Run:  python repro.py   (exit status 1 while the divergence is present, 0 once it is gone)",
        "The compiled side runs where a CUDA GPU is present; Triton's interpreter runs everywhere",
        "(TRITON_INTERPRET=1, in a subprocess). A side that cannot run here is replaced by its",
        "recorded result. Inputs are rebuilt inside guard bands with their exact strides and offsets.",
        *([f"tdiff's interpreter used its shims {', '.join(sorted(used))}: the interpreter side installs",
           "tdiff's shims and prints what they worked around (stock TRITON_INTERPRET=1 would fail or differ)."]
          if used else []),
        '"""',
    ]
    interpreted = any(x.split(":")[0].rstrip("'") == "interpreter" for x in (*pair, side))
    poisoned = interpreted and any(o.trace is not None and o.trace.poisoned and o.trace.undefined for o in both)
    body = "\n".join(header) + "\n" + _PRELUDE + _shim_source(used, interpreted)
    if poisoned:
        body += _poison_source()
    body += "\n# ------------------------------------------------------------------ kernels\n" + col.text() + "\n\n"
    body += "KERNELS = {" + ", ".join(f"{n!r}: {n}" for n in kernels_by_name) + "}\n\n"
    body += "# ------------------------------------------------------------------ the case\n"
    body += f"KIND = {kind!r}\n"
    body += f"PAIR = {_literal(tuple(pair))}\n"
    body += f"VARIANTS = {_literal(_variants((*pair, side)))}  # compiled variants: launch options on top, or None\n"
    body += f"SIDE = {side!r}\n"
    body += f"EXPECT_TARGETS = {_literal(list(verdict.targets))}\n"
    body += f"TIMEOUT = {float(timeout)!r}\n"
    body += f"GUARD = {GUARD_BYTES}\n"
    body += f"SIDECAR = {_literal('inputs.npz' if data.sidecar else None)}\n"
    body += f"INPUTS = {_literal(inputs)}\n"
    body += f"VIEWS = {_literal(views)}\n"
    body += f"LAUNCHES = {_literal(launches)}\n"
    body += f"TARGETS = {_literal(targets)}\n"
    body += f"TOLERANCE = {_literal(_tolerances(ev, verdict, targets, data))}\n"
    body += f"RECORDED = {_literal(recorded)}\n"
    body += _RUNTIME
    return body, data.sidecar


def _shim_source(used: dict[str, int], interpreted: bool) -> str:
    """tdiff's interpreter shims for the reproducer's TRITON_INTERPRET=1 run, where it runs the interpreter
    (`interpreted`): every shim tdiff's interpreter has on, as it ran the kernel (each acts only where stock
    TRITON_INTERPRET=1 would fail or compute differently, and counts its uses, which the reproducer prints).
    `used`: what the run's trace counted."""
    names = [n for n in sorted(_SHIM_CODE) if shims.ENABLED.get(n, False)] if interpreted else []
    missing = [n for n in sorted(used) if n not in _SHIM_CODE]
    lines = ["", "# ------------------------------------------------------------------ tdiff's interpreter shims"]
    if names:
        lines += ["# What tdiff's interpreter does and stock TRITON_INTERPRET=1 does not",
                  "# (tdiff.execute.interpreter.shims),",
                  "# installed for the interpreter side only; each acts only where stock TRITON_INTERPRET=1 would fail",
                  "# or compute differently, and the side reports its uses.",
                  "# tdiff's run used: " + (", ".join(sorted(used)) or "none")]
    lines.append("SHIMS = {" + "".join(f"\n    {n!r}: {shims.DESCRIPTIONS.get(n, n)!r}," for n in names)
                 + ("\n}" if names else "}"))
    lines.append(f"SHIMS_MISSING = {_literal(missing)}  # used by tdiff's run, not available here")
    lines.append("SHIMS_USED = {}  # shim -> uses in this process")
    text = "\n".join(lines) + "\n"
    if not names:
        return text
    code = [_SHIM_COMMON, inspect.getsource(shims.bf16_to_f32), inspect.getsource(shims.f32_to_bf16)]
    code += [_SHIM_CODE[n] for n in names]
    source = "\n\n".join(c.strip("\n") + "\n" for c in code)
    body = "".join("    " + line if line.strip() else line for line in source.splitlines(True))
    return text + 'if os.environ.get("TRITON_INTERPRET") == "1":\n' + body + "\n"


def _poison_source() -> str:
    """tdiff's interpreter fills the masked-out lanes of a load without other= with a poison value
    (tdiff.execute.interpreter.undefined); the reproducer's interpreter side does the same."""
    code = inspect.getsource(undefined.poison) + "\n\n" + inspect.getsource(undefined.is_poison_nan) + _POISON_LOAD
    return ("\n# ------------------------------------------------------------------ undefined masked lanes\n"
            "# Triton leaves the masked-out lanes of `tl.load` without `other=` undefined. tdiff's interpreter,\n"
            "# and the interpreter side here, fill them with a poison value (NaN; integers 0x5A bytes; booleans\n"
            "# True), so a result that depends on them shows; stock TRITON_INTERPRET=1 and the NVIDIA backend\n"
            "# fill them with 0.\n"
            'if os.environ.get("TRITON_INTERPRET") == "1":\n'
            + "".join("    " + line if line.strip() else line for line in code.splitlines(True)) + "\n")


_POISON_LOAD = '''

from triton.language.semantic import TritonSemantic as _Semantic

_masked_load = _interp.InterpreterBuilder.create_masked_load
_load_legacy = _Semantic._load_legacy
_other_given = [False]


def _legacy(self, ptr, mask, other, *rest, **kw):  # the frontend drops a falsy single-element other=
    _other_given[0] = other is not None
    try:
        return _load_legacy(self, ptr, mask, other, *rest, **kw)
    finally:
        _other_given[0] = False


def _poisoned_load(self, ptrs, mask, other, *rest):
    keep = None if mask is None else np.broadcast_to(np.asarray(mask.data, bool), ptrs.data.shape)
    if other is None and not _other_given[0] and keep is not None and not keep.all():
        dtype = ptrs.get_element_ty()
        other = _interp.TensorHandle(poison(dtype, _interp._get_np_dtype(dtype), ptrs.data.shape), dtype)
        print(f"interpreter: {keep.size - np.count_nonzero(keep)} masked-out lane(s) of a load without other= "
              "filled with a poison value", file=sys.stderr)
    return _masked_load(self, ptrs, mask, other, *rest)


_interp.InterpreterBuilder.create_masked_load = _poisoned_load
_Semantic._load_legacy = _legacy
'''


def verify(folder: Path, verdict: Verdict, timeout: float) -> None:
    """Run the reproducer in a fresh process; raise unless it shows the same kind of divergence on
    the same targets."""
    try:
        proc = subprocess.run([sys.executable, "repro.py"], capture_output=True, text=True, timeout=timeout,
                              cwd=str(folder))
    except subprocess.TimeoutExpired:
        raise ReproError(f"it did not finish in {timeout:.0f} s in a fresh process") from None
    tail = " | ".join((proc.stdout + proc.stderr).strip().splitlines()[-6:])
    shown = []
    for line in proc.stdout.splitlines():
        if line.startswith(MARK):
            try:
                shown.append(json.loads(line[len(MARK):].strip()))
            except ValueError:
                continue
    want = {"guard": "oob"}.get(verdict.kind, verdict.kind)
    same = [s for s in shown if {"guard": "oob"}.get(s.get("kind"), s.get("kind")) == want
            and (not verdict.targets or not s.get("targets") or set(s["targets"]) & set(verdict.targets))]
    if proc.returncode != 1 or not same:
        raise ReproError(f"it did not show the same divergence ({verdict.kind}"
                         + (f" in {', '.join(verdict.targets)}" if verdict.targets else "")
                         + f") in a fresh process (exit {proc.returncode}): {tail}")


def write(folder: Path, check: Any, case: Case, verdict: Verdict, ev: Evidence, validate: bool = True,
          timeout: float = 600.0, dry: Outcome | None = None, case_timeout: float = 60.0) -> Path:
    """Write `folder/repro.py` (and `inputs.npz`); with `validate`, keep it only if it reproduces."""
    text, sidecar = render(check, case, verdict, ev, dry, case_timeout)
    folder = Path(folder)
    if (folder / "repro.py").exists():  # the same case, already written (e.g. by another worker)
        return folder / "repro.py"
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=folder.parent))
    try:
        (tmp / "repro.py").write_text(text)
        if sidecar:
            np.savez(tmp / "inputs.npz", **sidecar)
        if validate:
            verify(tmp, verdict, timeout)
        if folder.exists():  # (pictures of an earlier run): add the files
            for f in tmp.iterdir():
                if not (folder / f.name).exists():
                    os.replace(f, folder / f.name)
        else:
            try:
                os.rename(tmp, folder)
            except OSError:
                if not (folder / "repro.py").exists():
                    raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return folder / "repro.py"


_PRELUDE = '''
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

nan, inf = float("nan"), float("inf")

if os.environ.get("TRITON_INTERPRET") == "1":
    # Triton <= 3.8's interpreter converts 1-element arrays with int(), which numpy >= 2.4 rejects
    import triton.runtime.interpreter as _interp

    _orig_patch_tensor = _interp._patch_lang_tensor

    def _patch_lang_tensor(tensor, *rest):
        _orig_patch_tensor(tensor, *rest)
        tensor.__index__ = lambda self: int(self.handle.data.reshape(-1)[0])

    _interp._patch_lang_tensor = _patch_lang_tensor
'''

# Each of tdiff's interpreter shims (tdiff.execute.interpreter.shims, scope) as the reproducer installs it under
# stock TRITON_INTERPRET=1 (in the `if` that `_shim_source` writes; `_used(name)` counts a use). Keyed by the shim's
# name in `Trace.shims`; tests/test_repro_library.py checks every shim tdiff has is here.
_SHIM_COMMON = '''
import triton.language as _tl
import triton.runtime.interpreter as _interp

_B = _interp.InterpreterBuilder


def _used(name):
    SHIMS_USED[name] = SHIMS_USED.get(name, 0) + 1


def _bf16(h):
    return getattr(getattr(h, "dtype", None), "scalar", getattr(h, "dtype", None)) == _tl.bfloat16
'''

_SHIM_CODE: dict[str, str] = {}

_SHIM_CODE["float-args"] = '''
_cvt = _interp._implicit_cvt
_cvt_depth = [0]


def _implicit_cvt(arg):  # a float kernel argument is an fp32 scalar, as the compiler types it
    if isinstance(arg, float) and not _cvt_depth[0]:
        _used("float-args")
        return _tl.tensor(_interp.TensorHandle(np.array([arg], dtype=np.float32), _tl.float32), _tl.float32)
    _cvt_depth[0] += 1  # (floats inside tuples stay Python floats, as in tdiff's interpreter)
    try:
        return _cvt(arg)
    finally:
        _cvt_depth[0] -= 1


_interp._implicit_cvt = _implicit_cvt
'''

_SHIM_CODE["bf16-constants"] = '''
if not hasattr(_B, "get_bf16"):
    def _get_bf16(self, v):
        _used("bf16-constants")
        return _interp.TensorHandle(f32_to_bf16(np.array([v], np.float32)), _tl.bfloat16)

    _B.get_bf16 = _get_bf16
'''

_SHIM_CODE["bf16-arith"] = '''
def _res(out, like):
    if out.dtype == np.bool_:  # a comparison: the builder keeps the operand's type on the handle
        return _interp.TensorHandle(out, like.dtype.scalar)
    return _interp.TensorHandle(f32_to_bf16(out), _tl.bfloat16)


def _on_values(orig, test, compute):
    def method(self, *a):
        if not test(a):
            return orig(self, *a)
        _used("bf16-arith")
        with np.errstate(all="ignore"):
            return compute(*a)

    return method


_B.binary_op = _on_values(_B.binary_op, lambda a: _bf16(a[0]) and _bf16(a[1]),
                          lambda x, y, op: _res(op(bf16_to_f32(x.data), bf16_to_f32(y.data)), x))
_B.ternary_op = _on_values(_B.ternary_op, lambda a: a[3] is not np.where and all(map(_bf16, a[:3])),
                           lambda x, y, z, op: _res(op(*(bf16_to_f32(h.data) for h in (x, y, z))), z))
_B.unary_op = _on_values(_B.unary_op, lambda a: _bf16(a[0]), lambda x, op: _res(op(bf16_to_f32(x.data)), x))
_B.create_rsqrt = _on_values(_B.create_rsqrt, lambda a: _bf16(a[0]),
                             lambda x: _res(1 / np.sqrt(bf16_to_f32(x.data)), x))
_B.create_erf = _on_values(_B.create_erf, lambda a: _bf16(a[0]),
                           lambda x: _res(_interp.np_erf_fp32(bf16_to_f32(x.data)), x))
_B.create_fma = _on_values(_B.create_fma, lambda a: all(map(_bf16, a)), lambda x, y, z: _res(
    (bf16_to_f32(x.data).astype(np.float64) * bf16_to_f32(y.data) + bf16_to_f32(z.data)).astype(np.float32), z))
_cast = _B.cast_impl


def _cast_impl(self, src, dst_type):  # bf16 <-> fp32 exactly / rounded to nearest even, as the compiler does
    s_t, d_t = getattr(src.dtype, "scalar", src.dtype), getattr(dst_type, "scalar", dst_type)
    if s_t == _tl.bfloat16 and d_t == _tl.float32:
        _used("bf16-arith")
        return _interp.TensorHandle(bf16_to_f32(src.data), _tl.float32)
    if s_t == _tl.float32 and d_t == _tl.bfloat16:
        _used("bf16-arith")
        return _interp.TensorHandle(f32_to_bf16(np.asarray(src.data, np.float32)), _tl.bfloat16)
    return _cast(self, src, dst_type)


_B.cast_impl = _cast_impl


def _retype(t, to):
    data = bf16_to_f32(t.handle.data) if to == _tl.float32 else f32_to_bf16(t.handle.data)
    ty = _tl.block_type(to, list(t.type.shape)) if t.type.is_block() else to
    return _tl.core.tensor(_interp.TensorHandle(np.asarray(data), to), ty)


_reduce_cls = getattr(_interp, "ReduceScanOpInterface", None)
_reduce_apply = getattr(_reduce_cls, "apply", None)


def _reduce_bf16(self, input):  # reductions and scans of bf16 values: on the values in fp32, rounded after
    if not isinstance(input, tuple):
        return _reduce_bf16(self, (input,))[0]
    narrow = [isinstance(t, _tl.core.tensor) and t.dtype == _tl.bfloat16 for t in input]
    if not any(narrow):
        return _reduce_apply(self, input)
    _used("bf16-arith")
    outs = _reduce_apply(self, tuple(_retype(t, _tl.float32) if n else t for t, n in zip(input, narrow)))
    return tuple(_retype(o, _tl.bfloat16) if n and isinstance(o, _tl.core.tensor) and o.dtype == _tl.float32 else o
                 for o, n in zip(outs, narrow))


if _reduce_apply is not None:
    _reduce_cls.apply = _reduce_bf16
'''

_SHIM_CODE["bf16-atomics"] = '''
_rmw = _B.create_atomic_rmw


def _atomic_rmw(self, op, ptr, val, mask, *rest):  # bf16 atomics done lane by lane on the values
    if not _bf16(val):
        return _rmw(self, op, ptr, val, mask, *rest)
    _used("bf16-atomics")
    name = str(op).rsplit(".", 1)[-1].lower()
    addrs = np.asarray(ptr.data)
    m = np.ones(addrs.shape, bool) if mask is None else np.broadcast_to(np.asarray(mask.data, bool), addrs.shape)
    vals = np.broadcast_to(np.asarray(val.data), addrs.shape).reshape(-1)
    flat, old = addrs.reshape(-1), np.zeros(addrs.size, np.uint16)
    for i in np.flatnonzero(m.reshape(-1)):
        one = flat[i:i + 1]
        cur = _interp._interpreter.load(one, np.ones(1, bool), np.zeros(1, np.uint16), np.dtype(np.uint16))
        old[i] = cur[0]
        a, b = bf16_to_f32(cur), bf16_to_f32(vals[i:i + 1])
        new = {"add": a + b, "fadd": a + b, "max": np.maximum(a, b), "min": np.minimum(a, b), "xchg": b}.get(name)
        if new is None:
            raise NotImplementedError(f"bf16 atomic {name} is not supported by tdiff's interpreter shim")
        _interp._interpreter.store(one, f32_to_bf16(new), np.ones(1, bool))
    return _interp.TensorHandle(old.reshape(addrs.shape), _tl.bfloat16)


_B.create_atomic_rmw = _atomic_rmw
'''

_SHIM_CODE["constexpr-args"] = '''
_device_call = _interp.InterpretedFunction.__call__


def _constexpr_call(self, *args, **kwargs):  # dtype arguments of device functions arrive as tl.constexpr
    if any(isinstance(a, _tl.dtype) for a in (*args, *kwargs.values())):
        _used("constexpr-args")
        args = tuple(_tl.constexpr(a) if isinstance(a, _tl.dtype) else a for a in args)
        kwargs = {k: _tl.constexpr(v) if isinstance(v, _tl.dtype) else v for k, v in kwargs.items()}
    return _device_call(self, *args, **kwargs)


_interp.InterpretedFunction.__call__ = _constexpr_call
'''

_SHIM_CODE["tensor-and-or"] = '''
import ast as _ast


class _BoolOps(_ast.NodeTransformer):  # `a and b` -> _tdiff_bool_op("and", a, lambda: b)
    def visit_BoolOp(self, node):
        self.generic_visit(node)
        result = node.values[0]
        for value in node.values[1:]:
            thunk = _ast.Lambda(args=_ast.arguments(posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[],
                                                    defaults=[]), body=value)
            result = _ast.Call(func=_ast.Name("_tdiff_bool_op", _ast.Load()), keywords=[],
                               args=[_ast.Constant("and" if isinstance(node.op, _ast.And) else "or"), result, thunk])
        return result


_transform = _interp.FunctionRewriter._transform_ast
_interp.FunctionRewriter._transform_ast = lambda self, src: _ast.fix_missing_locations(
    _BoolOps().visit(_transform(self, src)))


def _tdiff_bool_op(op, a, b):  # on tensors, elementwise logical and / or, as the compiler does
    if not isinstance(a, _tl.core.tensor):
        return (a and b()) if op == "and" else (a or b())
    other = b()
    _used("tensor-and-or")
    if not isinstance(other, _tl.core.tensor):
        other = _tl.full((), bool(other), _tl.int1)
    return a.logical_and(other) if op == "and" else a.logical_or(other)
'''

_SHIM_CODE["nan-minmax"] = '''
def _stock_nan():
    one, two = (_interp.TensorHandle(np.array([v], np.float32), _tl.float32) for v in (np.nan, 1.0))
    try:
        return bool(np.isnan(np.asarray(_B.create_maxnumf(_interp.interpreter_builder, one, two).data)).any())
    except Exception:
        return False


def _num_minmax(op, propagating):  # maxnum / minnum: a NaN operand loses, as compiled code does
    def create(self, lhs, rhs):
        if not any(np.isnan(bf16_to_f32(h.data) if _bf16(h) else np.asarray(h.data, np.float64)).any()
                   for h in (lhs, rhs) if np.asarray(h.data).dtype.kind == "f" or _bf16(h)):
            return self.binary_op(lhs, rhs, op)
        _used("nan-minmax")
        out = self.binary_op(lhs, rhs, op)
        check = globals().get("is_poison_nan")  # a masked lane's poison stands for any value: it goes on
        if check is not None:
            shape = np.shape(out.data)
            where = np.zeros(shape, bool)
            for h in (lhs, rhs):
                where |= np.broadcast_to(check(h.data, h.dtype.scalar), shape)
            if where.any():
                out.data = np.where(where, self.binary_op(lhs, rhs, propagating).data, out.data)
        return out

    return create


if _stock_nan():
    _B.create_maxnumf, _B.create_minnumf = _num_minmax(np.fmax, np.maximum), _num_minmax(np.fmin, np.minimum)
'''

_SHIM_CODE["fma-rounding"] = '''
def _fma_once(x, y, z, out):  # x * y + z rounded once (the float64 sum rounded to odd, then to the type)
    with np.errstate(all="ignore"):
        p = x.astype(np.float64) * y.astype(np.float64)
        c = z.astype(np.float64)
        s = p + c
        bb = s - p
        e = (p - (s - bb)) + (c - bb)
        nudge = np.isfinite(s) & np.isfinite(e) & (e != 0) & ((s.view(np.uint64) & np.uint64(1)) == 0)
        s = np.where(nudge, np.nextafter(s, np.where(e > 0, np.inf, -np.inf)), s)
        return s.astype(out)


def _fused(stock):
    def create_fma(self, x, y, z):
        res = stock(self, x, y, z)
        data = np.asarray(res.data)
        if data.dtype not in (np.float32, np.float16):
            return res
        once = _fma_once(*(np.broadcast_to(np.asarray(h.data), data.shape) for h in (x, y, z)), data.dtype)
        if not np.array_equal(once.view(np.uint8), np.ascontiguousarray(data).view(np.uint8)):
            _used("fma-rounding")
        return _interp.TensorHandle(once, res.dtype)

    return create_fma


_B.create_fma = _fused(_B.create_fma)
'''

#: libdevice: the table (tests compare it with tdiff's), then the stubs replaced
_LIBDEVICE_TABLE = '''
import math as _math


def _scalar_fn(f):
    vec = np.vectorize(lambda v: f(v) if not np.isnan(v) else np.nan, otypes=[np.float64])
    return lambda x: vec(x) if np.size(x) else np.asarray(x, np.float64)


_LIBDEVICE = {}  # name -> (numpy function on float64 values, result is an int32 predicate)
for _names, _fn in (
    ("abs", np.abs), ("floor", np.floor), ("ceil", np.ceil), ("trunc", np.trunc), ("rint nearbyint", np.rint),
    ("round", lambda x: np.sign(x) * np.floor(np.abs(x) + 0.5)),
    ("sqrt sqrt_rn sqrt_rz sqrt_rd sqrt_ru", np.sqrt), ("rsqrt rsqrt_rn", lambda x: 1 / np.sqrt(x)),
    ("exp fast_expf", np.exp), ("exp2", np.exp2), ("exp10 fast_exp10f", lambda x: np.power(10.0, x)),
    ("expm1", np.expm1), ("log fast_logf", np.log), ("log2 fast_log2f", np.log2), ("log10 fast_log10f", np.log10),
    ("log1p", np.log1p), ("sin fast_sinf", np.sin), ("cos fast_cosf", np.cos), ("tan fast_tanf", np.tan),
    ("sinpi", lambda x: np.sin(np.pi * x)), ("cospi", lambda x: np.cos(np.pi * x)), ("asin", np.arcsin),
    ("acos", np.arccos), ("atan", np.arctan), ("sinh", np.sinh), ("cosh", np.cosh), ("tanh fast_tanhf", np.tanh),
    ("asinh", np.arcsinh), ("acosh", np.arccosh), ("atanh", np.arctanh), ("erf", _scalar_fn(_math.erf)),
    ("erfc", _scalar_fn(_math.erfc)), ("lgamma", _scalar_fn(_math.lgamma)), ("tgamma", _scalar_fn(_math.gamma)),
    ("cbrt", np.cbrt), ("rcbrt", lambda x: 1 / np.cbrt(x)), ("saturatef", lambda x: np.clip(x, 0.0, 1.0)),
    ("rcp_rn rcp_rz rcp_rd rcp_ru", lambda x: 1 / x), ("pow fast_powf powf", np.power), ("atan2", np.arctan2),
    ("hypot", np.hypot), ("rhypot", lambda x, y: 1 / np.hypot(x, y)), ("fmod", np.fmod),
    ("remainder", lambda x, y: x - y * np.rint(x / y)), ("copysign", np.copysign),
    ("fdim", lambda x, y: np.maximum(x - y, 0.0)), ("nextafter", np.nextafter), ("fmin", np.fmin),
    ("fmax", np.fmax), ("div_rn div_rz div_rd div_ru fast_dividef", np.divide),
    ("add_rn add_rz add_rd add_ru", np.add), ("sub_rn sub_rz sub_rd sub_ru", np.subtract),
    ("mul_rn mul_rz mul_rd mul_ru", np.multiply), ("fma fma_rn fma_rz fma_rd fma_ru", lambda x, y, z: x * y + z),
):
    for _name in _names.split():
        _LIBDEVICE[_name] = (_fn, False)
for _names, _fn in (("isnan", np.isnan), ("isinf", np.isinf), ("finitef isfinited", np.isfinite),
                    ("signbit", np.signbit)):
    for _name in _names.split():
        _LIBDEVICE[_name] = (_fn, True)
'''

_SHIM_CODE["libdevice"] = _LIBDEVICE_TABLE + '''

def _libdevice(name, fn, predicate):
    def shim(*args, **_):  # the function in float64 on the values, the result in the arguments' float type
        _used("libdevice")
        tensors = [a for a in args if isinstance(a, _tl.core.tensor)]
        like = next((t for t in tensors if t.dtype.is_floating()), tensors[0] if tensors else None)
        handles = [a.handle if isinstance(a, _tl.core.tensor) else
                   _interp.TensorHandle(np.array([float(a)], np.float32), _tl.float32) for a in args]
        vals = [bf16_to_f32(h.data).astype(np.float64) if _bf16(h) else np.asarray(h.data, np.float64)
                for h in handles]
        with np.errstate(all="ignore"):
            out = np.asarray(fn(*vals))
        dt = _tl.int32 if predicate else (like.dtype if like is not None else _tl.float32)
        if predicate:
            data = out.astype(np.int32)
        elif dt == _tl.bfloat16:
            data = f32_to_bf16(out.astype(np.float32))
        else:
            data = out.astype({16: np.float16, 32: np.float32, 64: np.float64}[dt.primitive_bitwidth])
        ty = _tl.block_type(dt, list(data.shape)) if data.ndim and like is not None and like.type.is_block() else dt
        return _tl.core.tensor(_interp.TensorHandle(data, dt), ty)

    shim.__name__ = shim.__qualname__ = name
    return shim


# the stubs (triton.language.extra.libdevice, whose bodies are `...`) and the backend's `@core.extern` functions,
# replaced before the kernels below import them
import importlib as _importlib

for _mod in ("triton.language.extra.libdevice", "triton.language.extra.cuda.libdevice"):
    try:
        _m = _importlib.import_module(_mod)
    except ImportError:
        continue
    for _name, (_fn, _pred) in _LIBDEVICE.items():
        if callable(getattr(_m, _name, None)):
            setattr(_m, _name, _libdevice(_name, _fn, _pred))
'''

_RUNTIME = r'''

# ------------------------------------------------------------------ running it
CANARY = 0xA5


def _array(spec):
    """The carrier values of an encoded array (numpy)."""
    dt = getattr(torch, spec["dtype"])
    if "sidecar" in spec:
        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), SIDECAR)
        raw = torch.from_numpy(np.load(path, allow_pickle=False)[spec["sidecar"]].copy())
        return raw if raw.dtype == dt else raw.view(dt)
    if dt.is_floating_point:
        return torch.tensor(spec["values"], dtype=torch.float64).to(dt)
    return torch.tensor(spec["values"], dtype=dt)


def _guarded(spec, device):
    """A storage inside guard bands of canary bytes: (typed storage, the whole uint8 buffer)."""
    t = _array(spec).reshape(-1)
    raw = t.contiguous().view(torch.uint8)
    band = torch.full((GUARD,), CANARY, dtype=torch.uint8)
    buf = torch.cat([band, raw, band]).to(device)
    return buf[GUARD:GUARD + raw.numel()].view(t.dtype), buf


def _view(storage, offset, shape, strides):
    return storage.as_strided(tuple(shape), tuple(strides), storage.storage_offset() + offset)


def run(device, traced=False, options=None):
    """Rebuild the inputs on `device`, make the recorded launches (with a compiled variant's launch
    `options` on top); each target's values, and what the launches broke (guard bands, gaps, and with
    `traced` the tracer's findings)."""
    made, buffers = {}, {}
    storages = {}
    for name, spec in INPUTS.items():
        storages[name], buffers[name] = _guarded(spec, device)
    tracer = _Tracer(storages) if traced else None
    for i, launch in enumerate(LAUNCHES):
        def arg(a, key):
            kind = a["kind"]
            label = launch["names"][int(key)] if key.isdigit() and int(key) < len(launch["names"]) else key
            if kind == "input":
                return _view(storages[a["name"]], a["offset"], a["shape"], a["strides"])
            if kind == "tensor":
                made[(i, key)] = st = _array(a).to(device)
                if tracer is not None:
                    tracer.add(f"<argument {label} of launch {i}>", st)
                return _view(st, a["offset"], a["shape"], a["strides"])
            if kind == "float":
                return float.fromhex(a["value"])
            if kind == "dtype":
                return getattr(torch, a["value"].split(".")[-1])
            if kind == "tl_dtype":  # a Triton dtype (a constexpr argument such as `dtype=tl.float32`)
                import triton.language

                return getattr(triton.language, a["value"])
            if kind == "tuple":
                return tuple(arg(x, f"{key}.{j}") for j, x in enumerate(a["items"]))
            return a["value"]

        args = [arg(a, str(j)) for j, a in enumerate(launch["args"])]
        kwargs = {k: arg(a, k) for k, a in launch["kwargs"].items()}
        if device != "cpu":
            kwargs.update(launch["options"])
            kwargs.update(options or {})
        if tracer is not None:
            tracer.launch = i
        KERNELS[launch["kernel"]][tuple(launch["grid"])](*args, **kwargs)
    if device != "cpu":
        torch.cuda.synchronize()
    out = {"targets": {}, "findings": []}
    for target, where in TARGETS.items():
        st = storages[where["name"]] if where["kind"] == "input" else made[(where["launch"], where["arg"])]
        out["targets"][target] = _view(st, where["offset"], where["shape"], where["strides"]).double().cpu().numpy()
    for name, buf in buffers.items():
        host = buf.cpu().numpy()
        damaged = int((host[:GUARD] != CANARY).sum() + (host[len(host) - GUARD:] != CANARY).sum())
        if damaged:
            out["findings"].append({"kind": "guard", "targets": [name],
                                    "text": f"{damaged} guard-band byte(s) around `{name}` overwritten"})
        st = storages[name].cpu()
        before = _array(INPUTS[name]).reshape(-1)
        inside = torch.zeros(st.numel(), dtype=torch.bool)
        v = VIEWS[name]
        if st.numel():
            idx = torch.arange(st.numel()).as_strided(tuple(v["shape"]), tuple(v["strides"]), v["offset"])
            inside[idx.reshape(-1)] = True
        changed = (st.view(torch.uint8).reshape(st.numel(), -1) != before.contiguous().view(torch.uint8)
                   .reshape(st.numel(), -1)).any(dim=1) & ~inside
        if changed.any():
            out["findings"].append({"kind": "gap", "targets": [name], "text": f"{int(changed.sum())} element(s) of "
                                    f"the storage of `{name}` outside its view changed"})
    if tracer is not None:
        out["findings"] += tracer.findings()
    return out


class _Tracer:
    """Under TRITON_INTERPRET=1: accesses outside every allocation, cross-program conflicts without
    atomics within a launch (data races), and float-to-int casts out of range."""

    def __init__(self, storages):
        import triton.runtime.interpreter as interp

        self.regions, self.found, self.launch, self.seen = [], [], 0, {}
        self.atomic_sync = False
        self.inside = {}
        for name, st in storages.items():
            self.add(name, st)
            v = VIEWS[name]
            mask = np.zeros(st.numel(), bool)
            if st.numel() and all(v["shape"]):
                idx = np.arange(st.numel()).reshape(-1)
                view = np.lib.stride_tricks.as_strided(idx[v["offset"]:], shape=tuple(v["shape"]),
                                                       strides=tuple(8 * x for x in v["strides"]))
                mask[view.reshape(-1)] = True
            self.inside[name] = mask
        b, self.builder = interp.InterpreterBuilder, interp.interpreter_builder
        load, store, rmw, cas = b.create_masked_load, b.create_masked_store, b.create_atomic_rmw, b.create_atomic_cas
        tracer = self

        def traced_load(s, ptrs, mask, *rest):
            tracer.access("load", ptrs, mask)
            return load(s, ptrs, mask, *rest)

        def traced_store(s, ptrs, value, mask, *rest):
            tracer.access("store", ptrs, mask)
            return store(s, ptrs, value, mask, *rest)

        def traced_rmw(s, op, ptr, val, mask, *rest):
            if "XCHG" in str(op) or val.data.dtype.kind != "f":
                tracer.atomic_sync = True
            tracer.access("atomic", ptr, mask)
            return rmw(s, op, ptr, val, mask, *rest)

        def traced_cas(s, ptr, cmp, val, *rest):
            tracer.atomic_sync = True
            tracer.access("atomic", ptr, None)
            return cas(s, ptr, cmp, val, *rest)

        b.create_masked_load, b.create_masked_store = traced_load, traced_store
        b.create_atomic_rmw, b.create_atomic_cas = traced_rmw, traced_cas
        for name in ("create_fp_to_si", "create_fp_to_ui"):
            orig = getattr(b, name)

            def cast(s, src, dst, _orig=orig, _u=name.endswith("ui")):
                data = np.asarray(src.data)
                if data.dtype.kind == "f":
                    bits = dst.scalar.primitive_bitwidth
                    lo, hi = (0, 2.0 ** bits) if _u else (-(2.0 ** (bits - 1)), 2.0 ** (bits - 1))
                    with np.errstate(invalid="ignore"):
                        bad = ~np.isfinite(data) | (np.trunc(data) < lo) | (np.trunc(data) >= hi)
                    if bad.any():
                        tracer.found.append({"kind": "ub", "targets": [], "text": f"float-to-int{bits} cast of "
                                             f"{data[bad].reshape(-1)[0]!r} (out of range) in program "
                                             f"{tracer.builder.grid_idx}"})
                return _orig(s, src, dst)

            setattr(b, name, cast)

    def add(self, name, st):  # the storage itself: its guard bands are outside every allocation
        self.regions.append((name, st.data_ptr(), st.numel() * st.element_size(), st.element_size()))

    def access(self, op, ptrs, mask):
        addrs = np.asarray(ptrs.data).astype(np.uint64).reshape(-1)
        if mask is not None:
            addrs = addrs[np.broadcast_to(np.asarray(mask.data, bool), np.shape(ptrs.data)).reshape(-1)]
        pid = tuple(int(v) for v in self.builder.grid_idx)
        inside = np.zeros(addrs.shape, bool)
        for name, base, nbytes, size in self.regions:
            hit = (addrs >= base) & (addrs < base + nbytes)
            inside |= hit
            if not hit.any():
                continue
            elems = np.unique((addrs[hit] - np.uint64(base)) // np.uint64(size)).astype(np.int64)
            if name in self.inside and (~self.inside[name][elems]).any():
                self.found.append({"kind": "gap" if op != "load" else "gap-read", "targets": [name],
                                   "text": f"program {pid} {'wrote' if op != 'load' else 'loaded'} "
                                   f"{int((~self.inside[name][elems]).sum())} element(s) of the storage of "
                                   f"`{name}` outside its view"})
            if op == "atomic":
                continue
            for e in elems.tolist():
                key = (self.launch, name, e)
                readers, writer = self.seen.setdefault(key, [set(), None])
                if op == "load":
                    if writer is not None and writer != pid:
                        self.race(name, e, writer, pid, "read of an element another program wrote")
                    readers.add(pid)
                else:
                    if writer is not None and writer != pid:
                        self.race(name, e, writer, pid, "two programs wrote the same element")
                    other = readers - {pid}
                    if other:
                        self.race(name, e, min(other), pid, "write of an element another program read")
                    self.seen[key][1] = pid
        if not inside.all():
            self.found.append({"kind": "oob", "targets": [], "text": f"program {pid} tried to {op} "
                               f"{int((~inside).sum())} element(s) outside every allocation"})

    def race(self, name, e, first, second, what):
        self.found.append({"kind": "race", "targets": [name], "text": f"{what}: programs {first} and {second}, "
                           f"element {e} of the storage of `{name}` (launch {self.launch})"})

    def findings(self):
        out, seen = [], set()
        for f in self.found:
            if f["kind"] == "race" and self.atomic_sync:
                continue  # programs synchronize through atomics: not judged as races
            key = (f["kind"], tuple(f["targets"]))
            if key not in seen:
                seen.add(key)
                out.append(f)
        return out


def run_side(side):
    """Run one side in a fresh process (the interpreter with TRITON_INTERPRET=1), under TIMEOUT."""
    kind = side.split(":")[0].rstrip("'").split("[")[0]
    if kind == "compiled" and not torch.cuda.is_available():
        return None
    if kind not in ("compiled", "interpreter") or (side in VARIANTS and VARIANTS[side] is None):
        return None
    env = dict(os.environ)
    if kind == "interpreter":
        env["TRITON_INTERPRET"] = "1"
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "out.npz")
        try:
            p = subprocess.run([sys.executable, os.path.abspath(__file__), "--side", kind, out, side], env=env,
                               capture_output=True, text=True, timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            return {"error": f"timeout: no result within {TIMEOUT:g} s"}
        if p.returncode != 0 or not os.path.exists(out):
            return {"error": ((p.stdout + p.stderr).strip().splitlines() or ["failed"])[-1]}
        data = np.load(out, allow_pickle=False)
        with open(out + ".json") as f:
            extra = json.load(f)
        return {"targets": {k: data[k] for k in data.files}, "findings": extra["findings"], "shims": extra["shims"]}


def recorded(side):
    rec = RECORDED.get(side)
    if rec is None or side in VARIANTS:  # a variant's recorded result would show a divergence even once fixed
        return None
    if "error" in rec:
        return {"error": rec["error"]}
    return {"targets": {t: _array(v).double().reshape(v["shape"]).numpy() for t, v in rec.items()}, "findings": []}


def worked_around(side, got):
    """Print what tdiff's interpreter shims did in this side's run (stock TRITON_INTERPRET=1 does not)."""
    if not side.startswith("interpreter"):
        return
    for name, uses in sorted(((got or {}).get("shims") or {}).items()):
        print(f"  {side} worked around {name} ({uses} use(s)): {SHIMS.get(name, name)}")
    if SHIMS_MISSING:
        print(f"  note: tdiff's interpreter also used {', '.join(SHIMS_MISSING)}, which this reproducer does not "
              "provide: stock TRITON_INTERPRET=1 may fail or compute differently here")


def result(side):
    got = run_side(side)
    if got is not None:
        return got, "ran here"
    got = recorded(side)
    return got, "recorded" if got is not None else "cannot run here"


def close(a, b, tol):
    nan_a, nan_b = np.isnan(a), np.isnan(b)
    if tol["exact"]:
        return ((a == b) & (np.signbit(a) == np.signbit(b))) | (nan_a & nan_b)
    scale = _array(tol["scales"]).double().numpy().reshape(a.shape) if "scales" in tol else 0.0
    with np.errstate(invalid="ignore", over="ignore"):
        ok = np.abs(a - b) <= tol["atol"] + tol["rtol"] * np.minimum(np.abs(a), np.abs(b)) + tol["scale"] * scale
    ok = np.where(np.isinf(a) | np.isinf(b), a == b, ok)
    ok = np.where(nan_a | nan_b, nan_a & nan_b, ok)
    if tol["signed_zero"]:
        ok = np.where((a == 0) & (b == 0), np.signbit(a) == np.signbit(b), ok)
    if "legit" in tol:  # the run let these pass: inputs at the dtype's limits overflowed on the way
        legit = _array(tol["legit"]).numpy().reshape(a.shape)
        edge = ~np.isfinite(a) | ~np.isfinite(b)
        ok = ok | (legit & edge)
    return ok


def show(kind, targets, text):
    print(f"{text}")
    print("TDIFF-DIVERGENCE " + json.dumps({"kind": kind, "targets": targets}))


def main():
    if len(sys.argv) in (4, 5) and sys.argv[1] == "--side":  # --side KIND OUT [SIDE: a compiled variant's label]
        got = run("cpu" if sys.argv[2] == "interpreter" else "cuda", traced=sys.argv[2] == "interpreter",
                  options=(VARIANTS.get(sys.argv[4]) if len(sys.argv) == 5 else None) or {})
        np.savez(sys.argv[3], **got["targets"])
        with open(sys.argv[3] + ".json", "w") as f:
            json.dump({"findings": got["findings"], "shims": SHIMS_USED}, f)
        return 0
    if KIND == "values":
        if PAIR[0] == PAIR[1]:  # nondeterminism: the same side, run twice
            runs = [(run_side(PAIR[0]), "ran here"), (run_side(PAIR[0]), "ran here again")]
        else:
            runs = [result(side) for side in PAIR]
        for side, (got, how) in zip(PAIR, runs):
            print(f"{side}: {how}" + (f" - failed: {got['error']}" if got and "error" in got else ""))
            worked_around(side, got)
        a, b = (got for got, _ in runs)
        if a is None or b is None or all(how != "ran here" and how != "ran here again" for _, how in runs):
            print("neither side can run here (no GPU?): nothing to reproduce")
            return 2
        if "error" in a or "error" in b:
            print("a side failed, so the values cannot be compared here")
            return 3
        found = []
        for target, tol in TOLERANCE.items():
            x, y = a["targets"][target], b["targets"][target]
            ok = close(x, y, tol)
            if ok.all():
                print(f"{target}: equal within tolerance")
                continue
            found.append(target)
            bad = np.argwhere(~ok)
            i = tuple(int(v) for v in bad[0]) if bad.size else ()
            print(f"{target}: {int((~ok).sum())} of {ok.size} elements differ; first at {i}: "
                  f"{PAIR[0]} = {float(x[i])!r}, {PAIR[1]} = {float(y[i])!r}")
        if found:
            show("values", found, f"DIVERGENCE: {PAIR[0]} and {PAIR[1]} differ beyond tdiff's tolerance")
            return 1
        return 0
    got, how = result(SIDE)
    print(f"{SIDE}: {how}")
    worked_around(SIDE, got)
    if got is None or how != "ran here":
        print(f"{SIDE} cannot run here (no GPU?): nothing to reproduce")
        return 2
    if KIND == "error":
        if "error" in got:
            show("error", [SIDE], f"DIVERGENCE: {SIDE} failed: {got['error']}")
            return 1
        print(f"{SIDE} ran without error")
        return 0
    if "error" in got:
        print(f"{SIDE} failed: {got['error']}")
        return 3
    found = [f for f in got["findings"] if f["kind"] == KIND or {f["kind"], KIND} == {"oob", "guard"}]
    for f in found:
        show(f["kind"], f["targets"], f"DIVERGENCE: {f['text']}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
'''
