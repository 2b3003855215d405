"""The interpreter runs what the compiler accepts (issue 57): module-level aliases of builtins and jit functions,
constexpr globals, `getattr(tl, ...)` at module level, a scalar comparison broadcast into a mask, `.to()` on a loop
index, `is` on a dtype a device function was given; and what it cannot run is set aside under a name that says
what it is (`bench/reach/interpreter_reach.py` measures this over every installed real-library kernel)."""

import inspect
import re

import pytest
import torch
import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

import tdiff
from tdiff import strategies as tst
from tdiff.core import limitations
from tdiff.core.case import Case
from tdiff.execute.interpreter import shims
from tdiff.execute.interpreter.backend import InterpreterBackend
from tdiff.strategies import tensor_arg

pytestmark = pytest.mark.triton_matrix  # CI repeats these under every allowed Triton minor

# the forms released kernels write (a cross-entropy kernel: `cast = tl.cast`; fla: `gather = tl.gather`)
cast = tl.cast
my_exp = getattr(tl, "exp")  # noqa: B009  (the form under test)
my_sum = tl.sum  # (a jit function, not a builtin)
SCALE: tl.constexpr = tl.constexpr(2.0)


@triton.jit
def _double(x):
    return x * 2


twice = _double  # an alias of a user jit function

OPTS = tdiff.RunOptions(isolation="none", corpus_dir=None, repro_dir=None, backends=("interpreter", "reference"),
                        max_examples=12, shrink_budget=5)


def _launch(kernel, x):
    out = torch.empty_like(x)
    kernel[(1,)](x, out, x.numel(), BLOCK=triton.next_power_of_2(x.numel()))
    return out


X = tst.tensors(shape=(tst.sides(1, 16),), layouts=["contiguous"], values=tst.values(-4, 4, specials=False))


@tdiff.check(launch=_launch, reference=lambda x: x * 4 + 1 + x.sum() * 0, x=X)
@triton.jit
def aliased(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    y = twice(cast(x, tl.float32) * SCALE) + my_exp(x * 0) + my_sum(x * 0, axis=0)
    tl.store(out_ptr + offs, y, mask=offs < n)


@tdiff.check(launch=_launch, reference=lambda x: x * 4 + 1, x=X)
@triton.jit
def aliased_truncates(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    y = twice(cast(x, tl.int32) * SCALE) + my_exp(x * 0)  # the bug: the cast truncates x to an integer
    tl.store(out_ptr + offs, y, mask=offs < n)


def _run_check(kernel):
    return tdiff.Runner(OPTS).run_check(tdiff.checks_of(kernel)[0])


def test_a_kernel_calling_module_level_aliases_of_builtins_runs_and_is_judged():
    r = _run_check(aliased)
    assert r.status == "passed" and r.judged > 0, r.report()
    assert r.shims.get(shims.BUILTIN_ALIASES, 0) > 0


def test_a_planted_bug_behind_an_alias_is_found():
    r = _run_check(aliased_truncates)
    assert r.status == "failed", r.report()


def _interpret(kernel, x):
    return InterpreterBackend().run(tdiff.checks_of(kernel)[0], Case({"x": tensor_arg(x)}))


def test_without_the_shim_the_alias_is_set_aside_and_the_builtin_named(monkeypatch):
    monkeypatch.setitem(shims.ENABLED, shims.BUILTIN_ALIASES, False)
    out = _interpret(aliased, torch.ones(4))
    assert out.error is not None and out.error.kind == "limitation", out.error
    assert out.error.limitation == "unpatched-builtin" and "triton.language.core.cast" in out.error.message


def test_the_module_globals_are_restored_and_the_kernel_still_compiles(tmp_path, monkeypatch):
    out = _interpret(aliased, torch.arange(4.0))
    assert out.error is None and out.returned.values.tolist() == [1.0, 5.0, 9.0, 13.0]
    assert cast is tl.cast and my_exp is tl.exp and globals()["cast"] is tl.cast
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path))  # a fresh compile, no cache hit
    src = ASTSource(fn=aliased, signature={"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"},
                    constexprs={"BLOCK": 8})
    assert "ptx" in triton.compile(src, target=GPUTarget("cuda", 80, 32)).asm


# -- the other forms: each runs with its shim, and fails (or computes otherwise) without it

@triton.jit
def splat_mask(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    pid_b = tl.program_id(1)
    m = (offs < n) & (pid_b < 1)  # FlagGems' reflection_pad1d: `(offs_w < W_out) & (pid_b < B)`
    x = tl.load(x_ptr + offs, mask=m, other=0.0)  # Triton 3.9's stock: "mask has unsupported dtype"
    first = tl.load(x_ptr)
    keep = ~tl.broadcast_to(first != first, (BLOCK,))  # FlagGems' cummax `~prev_nan_mask`: stock xors floats
    tl.store(out_ptr + offs, tl.where(keep, x * 2, 0.0), mask=m)


@triton.jit
def loop_index_to(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], tl.float32)
    for i_t in range(2):  # fla's chunk kernels: `o_t = i_t.to(tl.int64) * BT + tl.arange(0, BT)`
        acc += tl.load(x_ptr + i_t.to(tl.int64) * 0 + offs, mask=offs < n, other=0.0)
    tl.store(out_ptr + offs, acc, mask=offs < n)


@triton.jit
def _lowest(dtype):
    if dtype is tl.float32:  # FlagGems' topk `_get_finfo_val`: the compiler compares the constexpr's value
        return -3.0
    return None


@triton.jit
def dtype_is(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.store(out_ptr + offs, tl.where(x > 0, x, _lowest(x_ptr.dtype.element_ty)), mask=offs < n)


def _plain_launch(kernel, x):
    out = torch.zeros_like(x)
    kernel[(1,)](x, out, x.numel(), BLOCK=8)
    return out


class _Target:
    def __init__(self, kernel):
        self.name, self.kernel, self.launch, self.reference = kernel.fn.__name__, kernel, _plain_launch, None


FORMS = [  # (shim, kernel, input, expected, what stock TRITON_INTERPRET=1 says without it)
    (shims.BOOL_SPLAT, splat_mask, [1.0, -2.0, 3.0], [2.0, -4.0, 6.0], "mask has unsupported dtype|bitwise_xor"),
    (shims.INT_METHODS, loop_index_to, [1.0, -2.0, 3.0], [2.0, -4.0, 6.0], "'int' object has no attribute 'to'"),
    (shims.CONSTEXPR_IS, dtype_is, [1.0, -2.0, 3.0], [1.0, -3.0, 3.0], "'NoneType' object has no attribute"),
]


@pytest.mark.parametrize("shim,kernel,x,expected,without", FORMS, ids=[f[0] for f in FORMS])
def test_each_form_runs_with_its_shim_and_fails_without(monkeypatch, shim, kernel, x, expected, without):
    out = InterpreterBackend().run(_Target(kernel), Case({"x": tensor_arg(torch.tensor(x))}))
    assert out.error is None, out.error
    assert out.returned.values.tolist() == expected and out.trace.shims[shim] > 0
    monkeypatch.setitem(shims.ENABLED, shim, False)
    out = InterpreterBackend().run(_Target(kernel), Case({"x": tensor_arg(torch.tensor(x))}))
    assert out.error is not None and re.search(without, out.error.message) and out.error.kind == "exception", out.error


# -- what the interpreter cannot run is named for what it is

@triton.jit
def argmax_of_nan(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=float("nan"))
    tl.store(out_ptr + offs, x * 0 + tl.argmax(x, axis=0).to(tl.float32), mask=offs < n)


def test_an_argmax_over_an_all_nan_slice_is_a_named_limitation():
    from triton.runtime.interpreter import ReduceOps

    out = InterpreterBackend().run(_Target(argmax_of_nan), Case({"x": tensor_arg(torch.full((3,), float("nan")))}))
    if "nanargmax" not in inspect.getsource(ReduceOps):  # (Triton 3.4 to 3.6: np.argmax, which does not raise)
        assert out.error is None
        return
    assert out.error is not None and out.error.kind == "limitation" and out.error.limitation == "argmax-all-nan"


try:  # (fla-core's attnres and sinkhorn kernels are Gluon kernels)
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl
except ImportError:  # pragma: no cover (every supported Triton has it)
    gluon = None
else:
    @gluon.jit
    def gluon_copy(x_ptr, out_ptr, n, BLOCK: gl.constexpr):
        pid = gl.program_id(0)
        gl.store(out_ptr + pid, gl.load(x_ptr + pid))


@pytest.mark.skipif(gluon is None, reason="this Triton has no Gluon")
def test_a_gluon_kernel_is_a_named_limitation():
    out = InterpreterBackend().run(_Target(gluon_copy), Case({"x": tensor_arg(torch.ones(3))}))
    assert out.error is not None and out.error.kind == "limitation" and out.error.limitation == "gluon", out.error
    assert "Gluon" in limitations.describe("gluon")


def test_an_unpatched_builtin_is_named_in_the_error():
    from tests import hostile as H  # tl.extra.cuda.num_warps(), which Triton's interpreter leaves unpatched

    out = InterpreterBackend().run(H.warps_assumed.__tdiff_checks__[0], Case({"x": tensor_arg(torch.ones(4))}))
    assert out.error.limitation == "unpatched-builtin" and "triton.language.extra.cuda" in out.error.message
    assert "num_warps" in out.error.explained and "compile options" in limitations.describe("unpatched-builtin")
    r = tdiff.Runner(OPTS.with_(max_examples=3)).run_check(H.warps_assumed.__tdiff_checks__[0])
    notes = " ".join(r.notes)  # the "not judged" note names the builtin
    assert r.judged == 0 and "the builtin `triton.language.extra.cuda" in notes and "num_warps`" in notes, notes
