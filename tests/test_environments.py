"""Backends in another Python environment (`interpreter@/venv/bin/python`): the spec is parsed and
checked with errors that name it, its worker runs there and its results are compared; with
TDIFF_OTHER_PYTHON set to a venv holding another Triton (CI installs Triton 3.9.0), a real
cross-version run."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest

import tdiff
from tdiff import options
from tdiff.core.backend_spec import BackendSpec
from tdiff.core.backend_spec import label_kind as kind_of
from tdiff.execute.environments import probe, sys_path_for_other

OTHER = os.environ.get("TDIFF_OTHER_PYTHON")
OPTS = tdiff.RunOptions(profile="ci", corpus_dir=None, repro_dir=None, max_examples=8, isolation="process")


def test_the_spec_names_the_python_and_keeps_its_lane():
    spec = BackendSpec.parse(f"interpreter@{sys.executable}:zero-fill")
    assert (spec.kind, spec.python, spec.masked) == ("interpreter", sys.executable, "zero")
    assert spec.label == f"interpreter@{sys.executable}:zero-fill" and kind_of(spec.label) == "interpreter"
    assert spec.lane == f"cpu@{sys.executable}"
    assert BackendSpec.parse(f"compiled[num_warps=2]@{sys.executable}").launch == (("num_warps", 2),)


@pytest.mark.parametrize("text,message", [
    ("interpreter@/no/such/venv/bin/python", "is not an executable Python"),
    (f"reference@{sys.executable}", "only compiled and interpreter run in another environment"),
])
def test_bad_specs_name_themselves(text, message):
    with pytest.raises(ValueError, match=message) as err:
        BackendSpec.parse(text)
    assert repr(text) in str(err.value)
    with pytest.raises(ValueError, match=message):
        options.build(lambda name: f"interpreter,{text}" if name == "backends" else None, Path("."))


def test_a_python_that_cannot_import_triton_is_refused_with_its_reason(tmp_path):
    bare = tmp_path / "python"  # a Python without site-packages: no triton, torch or numpy
    bare.write_text(f"#!/bin/sh\nexec {sys.executable} -S \"$@\"\n")
    bare.chmod(bare.stat().st_mode | stat.S_IEXEC)
    with pytest.raises(ValueError, match=r"cannot import triton, torch, numpy and hypothesis.*ModuleNotFoundError"):
        probe(str(bare))
    with pytest.raises(ValueError, match=rf"--tdiff-backends 'interpreter@{bare}'"):
        options.build(lambda name: f"interpreter,interpreter@{bare}" if name == "backends" else None, Path("."))


def test_the_other_environment_sees_this_checkout_and_not_this_environments_packages():
    paths = sys_path_for_other()
    assert paths[0] == os.path.dirname(os.path.dirname(tdiff.__file__))
    assert not any("site-packages" in p for p in paths)
    assert not any(p.startswith(sys.base_prefix + os.sep + "lib") for p in paths)


def test_in_process_isolation_cannot_run_another_environment():
    from suites import vector_add

    with pytest.raises(ValueError, match="needs isolation='process'"):
        opts = OPTS.with_(isolation="none", backends=("interpreter", f"interpreter@{sys.executable}"))
        tdiff.verify(vector_add.add_kernel, options=opts)


def _lane(python: str):
    from suites import softmax

    (res,) = tdiff.verify(softmax.softmax_kernel, options=OPTS.with_(backends=("interpreter", f"interpreter@{python}")))
    return res


def test_a_lane_in_another_environment_runs_and_is_compared():
    res = _lane(sys.executable)  # this Python, started as another environment (its own worker, its own paths)
    assert res.status == "passed" and res.judged == res.cases > 0
    assert f"interpreter@{sys.executable}" in res.opinions and res.seconds.get(f"interpreter@{sys.executable}", 0) > 0
    # a pass names both environments' versions: in its summary line, its record (--tdiff-json) and the totals
    from tdiff.execute.environments import versions_here
    from tdiff.record.summary import check_lines, record, total_lines

    here = versions_here()
    assert res.environments == {f"interpreter@{sys.executable}": probe(sys.executable)} and res.here == here
    s = record(res)
    assert s["environments"] == res.environments and s["here"] == here
    line = check_lines(s)[0]
    assert f"environments: interpreter@{sys.executable}: triton " in line and f"; here: {here}; no divergence" in line
    assert any(ln.startswith(f"tdiff: environments: interpreter@{sys.executable}: ") for ln in total_lines([s]))


def test_a_divergence_between_environments_names_both_versions(tmp_path):
    from tests import faulty_env

    python = OTHER or sys.executable
    opts = OPTS.with_(backends=("interpreter", f"interpreter@{python}"), repro_dir=tmp_path, max_examples=4,
                      reduce_budget=0)  # (kernel reduction: not what this tests)
    with pytest.raises(tdiff.DivergenceError) as err:
        tdiff.verify(faulty_env.env_dependent, options=opts)
    text = str(err.value)
    assert f"interpreter@{python}: triton " in text and "; the others: triton " in text, text


@pytest.mark.skipif(not OTHER, reason="TDIFF_OTHER_PYTHON (a venv with another Triton) is not set")
def test_a_real_other_triton_runs_the_bundled_kernels():
    res = _lane(OTHER)
    assert res.status == "passed" and res.judged > 0
    import triton

    assert probe(OTHER).split(",")[0] != f"triton {triton.__version__}"


def test_a_module_that_fails_to_import_fails_again_with_its_reason(tmp_path):
    # (a worker in another environment may lack what a check module imports: every case says why)
    from tdiff.declaration import TargetRef

    bad = tmp_path / "needs_missing.py"
    bad.write_text("import no_such_module_here\n")
    ref = TargetRef("needs_missing_mod", str(bad), "k")
    for _ in range(2):
        with pytest.raises(ModuleNotFoundError, match="no_such_module_here"):
            ref.resolve()
