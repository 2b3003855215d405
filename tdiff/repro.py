"""Standalone reproducers: one Python file (plus an .npz for large arrays) that shows a divergence.

The file needs only triton, torch and numpy. It rebuilds every input inside guard bands with its
exact strides and storage offset, replays the recorded launches, and shows the divergence of the
kind tdiff found: values that differ beyond the run's own per-element tolerance, a side that fails
or hangs, a guard band or a gap between views written, an access outside every allocation, a data
race or an undefined cast (the interpreter side runs under a small tracer for those). The compiled
side runs where a GPU is present, the interpreter everywhere (TRITON_INTERPRET=1, in a subprocess,
with tdiff's interpreter shims where the run needed them); a side that cannot run here (the
reference, or the GPU on a CPU machine) is replaced by its recorded result. The file exits 1 while
the divergence is present, 0 once it is gone, 2 when nothing can run here. tdiff keeps a reproducer
only after it showed the same kind of divergence on the same targets in a fresh process.
"""

from __future__ import annotations

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
from pathlib import Path
from typing import Any

import numpy as np
import torch
import triton

from . import dtypes, kernels
from .backends import shims
from .case import Case
from .evidence import Evidence
from .outcome import GUARD_BYTES, Outcome
from .source import Collector
from .targets import view
from .verdict import Verdict

INLINE_LIMIT = 512  # elements; larger arrays go to the sidecar file
MARK = "TDIFF-DIVERGENCE"  # the line a reproducer prints for each divergence it shows
#: divergence kinds a replay of the recorded launches can show
REPRODUCIBLE = ("values", "error", "oob", "guard", "gap", "race", "ub")


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


def _launch_args(outcome: Outcome, data: _Data, names: dict[str, list[str]]) -> list[dict]:
    out = []
    for i, rec in enumerate(outcome.launches):
        def enc(a: dict, key: str, _i: int = i) -> dict:
            if a.get("kind") == "tensor":
                d = data.encode(f"launch{_i}_{key}", a.get("storage"), a["dtype"])
                return {"kind": "tensor", **d, "offset": a["offset"], "shape": a["shape"], "strides": a["strides"]}
            if a.get("kind") == "tuple":
                return {"kind": "tuple", "items": [enc(x, f"{key}.{j}") for j, x in enumerate(a["items"])]}
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


def _find_jit(check: Any, name: str, module: str) -> Any:
    jit = kernels.jit_function(check.kernel)
    if jit.fn.__name__ == name:
        return jit
    mod = sys.modules.get(module)
    for obj in vars(mod).values() if mod else ():
        if kernels.is_kernel(obj) and kernels.jit_function(obj).fn.__name__ == name:
            return kernels.jit_function(obj)
    raise ReproError(f"kernel {name!r} launched by the check was not found in module {module!r}")


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
    runner = next((o for o in runners if o.backend.startswith("compiled")), runners[0] if runners else None)
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
    col = Collector()
    kernels_by_name: dict[str, Any] = {}
    for rec in runner.launches:
        jit = _find_jit(check, rec.kernel, rec.module)
        kernels_by_name[rec.kernel] = jit
        col.add(jit)
    launches = _launch_args(runner, data, {n: kernels.arg_names(j) for n, j in kernels_by_name.items()})
    both = [o for o in (ev.outcomes.get(a), ev.outcomes.get(b), ev.extra.get(f"again:{a}")) if o is not None]
    recorded = {o.backend: _recorded(o, case, targets, data) for o in both}
    used = {n for o in outcomes if o.trace is not None for n in o.trace.shims}
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
        '"""',
    ]
    body = "\n".join(header) + "\n" + _PRELUDE + (_shim_source(used) if used else "")
    body += "\n# ------------------------------------------------------------------ kernels\n" + col.text() + "\n\n"
    body += "KERNELS = {" + ", ".join(f"{n!r}: {n}" for n in kernels_by_name) + "}\n\n"
    body += "# ------------------------------------------------------------------ the case\n"
    body += f"KIND = {kind!r}\n"
    body += f"PAIR = {_literal(tuple(pair))}\n"
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


def _shim_source(used: set[str]) -> str:
    """tdiff's interpreter shims, for the reproducer's TRITON_INTERPRET=1 run."""
    parts = ["\n# tdiff's interpreter shims (see tdiff.backends.shims): the run needed "
             + ", ".join(sorted(used)) + "\nif os.environ.get(\"TRITON_INTERPRET\") == \"1\":\n"]
    code = [inspect.getsource(shims.bf16_to_f32), inspect.getsource(shims.f32_to_bf16), _SHIMS]
    parts.append("".join("    " + line if line.strip() else line for c in code for line in c.splitlines(True)))
    return "".join(parts) + "\n"


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

_SHIMS = '''
import triton.language as _tl
import triton.runtime.interpreter as _interp

_cvt = _interp._implicit_cvt


def _implicit_cvt(arg):  # float arguments are fp32 scalars, as the compiler types them
    if isinstance(arg, float):
        return _tl.tensor(_interp.TensorHandle(np.array([arg], dtype=np.float32), _tl.float32), _tl.float32)
    return _cvt(arg)


_interp._implicit_cvt = _implicit_cvt
_B = _interp.InterpreterBuilder
if not hasattr(_B, "get_bf16"):
    _B.get_bf16 = lambda self, v: _interp.TensorHandle(f32_to_bf16(np.array([v], np.float32)), _tl.bfloat16)


def _bf16(h):
    return getattr(getattr(h, "dtype", None), "scalar", None) == _tl.bfloat16


def _res(out, like):
    return _interp.TensorHandle(out, like.dtype.scalar) if out.dtype == np.bool_ else \\
        _interp.TensorHandle(f32_to_bf16(out), _tl.bfloat16)


_bin, _ter, _un, _fma = _B.binary_op, _B.ternary_op, _B.unary_op, _B.create_fma
_B.binary_op = lambda self, a, b, op: _res(op(bf16_to_f32(a.data), bf16_to_f32(b.data)), a) \\
    if _bf16(a) and _bf16(b) else _bin(self, a, b, op)
_B.ternary_op = lambda self, a, b, c, op: _res(op(*(bf16_to_f32(h.data) for h in (a, b, c))), c) \\
    if op is not np.where and all(map(_bf16, (a, b, c))) else _ter(self, a, b, c, op)
_B.unary_op = lambda self, a, op: _res(op(bf16_to_f32(a.data)), a) if _bf16(a) else _un(self, a, op)
_B.create_fma = lambda self, x, y, z: _res((bf16_to_f32(x.data).astype(np.float64) * bf16_to_f32(y.data)
                                            + bf16_to_f32(z.data)).astype(np.float32), z) \\
    if all(map(_bf16, (x, y, z))) else _fma(self, x, y, z)
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


def run(device, traced=False):
    """Rebuild the inputs on `device`, make the recorded launches; each target's values, and what
    the launches broke (guard bands, gaps, and with `traced` the tracer's findings)."""
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
            if kind == "tuple":
                return tuple(arg(x, f"{key}.{j}") for j, x in enumerate(a["items"]))
            return a["value"]

        args = [arg(a, str(j)) for j, a in enumerate(launch["args"])]
        kwargs = {k: arg(a, k) for k, a in launch["kwargs"].items()}
        if device != "cpu":
            kwargs.update(launch["options"])
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
            if op != "load" and name in self.inside and (~self.inside[name][elems]).any():
                self.found.append({"kind": "gap", "targets": [name], "text": f"program {pid} wrote "
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
    kind = side.split(":")[0].rstrip("'")
    if kind == "compiled" and not torch.cuda.is_available():
        return None
    if kind not in ("compiled", "interpreter"):
        return None
    env = dict(os.environ)
    if kind == "interpreter":
        env["TRITON_INTERPRET"] = "1"
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "out.npz")
        try:
            p = subprocess.run([sys.executable, os.path.abspath(__file__), "--side", kind, out], env=env,
                               capture_output=True, text=True, timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            return {"error": f"timeout: no result within {TIMEOUT:g} s"}
        if p.returncode != 0 or not os.path.exists(out):
            return {"error": ((p.stdout + p.stderr).strip().splitlines() or ["failed"])[-1]}
        data = np.load(out, allow_pickle=False)
        with open(out + ".json") as f:
            findings = json.load(f)
        return {"targets": {k: data[k] for k in data.files}, "findings": findings}


def recorded(side):
    rec = RECORDED.get(side)
    if rec is None:
        return None
    if "error" in rec:
        return {"error": rec["error"]}
    return {"targets": {t: _array(v).double().reshape(v["shape"]).numpy() for t, v in rec.items()}, "findings": []}


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
    if len(sys.argv) == 4 and sys.argv[1] == "--side":
        got = run("cpu" if sys.argv[2] == "interpreter" else "cuda", traced=sys.argv[2] == "interpreter")
        np.savez(sys.argv[3], **got["targets"])
        with open(sys.argv[3] + ".json", "w") as f:
            json.dump(got["findings"], f)
        return 0
    if KIND == "values":
        if PAIR[0] == PAIR[1]:  # nondeterminism: the same side, run twice
            runs = [(run_side(PAIR[0]), "ran here"), (run_side(PAIR[0]), "ran here again")]
        else:
            runs = [result(side) for side in PAIR]
        for side, (got, how) in zip(PAIR, runs):
            print(f"{side}: {how}" + (f" - failed: {got['error']}" if got and "error" in got else ""))
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
