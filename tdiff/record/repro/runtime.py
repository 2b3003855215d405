"""A reproducer's runtime: rebuild the inputs in guard bands, replay the launches, trace the interpreter
side, compare, and exit 1 while the divergence shows, 0 once it is gone, 2 when nothing can run here.

A reproducer embeds this module's source (`library.runtime_source`) after its case and the tracer (`tracer`):
the names in the block between the two `case` markers below are what the reproducer's header defines for its case (the
block is left out of the embedded source); `within` (`tdiff.core.tolerance`) and, where the interpreter
runs, the shim library (`tdiff.execute.interpreter.stock` and what it uses) are embedded too. It needs only
numpy and torch (and triton, to run kernels). `python repro.py --live` launches each kernel as imported
from its module (`LIVE`) instead of the copy in the file: how a user checks their fixed kernel.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import tempfile
from collections import Counter
from typing import Any

import numpy as np
import torch

from ...compat import compile_only
from ...core.tolerance import within
from ...execute.interpreter.stock import install
from .tracer import Tracer

# ------------------------------------------------------------------ the case (a reproducer's header sets these)
KIND = "values"  # the kind of divergence: values, error, oob, guard, gap, gap-read, race, ub
PAIR: tuple[str, ...] = ()  # the two sides compared (values), the same side twice for nondeterminism
KINDS: dict[str, str] = {}  # each side -> what it runs: compiled, interpreter, reference, compile-only, ...
VARIANTS: dict[str, Any] = {}  # compiled variants: their launch options, or None where a replay cannot run them
SIDE = ""  # the side whose own behaviour shows the divergence (errors, integrity findings)
EXPECT_TARGETS: list[str] = []
TIMEOUT = 60.0  # per side, seconds
GUARD = 256  # guard-band bytes around each input
SIDECAR: str | None = None  # large arrays: an .npz beside the file
INPUTS: dict[str, dict[str, Any]] = {}  # input name -> encoded storage
VIEWS: dict[str, dict[str, Any]] = {}  # input name -> offset, shape and strides of its view
LAUNCHES: list[dict[str, Any]] = []  # the recorded launches
TARGETS: dict[str, dict[str, Any]] = {}  # where each compared target lives
TOLERANCE: dict[str, dict[str, Any]] = {}  # the run's own tolerance for each target
RECORDED: dict[str, dict[str, Any]] = {}  # each side's recorded result, for sides that cannot run here
KERNELS: dict[str, Any] = {}  # kernel name -> the inlined kernel
LIVE: dict[str, list[str]] = {}  # kernel name -> [module, qualified name, the folder it was imported from]
SHIM_NAMES: list[str] | None = None  # the interpreter side's shims (None: no interpreter side)
POISON = False  # the interpreter side poisons masked-out lanes of loads without other=
SHIMS: dict[str, str] = {}  # shim -> what it works around
SHIMS_MISSING: list[str] = []  # shims tdiff's run used that this file does not provide
COMPILE_ARCH = 90  # a compile-only side compiles each launch for sm_<this>, without a GPU, and runs nothing
# ------------------------------------------------------------------ end of the case

CANARY = 0xA5
SHIMS_USED: Counter[str] = Counter()  # shim -> uses in this process


def _array(spec: dict[str, Any]) -> torch.Tensor:
    """The carrier values of an encoded array."""
    dt = getattr(torch, spec["dtype"])
    if "sidecar" in spec:
        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), SIDECAR or "")
        raw = torch.from_numpy(np.load(path, allow_pickle=False)[spec["sidecar"]].copy())
        return raw if raw.dtype == dt else raw.view(dt)
    if dt.is_floating_point:
        return torch.tensor(spec["values"], dtype=torch.float64).to(dt)
    return torch.tensor(spec["values"], dtype=dt)


def _guarded(spec: dict[str, Any], device: str) -> tuple[torch.Tensor, torch.Tensor]:
    """A storage inside guard bands of canary bytes: (typed storage, the whole uint8 buffer)."""
    t = _array(spec).reshape(-1)
    raw = t.contiguous().view(torch.uint8)
    band = torch.full((GUARD,), CANARY, dtype=torch.uint8)
    buf = torch.cat([band, raw, band]).to(device)
    return buf[GUARD:GUARD + raw.numel()].view(t.dtype), buf


def _view(storage: torch.Tensor, offset: int, shape: list[int], strides: list[int]) -> torch.Tensor:
    return storage.as_strided(tuple(shape), tuple(strides), storage.storage_offset() + offset)


def _live() -> bool:
    return "--live" in sys.argv


def kernel(name: str) -> Any:
    """The kernel to launch: the copy in this file, or with --live the one its module defines now."""
    if not _live():
        return KERNELS[name]
    module, qualname, root = LIVE[name]
    for folder in (root, os.getcwd()):
        if folder and folder not in sys.path:
            sys.path.insert(0, folder)
    obj: Any = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    while not hasattr(obj, "arg_names") or type(obj).__name__ not in ("JITFunction", "InterpretedFunction"):
        if not hasattr(obj, "fn"):  # the recorded launches are the @triton.jit function's own
            raise TypeError(f"{module}.{qualname} is not a @triton.jit kernel")
        obj = obj.fn  # (through @triton.autotune, @triton.heuristics and wrappers such as FlagGems' LibEntry)
    return obj


def run(device: str, traced: bool = False, options: dict[str, Any] | None = None,
        compile_only_arch: int | None = None) -> dict[str, Any]:
    """Rebuild the inputs on `device`, make the recorded launches (with a compiled variant's launch
    `options` on top); each target's values, and what the launches broke (guard bands, gaps, and with
    `traced` the tracer's findings). With `compile_only_arch`, each launch is compiled for that GPU (Triton
    compiles without one) and nothing runs: a compile error raises."""
    made, buffers, storages, bands = {}, {}, {}, {}
    for name, spec in INPUTS.items():
        storages[name], buffers[name] = _guarded(spec, device)
    tracer = Tracer(storages, VIEWS) if traced else None
    for i, launch in enumerate(LAUNCHES):
        def arg(a: dict[str, Any], key: str, i: int = i, launch: dict[str, Any] = launch) -> Any:
            kind = a["kind"]
            label = launch["names"][int(key)] if key.isdigit() and int(key) < len(launch["names"]) else key
            if kind == "input":
                return _view(storages[a["name"]], a["offset"], a["shape"], a["strides"])
            if kind == "tensor":  # an array the launch made (an output): inside guard bands as well
                st, bands[f"<argument {label} of launch {i}>"] = _guarded(a, device)
                made[(i, key)] = st
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
        if compile_only_arch is not None:
            with compile_only(compile_only_arch):
                kernel(launch["kernel"]).warmup(*args, grid=tuple(launch["grid"]), **kwargs, **launch["options"])
            continue
        kernel(launch["kernel"])[tuple(launch["grid"])](*args, **kwargs)
    if compile_only_arch is not None:
        return {"targets": {}, "findings": []}
    if device != "cpu":
        torch.cuda.synchronize()
    out: dict[str, Any] = {"targets": {}, "findings": []}
    for target, where in TARGETS.items():
        st = storages[where["name"]] if where["kind"] == "input" else made[(where["launch"], where["arg"])]
        out["targets"][target] = _view(st, where["offset"], where["shape"], where["strides"]).double().cpu().numpy()
    for name, buf in buffers.items():
        out["findings"] += _damage(name, buf, storages[name])
    for name, buf in bands.items():
        out["findings"] += _overwritten(name, buf)
    if tracer is not None:
        out["findings"] += tracer.findings()
    return out


def _overwritten(name: str, buf: torch.Tensor) -> list[dict[str, Any]]:
    """The guard bands of `name` (the whole buffer `buf`) overwritten."""
    host = buf.cpu().numpy()
    damaged = int((host[:GUARD] != CANARY).sum() + (host[len(host) - GUARD:] != CANARY).sum())
    return [{"kind": "guard", "targets": [name], "text": f"{damaged} guard-band byte(s) around `{name}` "
             "overwritten"}] if damaged else []


def _damage(name: str, buf: torch.Tensor, storage: torch.Tensor) -> list[dict[str, Any]]:
    """A guard band of `name` overwritten, or elements of its storage outside its view changed."""
    found = _overwritten(name, buf)
    st = storage.cpu()
    before = _array(INPUTS[name]).reshape(-1)
    inside = torch.zeros(st.numel(), dtype=torch.bool)
    v = VIEWS[name]
    if st.numel():
        idx = torch.arange(st.numel()).as_strided(tuple(v["shape"]), tuple(v["strides"]), v["offset"])
        inside[idx.reshape(-1)] = True
    changed = (st.view(torch.uint8).reshape(st.numel(), -1) != before.contiguous().view(torch.uint8)
               .reshape(st.numel(), -1)).any(dim=1) & ~inside
    if changed.any():
        found.append({"kind": "gap", "targets": [name], "text": f"{int(changed.sum())} element(s) of "
                      f"the storage of `{name}` outside its view changed"})
    return found


def run_side(side: str) -> dict[str, Any] | None:
    """Run one side in a fresh process (the interpreter with TRITON_INTERPRET=1), under TIMEOUT."""
    kind = KINDS.get(side, "")
    if kind == "compiled" and not torch.cuda.is_available():
        return None
    if kind not in ("compiled", "interpreter", "compile-only") or (side in VARIANTS and VARIANTS[side] is None):
        return None
    env = dict(os.environ)
    if kind == "interpreter":
        env["TRITON_INTERPRET"] = "1"
    else:
        env.pop("TRITON_INTERPRET", None)
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "out.npz")
        command = [sys.executable, os.path.abspath(__file__), "--side", kind, out, side]
        command += ["--live"] if _live() else []
        try:
            p = subprocess.run(command, env=env, capture_output=True, text=True, timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            return {"error": f"timeout: no result within {TIMEOUT:g} s"}
        if p.returncode != 0 or not os.path.exists(out):
            return {"error": ((p.stdout + p.stderr).strip().splitlines() or ["failed"])[-1]}
        data = np.load(out, allow_pickle=False)
        with open(out + ".json") as f:
            extra = json.load(f)
        return {"targets": {k: data[k] for k in data.files}, "findings": extra["findings"], "shims": extra["shims"]}


def recorded(side: str) -> dict[str, Any] | None:
    rec = RECORDED.get(side)
    if rec is None or side in VARIANTS:  # a variant's recorded result would show a divergence even once fixed
        return None
    if "error" in rec:
        return {"error": rec["error"]}
    return {"targets": {t: _array(v).double().reshape(v["shape"]).numpy() for t, v in rec.items()}, "findings": []}


def worked_around(side: str, got: dict[str, Any] | None) -> None:
    """Print what tdiff's interpreter shims did in this side's run (stock TRITON_INTERPRET=1 does not)."""
    if KINDS.get(side) != "interpreter":
        return
    for name, uses in sorted(((got or {}).get("shims") or {}).items()):
        print(f"  {side} worked around {name} ({uses} use(s)): {SHIMS.get(name, name)}")
    if SHIMS_MISSING:
        print(f"  note: tdiff's interpreter also used {', '.join(SHIMS_MISSING)}, which this reproducer does not "
              "provide: stock TRITON_INTERPRET=1 may fail or compute differently here")


def result(side: str) -> tuple[dict[str, Any] | None, str]:
    got = run_side(side)
    if got is not None:
        return got, "ran here"
    got = recorded(side)
    return got, "recorded" if got is not None else "cannot run here"


def close(a: np.ndarray, b: np.ndarray, tol: dict[str, Any]) -> np.ndarray:
    """Where a and b agree under the run's tolerance `tol` (see `within`); elements the run let pass at
    the range edge (`legit`: inputs at the dtype's limits overflowed on the way) pass here too; where a
    narrowing cast fed the target (`narrowed`), only equal values agree, as in tdiff's comparison."""
    scale = _array(tol["scales"]).double().numpy().reshape(a.shape) if "scales" in tol else 0.0
    ok = within(a, b, tol["rtol"], tol["atol"], tol["scale"], scale, tol["signed_zero"], tol["exact"])
    if "legit" in tol and not tol["exact"]:
        legit = _array(tol["legit"]).numpy().reshape(a.shape)
        ok = ok | (legit & (~np.isfinite(a) | ~np.isfinite(b)))
    if tol.get("narrowed"):  # an undeclared narrowing cast fed these values: any difference from the reference counts
        with np.errstate(invalid="ignore"):
            ok = ok & ((a == b) | (np.isnan(a) & np.isnan(b)))
    return ok


def show(kind: str, targets: list[str], text: str) -> None:
    print(f"{text}")
    print("TDIFF-DIVERGENCE " + json.dumps({"kind": kind, "targets": targets}))


def side_main(argv: list[str]) -> int:
    """`--side KIND OUT [SIDE]`: run one side here (SIDE: a compiled variant's label), write its results."""
    if argv[0] == "interpreter" and SHIM_NAMES is not None and os.environ.get("TRITON_INTERPRET") == "1":
        install(SHIM_NAMES, SHIMS_USED, POISON)
    if argv[0] == "compile-only":  # each launch compiled for COMPILE_ARCH here, none run
        try:
            got = run("cpu", compile_only_arch=COMPILE_ARCH)
        except Exception as exc:  # Triton's message: where (the source, marked), then what it rejected, last
            text = str(exc).strip()
            print(f"{type(exc).__name__}: {text}")
            print(f"{type(exc).__name__}: {text.splitlines()[-1] if text else ''}", file=sys.stderr)  # (last line)
            return 1
    else:
        got = run("cpu" if argv[0] == "interpreter" else "cuda", traced=argv[0] == "interpreter",
                  options=(VARIANTS.get(argv[2]) if len(argv) == 3 else None) or {})
    np.savez(argv[1], **got["targets"])
    with open(argv[1] + ".json", "w") as f:
        json.dump({"findings": got["findings"], "shims": dict(SHIMS_USED)}, f)
    return 0


def compare_values() -> int:
    if PAIR[0] == PAIR[1]:  # nondeterminism: the same side, run twice
        runs = [(run_side(PAIR[0]), "ran here"), (run_side(PAIR[0]), "ran here again")]
    else:
        runs = [result(side) for side in PAIR]
    for side, (got, how) in zip(PAIR, runs):
        print(f"{side}: {how}" + (f" - failed: {got['error']}" if got and "error" in got else ""))
        worked_around(side, got)
    a, b = (got for got, _ in runs)
    if a is None or b is None or all(how not in ("ran here", "ran here again") for _, how in runs):
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


def main() -> int:
    argv = [a for a in sys.argv[1:] if a != "--live"]
    if len(argv) in (3, 4) and argv[0] == "--side":  # --side KIND OUT [SIDE]
        return side_main(argv[1:])
    if _live():
        problems = {m: why for m, _, root in LIVE.values() for why in [_unimportable(m, root)] if why}
        if problems:
            print("--live: cannot import " + "; ".join(f"{m} ({why})" for m, why in sorted(problems.items()))
                  + " here: run from where it is importable, or put its folder on PYTHONPATH; nothing to reproduce")
            return 2
        print("--live: kernels launched as their modules define them now: "
              + ", ".join(f"{m}.{q}" for m, q, _ in LIVE.values()))
    if KIND == "values":
        return compare_values()
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


def _unimportable(module: str, root: str) -> str | None:
    """Why `module` cannot be imported here (None: it can be found)."""
    import importlib.util

    for folder in (root, os.getcwd()):
        if folder and folder not in sys.path:
            sys.path.insert(0, folder)
    try:  # (finding a submodule imports its packages, which may fail in their own ways)
        return None if importlib.util.find_spec(module) is not None else "not found"
    except Exception as exc:
        return f"{type(exc).__name__}: {' '.join(str(exc).split())}"
