"""Standalone reproducers: one Python file (plus an .npz for large inputs) that shows a divergence.

The file needs only triton, torch and numpy. It runs the compiled kernel where a GPU is present
and Triton's interpreter (TRITON_INTERPRET=1, in a subprocess) everywhere; a side that cannot run
on the machine is replaced by its recorded result. It exits 1 while the divergence is present
and 0 once fixed. A reproducer is kept only after it reproduced once in a fresh process.
"""

from __future__ import annotations

import datetime
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
from .case import Case
from .compare import Comparison, storage_values
from .outcome import Outcome, ReturnedTensor, returned_at
from .source import Collector
from .verdict import Verdict

INLINE_LIMIT = 512  # elements; larger arrays go to the sidecar file


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


def _launch_args(outcome: Outcome, data: _Data) -> list[dict]:
    out = []
    for i, rec in enumerate(outcome.launches):
        def enc(a: dict, key: str, _i: int = i) -> dict:
            if a.get("kind") == "tensor":
                storage = a.get("storage")
                d = data.encode(f"launch{_i}_{key}", storage, a["dtype"])
                return {"kind": "tensor", **d, "offset": a["offset"], "shape": a["shape"], "strides": a["strides"]}
            return {k: v for k, v in a.items() if k != "storage"}

        out.append({
            "kernel": rec.kernel,
            "grid": list(rec.grid),
            "args": [enc(a, str(j)) for j, a in enumerate(rec.args)],
            "kwargs": {k: enc(a, k) for k, a in rec.kwargs.items()},
            "options": {k: v for k, v in (rec.config or {}).items() if isinstance(v, (int, bool, str, float))},
        })
    return out


def _recorded(o: Outcome, case: Case, targets: dict[str, dict], data: _Data) -> dict:
    if o.error is not None:
        return {"error": o.error.summary()}
    out: dict[str, Any] = {}
    tensors = case.tensors()
    for target in targets:
        if target in tensors and target in o.storages:
            arg = tensors[target]
            st = o.storages[target]
            raw = storage_values(st)[arg.view_index()]
            out[target] = {**data.encode(f"{o.backend}_{target}", raw, st.dtype), "shape": list(arg.shape)}
        else:
            node = returned_at(o.returned, target)
            if isinstance(node, ReturnedTensor):
                out[target] = {**data.encode(f"{o.backend}_{target}", node.values, node.dtype),
                               "shape": list(node.shape)}
    return out


def _targets(cmp: Comparison, case: Case, runner: Outcome) -> dict[str, dict]:
    tensors = case.tensors()
    out: dict[str, dict] = {}
    names = [m.target for m in cmp.mismatches if m.kind == "values" and m.target]
    if not names and any(m.kind == "error" for m in cmp.mismatches):  # one side failed: compare everything
        names = list(tensors) + list(runner.returned_args)
    for t in dict.fromkeys(names):
        if t in tensors:
            a = tensors[t]
            out[t] = {"kind": "input", "name": t, "offset": a.offset, "shape": list(a.shape),
                      "strides": list(a.strides)}
        elif t in runner.returned_args:
            out[t] = {"kind": "arg", **runner.returned_args[t]}
    return out


def _tolerances(cmp: Comparison, targets: dict[str, dict]) -> dict[str, dict]:
    out = {}
    for t in targets:
        m = next((m for m in cmp.mismatches if m.target == t and m.tol is not None), None)
        tol = m.tol if m else None
        out[t] = ({"exact": tol.exact, "rtol": tol.rtol, "atol": tol.atol, "scale": tol.scale,
                   "signed_zero": tol.signed_zero} if tol else
                  {"exact": False, "rtol": 1e-5, "atol": 1e-8, "scale": 1e-5, "signed_zero": False})
    return out


def render(check: Any, case: Case, cmp: Comparison, verdict: Verdict | None, pair: tuple[str, str]) -> tuple[str, dict]:
    """The reproducer's text and its sidecar arrays."""
    a, b = cmp.a, cmp.b
    runners = [o for o in (a, b) if o.launches]
    runner = next((o for o in runners if o.backend.startswith("compiled")), runners[0] if runners else None)
    if runner is None:
        raise ReproError("no backend recorded a kernel launch: there is nothing to replay")
    data = _Data()
    inputs = {name: data.encode(f"input_{name}", arg.storage, arg.dtype)
              for name, arg in case.tensors().items()}
    targets = _targets(cmp, case, runner)
    if not targets:
        raise ReproError("the divergence is not in a tensor the reproducer can compare")
    launches = _launch_args(runner, data)
    recorded = {o.backend: _recorded(o, case, targets, data) for o in (a, b)}
    col = Collector()
    kernels_by_name: dict[str, Any] = {}
    for rec in runner.launches:
        jit = _find_jit(check, rec.kernel, rec.module)
        kernels_by_name[rec.kernel] = jit
        col.add(jit)
    device = next((o.device for o in (a, b) if o.device), "")
    v = versions()
    header = [
        f'"""tdiff reproducer for {check.id}',
        "",
        f"Verdict: {verdict.label if verdict else 'not judged'}",
        *(f"  {r}" for r in (verdict.reasons[:3] if verdict else [])),
        f"Divergence: {cmp.summary()}",
        f"Case: {case.describe()}",
        f"Found {datetime.date.today().isoformat()} with triton {v['triton']}, torch {v['torch']}, "
        f"numpy {v['numpy']}, python {v['python']}" + (f", {device}" if device else ""),
        "",
        "Run:  python repro.py   (exit status 1 while the divergence is present, 0 once it is fixed)",
        "The compiled side runs where a CUDA GPU is present; Triton's interpreter runs everywhere",
        "(TRITON_INTERPRET=1, in a subprocess). A side that cannot run here is replaced by its",
        "recorded result. Tensors are rebuilt with their exact strides and storage offsets.",
        '"""',
    ]
    body = "\n".join(header) + "\n" + _PRELUDE + col.text() + "\n\n"
    body += "KERNELS = {" + ", ".join(f"{n!r}: {n}" for n in kernels_by_name) + "}\n\n"
    body += "# ------------------------------------------------------------------ the case\n"
    body += f"PAIR = {_literal(tuple(pair))}\n"
    body += f"SIDECAR = {_literal('inputs.npz' if data.sidecar else None)}\n"
    body += f"INPUTS = {_literal(inputs)}\n"
    body += f"LAUNCHES = {_literal(launches)}\n"
    body += f"TARGETS = {_literal(targets)}\n"
    body += f"TOLERANCE = {_literal(_tolerances(cmp, targets))}\n"
    body += f"RECORDED = {_literal(recorded)}\n"
    body += _RUNTIME
    return body, data.sidecar


def _find_jit(check: Any, name: str, module: str) -> Any:
    jit = kernels.jit_function(check.kernel)
    if jit.fn.__name__ == name:
        return jit
    mod = sys.modules.get(module)
    for obj in vars(mod).values() if mod else ():
        if kernels.is_kernel(obj) and kernels.jit_function(obj).fn.__name__ == name:
            return kernels.jit_function(obj)
    raise ReproError(f"kernel {name!r} launched by the check was not found in module {module!r}")


def write(folder: Path, check: Any, case: Case, cmp: Comparison, verdict: Verdict | None, pair: tuple[str, str],
          validate: bool = True, timeout: float = 600.0) -> Path:
    """Write `folder/repro.py` (and `inputs.npz`); with `validate`, keep it only if it reproduces."""
    text, sidecar = render(check, case, cmp, verdict, pair)
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
            try:
                proc = subprocess.run([sys.executable, "repro.py"], capture_output=True, text=True, timeout=timeout,
                                      cwd=str(tmp))
            except subprocess.TimeoutExpired:
                raise ReproError(f"it did not finish in {timeout:.0f} s in a fresh process") from None
            if proc.returncode != 1:
                tail = (proc.stdout + proc.stderr).strip().splitlines()[-6:]
                raise ReproError(f"it did not reproduce in a fresh process (exit {proc.returncode}): "
                                 + " | ".join(tail))
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

# ------------------------------------------------------------------ kernels
'''

_RUNTIME = r'''

# ------------------------------------------------------------------ running it
def _values(spec, device):
    dt = getattr(torch, spec["dtype"])
    if "sidecar" in spec:
        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), SIDECAR)
        raw = torch.from_numpy(np.load(path, allow_pickle=False)[spec["sidecar"]].copy())
        t = raw if raw.dtype == dt else raw.view(dt)
    elif dt.is_floating_point:
        t = torch.tensor(spec["values"], dtype=torch.float64).to(dt)
    else:
        t = torch.tensor(spec["values"], dtype=dt)
    return t.to(device)


def _view(storage, offset, shape, strides):
    return storage.as_strided(tuple(shape), tuple(strides), offset)


def run(device):
    """Rebuild the inputs on `device`, make the recorded launches, return each target's values."""
    storages = {name: _values(spec, device) for name, spec in INPUTS.items()}
    made = {}
    for i, launch in enumerate(LAUNCHES):
        def arg(a, key):
            kind = a["kind"]
            if kind == "input":
                return _view(storages[a["name"]], a["offset"], a["shape"], a["strides"])
            if kind == "tensor":
                made[(i, key)] = st = _values(a, device)
                return _view(st, a["offset"], a["shape"], a["strides"])
            if kind == "float":
                return float.fromhex(a["value"])
            if kind == "dtype":
                return getattr(torch, a["value"].split(".")[-1])
            if kind == "tuple":
                return tuple(arg(x, key) for x in a["items"])
            return a["value"]

        args = [arg(a, str(j)) for j, a in enumerate(launch["args"])]
        kwargs = {k: arg(a, k) for k, a in launch["kwargs"].items()}
        if device != "cpu":
            kwargs.update(launch["options"])
        KERNELS[launch["kernel"]][tuple(launch["grid"])](*args, **kwargs)
    if device != "cpu":
        torch.cuda.synchronize()
    out = {}
    for target, where in TARGETS.items():
        st = storages[where["name"]] if where["kind"] == "input" else made[(where["launch"], where["arg"])]
        out[target] = _view(st, where["offset"], where["shape"], where["strides"]).double().cpu().numpy()
    return out


def interpreted():
    """Run this file again with TRITON_INTERPRET=1 and collect what it wrote."""
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "out.npz")
        env = dict(os.environ, TRITON_INTERPRET="1")
        p = subprocess.run([sys.executable, os.path.abspath(__file__), "--interpret", out], env=env,
                           capture_output=True, text=True)
        if p.returncode != 0:
            return {"error": (p.stdout + p.stderr).strip().splitlines()[-1:] or ["failed"]}
        data = np.load(out, allow_pickle=False)
        return {k: data[k] for k in data.files}


def recorded(side):
    rec = RECORDED[side]
    if "error" in rec:
        return {"error": rec["error"]}
    return {t: _values(v, "cpu").double().reshape(v["shape"]).numpy() for t, v in rec.items()}


def live(side):
    kind = side.split(":")[0]
    try:
        if kind == "compiled" and torch.cuda.is_available():
            return run("cuda"), "ran here"
        if side == "interpreter":
            return interpreted(), "ran here"
    except Exception as exc:  # the kernel failed on this side
        return {"error": f"{type(exc).__name__}: {exc}"}, "ran here"
    return recorded(side), "recorded"


def close(a, b, tol):
    nan_a, nan_b = np.isnan(a), np.isnan(b)
    if tol["exact"]:
        ok = (a == b) & (np.signbit(a) == np.signbit(b))
        return ok | (nan_a & nan_b)
    with np.errstate(invalid="ignore", over="ignore"):
        fa, fb = np.abs(a[np.isfinite(a)]), np.abs(b[np.isfinite(b)])
        scale = min(fa.max() if fa.size else 0.0, fb.max() if fb.size else 0.0)
        ok = np.abs(a - b) <= tol["atol"] + tol["rtol"] * np.minimum(np.abs(a), np.abs(b)) + tol["scale"] * scale
    ok = np.where(np.isinf(a) | np.isinf(b), a == b, ok)
    return np.where(nan_a | nan_b, nan_a & nan_b, ok)


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--interpret":
        np.savez(sys.argv[2], **run("cpu"))
        return 0
    results, hows = {}, []
    for side in PAIR:
        results[side], how = live(side)
        hows.append(how)
        print(f"{side}: {how}" + (f" - failed: {results[side]['error']}" if "error" in results[side] else ""))
    if all(how == "recorded" for how in hows):
        print("neither side can run on this machine (no GPU?): nothing to reproduce here")
        return 2
    a, b = (results[s] for s in PAIR)
    if "error" in a or "error" in b:
        print("DIVERGENCE: only one side failed" if ("error" in a) != ("error" in b) else "both sides failed")
        return 1
    diverged = False
    for target, tol in TOLERANCE.items():
        x, y = a[target], b[target]
        ok = close(x, y, tol)
        if ok.all():
            print(f"{target}: equal within tolerance")
            continue
        diverged = True
        bad = np.argwhere(~ok)
        i = tuple(int(v) for v in bad[0]) if bad.size else ()
        print(f"DIVERGENCE in {target}: {int((~ok).sum())} of {ok.size} elements differ; "
              f"first at {i}: {PAIR[0]} = {float(x[i])!r}, {PAIR[1]} = {float(y[i])!r}")
    return 1 if diverged else 0


if __name__ == "__main__":
    sys.exit(main())
'''
