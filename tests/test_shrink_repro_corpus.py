"""Divergences end as a small case, a standalone reproducer, and a corpus entry replayed forever."""

import json
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
import torch

import tdiff
from tdiff.core.case import Case, TensorArg, from_json, to_json
from tdiff.drive.runner import Runner
from tdiff.record import corpus
from tdiff.record.shrink import shrink
from tdiff.strategies import tensor_arg
from tests import kernels as K

BUGGY = textwrap.dedent('''
    import torch
    import triton
    import triton.language as tl

    import tdiff
    from tdiff import strategies as tst

    BLOCK = 64


    def launch(kernel, x):
        out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
        kernel[(triton.cdiv(x.numel(), BLOCK),)](x, out, x.numel(), x.stride(0), BLOCK=BLOCK)
        return out


    @tdiff.check(launch=launch, reference=lambda x: x * 2,
                 x=tst.tensors(shape=(tst.sizes(block=BLOCK, max_blocks=6),), dtype=["float32", "float16"]))
    @triton.jit
    def tail_kernel(x_ptr, out_ptr, n, stride, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs * stride, mask=mask, other=0.0)
        y = x * 2 + tl.where(offs == n - 1, 1.0, 0.0)  # BUG: the last element is off by one
        tl.store(out_ptr + offs, y, mask=mask)
''')


def _run(args, cwd):
    return subprocess.run([sys.executable, *args], cwd=cwd, capture_output=True, text=True, timeout=600)


def test_found_shrunk_reproduced_recorded_then_fixed(tmp_path):
    (tmp_path / "planted.py").write_text(BUGGY)
    driver = ("import sys, tdiff, planted\n"
              "try:\n"
              "    tdiff.verify(planted.tail_kernel, profile='ci', corpus_dir='corpus', repro_dir='out')\n"
              "except tdiff.DivergenceError as e:\n"
              "    print(e); sys.exit(1)\n")
    t0 = time.perf_counter()
    found = _run(["-c", driver], tmp_path)
    elapsed = time.perf_counter() - t0
    assert found.returncode == 1, found.stderr
    report = found.stdout
    assert "case: x=float32[1] contiguous" in report and "grid: (1, 1, 1)" in report
    assert "shrunk:" in report
    print(f"\nsearch + shrink + verdict + reproducer for the planted tail bug: {elapsed:.1f} s")
    # (reproduced: tdiff keeps a reproducer only once it has run it in a fresh process and seen it exit 1 with the
    # same kind of divergence on the same targets, here values of `returned`; record/repro/verify.py, tested in
    # test_mutants_killed.py)
    assert "disagrees with reference" in report and "reproducer:" in report
    (repro,) = tmp_path.glob("out/tail_kernel/*/repro.py")
    assert "import tdiff" not in repro.read_text()  # standalone: no tdiff needed
    (entry,) = tmp_path.glob("corpus/tail_kernel/*/entry.json")
    meta = json.loads(entry.read_text())
    assert meta["format"] == 1 and meta["kernel"]["name"] == "tail_kernel" and meta["versions"]["triton"]
    assert meta["case"]["inputs"]["x"]["shape"] == [1]
    still = _run(["-m", "tdiff.cli", "replay", "corpus", "--isolation", "none"], tmp_path)
    assert still.returncode == 1 and "FAILED" in still.stdout
    (tmp_path / "planted.py").write_text(BUGGY.replace("+ tl.where(offs == n - 1, 1.0, 0.0)", ""))
    fixed = _run(["-m", "tdiff.cli", "replay", "corpus", "--isolation", "none"], tmp_path)
    assert fixed.returncode == 0 and "1 passed" in fixed.stdout, fixed.stdout + fixed.stderr
    entry.write_text(json.dumps({**meta, "expect": "divergence"}))  # a known divergence that stopped: exit 1
    stale = _run(["-m", "tdiff.cli", "replay", "corpus", "--isolation", "none"], tmp_path)
    assert stale.returncode == 1 and "1 known but no longer diverging" in stale.stdout, stale.stdout


def test_planted_faulty_backend_is_shrunk_small(tmp_path):
    opts = tdiff.RunOptions(profile="ci", corpus_dir=tmp_path / "c", repro_dir=tmp_path / "o", isolation="none",
                            backends=("tests.faulty:FaultyFirstProgram", "interpreter"))
    with pytest.raises(tdiff.DivergenceError) as err:
        tdiff.verify(K.double_kernel, options=opts)
    (div,) = err.value.results[0].failures
    tensors, elements, programs = div.shrink.after
    assert elements <= 64 and programs <= 2
    assert div.shrink.seconds < 60
    print(f"\nshrink of the planted faulty-backend case: {div.shrink.describe()}")
    # interpreter live vs the faulty side's recorded result (it exited 1 so in a fresh process: see above)
    assert div.repro_path is not None, div.repro_note


def _judge(check, opts):
    runner = Runner(opts)
    return runner.judge(check)


def test_shrink_makes_layouts_contiguous_and_zeroes_what_does_not_matter():
    check = K.masked_tail_bug.__tdiff_checks__[0]
    judge = _judge(check, tdiff.RunOptions(isolation="none", corpus_dir=None, repro_dir=None))
    parent = torch.arange(2 * 40, dtype=torch.float32).reshape(2, 40) + 1
    case = Case({"x": tensor_arg(parent[1, 3:], layout="split")})
    verdict, ev = judge.verdict(case)
    assert verdict.failed
    small, verdict2, _, info = shrink(case, verdict, ev, judge.verdict, budget=30)
    x = small.inputs["x"]
    assert x.layout == "contiguous" and x.offset == 0
    assert (x.values() == 0).all()
    assert verdict2.signature == verdict.signature and info.evaluations > 1 and "made contiguous" in info.describe()


def test_corrupted_corpus_entries_give_readable_errors(tmp_path):
    opts = tdiff.RunOptions(profile="ci", max_examples=3, corpus_dir=tmp_path, repro_dir=None, isolation="none")
    check = K.double_kernel.__tdiff_checks__[0]
    case = Case({"x": tensor_arg(torch.arange(5, dtype=torch.float32))})
    verdict, ev = _judge(check, opts).verdict(case)
    path = corpus.write(tmp_path, check, case, verdict, ev)
    (res,) = tdiff.verify(K.double_kernel, options=opts)
    assert res.replayed == ((path.name, "passed"),)
    (path.parent / "removed-entry").mkdir()  # an empty folder (left by a sync) is no entry
    (res,) = tdiff.verify(K.double_kernel, options=opts)
    assert res.replayed == ((path.name, "passed"),)
    (path.parent / "removed-entry" / "tensors.npz").write_bytes(b"")  # a folder with files but no entry.json is
    with pytest.raises(tdiff.DivergenceError, match=r"entry.json is missing"):
        tdiff.verify(K.double_kernel, options=opts)
    (path.parent / "removed-entry" / "tensors.npz").unlink()
    (path / "entry.json").write_text("{ not json")
    with pytest.raises(tdiff.DivergenceError, match=r"entry.json is not valid JSON"):
        tdiff.verify(K.double_kernel, options=opts)
    (path / "entry.json").write_text(json.dumps({"format": 1, "kernel": {"name": "double_kernel"}, "case": {}}))
    (path / "tensors.npz").write_bytes(b"garbage")
    with pytest.raises(tdiff.DivergenceError, match=r"tensors.npz cannot be read"):
        tdiff.verify(K.double_kernel, options=opts)
    (path / "entry.json").write_text(json.dumps({"format": 99, "kernel": {}, "case": {}}))
    with pytest.raises(tdiff.DivergenceError, match=r"format 99 is not supported"):
        tdiff.verify(K.double_kernel, options=opts)


def test_cases_round_trip_through_json_and_npz():
    x = TensorArg("bfloat16", (2, 3), (4, 1), 1, np.arange(9, dtype=np.uint16), "padded")
    case = Case({"x": x, "n": 3, "alpha": 0.1, "flag": True, "name": "a", "pair": (1, 2.5)}, config=1,
                dims={"N": 3})
    meta, arrays = to_json(case)
    back = from_json(json.loads(json.dumps(meta)), arrays)
    assert back.inputs == case.inputs and back.config == 1 and back.dims == {"N": 3}
    assert back.digest() == case.digest()


def test_known_divergences_are_watched_not_failed(tmp_path):
    opts = tdiff.RunOptions(profile="ci", max_examples=2, corpus_dir=tmp_path, repro_dir=None, isolation="none",
                            backends=("tests.faulty:FaultyFirstProgram", "interpreter"))
    check = K.double_kernel.__tdiff_checks__[0]
    case = Case({"x": tensor_arg(torch.arange(5, dtype=torch.float32))})
    verdict, ev = _judge(check, opts).verdict(case)
    assert verdict.failed
    path = corpus.write(tmp_path, check, case, verdict, ev)
    meta = json.loads((path / "entry.json").read_text())
    meta["expect"] = "divergence"
    (path / "entry.json").write_text(json.dumps(meta))
    with pytest.raises(tdiff.DivergenceError):  # the faulty backend still fails new cases...
        tdiff.verify(K.double_kernel, options=opts)
    # ...and once "fixed", the check fails (as a strict xfail does) and the entry says what to do
    with pytest.raises(tdiff.DivergenceError, match=r"no\s+longer shows") as info:
        tdiff.verify(K.double_kernel, options=opts.with_(backends=("interpreter", "reference")))
    (res,) = info.value.results
    assert (path.name, "fixed") in res.replayed and res.status == "failed" and not res.failures
    assert 'set its "expect" to "pass"' in str(info.value)


def _recorded(tmp_path, backend="tests.faulty:FaultyFirstProgram", x=None):
    """Options comparing `backend` with the interpreter, double_kernel's check, and the corpus entry (under
    tmp_path) of the case `x` (default arange(5)) judged with them."""
    opts = tdiff.RunOptions(profile="ci", max_examples=2, corpus_dir=tmp_path, repro_dir=None, isolation="none",
                            backends=(backend, "interpreter"))
    check = K.double_kernel.__tdiff_checks__[0]
    case = Case({"x": tensor_arg(torch.arange(5, dtype=torch.float32) if x is None else x)})
    verdict, ev = _judge(check, opts).verdict(case)
    return opts, check, corpus.write(tmp_path, check, case, verdict, ev)


def test_a_known_divergence_bounded_to_older_tritons_is_a_regression_test_past_them(tmp_path):
    import triton

    from tdiff.record.summary import problem_lines, record

    opts, check, path = _recorded(tmp_path)
    meta = json.loads((path / "entry.json").read_text())
    here = triton.__version__
    clean = opts.with_(backends=("interpreter", "reference"))
    # the bug's Tritons exclude this one: the entry must pass, and does (the divergence is gone)
    meta.update(expect="divergence", expect_triton=f"<{here}")
    (path / "entry.json").write_text(json.dumps(meta))
    assert corpus.Entry(path).expected() == "pass"
    (res,) = tdiff.verify(K.double_kernel, options=clean)
    assert (path.name, "passed") in res.replayed and res.status == "passed"
    assert any(f"expects its divergence under triton <{here} only" in n for n in res.notes)
    # while the divergence shows, it fails as a regression test would
    with pytest.raises(tdiff.DivergenceError):
        tdiff.verify(K.double_kernel, options=opts)
    # under a specifier holding this Triton, it is a known divergence: gone, it fails the check, and the
    # check's block names why (not the first note)
    meta["expect_triton"] = f">={here}"
    (path / "entry.json").write_text(json.dumps(meta))
    assert corpus.Entry(path).expected() == "divergence"
    with pytest.raises(tdiff.DivergenceError) as info:
        tdiff.verify(K.double_kernel, options=clean)
    (res,) = info.value.results
    assert (path.name, "fixed") in res.replayed and "no longer shows" in res.why
    assert "no longer shows" in problem_lines(record(res), "XFAIL")[0]
    meta["expect_triton"] = "three point nine"
    (path / "entry.json").write_text(json.dumps(meta))
    with pytest.raises(tdiff.DivergenceError, match="not a version specifier"):
        tdiff.verify(K.double_kernel, options=clean)


def test_a_finding_check_fails_on_its_known_divergence_and_passes_once_it_is_gone(tmp_path):
    # an xfail(strict) check's corpus entry records the finding: while it shows, the check fails (XFAIL) whatever
    # the search draws; once it is gone, the check passes and a strict xfail says XPASS (a fix is never an XFAIL)
    import dataclasses

    opts, plain, path = _recorded(tmp_path, "tests.faulty:FaultyOnHuge", torch.tensor([1.0, 1e35, 3.0]))
    opts = opts.with_(max_examples=1)  # (FaultyOnHuge is wrong only past 1e30: the entry's case, not the search's)
    finding = dataclasses.replace(plain, marks=(pytest.mark.xfail(strict=True, reason="a finding"),))
    assert finding.expects_failure() and not plain.expects_failure()
    assert not dataclasses.replace(plain, marks=(pytest.mark.xfail(False, reason="fixed here"),)).expects_failure()
    meta = json.loads((path / "entry.json").read_text())
    meta["expect"] = "divergence"
    (path / "entry.json").write_text(json.dumps(meta))
    # the search's one case holds no such value: only the entry shows the finding
    res = tdiff.Runner(opts).run_check(finding)
    assert (path.name, "known") in res.replayed and not res.failures and res.status == "failed", res.notes
    assert res.why.startswith(f"corpus entry {path} still shows its known divergence")
    assert tdiff.Runner(opts).run_check(plain).status == "passed"  # (unmarked: a known divergence is watched)
    clean = opts.with_(backends=("interpreter", "reference"))
    assert tdiff.Runner(clean).run_check(plain).status == "failed"  # (unmarked: the fixed entry fails it)
    res = tdiff.Runner(clean).run_check(finding)
    assert (path.name, "fixed") in res.replayed and res.status == "passed" and not res.why, res.notes
    assert any("no longer shows" in n for n in res.notes)


def test_an_entry_recorded_under_another_triton_says_so_when_replayed(tmp_path):
    import triton

    opts, check, path = _recorded(tmp_path)
    assert json.loads((path / "entry.json").read_text())["versions"]["triton"] == triton.__version__
    clean = opts.with_(backends=("interpreter", "reference"))
    (same,) = tdiff.verify(K.double_kernel, options=clean)
    assert (path.name, "passed") in same.replayed and not same.other_versions  # recorded here: nothing to say
    meta = json.loads((path / "entry.json").read_text())
    meta["versions"]["triton"] = "3.0.0"
    (path / "entry.json").write_text(json.dumps(meta))
    (res,) = tdiff.verify(K.double_kernel, options=clean)
    assert (path.name, "passed") in res.replayed and res.other_versions == {"triton 3.0.0": 1}
    assert f"corpus entry {path} was recorded under triton 3.0.0; replayed here under triton {triton.__version__}" \
        in res.notes
    from tdiff.record.summary import aggregate, record

    (row,) = [r for r in aggregate([record(res)]) if r.kind.startswith("corpus entries")]
    assert (row.kind, row.checks, row.cases) == ("corpus entries recorded under triton 3.0.0", [res.check_id], 1)
