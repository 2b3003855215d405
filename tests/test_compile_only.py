"""The compile-only opinion (tdiff.execute.backends.compile_only): without a GPU, every specialization a case
launches is compiled for sm_90 and not run; a kernel Triton's compiler rejects where the interpreter ran it fails
with `compiled error (compile only)`, naming the line. Triton compiles without a GPU, so all of it runs here."""

import re

import pytest
import torch

import tdiff
from tdiff.core.backend_spec import COMPILE_ONLY, BackendSpec, parse_all
from tdiff.core.case import Case
from tdiff.core.limitations import KNOWN
from tdiff.core.outcome import ErrorInfo, Outcome
from tdiff.execute.backends.compile_only import CompileOnlyBackend
from tdiff.execute.launch_keys import native_specialize_impl
from tdiff.judge import verdict as V
from tdiff.judge.evidence import gather
from tdiff.judge.opinions import choose
from tdiff.judge.rules import Declared, Rules
from tdiff.strategies import tensor_arg
from tests import compile_only_kernels as C

pytestmark = pytest.mark.triton_matrix  # (Triton's frontend and driver differ between minors)


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    """An empty Triton cache: what is compiled is compiled here, not loaded."""
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton-cache"))


def _failure(kernel, opts):
    """The check's first failure, not shrunk: no test here asserts on the shrunk case (shrinking a compile error
    compiles every smaller case's class for sm_90: most of these tests' time, on every Triton of the matrix)."""
    with pytest.raises(tdiff.DivergenceError) as err:
        tdiff.verify(kernel, options=opts.with_(shrink_budget=0))
    (result,) = err.value.results
    return result, result.failures[0]


def test_a_python_if_on_a_tensor_fails_compile_only_naming_the_line(run_opts):
    result, div = _failure(C.if_on_tensor, run_opts)
    assert div.verdict.label == V.COMPILE_ONLY_ERROR == "compiled error (compile only)"
    assert div.verdict.targets == ("compile-only",)
    first = div.verdict.reasons[0]
    assert "compile_only_kernels.py:" in first and ": if x > 0:" in first, first
    assert "Boolean value of Tensor with more than one value is ambiguous" in first
    assert "for sm_90" in first  # (the specialization it compiled)
    assert "compile-only" in result.compared and "compile-only" in (result.pair_note or "")


def test_a_runtime_value_where_a_constexpr_is_needed_fails_in_the_classes_the_compiler_rejects(run_opts):
    _, div = _failure(C.static_range_on_a_runtime_value, run_opts)
    assert div.verdict.label == V.COMPILE_ONLY_ERROR
    first = div.verdict.reasons[0]
    assert ": for _ in tl.static_range(stride):" in first and "is not a constexpr" in first, first
    if native_specialize_impl is not None:  # (Triton 3.5+: launch keys name the specialization)
        assert "stride: i32" in first  # a stride of 1 is a constexpr: it compiles; the one named is another
    assert div.case.inputs["x"].strides != (1,)


def test_an_error_in_a_called_function_names_its_line(run_opts):
    _, div = _failure(C.if_in_a_called_function, run_opts)
    assert div.verdict.label == V.COMPILE_ONLY_ERROR
    assert ": if x > 0:  # the same mistake in a called function" in div.verdict.reasons[0]


def test_a_correct_kernel_passes_and_says_it_was_compiled(run_opts):
    (result,) = tdiff.verify(C.doubled, options=run_opts)
    assert result.status == "passed" and result.judged == result.cases > 0
    assert result.compared == "interpreter (+trace), reference, compile-only"
    assert "compiled for sm_90" in result.pair_note and "not run" in result.pair_note
    done = result.compile_only
    assert done["compiled"] + done["marked"] >= 1 and result.compiles == 0  # (not the compiled backend's)
    if native_specialize_impl is not None:  # (Triton 3.4 has no launch keys: it compiles every launch)
        assert done["compiled"] + done["marked"] + done["skipped"] < result.cases  # (once per class, not per case)


def test_off_the_interpreter_alone_passes_the_kernel(run_opts):
    (result,) = tdiff.verify(C.if_on_tensor, options=run_opts.with_(compile_only=False))
    assert result.status == "passed" and "compile-only" not in result.compared


def test_the_reproducer_compiles_here_and_shows_the_error(run_opts):
    _, div = _failure(C.if_on_tensor, run_opts)
    assert div.repro_path is not None, div.repro_note  # (kept only after it showed the error in a fresh process)
    text = div.repro_path.read_text()
    assert 'KINDS = {"compile-only": "compile-only"' in text or "'compile-only': 'compile-only'" in text
    assert "compiles each launch for sm_90 here" in text


def _cases(*sizes_and_strides):
    out = []
    for n, stride in sizes_and_strides:
        base = torch.randn(n * stride)
        out.append(Case({"x": tensor_arg(base[::stride] if stride > 1 else base)}))
    return out


NO_KEYS = pytest.mark.skipif(native_specialize_impl is None, reason="Triton 3.4 has no launch keys: compile-only "
                             "compiles every launch there")


@NO_KEYS
def test_each_class_is_compiled_once_however_many_cases_bring_it(fresh_cache):
    check = C.doubled.__tdiff_checks__[0]
    backend = CompileOnlyBackend()
    # sizes 3, 5, 7, 9: one specialization (n other, stride 1, both pointers aligned); 16: n a multiple of 16;
    # 5 with a stride of 2: another class of the stride; 16 with a stride of 2: both classes compiled before
    outcomes = [backend.run(check, c) for c in _cases((3, 1), (5, 1), (7, 1), (9, 1), (16, 1), (5, 2), (16, 2))]
    assert all(o.error is None for o in outcomes)
    assert [o.compiles for o in outcomes] == [1, 0, 0, 0, 1, 1, 0]
    assert [o.compile_skipped for o in outcomes] == [0, 0, 0, 0, 0, 0, 1]  # (counted: the run's summary says it)
    assert [o.cache_loads for o in outcomes] == [0] * 7
    assert len({k for o in outcomes for k in o.launch_keys}) == 4
    again = CompileOnlyBackend().run(check, _cases((4, 1))[0])  # another process: marked compiled by this one
    assert (again.compiles, again.cache_loads) == (0, 1)


@NO_KEYS
def test_a_rejected_specialization_is_compiled_once_and_fails_every_case_of_it(fresh_cache):
    check = C.static_range_on_a_runtime_value.__tdiff_checks__[0]
    backend = CompileOnlyBackend()
    outcomes = [backend.run(check, c) for c in _cases((3, 1), (5, 2), (7, 2), (9, 3))]
    assert outcomes[0].error is None and outcomes[0].compiles == 1
    assert [o.error.kind for o in outcomes[1:]] == ["compile"] * 3
    assert outcomes[1].error is outcomes[2].error is outcomes[3].error  # (its one compile's error, kept)


def test_the_pipeline_stops_after_ttgir_and_triton_caches_no_kernel_without_its_binary(fresh_cache, tmp_path,
                                                                                     monkeypatch):
    from triton.backends.nvidia.compiler import CUDABackend

    lowered = []
    make_llir = CUDABackend.make_llir
    monkeypatch.setattr(CUDABackend, "make_llir", lambda self, *a, **k: lowered.append(1) or make_llir(self, *a, **k))
    C.doubled.device_caches.clear()  # (a kernel the JIT compiled whole before would come from its memory)
    outcome = CompileOnlyBackend().run(C.doubled.__tdiff_checks__[0], _cases((3, 1))[0])
    assert outcome.error is None and outcome.compiles == 1
    assert lowered == []  # (LLVM IR, PTX and the cubin are two thirds of a compile: README)
    cached = [p.name for p in (tmp_path / "triton-cache").rglob("*") if p.is_file()]
    # (no kernel: at most a mark, which Triton 3.4 does not write)
    assert all(not n.endswith((".cubin", ".json")) for n in cached), cached


def _outcome(spec, error=None):
    return Outcome(spec.label, role=spec.role, error=error)


def test_a_compile_error_is_never_not_judged():
    # the interpreter hit a known limitation (the pair is set aside); the compiler rejects the kernel
    case = _cases((3, 1))[0]
    interp, ref, only = BackendSpec("interpreter"), BackendSpec("reference"), BackendSpec(COMPILE_ONLY)
    outcomes = {"interpreter": _outcome(interp, ErrorInfo("limitation", "no bf16", limitation="bf16-constant")),
                "reference": _outcome(ref),
                "compile-only": _outcome(only, ErrorInfo("compile", "CompilationError"))}
    outcomes["reference"].returned = torch.zeros(1)
    ev = gather(case, "k", outcomes, Rules(Declared(None, None)), [("interpreter", "reference")])
    assert V.decide(ev).label == V.COMPILE_ONLY_ERROR
    outcomes["compile-only"].error = None
    ev = gather(case, "k", outcomes, Rules(Declared(None, None)), [("interpreter", "reference")])
    assert V.decide(ev).label == V.NOT_JUDGED


def test_its_outcome_holds_no_results_to_check():
    case = _cases((3, 1))[0]
    outcomes = {"interpreter": _outcome(BackendSpec("interpreter")),
                "compile-only": _outcome(BackendSpec(COMPILE_ONLY))}
    ev = gather(case, "k", outcomes, Rules(Declared(None, None)), [])
    assert set(ev.reports) == {"interpreter"}  # (else: "never launched the declared kernel", also seen in it)


def test_where_the_interpreter_raises_too_it_is_the_interpreters_error():
    case = _cases((3, 1))[0]
    interp, ref, only = BackendSpec("interpreter"), BackendSpec("reference"), BackendSpec(COMPILE_ONLY)
    outcomes = {"interpreter": _outcome(interp, ErrorInfo("exception", "ValueError: arange")),
                "reference": _outcome(ref), "compile-only": _outcome(only, ErrorInfo("compile", "ValueError"))}
    ev = gather(case, "k", outcomes, Rules(Declared(None, None)), [("interpreter", "reference")])
    assert V.decide(ev).label == "interpreter error"


class _NoGPU:
    backends = None
    reference = None


def test_it_joins_only_where_the_compiled_backend_is_skipped():
    check = _NoGPU()
    op = choose(check, None, lambda: False, compile_only=True)
    assert op.labels == ("interpreter", "interpreter:reversed", "compile-only")
    assert op.pairs == ((0, 1),)  # compared with nothing
    assert choose(check, None, lambda: False, compile_only=False).labels == ("interpreter", "interpreter:reversed")
    assert "compile-only" not in choose(check, None, lambda: True, compile_only=True).labels  # a GPU compiles
    named = parse_all(("interpreter", "tests.faulty:FaultyInterpreter"))
    assert "compile-only" not in choose(check, named, lambda: False, compile_only=True).labels
    named = parse_all(("interpreter", "compile-only"))  # named: it runs, and is in no pair
    op = choose(check, named, lambda: False, compile_only=False)
    assert op.labels == ("interpreter", "interpreter:reversed", "compile-only") and op.pairs == ((0, 1),)


def test_block_pointers_removed_in_triton_3_9_are_an_error_not_an_interpreter_limitation():
    (descriptor,) = [lim for lim in KNOWN if lim.name == "tensor-descriptor"]
    # the compiler rejects them too (FINDINGS.md flaggems 10): the case fails wherever it runs
    assert not re.search(descriptor.pattern, "Block pointers have been removed in favor of the tensor descriptor API")
    assert re.search(descriptor.pattern, "'InterpreterBuilder' object has no attribute 'create_make_tensor_descriptor'")


def test_on_by_default_in_ci_only(monkeypatch):
    from tdiff import RunOptions

    monkeypatch.setenv("CI", "true")
    assert RunOptions().compile_only is True
    monkeypatch.delenv("CI")
    assert RunOptions().compile_only is False  # (it costs more than 15% of the CPU main job: README)
