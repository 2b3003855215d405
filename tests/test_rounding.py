"""Random rounding (tdiff.execute.interpreter.rounding): one ulp up or down, never to an infinity or across zero;
sums rounded as the trees and chains they are."""

import numpy as np

from tdiff.execute.interpreter.rounding import Rounder


def test_perturb_moves_finite_values_by_at_most_one_ulp_and_leaves_the_rest():
    r = Rounder(1)
    x = np.array([1.0, -3.5, 0.0, np.inf, -np.inf, np.nan, np.finfo(np.float32).max], np.float32)
    seen = set()
    for _ in range(20):
        y = r.perturb(x)
        assert y.dtype == np.float32
        ulps = (y[:2].view(np.int32).astype(np.int64) - x[:2].view(np.int32).astype(np.int64))
        assert np.all(np.abs(ulps) <= 1)
        seen.update(int(u) for u in ulps)
        assert y[2] == 0 and np.isinf(y[3]) and np.isinf(y[4]) and np.isnan(y[5]) and np.isfinite(y[6])
    assert seen == {-1, 0, 1}


def test_perturb_steps_bfloat16_bits_and_float16():
    r = Rounder(2)
    bits = np.array([0x3F80, 0xBF80, 0x7F80, 0x0000], np.uint16)  # 1.0, -1.0, inf, 0 as bfloat16
    moved = {int(v) for _ in range(20) for v in r.perturb(bits)[:1]}
    assert moved <= {0x3F7F, 0x3F80, 0x3F81} and len(moved) > 1
    assert all(int(r.perturb(bits)[k]) == int(bits[k]) for k in (2, 3))
    h = r.perturb(np.full(50, 2.0, np.float16))
    assert set(np.unique(h).tolist()) <= {float(np.nextafter(np.float16(2), np.float16(0))), 2.0,
                                          float(np.nextafter(np.float16(2), np.float16(4)))}


def test_a_tree_sum_in_float16_accumulates_its_own_rounding():
    x = np.full(4096, 0.1, np.float16)
    exact = 4096 * float(np.float16(0.1))
    sums = [float(Rounder(k).tree_sum(x, 0, False)) for k in range(1, 5)]
    assert all(abs(s - exact) < 4 for s in sums)  # a tree: the error of log2(4096) roundings, not 4096
    assert len(set(sums)) > 1  # and it differs from run to run
    chain = Rounder(1).chain_sum(np.ones((5, 2), np.float32), 0)
    assert chain.shape == (5, 2) and np.allclose(chain[:, 0], [1, 2, 3, 4, 5], rtol=1e-6)


def _atomic_sum(spec, x):
    import suites.semantics.atomics_random as A
    import tdiff
    from tdiff.core.case import Case
    from tdiff.execute.interpreter.backend import InterpreterBackend
    from tdiff.judge.targets import view
    from tdiff.strategies import tensor_arg

    chk = next(iter(tdiff.checks_of(A.float_atomics)))
    case = Case({"x": tensor_arg(x)})
    return view(InterpreterBackend(spec).run(chk, case), case).targets["returned"].values


def test_a_float_atomic_add_rounds_at_random_in_an_ensemble_run():
    # an accumulation through atomics rounds once per add: the ensemble must see it (a CPU soak seed judged a
    # sequential sum of 188 values a bug where only its rounding differed), the plain run stays IEEE and in order
    import torch

    from tdiff.core.backend_spec import BackendSpec

    x = torch.from_numpy(np.random.default_rng(3).uniform(-1e3, 1e3, 188).astype(np.float32))
    plain = _atomic_sum(BackendSpec("interpreter"), x)
    again = _atomic_sum(BackendSpec("interpreter"), x)
    runs = [_atomic_sum(BackendSpec("interpreter", rounding=k), x) for k in (1, 2, 3)]
    assert plain[0] == again[0]
    assert any(r[0] != plain[0] for r in runs)  # the sum moved under random rounding
    assert all(abs(r[0] - plain[0]) <= 188 * 2.0**-23 * np.abs(x.numpy()).sum() for r in runs)
    assert all(r[1] == plain[1] and r[2] == plain[2] for r in runs)  # max and min are exact
