"""Planted bugs are found by the default CI settings (interpreter against reference); correct kernels pass."""

import pytest

import tdiff
from tests import kernels as K


@pytest.fixture
def ci(tmp_path):
    # the defaults, except that nothing is written into the repository
    return tdiff.RunOptions(profile="ci", corpus_dir=tmp_path / "corpus", repro_dir=None)


def _found(kernel, opts):
    with pytest.raises(tdiff.DivergenceError) as err:
        tdiff.verify(kernel, options=opts)
    (result,) = err.value.results
    (div,) = result.failures
    return div


def test_masked_tail_bug(ci):
    div = _found(K.masked_tail_bug, ci)
    assert div.verdict.label == "out of bounds"
    assert "masked_tail_bug" in div.report and "kernels.py" in div.report  # says where


def test_bug_only_on_split_halves(ci):
    div = _found(K.row_stride_bug, ci)
    assert div.case.inputs["x"].layout == "split"
    # rows of a half split along the columns are not packed: the kernel reads the other half's elements
    assert div.verdict.label == "reads outside its view", div.report


def test_bug_only_on_misaligned_pointers(ci):
    div = _found(K.alignment_bug, ci)
    x = div.case.inputs["x"]
    assert (x.offset * 4) % 16 != 0  # the shrunk case keeps the misaligned offset


def test_correct_kernels_raise_no_alarm(ci):
    for kernel in (K.double_kernel, K.inplace_add_one, K.loop_reduce_kernel, K.heuristic_checked):
        (res,) = tdiff.verify(kernel, options=ci)
        assert res.status == "passed" and res.cases >= 10
