"""Interpreter reach: how many of the installed real libraries' `@triton.jit` kernels tdiff's interpreter runs.

Every kernel object of liger-kernel (`liger_kernel.ops`), FlagGems (`flag_gems.ops`, `flag_gems.fused`,
`flag_gems.utils`, its NVIDIA backend) and, where installed, fla-core (`fla.ops`) is found (autotune, heuristics
and FlagGems' `LibEntry` unwrapped to the `@triton.jit` function; a jit function that returns a value is a device
function, not launched). Each kernel gets one trivial call, synthesized from its signature and source:

- a parameter is a pointer where it flows into the address of a `tl.load` / `tl.store` / atomic /
  `make_block_ptr` (through assignments and calls of other jit functions), or is annotated `tensor`; it gets a
  small tensor (int64 for index-like names, bool for masks, else float32);
- other parameters: constexpr block sizes 16, flags False, dtype constexprs `tl.float32`, float-like names 0.5,
  every other int 4; what an autotune config or a heuristic sets is left to it (config 0);
- the grid is (1,).

The call is first compiled by Triton's frontend (to TTIR, for sm_90, no GPU needed): where the compiler rejects
it, the arguments could not be synthesized (counted as such, never as an interpreter failure). A call the compiler
accepts is run by tdiff's interpreter backend (as a check's case is); its failure is classified by cause.

    python -m bench.reach.interpreter_reach --json /tmp/reach.json
    python -m bench.reach.interpreter_reach --table before.json after.json > bench/reach/interpreter_reach.md
    PYTHONPATH=/other/checkout:$PWD python -P -m bench.reach.interpreter_reach --json /tmp/before.json

The tdiff imported is the one measured: run from the repository root, the working tree's; with `python -P` (the
working directory not put first on sys.path) the first tdiff on PYTHONPATH, e.g. another checkout's.

`--json` writes one record per kernel; `--table` renders the counts of one or more such files side by side.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import inspect
import json
import pkgutil
import re
import signal
import textwrap
import time
import warnings
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

import torch
import triton
import triton.language as tl
from triton.runtime.autotuner import Autotuner, Heuristics

from tdiff.core import kernels
from tdiff.core.case import Case
from tdiff.execute.interpreter.backend import InterpreterBackend
from tdiff.execute.plan import route_launches
from tdiff.execute.stages.toolchain import compile_only
from tdiff.generate.cases import tensor_arg

#: the packages searched for kernels, per library (a module that fails to import is listed, not searched)
LIBRARIES = {
    "liger-kernel": ["liger_kernel.ops"],
    "flaggems": ["flag_gems.ops", "flag_gems.fused", "flag_gems.utils", "flag_gems.runtime.backend._nvidia"],
    "fla-core": ["fla.ops"],
}

BLOCK, INT, FLOAT, NUMEL = 16, 4, 0.5, 1 << 14
TIMEOUT_S = 180

# ------------------------------------------------------------------ finding kernels


@dataclass
class Entry:
    library: str
    name: str  # module.function of the @triton.jit function
    obj: Any  # the outermost kernel object found (Autotuner, Heuristics, LibEntry or JITFunction)


def _modules(package: str) -> tuple[list[Any], list[str]]:
    failed: list[str] = []
    try:
        root = importlib.import_module(package)
    except Exception as exc:
        return [], [f"{package}: {type(exc).__name__}: {str(exc)[:100]}"]
    mods = [root]
    for info in pkgutil.walk_packages(getattr(root, "__path__", []), package + ".", onerror=lambda _: None):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                mods.append(importlib.import_module(info.name))
        except BaseException as exc:  # noqa: BLE001  (a backend for another vendor: listed, not searched)
            failed.append(f"{info.name}: {type(exc).__name__}: {str(exc)[:100]}")
    return mods, failed


def returns_value(fn: Any) -> bool:
    """Whether a jit function returns a value (a device function, not a kernel)."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError, SyntaxError):
        return False
    return any(isinstance(n, ast.Return) and n.value is not None for n in ast.walk(tree.body[0]))


def collect(libraries: list[str]) -> tuple[list[Entry], dict[str, int], list[str]]:
    """The kernels of the libraries (each @triton.jit function once, under its outermost wrapper seen), the number
    of device functions skipped per library, and the modules that could not be imported."""
    if "flaggems" in libraries:
        from suites.flaggems import _gems  # noqa: F401  (FlagGems' GPU queries answered on a CPU machine)
    seen: dict[Any, Entry] = {}
    devices: Counter = Counter()
    failed: list[str] = []
    for lib in libraries:
        for package in LIBRARIES[lib]:
            mods, bad = _modules(package)
            failed += bad
            for mod in mods:
                for obj in list(vars(mod).values()):
                    if not kernels.is_kernel(obj):
                        continue
                    fn = kernels.jit_function(obj).fn
                    old = seen.get(fn)
                    if old is None:
                        if returns_value(fn):
                            devices[lib] += 1
                            seen[fn] = Entry(lib, "", None)
                            continue
                        seen[fn] = Entry(lib, f"{fn.__module__}.{fn.__qualname__}", obj)
                    elif old.obj is not None and len(kernels.layers(obj)[0]) > len(kernels.layers(old.obj)[0]):
                        old.obj = obj  # the most wrapped object: its configs and heuristics fill constexprs
    return [e for e in seen.values() if e.obj is not None], dict(devices), failed


# ------------------------------------------------------------------ which parameters are pointers

_SINKS = {"load", "store", "atomic_add", "atomic_max", "atomic_min", "atomic_xchg", "atomic_cas", "atomic_and",
          "atomic_or", "atomic_xor", "make_block_ptr", "make_tensor_descriptor", "prefetch"}
_PASS = {"to", "cast", "multiple_of", "max_contiguous", "max_constancy", "advance", "broadcast_to", "reshape",
         "expand_dims", "view"}
_PTR_NAME = re.compile(r"(?i)ptr|pointer|^desc")
_INT_NAME = re.compile(r"(?i)stride|^n$|^n_|_n$|num|size|len|offset|^off|dim|rows|cols|count|start|end|step|"
                       r"seed|idx$|index$|^pid|total|chunk|batch|_size$|^[MNKTHDBLSCE]$")


def _roots(e: ast.AST) -> set[str]:
    """Names an address expression may take its pointer from."""
    if isinstance(e, ast.Name):
        return {e.id}
    if isinstance(e, ast.BinOp) and isinstance(e.op, (ast.Add, ast.Sub)):
        return _roots(e.left) | _roots(e.right)
    if isinstance(e, ast.Subscript):
        return _roots(e.value)
    if isinstance(e, ast.IfExp):
        return _roots(e.body) | _roots(e.orelse)
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and e.func.attr in _PASS:
        if isinstance(e.func.value, ast.Name) and e.func.value.id in ("tl", "triton"):
            return _roots(e.args[0]) if e.args else set()
        return _roots(e.func.value)
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and e.func.attr == "where" and len(e.args) == 3:
        return _roots(e.args[1]) | _roots(e.args[2])
    return set()


def _resolve(node: ast.AST, g: dict[str, Any]) -> Any:
    if isinstance(node, ast.Name):
        return g.get(node.id)
    if isinstance(node, ast.Attribute):
        base = _resolve(node.value, g)
        return getattr(base, node.attr, None) if base is not None else None
    return None


def pointer_params(fn: Any, depth: int = 0) -> set[str]:
    """The parameters of a jit function used as pointers (see the module's docstring)."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn))).body[0]
    except (OSError, TypeError, SyntaxError, IndexError):
        return set()
    sig = inspect.signature(fn).parameters
    addresses: list[set[str]] = []  # the roots of each address expression
    assigns: dict[str, set[str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            assigns.setdefault(node.targets[0].id, set()).update(_roots(node.value))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            assigns.setdefault(node.target.id, set()).update(_roots(node.value))
        elif isinstance(node, ast.Attribute) and node.attr == "element_ty" and isinstance(node.value, ast.Attribute):
            addresses.append(_roots(node.value.value))  # X.dtype.element_ty
        if not isinstance(node, ast.Call):
            continue
        attr = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
        if attr in _SINKS:
            first = node.args[0] if node.args else next((k.value for k in node.keywords
                                                          if k.arg in ("pointer", "ptr", "base", "desc")), None)
            if first is not None:
                addresses.append(_roots(first))
            continue
        callee = _resolve(node.func, fn.__globals__)
        if depth < 4 and kernels.is_kernel(callee):
            inner = kernels.jit_function(callee).fn
            inner_ptrs = pointer_params(inner, depth + 1)
            names = list(inspect.signature(inner).parameters)
            for i, a in enumerate(node.args):
                if i < len(names) and names[i] in inner_ptrs:
                    addresses.append(_roots(a))
            for k in node.keywords:
                if k.arg in inner_ptrs:
                    addresses.append(_roots(k.value))

    def params_of(names: set[str], seen: set[str]) -> set[str]:
        out: set[str] = set()
        for n in names - seen:
            if n in sig:
                out.add(n)
            elif n in assigns:
                out |= params_of(assigns[n], seen | {n})
        return out

    out: set[str] = set()
    for roots in addresses:
        found = {p for p in params_of(roots, set())
                 if getattr(sig[p].annotation, "__name__", "") in ("_empty", "tensor")}
        likely = {p for p in found if _PTR_NAME.search(p) or not _INT_NAME.search(p)}
        out |= likely or found
    return out | {p for p in sig if getattr(sig[p].annotation, "__name__", "") == "tensor"}


# ------------------------------------------------------------------ synthesizing one call

_BLOCK_NAME = re.compile(r"(?i)block|tile|_size$|^B[A-Z]{1,2}$|pow2|^GROUP|chunk|^N?BLOCK|^BS$|^BT$")
_FLAG_NAME = re.compile(r"(?i)^(has|is|use|enable|have|one_tile|even|return|compute|with|need|do|apply|save|"
                        r"store|load|inplace|allow|skip|reverse|split|transpose|trans|causal|training|upper|"
                        r"lower|keep|fuse|output|input)_?|mask$|affine|flag|^elementwise")
_DTYPE_NAME = re.compile(r"(?i)dtype|_ty$|type$")
_FLOAT_NAME = re.compile(r"(?i)eps|scale|alpha|beta|gamma|lr|momentum|temp|smoothing|softcap|decay|^p$|factor|"
                         r"lambd|threshold|^value$|weight$|coef|^tau|margin|delta|^sigma|^std|^mean|^min_|^max_")
_INT_PTR = re.compile(r"(?i)idx|index|indices|label|target|tgt|ids|offsets|cu_seqlens|cnt|count|lock|seed|"
                      r"expert|token|sorted|position|pos_|lengths|seq_len|num_|rank|histogram|sum_ptr")


@dataclass
class Call:
    tensors: dict[str, torch.Tensor]
    scalars: dict[str, Any]
    note: str = ""


def _fixed_by_wrappers(obj: Any) -> set[str]:
    """Parameters an autotune config (the first) or a heuristic sets."""
    fixed: set[str] = set()
    for layer in kernels.layers(obj)[0]:
        if isinstance(layer, Autotuner) and layer.configs:
            fixed |= set(layer.configs[0].kwargs)
        if isinstance(layer, Heuristics):
            fixed |= set(layer.values)
    return fixed


def _tensor(name: str) -> torch.Tensor:
    if re.search(r"(?i)mask", name):
        return torch.zeros(NUMEL, dtype=torch.bool)
    if _INT_PTR.search(name):
        return torch.zeros(NUMEL, dtype=torch.int64)
    return torch.linspace(0.1, 1.0, NUMEL, dtype=torch.float32)


@dataclass(frozen=True)
class Variant:
    """One way to synthesize a call: the base guesses, or with float scalars as ints, constexpr ints as block
    sizes, and some pointers to int64 tensors (an index the kernel loads)."""

    floats_as_ints: bool = False
    constexpr_int: int = INT
    int_pointers: frozenset[str] = frozenset()


def synthesize(entry: Entry, variant: Variant = Variant()) -> Call:
    jit = kernels.jit_function(entry.obj)
    fn = jit.fn
    ptrs = pointer_params(fn)
    fixed = _fixed_by_wrappers(entry.obj)
    constexprs = set(kernels.constexpr_names(jit))
    floating = INT if variant.floats_as_ints else FLOAT
    call = Call({}, {})
    for p in inspect.signature(fn).parameters.values():
        name = p.name
        if name in fixed:
            continue
        if p.default is not inspect.Parameter.empty and (name in constexprs or p.default is None):
            continue
        ann = getattr(p.annotation, "__name__", str(p.annotation))
        if name in ptrs:
            call.tensors[name] = torch.zeros(NUMEL, dtype=torch.int64) if name in variant.int_pointers \
                else _tensor(name)
        elif name in constexprs:
            if _DTYPE_NAME.search(name):
                call.scalars[name] = tl.float32
            elif _FLAG_NAME.search(name):
                call.scalars[name] = False
            elif _BLOCK_NAME.search(name):
                call.scalars[name] = BLOCK
            elif _FLOAT_NAME.search(name):
                call.scalars[name] = floating
            else:
                call.scalars[name] = variant.constexpr_int
        elif ann == "float" or (ann != "int" and _FLOAT_NAME.search(name)):
            call.scalars[name] = floating
        else:
            call.scalars[name] = INT
    return call


#: at most this many calls are tried on the compiler per kernel
ATTEMPTS = 24


def find_call(entry: Entry) -> tuple[Call | None, str, int]:
    """The first synthesized call the compiler accepts (base guesses first, then variants), else None with the
    compiler's message on the base call; and how many calls were tried."""
    base = synthesize(entry)
    float_ptrs = [k for k, v in base.tensors.items() if v.dtype.is_floating_point]
    variants = [Variant(), Variant(constexpr_int=BLOCK), Variant(floats_as_ints=True),
                Variant(floats_as_ints=True, constexpr_int=BLOCK)]
    variants += [Variant(f, c, frozenset([p])) for f in (False, True) for c in (INT, BLOCK) for p in float_ptrs]
    first = ""
    for i, v in enumerate(variants[:ATTEMPTS]):
        call = synthesize(entry, v)
        rejected = compiler_rejects(entry, call)
        if rejected is None:
            call.note = "" if i == 0 else repr(v)
            return call, "", i + 1
        first = first or rejected
    return None, first, min(len(variants), ATTEMPTS)


def _launch(call: Call) -> Any:
    def launch(kernel: Any, **tensors: torch.Tensor) -> None:
        kernel[(1,)](**tensors, **call.scalars)

    return launch


@dataclass
class _Target:
    name: str
    kernel: Any
    launch: Any
    reference: Any = None


# ------------------------------------------------------------------ does the compiler accept the call?


class _Accepted(Exception):
    pass


def _frontend(src: Any, target: Any = None, options: Any = None, _env_vars: Any = None) -> Any:
    """Triton's compile up to TTIR (the frontend: types, constexprs, what the language accepts)."""
    from triton._C.libtriton import ir
    from triton.compiler.compiler import make_backend

    backend = make_backend(target)
    opts = backend.parse_options(dict(options or {}))
    context = ir.context()
    ir.load_dialects(context)
    backend.load_dialects(context)
    codegen_fns = backend.get_codegen_implementation(opts)
    module_map = backend.get_module_map()
    params = inspect.signature(src.make_ir).parameters
    if "target" in params:
        src.make_ir(target, opts, codegen_fns, module_map, context)
    else:  # Triton 3.4
        src.make_ir(opts, codegen_fns, module_map, context)
    raise _Accepted


def compiler_rejects(entry: Entry, call: Call) -> str | None:
    """None where Triton's frontend compiles the call, else the compiler's message."""
    def handler(jit: Any, original: Any, args: tuple, grid: Any, warmup: bool, kwargs: dict) -> None:
        from triton.runtime.driver import driver

        jit.device_caches[driver.active.get_current_device()]  # (made on first use; it sets jit.compile)
        saved = jit.__dict__.get("compile")
        jit.compile = _frontend
        try:
            original(jit, *args, grid=grid, warmup=True, **kwargs)
        finally:
            jit.compile = saved

    kernel = kernels.rebuild(entry.obj, kernels.jit_function(entry.obj), None)
    try:
        with compile_only(90), route_launches(handler), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _launch(call)(kernel, **call.tensors)
    except _Accepted:
        return None
    except Exception as exc:  # noqa: BLE001
        return f"{type(exc).__name__}: {_short(str(exc))}"
    return "the launch compiled nothing"


def _short(message: str) -> str:
    lines = [ln.strip() for ln in message.strip().splitlines() if ln.strip()]
    tail = [ln for ln in lines if not ln.startswith("^")]
    return (tail[-1] if tail else "")[:200]


# ------------------------------------------------------------------ running it in tdiff's interpreter


@dataclass
class Result:
    library: str
    kernel: str
    status: str  # runs | synthesis | call-error | limitation | error | timeout
    cause: str = ""
    detail: str = ""
    where: str = ""
    seconds: float = 0.0
    violations: int = 0
    variant: str = ""  # the synthesis variant the compiler accepted, where not the base guesses
    shims: dict[str, int] = field(default_factory=dict)


class _Timeout(Exception):
    pass


def _alarm(*_: Any) -> None:
    raise _Timeout(f"over {TIMEOUT_S} s")


def run_one(entry: Entry) -> Result:
    t0 = time.perf_counter()
    res = Result(entry.library, entry.name, "runs")
    try:
        call, rejected, tried = find_call(entry)
    except Exception as exc:  # noqa: BLE001
        res.status, res.cause = "synthesis", f"no call: {type(exc).__name__}: {exc}"[:200]
        return res
    if call is None:
        res.status = "synthesis"
        res.cause = ("the kernel uses tl.make_block_ptr, which this Triton removed" if "Block pointers have been "
                     "removed" in rejected else f"the compiler rejects every synthesized call ({tried} tried)")
        res.detail = rejected
        return res
    res.variant = call.note
    case = Case({k: tensor_arg(v) for k, v in call.tensors.items()})
    signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, TIMEOUT_S)
    try:
        out = InterpreterBackend().run(_Target(entry.name, entry.obj, _launch(call)), case)
    except _Timeout:
        res.status, res.cause = "timeout", f"over {TIMEOUT_S} s"
        return res
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    res.seconds = round(time.perf_counter() - t0, 2)
    if out.trace is not None:
        res.violations = sum(v.count for v in out.trace.violations)
        res.shims = dict(out.trace.shims)
    err = out.error
    if err is None:
        return res
    res.detail, res.where = err.message[:300], err.where
    if "_Timeout" in err.message or "_Timeout" in err.details:
        res.status, res.cause = "timeout", f"over {TIMEOUT_S} s"
    elif err.kind == "limitation":
        res.status, res.cause = "limitation", err.limitation
    else:
        res.status, res.cause = classify(err.message, err.details)
    return res


#: known causes of an interpreter error, by the message (first match wins): (regex, status, cause); the shims named
#: here are those that fixed the cause (`tdiff.execute.interpreter.shim_names`)
CAUSES: list[tuple[str, str, str]] = [
    (r"mask has unsupported dtype|ufunc 'bitwise_xor' not supported", "error",
     "a scalar comparison broadcast to a block loses its bool type (Triton's interpreter; shim bool-splat)"),
    (r"'int' object has no attribute 'to'", "error",
     "`.to()` on a loop index, a Python int in Triton's interpreter (shim int-methods)"),
    (r"'NoneType' object has no attribute 'dtype'|ValueError: Unknown dtype", "error",
     "`dtype is tl.float32` false on the tl.constexpr tdiff's constexpr-args passes (shim constexpr-is)"),
    (r"range\(\) arg 3 must not be zero", "call-error",
     "the synthesized call is wrong for the kernel: the grid (1,) makes a loop step 0 (`tl.num_programs(2) // H`)"),
]


def classify(message: str, details: str) -> tuple[str, str]:
    """(status, cause) of an interpreter error that is no known limitation."""
    for pattern, status, cause in CAUSES:
        if re.search(pattern, message):
            return status, cause
    text = re.sub(r"0x[0-9a-f]+|\d+", "N", message.split(" (program")[0])
    return "error", "unclassified: " + text[:120]


# ------------------------------------------------------------------ the table


def table(files: list[str]) -> str:
    runs = []
    for path in files:
        with open(path) as f:
            runs.append(json.load(f))
    lines = ["| | " + " | ".join(r["label"] for r in runs) + " |", "|---|" + "---|" * len(runs)]

    def row(label: str, values: list[Any]) -> None:
        lines.append(f"| {label} | " + " | ".join(str(v) for v in values) + " |")

    def count(r: dict, lib: str | None, status: str | None = None) -> int:
        return sum(1 for x in r["results"] if (lib is None or x["library"] == lib)
                   and (status is None or x["status"] == status))

    libs = sorted({x["library"] for r in runs for x in r["results"]})
    for lib in [*libs, None]:
        name = lib or "all"
        total = [count(r, lib) for r in runs]
        synth = [count(r, lib, "synthesis") + count(r, lib, "call-error") for r in runs]
        ran = [count(r, lib, "runs") for r in runs]
        row(f"**{name}**: kernels", total)
        row(f"{name}: no valid call synthesized", synth)
        row(f"{name}: runs in tdiff's interpreter",
            [f"{a} / {t - s} ({100 * a / max(t - s, 1):.0f}%)" for a, t, s in zip(ran, total, synth)])
    lines.append("")
    lines.append("Kernels the compiler accepted that tdiff's interpreter did not run, by cause (`call-error`: the "
                 "synthesized call was wrong for the kernel; `limitation`: set aside as not judged, under that name):")
    lines.append("")
    causes = sorted({(x["status"], x["cause"]) for r in runs for x in r["results"]
                     if x["status"] not in ("runs", "synthesis")})
    causes += sorted({("synthesis", x["cause"] if "make_block_ptr" in x["cause"] else "the compiler rejects every "
                       "synthesized call") for r in runs for x in r["results"] if x["status"] == "synthesis"})
    lines.append("| status | cause | " + " | ".join(r["label"] for r in runs) + " |")
    lines.append("|---|---|" + "---|" * len(runs))
    def key(x: dict) -> tuple[str, str]:
        if x["status"] == "synthesis" and "make_block_ptr" not in x["cause"]:
            return "synthesis", "the compiler rejects every synthesized call"
        return x["status"], x["cause"]

    for status, cause in causes:
        vals = [sum(1 for x in r["results"] if key(x) == (status, cause)) for r in runs]
        lines.append(f"| {status} | {cause} | " + " | ".join(str(v) for v in vals) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", help="write the per-kernel records here")
    ap.add_argument("--label", default="tdiff", help="the column's name in --table")
    ap.add_argument("--libraries", nargs="*", default=list(LIBRARIES))
    ap.add_argument("--only", default="", help="run only kernels whose name contains this")
    ap.add_argument("--table", nargs="*", help="render these --json files as a markdown table")
    args = ap.parse_args()
    if args.table:
        print(table(args.table), end="")
        return
    t0 = time.perf_counter()
    entries, devices, failed = collect(args.libraries)
    entries = [e for e in entries if args.only in e.name]
    results = []
    for i, e in enumerate(entries):
        r = run_one(e)
        results.append(r)
        print(f"[{i + 1}/{len(entries)}] {r.status:10} {e.name}  {r.cause}  {r.detail[:150]}", flush=True)
    counts = Counter(r.status for r in results)
    print(f"{len(results)} kernels ({devices} device functions skipped) in {time.perf_counter() - t0:.0f} s: "
          f"{dict(counts)}; triton {triton.__version__}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"label": args.label, "triton": triton.__version__, "devices": devices,
                       "import_failures": failed, "results": [asdict(r) for r in results]}, f, indent=1)


if __name__ == "__main__":
    main()
