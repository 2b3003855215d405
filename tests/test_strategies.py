"""Strategies reach every layout, special value and specialization class, and shrink to simple cases."""

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, find, given, settings
from hypothesis import strategies as st

from tdiff import strategies as tst
from tdiff.core.dtypes import as_float64, dtype
from tdiff.generate.layouts import LAYOUTS
from tdiff.generate.values import FLOAT_SPECIALS, INT_SPECIALS

DRAWS = settings(max_examples=300, derandomize=True, database=None, phases=[Phase.generate],
                 suppress_health_check=list(HealthCheck))


def _collect(strategy, n_tags=None):
    seen = set()

    @DRAWS
    @given(strategy)
    def run(value):
        seen.update(value.tags if hasattr(value, "tags") else value)

    run()
    return seen


def test_every_layout_class_appears_and_views_are_valid():
    seen = set()

    @DRAWS
    @given(tst.tensors(ndim=2, max_side=12, readonly=True, dtype=["float32", "float16", "int32"]))
    def run(t):
        seen.add(t.layout.split("-")[0])  # size1-inherited, size1-arbitrary, size1-zero: the class size1
        idx = t.view_index()
        assert idx.min(initial=0) >= 0 and idx.max(initial=0) < t.storage.size
        if t.layout != "expanded" and t.numel:
            assert np.unique(idx).size == idx.size  # writable layouts never alias
        if t.layout == "padded" and t.shape[0] > 1:
            assert t.strides[0] > t.shape[1]
        gaps = ~t.in_view()
        if gaps.any() and t.dt.is_float:
            assert np.isnan(as_float64(t.storage[gaps], t.dt)).all()  # poison in every gap

    run()
    assert seen == set(LAYOUTS)


def test_every_special_value_class_appears():
    floats = _collect(tst.tensors(ndim=1, max_side=64, dtype=["float32", "float16", "bfloat16"]))
    ints = _collect(tst.tensors(ndim=1, max_side=64, dtype=["int32", "int8", "int64"]))
    assert set(FLOAT_SPECIALS) <= floats
    assert set(INT_SPECIALS) <= ints


def test_specials_are_really_there():
    @DRAWS
    @given(tst.tensors(shape=(32,), dtype="float16", layouts=["contiguous"]))
    def run(t):
        v = as_float64(t.storage, t.dt)
        if "nan" in t.tags:
            assert np.isnan(v).any()
        if "-inf" in t.tags:
            assert (v == -math.inf).any()
        if "-0.0" in t.tags:
            assert ((v == 0) & np.signbit(v)).any()
        if "subnormal" in t.tags:
            assert ((np.abs(v) > 0) & (np.abs(v) < dtype("float16").tiny)).any()
        if "max" in t.tags:
            assert (v == 65504).any()

    run()


def test_values_can_be_narrowed():
    @DRAWS
    @given(tst.tensors(shape=(64,), values=tst.values(0, 10, nan=False)))
    def run(t):
        v = t.values().astype(np.float64)
        assert np.isfinite(v).all() and (v >= 0).all() and (v <= 10).all()

    run()


def test_the_smallest_normal_can_be_left_out():
    # (liger 32: a class weight of float32's smallest normal; subnormal=False alone keeps it)
    f32 = dtype("float32")
    assert "tiny" in tst.values(0, 4, subnormal=False).kinds(f32)
    assert "tiny" not in tst.values(0, 4, subnormal=False, tiny=False).kinds(f32)

    @DRAWS
    @given(tst.tensors(shape=(64,), dtype="float32", values=tst.values(0, 4, subnormal=False, tiny=False)))
    def run(t):
        v = t.values().astype(np.float64)
        assert not ((v > 0) & (v <= f32.tiny)).any()

    run()


def test_values_are_mostly_dense_with_named_structures_besides():
    # hypothesis's own `arrays` mostly repeats one fill value, which hides indexing bugs; tdiff's values
    # are dense, and besides come in structures dense values hide bugs behind (tdiff.generate.values)
    seen = []

    @DRAWS
    @given(tst.tensors(shape=(64,), dtype="float32", values=tst.values(specials=False)))
    def run(t):
        v = t.values()
        seen.append(v)

    run()
    dense = sum(np.unique(v).size >= 16 for v in seen)
    assert dense >= len(seen) // 3, (dense, len(seen))
    assert any(np.unique(v).size == 1 for v in seen)  # constant
    assert any((v == 0).sum() >= 60 and np.abs(v).max() >= 4 for v in seen)  # sparse
    assert any((v < 0).all() for v in seen)  # negative


def test_each_specialization_class_appears():
    ints = set()

    @DRAWS
    @given(tst.sizes(block=64))
    def run(n):
        ints.add(tst.specialization(n))
        ints.add(("tail", n % 64))

    run()
    assert {"eq1", "div16", "odd", "other"} <= ints
    assert {("tail", 63), ("tail", 0), ("tail", 1)} <= ints  # k*B-1, k*B, k*B+1
    aligned = _collect(tst.tensors(ndim=1, dtype=["float32", "float16"]))
    assert {"aligned", "misaligned"} <= aligned


def test_sizes_cover_every_block_of_an_autotuned_kernel():
    seen = set()

    @DRAWS
    @given(tst.sizes(block=(64, 256), max_blocks=3))
    def run(n):
        seen.add(n)

    run()
    assert {255, 256, 257, 511, 513} & seen and {63, 65, 127, 129} & seen  # both configs' tails
    assert max(seen) > 256 and max(seen) <= 769  # a second program of the larger block
    with pytest.raises(ValueError, match="positive int"):
        tst.sizes(block=(64, 0))
    assert tst.sizes(block=[64, 256], max_blocks=3) is tst.sizes(block=(64, 256), max_blocks=3)  # a list works too


def test_ints_hit_specialization_classes():
    seen = set()

    @DRAWS
    @given(tst.ints(1, 1000))
    def run(n):
        seen.add(tst.specialization(n))

    run()
    assert seen == {"eq1", "div16", "odd", "other"}


def test_shrinks_to_small_contiguous_float32():
    t = find(tst.tensors(ndim=2, dtype=["float16", "bfloat16", "float32"]), lambda t: t.numel >= 3,
             settings=settings(database=None, max_examples=500, derandomize=True))
    assert t.dtype == "float32" and t.layout == "contiguous" and t.numel == 3 and t.offset == 0


def test_like_and_named_dims_resolve_in_a_check():
    import torch
    import triton

    from suites import layer_norm, matmul

    check = matmul.matmul_kernel.__tdiff_checks__[0]
    seen = set()

    @DRAWS
    @given(tst.case_strategy(check))
    def run(case):
        a, b = case.inputs["a"], case.inputs["b"]
        assert a.shape[1] == b.shape[0] and a.dtype == b.dtype
        assert (case.dims["M"], case.dims["K"], case.dims["N"]) == (a.shape[0], a.shape[1], b.shape[1])
        seen.add(a.dtype)

    run()
    assert seen == {"float32", "float16"}
    ln = layer_norm.layer_norm_fwd.__tdiff_checks__[0]
    case = find(tst.case_strategy(ln), lambda c: True, settings=settings(database=None))
    assert case.inputs["w"].shape == (case.inputs["x"].shape[1],)
    del torch, triton


def test_configs_are_drawn_from_the_autotuner():
    from suites import autotuned

    check = autotuned.axpb_kernel.__tdiff_checks__[0]
    seen = set()

    @DRAWS
    @given(tst.case_strategy(check))
    def run(case):
        seen.add((case.config, case.inputs["alpha"]))

    run()
    assert {c for c, _ in seen} == {0, 1} and {a for _, a in seen} == {0.5, 2.0, -3.0}


def test_inputs_composite_and_torch_tensors():
    import torch

    @st.composite
    def pair(draw):
        n = draw(st.integers(1, 8))
        x = torch.arange(2 * n, dtype=torch.float32)[::2]
        return {"x": x, "n": n}

    case = find(st.just(None).flatmap(lambda _: pair()), lambda d: d["n"] == 3, settings=settings(database=None))
    arg = tst.tensor_arg(case["x"])
    assert arg.strides == (2,) and np.array_equal(arg.values(), [0, 2, 4])


def test_some_float_tensors_cluster_around_an_offset():
    # values = an offset plus noise small against it (activations after a bias, timestamps, probabilities near 1):
    # statistics that cancel (E[x^2] - E[x]^2) and normalisations go wrong there; drawn for every float tensor, as
    # one structure among the others, and a value class of the boundary plan
    from tdiff.generate.values import OFFSET, _classes

    seen = []

    @DRAWS
    @given(tst.tensors(ndim=2, max_side=16, dtype=["float32", "float16"], values=tst.values(specials=False)))
    def run(t):
        seen.append((t.dtype, t.values().astype(np.float64).reshape(-1)))

    run()

    def clustered(dt, v):  # (shifted values reach |mean| 8 at most; constant ones have no spread)
        c = abs(v.mean()) if v.size > 1 else 0.0
        return c >= 16 and 0 < v.max() - v.min() <= c * (2.0**-5 if dt == "float32" else 2.0**-2)

    offset = sum(clustered(dt, v) for dt, v in seen)
    assert len(seen) // 40 <= offset <= len(seen) // 4, (offset, len(seen))
    assert {"float32", "float16"} <= {dt for dt, v in seen if clustered(dt, v)}
    assert OFFSET in [k.name for k in _classes(dtype("float32"), tst.values(), None, ("normal",))]


def test_offset_values_stay_inside_the_bounds():
    @DRAWS
    @given(tst.tensors(shape=(8, 8), values=tst.values(0.5, 1.0, specials=False)))
    def run(t):
        v = t.values().astype(np.float64)
        assert (v >= 0.5).all() and (v <= 1.0).all()

    run()
