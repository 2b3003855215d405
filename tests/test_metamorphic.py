"""The metamorphic profile (`--tdiff-backends metamorphic`): compiled variants of each kernel against
each other (autotune configs, else launch-option variants), the reference asked only when they
disagree; without a GPU it says so and runs the default opinions."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

import tdiff
from tdiff import options
from tdiff.core.backend_spec import BackendSpec, parse_all
from tdiff.core.case import Case
from tdiff.core.rerun import REFERENCE_RUN
from tdiff.drive.runner import Runner
from tdiff.judge.opinions import OPTION_VARIANTS, Opinions, choose, metamorphic
from tdiff.strategies import tensor_arg


def _check(kernel):
    return tdiff.declaration.checks_of(kernel)[0]


def test_an_autotuned_kernel_compares_its_configs():
    from suites import autotuned

    op = metamorphic(_check(autotuned.axpb_kernel))
    assert op.labels == ("compiled[config=0]", "compiled[config=1]") and op.pairs == ((0, 1),)
    assert op.reference_on_divergence and "autotune configs 0, 1 of 2" in op.note
    assert "the reference is asked only when they disagree" in op.note


def test_a_plain_kernel_compares_launch_option_variants_and_asks_the_reference_only_on_divergence():
    from suites import vector_add

    op = choose(_check(vector_add.add_kernel), parse_all(("metamorphic",)), lambda: True)
    assert op.labels == OPTION_VARIANTS and "reference" not in op.labels
    assert len(op.pairs) == 6 and op.reference_on_divergence


def test_without_a_gpu_the_profile_says_it_did_not_run():
    from suites import vector_add

    op = choose(_check(vector_add.add_kernel), parse_all(("metamorphic",)), lambda: False)
    assert op.labels == ("interpreter", "reference")
    assert op.note.startswith("no CUDA GPU: the metamorphic profile (compiled variants) was not run")


def test_metamorphic_stands_alone():
    with pytest.raises(ValueError, match="metamorphic stands alone"):
        options.build(lambda n: "metamorphic,compiled" if n == "backends" else None, Path("."))
    built = options.build(lambda n: "metamorphic" if n == "backends" else None, Path("."))
    assert built.backends == (BackendSpec("metamorphic"),)
    from tdiff import strategies as tst
    from tests.test_check import _decorate, ok_launch

    with pytest.raises(tdiff.DeclarationError, match="metamorphic stands alone"):
        _decorate(launch=ok_launch, x=tst.tensors(ndim=1), y=tst.tensors(like="x"),
                  backends=["metamorphic", "interpreter"])


def _judge(kernel, specs):
    runner = Runner(tdiff.RunOptions(isolation="none", corpus_dir=None, repro_dir=None))
    check = _check(kernel)
    opinions = Opinions(parse_all(specs), ((0, 1),), "test", parse_all(("reference",)))
    return runner.judge(check, opinions=opinions)


def test_the_reference_decides_a_disagreement_and_is_not_run_otherwise():
    from suites import vector_add

    case = Case({"x": tensor_arg(torch.tensor([1.0, 2.0, 3.0])), "y": tensor_arg(torch.tensor([0.5, 0.25, 4.0]))})
    judge = _judge(vector_add.add_kernel, ("tests.faulty:FakeCompiledExact", "tests.faulty:FakeCompiledWrong"))
    verdict, ev = judge.verdict(case, final=True)
    assert verdict.label == "compiled' wrong", verdict  # (the second of two backends labelled compiled)
    assert REFERENCE_RUN in ev.extra and "compiled agrees with the reference" in verdict.reasons[0]
    agree = _judge(vector_add.add_kernel, ("tests.faulty:FakeCompiledExact", "tests.faulty:FakeCompiledExact"))
    verdict, ev = agree.verdict(case, final=True)
    assert verdict.label == "passed" and REFERENCE_RUN not in ev.extra and "reference" not in ev.outcomes
    assert np.isfinite(case.inputs["x"].values()).all()
