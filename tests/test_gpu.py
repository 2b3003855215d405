"""Tests of the compiled path; they need a CUDA GPU and are skipped (with the reason) without one."""

import subprocess
import sys

import numpy as np
import pytest
import torch
import triton

import tdiff
from tdiff.core.backend_spec import BackendSpec
from tdiff.core.case import Case
from tdiff.execute.workers import Job, Pool
from tdiff.strategies import tensor_arg
from tests import kernels as K
from tests.test_suites import _suite_checks

pytestmark = pytest.mark.gpu


def _case(first):
    return Case({"x": tensor_arg(torch.tensor([first, 0.5, 0.25, 0.125]))})


@pytest.mark.parametrize("kernel,name", _suite_checks())
def test_suite_compiled_and_interpreted_in_one_process(kernel, name, tmp_path):
    # isolation="none": the same kernel objects are compiled and interpreted, case after case, here
    opts = tdiff.RunOptions(profile="ci", isolation="none", corpus_dir=None, repro_dir=tmp_path,
                            backends=("compiled", "interpreter"))
    for r in tdiff.verify(kernel, options=opts):
        assert r.status == "passed", r.report()
        # (compiled here, or loaded from Triton's cache where an earlier run on this machine compiled it)
        assert r.compiles + r.cache_loads >= 1 and r.seconds.get("compiled", 0) > 0


def test_out_of_bounds_gpu_write_fails_one_case_and_the_run_goes_on():
    pool = Pool()
    try:
        ref = K.far_write_kernel.__tdiff_checks__[0].ref()
        spec = BackendSpec("compiled")
        bad = pool.run(Job(ref, spec, _case(1.0)), timeout=120)
        assert bad.error is not None and bad.error.kind in ("cuda", "crash"), bad.error
        print(f"\nout-of-bounds GPU write: {bad.error.summary()}")
        good = pool.run(Job(ref, spec, _case(-1.0)), timeout=120)
        assert good.error is None and pool.workers["gpu"].starts == 2  # a fresh worker, healthy
    finally:
        pool.close()


def test_device_pointer_load_under_the_interpreter_fails_one_case():
    pool = Pool()
    try:
        ref = K.device_pointer_kernel.__tdiff_checks__[0].ref()
        reported = pool.run(Job(ref, BackendSpec.parse("interpreter:cuda"), _case(1.0)), timeout=120)
        assert reported.error is None and reported.trace.violations  # stopped and reported
        print(f"\ndevice pointer, checked: {reported.trace.violations[0]}")
        spec = BackendSpec.parse("interpreter:cuda").with_(check_pointers=False)
        crashed = pool.run(Job(ref, spec, _case(1.0)), timeout=120)
        assert crashed.error is not None and crashed.error.kind == "crash", crashed.error
        print(f"device pointer, unchecked: {crashed.error.summary()}")
        fine = pool.run(Job(ref, spec, _case(-1.0)), timeout=120)
        assert fine.error is None
    finally:
        pool.close()


def test_bf16_dot_divergence_becomes_a_reproducer(tmp_path):
    opts = tdiff.RunOptions(profile="ci", max_examples=5, corpus_dir=tmp_path / "corpus", repro_dir=tmp_path / "out",
                            backends=("compiled", "interpreter"))
    with pytest.raises(tdiff.DivergenceError) as err:
        tdiff.verify(K.bf16_dot_kernel, options=opts)
    (div,) = err.value.results[0].failures
    print("\n" + div.report)
    assert div.verdict.label == "interpreter wrong"
    ran = subprocess.run([sys.executable, str(div.repro_path)], capture_output=True, text=True,
                         cwd=div.repro_path.parent)
    print(ran.stdout)
    assert ran.returncode == 1 and "compiled: ran here" in ran.stdout and "interpreter: ran here" in ran.stdout


def test_compiled_backend_records_launches_and_compiles():
    from tdiff.execute.backends.compiled import CompiledBackend

    check = K.double_kernel.__tdiff_checks__[0]
    case = Case({"x": tensor_arg(torch.arange(100, dtype=torch.float32))})
    out = CompiledBackend().run(check, case)
    assert out.error is None and out.launches[0].grid == (2, 1, 1)
    assert np.array_equal(out.returned.values, np.arange(100, dtype=np.float32) * 2)
    assert out.device.startswith("NVIDIA")


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_each_pool_compiles_on_its_own_gpu():
    check = K.double_kernel.__tdiff_checks__[0]
    case = Case({"x": tensor_arg(torch.arange(10, dtype=torch.float32))})
    for gpu in (0, 1):
        pool = Pool(gpu=gpu)
        try:
            out = pool.run(Job(check.ref(), BackendSpec("compiled"), case), timeout=120)
            assert out.error is None and out.device.endswith(f"(CUDA_VISIBLE_DEVICES={gpu})"), out.device
        finally:
            pool.close()


def test_launch_keys_predict_real_compiles():
    """The compile budget's dry launches (CPU tensors) classify arguments as Triton's JIT cache does:
    for every suite kernel they equal the keys the compiled backend reports from the real launches."""
    from tdiff.drive.runner import Runner
    from tdiff.execute.launch_keys import launch_keys

    opts = tdiff.RunOptions(profile="ci", max_examples=12, corpus_dir=None, repro_dir=None, compile_budget=0,
                            backends=("compiled", "interpreter"), shrink_budget=0, verdict=False)
    kernels = {id(p.values[0]): p.values[0] for p in _suite_checks()}
    pool = Pool()
    wrong, rows = [], []
    try:
        runner = Runner(opts, pool)
        for kernel in kernels.values():
            for check in tdiff.checks_of(kernel):
                judge = runner.judge(check)
                seen = 0
                for case in _cases(check, 6):
                    _, ev = judge.verdict(case)
                    reported = ev.outcomes["compiled"].launch_keys
                    predicted = launch_keys(check, case)
                    wrong += [(check.id, case)] if set(reported or ()) != set(predicted or ()) else []
                    seen += 1
                rows.append((check.kernel_name, seen))
    finally:
        pool.close()
    print("\n(kernel, cases): " + ", ".join(map(str, rows)))
    assert not wrong, wrong[:3]


def _cases(check, n):
    from hypothesis import HealthCheck, given, settings

    from tdiff.strategies import case_strategy

    out = []

    @settings(max_examples=n, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
    @given(case_strategy(check))
    def draw(case):
        out.append(case)

    draw()
    return out


# ---------------------------------------------------------------- trust on the GPU

from tests import hostile as H  # noqa: E402


def _run(kernel, name="tdiff", **changes):
    (check,) = [c for c in tdiff.checks_of(kernel) if c.name == name]
    opts = tdiff.RunOptions(profile="ci", corpus_dir=None, repro_dir=None, shrink_budget=5).with_(**changes)
    return tdiff.Runner(opts).run_check(check)


@pytest.mark.parametrize("kernel", [H.softmax_no_max, H.row_sum_drops_tail, H.row_max_zero_fill, H.rms_eps_outside,
                                    H.tiled_swapped_ids], ids=lambda k: k.fn.__name__)
def test_a_bug_both_backends_share_fails_on_the_gpu(kernel):
    r = _run(kernel)
    assert r.opinions == ("compiled", "interpreter", "reference")
    assert r.status == "failed", r.report()
    print(f"\n{r.check_id}: {[d.verdict.label for d in r.failures]}")
    assert r.failures[0].verdict.label in ("kernel bug", "unobserved result"), r.report()


@pytest.mark.parametrize("name", sorted(H.DECLARATIONS))
def test_mistaken_declarations_fail_on_the_gpu(name):
    r = _run(H.scale_kernel, name)
    assert r.status == "failed", r.report()
    print(f"\n{name}: {[d.verdict.label for d in r.failures]}")


def test_range_edge_kernels_pass_compiled_vs_interpreted():
    top = float(np.finfo(np.float32).max)
    runner = tdiff.Runner(tdiff.RunOptions(profile="ci", corpus_dir=None, repro_dir=None))
    results = []
    for kernel, inputs in ((H.atomic_sum, {"x": torch.tensor([top, top, -top, 1.0, top, 2.0, 3.0, -top])}),
                           (H.layer_norm, {"x": torch.tensor([[top, 1.0, 2.0, -top], [1.0, 2.0, 3.0, 4.0]])}),
                           (H.small_matmul, {"a": torch.tensor([[top, 1.0], [float("inf"), -2.0]]),
                                             "b": torch.tensor([[1.0, -1.0], [top, 3.0]])})):
        check = kernel.__tdiff_checks__[0]
        judge = runner.judge(check)
        v, ev = judge.verdict(Case({k: tensor_arg(t) for k, t in inputs.items()}))
        results.append((check.kernel_name, v.label, [k for k, _ in v.notes]))
        assert not v.failed, (check.kernel_name, v, v.notes)
    print("\n" + "\n".join(map(str, results)))
    # float16 sums of squares at and past 65504 (liger's RMSNorm "none"): a search, compiled vs interpreter vs
    # the float64 reference; rows past the limit fail as the kernel's, rows at it pass at the range edge
    r = _run(H.fp16_rms)
    print(f"fp16_rms: {r.status}, {[d.verdict.label for d in r.failures]}, caveats {dict(r.caveats)}")
    assert r.status in ("passed", "failed") and all(d.verdict.label == "kernel bug" for d in r.failures), r.report()
    r = _run(H.nan_into_finite)
    assert r.status == "failed" and r.failures[0].verdict.label == "kernel bug", r.report()
    r = _run(H.writes_padding)
    assert r.failures[0].verdict.label == "writes outside its view", r.report()


def test_loads_outside_the_view_and_a_tf32_float16_accumulator_on_the_gpu():
    r = _run(H.row_sum_over_reads)
    assert r.opinions == ("compiled", "interpreter", "reference")
    assert [d.verdict.label for d in r.failures] == ["reads outside its view"], r.report()
    assert _run(H.row_sum_strided).status == "passed"
    # the float16 accumulator (`acc += tl.dot(a, b).to(tl.float16)`) is an undeclared narrowing cast, not forgiven as
    # rounding (issue 31): compiled (tf32) and the interpreter (IEEE float32) agree with each other and both differ
    # from the reference where the cast fed the result: the kernel's bug, no backend blamed
    r = _run(H.tf32_matmul_fp16_acc)
    print(f"\n{r.check_id}: {[d.verdict.label for d in r.failures]}: {r.report()[:600]}")
    assert [d.verdict.label for d in r.failures] == ["kernel bug"], r.report()
    assert "cast to float16" in r.report(), r.report()
    r = _run(H.tf32_matmul)
    assert r.status == "passed", r.report()


def test_shims_give_the_compiled_numerics():
    from tests import test_shims as S

    for kernel in (S.eps_to, S.promotes, S.bf16_math):
        for r in tdiff.verify(kernel, profile="ci", corpus_dir=None, repro_dir=None):
            assert r.status == "passed" and "compiled" in r.opinions, r.report()
            print(f"\n{r.check_id}: {r.cases} cases compiled vs interpreter vs reference; shims {dict(r.shims)}")


def _size1_launch(kernel, x):
    out = torch.empty_like(x)
    n = x.numel()
    kernel[(triton.cdiv(n, 64),)](x, out, n, x.stride(0), BLOCK=64)
    return out


def test_a_bug_only_at_size_1_is_found_past_the_compile_budget():
    # the check's draws need many specializations (dtypes, alignment, sizes); max_compiles=8 leaves no
    # budget for new combinations, and the n == 1 class is compiled anyway because it is a new class
    import triton.language as tl

    @triton.jit
    def size1_bug(x_ptr, out_ptr, n, stride, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs * stride, mask=offs < n)
        y = tl.where(n == 1, x * 3, x * 2)  # the bug: a size of one is special-cased wrongly
        tl.store(out_ptr + offs, y, mask=offs < n)

    from tdiff import strategies as tst

    tdiff.check(launch=_size1_launch, reference=lambda x: x * 2, max_compiles=8,
                x=tst.tensors(shape=(tst.sizes(block=64),), dtype=tst.FLOATS))(size1_bug)
    with pytest.raises(tdiff.DivergenceError) as err:
        tdiff.verify(size1_bug, profile="ci", corpus_dir=None, repro_dir=None, isolation="none")
    (r,) = err.value.results
    d = r.failures[0]
    assert d.case.inputs["x"].shape == (1,) and "compiled" in d.evidence.outcomes, r.report()
    print(f"\nsize-1 bug: {d.verdict.label} after {r.cases} cases, {r.compiles} compiles")


def test_a_cached_second_run_compiles_nothing(tmp_path, monkeypatch):
    from suites import softmax

    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton-cache"))
    counts = []
    for _ in range(2):
        pool = Pool()  # a fresh worker each time: an empty in-memory cache
        try:
            (r,) = tdiff.verify(softmax.softmax_kernel, profile="ci", corpus_dir=None, repro_dir=None, executor=pool,
                                compile_ahead=0)
        finally:
            pool.close()
        counts.append((r.compiles, r.cache_loads))
    print(f"\n(compiles, loaded from Triton's cache): first run {counts[0]}, second run {counts[1]}")
    assert counts[0][0] > 0 and counts[1][0] == 0 and counts[1][1] == counts[0][0]


def test_compiling_ahead_compiles_each_binary_once_across_workers(tmp_path, monkeypatch):
    # the same derandomized cases with and without two compile workers, each run on an empty cache: together the
    # GPU worker and the compile workers compile exactly what the GPU worker alone compiled, none of it twice
    from suites import softmax

    runs = {}
    for workers in (0, 2):
        monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / f"triton-cache-{workers}"))
        pool = Pool()  # fresh workers: empty in-memory caches
        try:
            (r,) = tdiff.verify(softmax.softmax_kernel, profile="ci", corpus_dir=None, repro_dir=None, executor=pool,
                                compile_ahead=workers)
        finally:
            pool.close()
        runs[workers] = r
        print(f"\ncompile_ahead={workers}: wall {r.wall:.1f}s, GPU worker compiled {r.compiles} "
              f"({r.compile_seconds:.1f}s), loaded {r.cache_loads}, waited {r.compile_wait:.2f}s; ahead {r.ahead}")
    alone, shared = runs[0], runs[2]
    assert alone.status == shared.status == "passed" and alone.cases == shared.cases
    a = shared.ahead
    assert a["workers"] == 2 and a["compiles"] > 0 and not a["errors"], a
    assert shared.compiles + a["compiles"] == alone.compiles and shared.cache_loads == a["compiles"]

    def launchers(cache: str) -> list[str]:  # (each in a folder named by the hash of its C source)
        return sorted(p.parent.name for p in (tmp_path / cache).rglob("__triton_launcher*"))

    # the compile workers built launchers, the very ones the GPU worker's launches need: each built once
    assert a["launchers"] > 0 and launchers("triton-cache-2") == launchers("triton-cache-0"), a


@pytest.mark.parametrize("kernel,verdict_kind", [(H.row_sum_no_other, "values"), (H.gather_unmasked_index, "oob")],
                         ids=["sum", "index"])
def test_undefined_masked_lanes_are_named_on_the_gpu(kernel, verdict_kind):
    # the compiled kernel zero-fills the lanes (NVIDIA) and agrees with the reference; the interpreter's
    # poisoned lanes show the dependency, and the zero-filled rerun names it
    r = _run(kernel)
    assert r.opinions == ("compiled", "interpreter", "reference")
    d = r.failures[0]
    print(f"\n{r.check_id}: {d.verdict}")
    assert d.verdict.label == "reads undefined masked lanes" and d.verdict.kind == verdict_kind, r.report()
    compiled = d.evidence.pair("compiled", "reference")
    assert compiled is not None and not compiled.disagrees, r.report()


def test_masked_lanes_kept_out_of_the_result_pass_on_the_gpu():
    r = _run(H.row_sum_where)
    assert r.status == "passed", r.report()
    r = _run(H.row_lse_where)  # the poison goes through a max, then the where drops it
    assert r.status == "passed", r.report()


def test_undefined_masked_lanes_through_a_running_max_on_the_gpu():
    # NVIDIA's zero-filled lanes enter the max and the sum: compiled and interpreter both differ from the
    # reference, by different values; the poison is not dropped by the max (maxnum), the verdict names the load
    r = _run(H.row_lse_no_other)
    assert r.opinions == ("compiled", "interpreter", "reference")
    d = r.failures[0]
    print(f"\n{r.check_id}: {d.verdict}")
    assert d.verdict.label == "reads undefined masked lanes", r.report()
    assert "mask=cols < n).to(tl.float32)" in d.report
    assert "zero-filled it is wrong too" in d.report  # the compiled kernel's zeros disagree with the reference


def test_a_kernel_assuming_the_default_num_warps_is_found_by_a_variant_pair(tmp_path):
    # the default opinions pass it (num_warps=4 everywhere; the interpreter cannot read the option and
    # is set aside with a named limitation); compiled against compiled[num_warps=2] finds it
    default = _run(H.warps_assumed)
    assert default.status == "passed" and default.judged > 0, default.report()
    r = _run(H.warps_assumed, backends=("compiled", "compiled[num_warps=2]"), repro_dir=tmp_path)
    assert r.opinions == ("compiled", "compiled[num_warps=2]", "reference")
    d = r.failures[0]
    print(f"\nnum_warps variant: {d.verdict} after {r.first_failure} case(s)")
    assert d.verdict.label == "compiled[num_warps=2] wrong", r.report()
    # the reproducer runs both variants (never a recorded result for a variant, which could not go green)
    assert d.repro_path is not None, d.repro_note
    ran = subprocess.run([sys.executable, str(d.repro_path)], capture_output=True, text=True, cwd=d.repro_path.parent)
    print(ran.stdout[-600:])
    assert ran.returncode == 1 and "compiled[num_warps=2]: ran here" in ran.stdout, ran.stdout + ran.stderr


def test_exact_operations_agree_bit_for_bit_with_the_compiled_kernel():
    # tl.fma is rounded once by the GPU (fma.rn.f32) and by tdiff's interpreter (shim fma-rounding);
    # a conversion to bf16 rounds to nearest even on both: compared bit for bit, they agree
    from tdiff.execute.interpreter import shims
    from tests import semantics_kernels as SK

    opts = tdiff.RunOptions(profile="ci", isolation="none", corpus_dir=None, repro_dir=None,
                            backends=("compiled", "interpreter"), max_examples=50)
    (fma,) = tdiff.verify(SK.fma_kernel, options=opts)
    assert fma.status == "passed" and fma.judged > 0 and fma.shims[shims.FMA_ROUNDING] > 0, fma.report()
    (cast,) = tdiff.verify(SK.to_bf16, options=opts)
    assert cast.status == "passed" and cast.judged > 0, cast.report()


def test_an_integer_division_by_zero_is_named_on_the_gpu():
    from tests import semantics_kernels as SK

    opts = tdiff.RunOptions(profile="ci", isolation="none", corpus_dir=None, repro_dir=None,
                            backends=("compiled", "interpreter"), max_examples=50)
    (res,) = tdiff.verify(SK.divide_noted, options=opts)  # compiled and interpreter may differ there: a note
    print("\n" + res.report())
    assert res.status == "passed" and res.judged > 0


def test_the_metamorphic_profile_finds_a_kernel_assuming_the_default_num_warps(tmp_path):
    # compiled variants against each other, the reference asked only once they disagree
    r = _run(H.warps_assumed, backends=("metamorphic",), repro_dir=tmp_path)
    assert "reference" not in r.opinions and r.opinions[0] == "compiled", r.opinions
    d = r.failures[0]
    print(f"\nmetamorphic: {d.verdict} after {r.first_failure} case(s)")
    assert d.verdict.label.startswith("compiled[num_warps=") and d.verdict.label.endswith(" wrong"), r.report()


def test_compiled_variants_of_an_elementwise_kernel_agree_bit_for_bit():
    from suites import vector_add
    from tdiff.core.backend_spec import parse_all
    from tdiff.judge.opinions import Opinions
    from tdiff.judge.targets import view

    runner = tdiff.Runner(tdiff.RunOptions(isolation="none", corpus_dir=None, repro_dir=None))
    (check,) = tdiff.checks_of(vector_add.add_kernel)
    judge = runner.judge(check, opinions=Opinions(parse_all(("compiled", "compiled[num_warps=2]")), ((0, 1),)))
    for n in (1, 255, 257, 1000):
        x, y = torch.randn(n), torch.randn(n)
        case = Case({"x": tensor_arg(x), "y": tensor_arg(y)})
        verdict, ev = judge.verdict(case)
        (pair,) = ev.pairs
        a, b = ev.outcomes["compiled"], ev.outcomes["compiled[num_warps=2]"]
        assert verdict.label == "passed" and pair.comparison.ok and not pair.comparison.coarse, verdict
        assert ev.rules.ops(view(a, case), view(b, case)) == set()  # no tolerance: bit for bit


@pytest.mark.parametrize("prec,b,caveat", [("tf32", 1e-45, True), ("tf32", 3e-42, True), ("tf32", 1e-40, False),
                                           ("tf32x3", 1e-45, True), ("ieee", 1e-45, False)])
def test_a_compiled_tf32_dot_of_minus_inf_and_a_subnormal_passes_as_the_gpus_arithmetic(prec, b, caveat):
    # the H200 gives NaN for -inf * 1e-45 and 3e-42 in tf32 and tf32x3 (the subnormal truncated to 0), -inf for
    # 1e-40 and under ieee; the interpreter gives -inf: a modelled run (interpreter:gpu) gives the NaN
    from tests import gpu_arith_kernels as G

    a, m = torch.zeros(16, 16), torch.zeros(16, 16)
    a[0, 0], m[0, 0] = -float("inf"), b
    check = next(c for c in G.dot16.__tdiff_checks__ if c.name == f"{prec}_compiled")
    runner = tdiff.Runner(tdiff.RunOptions(profile="ci", corpus_dir=None, repro_dir=None, isolation="none"))
    judge = runner.judge(check)
    v, ev = judge.verdict(Case({"a": tensor_arg(a), "b": tensor_arg(m)}), final=True)
    compiled = ev.outcomes["compiled"]
    assert compiled.error is None, compiled.error
    from tdiff.judge.targets import view

    got = view(compiled, ev.case).targets["returned"].values[0, 0]
    print(f"\n{prec} -inf * {b}: compiled {got}; {v.label}; {[k for k, _ in v.notes]}")
    assert not v.failed, v
    assert bool(np.isnan(got)) == caveat
    assert any(k == "GPU arithmetic (NaN/inf)" for k, _ in v.notes) == caveat



def test_flaggems_layer_norm_on_a_row_whose_mean_div_full_rounds_onto_an_element_passes():
    # FlagGems' LayerNorm divides the row's sum by N with float32 `/` (div.full.f32: x * (1/5) for this row), so its
    # mean lands on x[0] and (x - mean) * rstd * inf is NaN on the GPU, where the interpreter's IEEE mean leaves one
    # ulp (inf): the GPU red of a random seed (bench/trust/soak.md); a modelled run (interpreter:gpu) gives the NaN
    pytest.importorskip("flag_gems")
    from bench.gpu.div_full import flaggems_row

    y, v = flaggems_row()
    assert np.isnan(y["compiled"]) and y["interpreter"] == np.inf, y
    assert not v.failed, v
    assert any("div.full" in t for k, t in v.notes if k == "GPU arithmetic (NaN/inf)"), v.notes
