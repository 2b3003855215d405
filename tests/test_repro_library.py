"""Reproducers for divergences in real library kernels (liger-kernel, FlagGems) and for kernels that need tdiff's
interpreter shims: the reproducer is written, reproduces in a fresh process, and its interpreter side computes
what tdiff's interpreter computed.

Each case pairs a deliberately wrong backend (tests.faulty, which a reproducer replaces by its recorded result
on any machine) with the interpreter, so the divergence does not depend on a library bug. What is tested: the
reproducer rebuilds the launches (a Triton dtype as an argument), runs the kernel without the library (FlagGems'
LibEntry kernels and the helpers they reach through `tle.`), and installs tdiff's interpreter shims (libdevice,
float arguments, bf16, ...) under stock TRITON_INTERPRET=1, reporting those it used.
"""

import json
import os

import numpy as np
import pytest
import torch
import triton
import triton.language as tl
from triton.language.extra.libdevice import rsqrt

import tdiff
from tdiff import compat
from tdiff import strategies as tst
from tdiff.core.case import Case
from tdiff.drive.runner import Runner
from tdiff.execute import forkserver
from tdiff.execute.interpreter import shims
from tdiff.judge.targets import view
from tdiff.record import repro
from tdiff.strategies import tensor_arg

WRONG = ("tests.faulty:FaultyFirstProgram", "interpreter")


def _written(tmp_path, check, case, validate=True):
    """The verdict, its evidence and the reproducer tdiff keeps (it verified it in a fresh process). Without
    `validate`, the test runs it itself (`_reproduces`): verifying it too would run it twice."""
    runner = Runner(tdiff.RunOptions(isolation="none", corpus_dir=None, repro_dir=None, backends=WRONG))
    verdict, ev = runner.judge(check).verdict(case)
    assert verdict.failed and verdict.kind == "values", verdict.label
    path = repro.write(tmp_path / "repro", check, case, verdict, ev, timeout=120, validate=validate)
    return verdict, ev, path


def _reproduces(path, verdict):
    """Run the reproducer as a user would and see it show what verification requires (exit 1, the verdict's values
    diverging on one of its targets: record/repro/verify.py) and which sides ran how."""
    ran = _run(path)
    shown = [json.loads(ln[len(repro.MARK):]) for ln in ran.stdout.splitlines() if ln.startswith(repro.MARK)]
    assert ran.returncode == 1 and any(s["kind"] == "values" and set(s["targets"]) & set(verdict.targets)
                                       for s in shown), ran.stdout + ran.stderr
    assert "faulty: recorded\ninterpreter: ran here\n" in ran.stdout, ran.stdout
    return ran


def _run(path, *args, interpret=False):
    env = dict(os.environ)
    env.pop("TRITON_INTERPRET", None)
    if interpret:
        env["TRITON_INTERPRET"] = "1"
    return forkserver.run_script([str(path), *args], path.parent, env=env, timeout=300)


def _interpreted_here(path, tmp_path):
    """The reproducer's interpreter side, run as its subprocess runs it: each target's values and the shims used."""
    out = tmp_path / "side.npz"
    ran = _run(path, "--side", "interpreter", str(out), interpret=True)
    assert ran.returncode == 0, (ran.stdout + ran.stderr)[-3000:]
    data = np.load(out, allow_pickle=False)
    return {k: data[k] for k in data.files}, json.loads((tmp_path / "side.npz.json").read_text())["shims"]


def _same_as_tdiff(values, ev, case):
    """Each target as the reproducer's interpreter computed it equals tdiff's interpreter's, bit for bit."""
    targets = view(ev.outcomes["interpreter"], case).targets
    assert set(values) and set(values) <= set(targets)
    for name, got in values.items():
        np.testing.assert_array_equal(got, targets[name].values, err_msg=name)


def test_liger_group_norm_backward_rebuilds_a_triton_dtype_argument(tmp_path):
    """liger's group norm backward takes `dtype=tl.float32` (a constexpr): the reproducer passed its repr, the
    string 'triton.language.float32', and both sides failed with "'str' object has no attribute 'scalar'"."""
    pytest.importorskip("liger_kernel")
    import suites.liger.group_norm as gn

    check = next(c for c in gn.lib._group_norm_backward_kernel.__tdiff_checks__ if c.name == "backward")
    g = torch.Generator().manual_seed(0)
    case = Case({"X": tensor_arg(torch.randn(1, 2, 2, 2, generator=g)), "W": tensor_arg(torch.randn(2, generator=g)),
                 "B": tensor_arg(torch.randn(2, generator=g)), "num_groups": 1,
                 "dY": tensor_arg(torch.randn(1, 2, 2, 2, generator=g))})
    verdict, ev, path = _written(tmp_path, check, case, validate=False)
    text = path.read_text()
    assert "'kind': 'tl_dtype', 'value': 'float32'" in text and "import liger_kernel" not in text
    _reproduces(path, verdict)
    values, _ = _interpreted_here(path, tmp_path)
    _same_as_tdiff(values, ev, case)


def test_liger_fused_add_rms_norm_uses_the_libdevice_shim(tmp_path):
    """casting_mode='none' in float16: `rsqrt` is liger's `triton.language.extra.libdevice` import, whose stub
    returns None under stock TRITON_INTERPRET=1 ("cannot convert None of type <class 'NoneType'> to tensor");
    the reproducer carries tdiff's libdevice shim (and the float-args one: `eps.to(...)`) and says so."""
    pytest.importorskip("liger_kernel")
    import suites.liger.fused_add_rms_norm as m

    check = next(c for c in m.lib._fused_add_rms_norm_forward_kernel.__tdiff_checks__ if c.name == "forward")
    g = torch.Generator().manual_seed(0)
    case = Case({"X": tensor_arg(torch.randn(1, 255, generator=g).half()),
                 "R": tensor_arg(torch.randn(1, 255, generator=g).half()),
                 "W": tensor_arg(torch.randn(255, generator=g).half()),
                 "eps": 1e-6, "offset": 0.0, "casting_mode": "none"})
    verdict, ev, path = _written(tmp_path, check, case, validate=False)
    used = set(ev.outcomes["interpreter"].trace.shims)
    assert {"libdevice", "float-args"} <= used
    ran = _reproduces(path, verdict)
    assert "interpreter worked around libdevice (1 use(s))" in ran.stdout
    assert "interpreter worked around float-args (2 use(s))" in ran.stdout
    values, shims_used = _interpreted_here(path, tmp_path)
    assert set(shims_used) == used
    _same_as_tdiff(values, ev, case)


def test_flaggems_libentry_kernel_runs_without_flaggems(tmp_path):
    """FlagGems' softmax_kernel_inner is LibEntry(heuristics(jit)) and calls `tle.program_id` (FlagGems'
    triton_lang_extension): the reproducer imported flag_gems, which fails under TRITON_INTERPRET=1 ("'function'
    object has no attribute 'fn'", LibEntry wrapping an interpreted kernel) and on machines without a GPU. The
    helpers are inlined, and the launch carries the heuristics' constexprs."""
    from suites.flaggems import softmax as sm  # skipped there when FlagGems (or its dependencies) is missing

    check = next(c for c in sm.S.softmax_kernel_inner.__tdiff_checks__ if c.name == "inner")
    case = Case({"x": tensor_arg(torch.randn(2, 5, generator=torch.Generator().manual_seed(0))), "dim": -1})
    _, ev, path = _written(tmp_path, check, case)
    text = path.read_text()
    assert "import flag_gems" not in text and "from flag_gems" not in text  # (the names of --live's modules stay)
    assert "tle.program_id = program_id" in text
    values, _ = _interpreted_here(path, tmp_path)
    _same_as_tdiff(values, ev, case)


# ------------------------------------------------------------------ every shim, in one kernel

@triton.jit
def _lowest(dtype):
    d = dtype.value  # constexpr-args: the compiler wraps a dtype argument of a device function in constexpr
    if d.is_floating():
        value: tl.constexpr = float("-inf")
        return value
    return 0


_cast = tl.cast  # builtin-aliases: a module-level alias of a builtin


@triton.jit
def _one_if_fp32(dtype):
    if dtype is tl.float32:  # constexpr-is: the dtype arrives wrapped in constexpr (constexpr-args)
        return 1.0
    return 2.0


@triton.jit
def _all_shims(x_ptr, b_ptr, acc_ptr, out_ptr, n, scale, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    live = (offs < n) & (tl.program_id(0) < 1)  # bool-splat: a scalar comparison broadcast into the mask
    x = tl.load(x_ptr + offs, mask=live, other=_lowest(x_ptr.type.element_ty))
    for i in range(1):
        x = _cast(x, tl.float32) * _one_if_fp32(x_ptr.type.element_ty) + i.to(tl.float32)  # int-methods
    b = tl.load(b_ptr + offs, mask=live, other=0.0)  # bfloat16
    prod = b * b + b * 1.5  # bf16-arith, bf16-constants
    tl.atomic_add(acc_ptr + offs, prod, mask=live)  # bf16-atomics
    acc = tl.load(acc_ptr + offs, mask=live, other=0.0)
    total = tl.sum(acc, axis=0)  # a bf16 reduction (bf16-arith)
    pos = live and (x > 0)  # tensor-and-or
    y = tl.where(pos, rsqrt(tl.abs(x) + 1.0), tl.maximum(x, 0.25))  # libdevice; nan-minmax on NaN inputs
    y = tl.fma(y, y, -(y * y))  # fma-rounding: the product's rounding error, 0 if rounded twice
    tl.store(out_ptr + offs, y * scale + acc.to(tl.float32) + total.to(tl.float32), mask=live)  # float-args


def _launch_all(kernel, x, b):
    acc = torch.zeros_like(b)
    out = torch.empty_like(x)
    kernel[(1,)](x, b, acc, out, x.numel(), 0.5, BLOCK=triton.next_power_of_2(x.numel()))
    return out



def test_all_shims_in_one_kernel_compute_what_tdiffs_interpreter_computed(tmp_path):
    """A kernel that needs every shim (float argument, bf16 arithmetic, constants, atomics and reduction,
    a dtype passed to a device function, `and` between tensors, libdevice, tl.maximum with NaN, an alias of a
    builtin, a comparison splat into a mask, `.to()` on a loop index, `is` on a dtype): stock
    TRITON_INTERPRET=1 fails or computes differently; the reproducer's interpreter side matches tdiff's
    interpreter bit for bit and reports the same shims."""
    check = tdiff.check(launch=_launch_all, x=tst.tensors(shape=(8,)),
                        b=tst.tensors(shape=(8,), dtype="bfloat16"))(_all_shims).__tdiff_checks__[-1]
    x = torch.tensor([1.0, -2.0, float("nan"), 0.5, 3.0, -0.0, 0.1, 7.0])
    b = torch.tensor([0.5, 1.25, -2.0, 3.0, 0.0078125, -1.5, 2.0, 1e-3]).bfloat16()
    case = Case({"x": tensor_arg(x), "b": tensor_arg(b)})
    verdict, ev, path = _written(tmp_path, check, case, validate=False)
    used = {n for n, c in ev.outcomes["interpreter"].trace.shims.items() if c}
    ran = _reproduces(path, verdict)
    values, shims_used = _interpreted_here(path, tmp_path)
    # every shim the run counted, and no other; all of them but those this Triton does not need
    assert used == set(shims_used) <= set(shims.ENABLED)
    assert set(shims.ENABLED) - set(shims_used) == _not_needed_here()
    for name in shims_used:
        assert f"interpreter worked around {name} (" in ran.stdout, name
    _same_as_tdiff(values, ev, case)


def _not_needed_here() -> set[str]:
    """The shims this Triton's stock interpreter does not need (it does what they do)."""
    return ({shims.NAN_MINMAX} if not compat.minmax_propagates_nan() else set()) \
        | ({shims.BF16_CONSTANTS} if compat.has_get_bf16() else set()) \
        | ({shims.FMA_ROUNDING} if compat.fma_rounds_once() else set())


# ------------------------------------------------------------------ --live: checking a fixed kernel

_KERNEL_SOURCE = '''
import triton
import triton.language as tl


@triton.jit
def shift(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=0.0)
    tl.store(out_ptr + offs, x + {step}, mask=m)
'''


def _launch_shift(kernel, x):
    out = torch.empty_like(x)
    kernel[(1,)](x, out, x.numel(), BLOCK=triton.next_power_of_2(x.numel()))
    return out


def test_live_runs_the_fixed_kernel_from_its_module(tmp_path, monkeypatch):
    """The reproducer inlines the kernel as it was; `--live` imports it from its module, so once the user fixed
    it there, `python repro.py --live` exits 0 while the inlined copy still shows the divergence."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "live_kernel_module.py").write_text(_KERNEL_SOURCE.format(step="1.0"))  # the bug: + 1, not + 2
    monkeypatch.syspath_prepend(str(project))
    import live_kernel_module

    check = tdiff.check(launch=_launch_shift, reference=lambda x: x + 2,
                        x=tst.tensors(shape=(4,)))(live_kernel_module.shift).__tdiff_checks__[-1]
    case = Case({"x": tensor_arg(torch.tensor([1.0, 2.0, 3.0, 4.0]))})
    runner = Runner(tdiff.RunOptions(isolation="none", corpus_dir=None, repro_dir=None))
    verdict, ev = runner.judge(check).verdict(case)
    path = repro.write(tmp_path / "repro", check, case, verdict, ev, timeout=120)  # (it exits 1: verified)
    assert "python repro.py --live" in path.read_text() and str(project) in path.read_text()
    (project / "live_kernel_module.py").write_text(_KERNEL_SOURCE.format(step="2.0"))  # the user's fix
    fixed = _run(path, "--live")
    assert fixed.returncode == 0 and "returned: equal within tolerance" in fixed.stdout, fixed.stdout + fixed.stderr
    assert "--live: kernels launched as their modules define them now: live_kernel_module.shift" in fixed.stdout
    assert _run(path).returncode == 1  # the copy in the file is the kernel as it was
    (project / "live_kernel_module.py").rename(project / "moved.py")
    gone = _run(path, "--live")
    assert gone.returncode == 2 and "cannot import live_kernel_module (not found)" in gone.stdout, gone.stdout


# ------------------------------------------------------------------ what a reproducer embeds

def test_the_reproducers_comparison_is_tdiffs():
    """The runtime a reproducer embeds (rendered from source) compares as tdiff does: the tolerance formula,
    NaN, infinities and signed zeros."""
    from tdiff.core.tolerance import Tolerance
    from tdiff.judge.closeness import close

    scope = {"__name__": "reproducer"}
    exec(compile(repro._PRELUDE + repro._RUNTIME, "repro.py", "exec"), scope)
    rng = np.random.default_rng(1)
    a = rng.uniform(-4, 4, 3000)
    b = a * (1 + rng.uniform(-1e-5, 1e-5, a.size))
    specials = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0]
    a[:36], b[:36] = np.repeat(specials, 6), np.tile(specials, 6)
    scale = np.abs(rng.uniform(0, 2, a.size))
    for tol in (Tolerance(rtol=1e-6), Tolerance(rtol=1e-6, atol=1e-5, scale=1e-6, signed_zero=True),
                Tolerance.preset("arith", "float32"), Tolerance(exact=True), Tolerance(exact=True, signed_zero=True)):
        spec = {"exact": tol.exact, "rtol": tol.rtol, "atol": tol.atol, "scale": tol.scale,
                "signed_zero": tol.signed_zero, "scales": {"dtype": "float64", "values": scale.tolist()}}
        assert np.array_equal(scope["close"](a, b, spec), close(a, b, tol, scale)), tol


def test_the_shim_library_is_checked_as_it_is_rendered():
    from tdiff.record.repro import library

    text = library.shim_library()
    compile(text, "library", "exec")
    for name in ("tdiff/compat.py", "tdiff/execute/interpreter/shims.py", "tdiff/execute/interpreter/stock.py"):
        assert f"# {'-' * 66} {name}" in text
    bundle = library.Bundle()
    bundle.add_source("import numpy as np\n\n\ndef f():\n    return np\n", "a.py")
    with pytest.raises(library.RenderError, match="`f` is defined by an earlier module"):
        bundle.add_source("def f():\n    return 1\n", "b.py")
    with pytest.raises(library.RenderError, match="`g` .* is not defined before it"):
        bundle.add_source("from .a import g\n", "c.py")
    with pytest.raises(library.RenderError, match="`np` names another object"):
        bundle.add_source("import numpy.linalg as np\n", "d.py")
    bundle.add_source("from .a import f\nimport numpy as np\n\nx = f()\n", "e.py")  # (what came before: fine)
    assert "from .a import" not in bundle.text()
