"""What `pytest --tdiff` prints and writes: checks labelled as pytest labels them, one block per check that
did not pass, one table of what was worked around (per kind, never per check), the --tdiff-json file,
progress while a check runs, and a run that leaves the checkout clean (new entries and reproducers in the
self-ignoring run directory, `tdiff corpus promote` to move a reviewed entry into the tracked corpus)."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import textwrap
from pathlib import Path

import pytest

from tests.projects import import_all_of_tdiff, kernel_project

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[1]

# before any pytester run: pytester restores sys.modules after each, and a Triton or tdiff module imported inside one
# would be half removed (Triton's C extension stays loaded; a kernel keeps the first tdiff.declaration)
import_all_of_tdiff()

KERNELS = textwrap.dedent('''
    import time

    import pytest
    import torch
    import triton
    import triton.language as tl

    import tdiff
    from tdiff import strategies as tst

    X = tst.tensors(shape=(tst.sizes(block=32),), layouts=["contiguous"])


    def launch(kernel, x):
        out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
        kernel[(triton.cdiv(x.numel(), 32),)](x, out, x.numel(), BLOCK=32)
        return out


    @triton.jit
    def twice(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)


    @triton.jit
    def thrice(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 3, mask=offs < n)


    @triton.jit
    def scaled(x_ptr, out_ptr, n, scale, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs, mask=offs < n)
        tl.store(out_ptr + offs, x * scale.to(tl.float32), mask=offs < n)  # float-args: stock .to() fails


    def launch_scaled(kernel, x):
        out = torch.empty_like(x)
        kernel[(triton.cdiv(x.numel(), 32),)](x, out, x.numel(), 2.0, BLOCK=32)
        return out


    def twice_ref(x):
        return x * 2


    def slow_twice_ref(x):
        time.sleep(1.5)
        return x * 2


    tdiff.check(launch=launch, reference=twice_ref, x=X, name="passes")(twice)
    tdiff.check(launch=launch, reference=twice_ref, x=X, name="fails")(thrice)
    tdiff.check(launch=launch, reference=twice_ref, x=X, name="known",
                marks=[pytest.mark.xfail(reason="known: thrice is not twice", strict=True)])(thrice)
    tdiff.check(launch=launch, reference=twice_ref, x=X, name="unexpected",
                marks=[pytest.mark.xfail(reason="thought wrong")])(twice)
    tdiff.check(launch=launch, reference=twice_ref, x=X, name="unexpected_strict",
                marks=[pytest.mark.xfail(reason="thought wrong, strictly", strict=True)])(twice)
    tdiff.check(launch=launch_scaled, reference=twice_ref, x=X, name="shim_a")(scaled)
    tdiff.check(launch=launch_scaled, reference=twice_ref, x=X, name="shim_b")(scaled)
    tdiff.check(launch=launch, reference=slow_twice_ref, x=X, name="slow", max_examples=3)(twice)
''')


@pytest.fixture
def project(pytester):
    # (no boundary plan: these count cases exactly; no kernel reduction: no test here asserts on it, and a failing
    # check with a reproducer paid up to 30 s for it)
    kernel_project(pytester, KERNELS, tdiff_examples=4, tdiff_profile="ci", tdiff_shrink_budget=5, tdiff_plan=0,
                   tdiff_isolation="none",
                   tdiff_reduce_budget=0)
    return pytester


def _run(project, *args):
    # in this process: what is tested is what the plugin prints and writes, not how a process starts (a fresh
    # interpreter costs 2-3 s of `import torch, triton` a run); the xdist test's workers are processes all the same
    return project.runpytest_inprocess("--tdiff", "-p", "no:cacheprovider", "--tdiff-repro-dir=none", *args)


def test_outcomes_are_labelled_as_pytest_labels_them_and_the_json_file_holds_every_check(project):
    result = _run(project, "-k", "not slow", "--tdiff-json", "run.json")
    result.assert_outcomes(passed=3, failed=2, xfailed=1, xpassed=1)
    out = result.stdout.str()
    summary = out[out.index("tdiff summary"):out.index("short test summary info")]
    lines = summary.splitlines()
    # one block per check that did not pass, labelled as pytest's outcome says, not as tdiff's status; the
    # expected first, what failed last (nearest the totals)
    assert [ln.split()[0] for ln in lines if "kernels.ops::" in ln and not ln.startswith(" ")] == [
        "XFAIL", "XPASS", "FAILED", "XPASS(strict)"], summary
    (xfail,) = [ln for ln in lines if ln.startswith("XFAIL")]
    assert "kernels.ops::thrice[known]: disagrees with reference on x=float32[" in xfail
    assert "XPASS   kernels.ops::twice[unexpected]: no divergence" in summary
    assert "          xfail: thought wrong, strictly" in summary
    (failed,) = [i for i, ln in enumerate(lines) if ln.startswith("FAILED  kernels.ops::thrice[fails]")]
    assert "disagrees with reference" in lines[failed] and lines[failed + 1].startswith("          case: x=float32[")
    assert "tdiff: 7 checks, " in summary and "3 passed, 2 failed, 1 xfailed, 1 xpassed" in summary
    assert "PASSED  kernels.ops" not in summary  # passing checks' own lines: only with -v

    data = json.loads((project.path / "run.json").read_text())
    assert data["format"] == 1
    by_id = {c["id"]: c for c in data["checks"]}
    assert {k: c["outcome"] for k, c in by_id.items()} == {
        "kernels.ops::twice[passes]": "PASSED", "kernels.ops::thrice[fails]": "FAILED",
        "kernels.ops::thrice[known]": "XFAIL", "kernels.ops::twice[unexpected]": "XPASS",
        "kernels.ops::twice[unexpected_strict]": "XPASS(strict)", "kernels.ops::scaled[shim_a]": "PASSED",
        "kernels.ops::scaled[shim_b]": "PASSED"}
    known = by_id["kernels.ops::thrice[known]"]
    assert known["nodeid"] == "kernels/ops.py::thrice[known]" and known["xfail_reason"] == "known: thrice is not twice"
    assert known["status"] == "failed" and known["divergences"][0]["verdict"] == "disagrees with reference"
    assert by_id["kernels.ops::twice[passes]"]["cases"] == 4 and by_id["kernels.ops::twice[passes]"]["judged"] == 4
    totals = data["totals"]
    assert totals["checks"] == 7 and totals["cases"] == sum(c["cases"] for c in data["checks"])
    assert totals["outcomes"] == {"FAILED": 1, "PASSED": 3, "XFAIL": 1, "XPASS": 1, "XPASS(strict)": 1}
    shim = [r for r in data["worked_around"] if r["kind"] == "interpreter shim float-args"]
    assert shim and shim[0]["checks"] == 2 and shim[0]["cases"] == 8


def test_what_was_worked_around_is_one_table_line_per_kind_and_each_checks_lines_come_with_v(project):
    result = _run(project, "-k", "shim or passes")
    result.assert_outcomes(passed=3)
    out = result.stdout.str()
    rows = [ln for ln in out.splitlines() if "interpreter shim float-args" in ln]
    assert len(rows) == 1, out  # one line for the kind, however many checks used it
    assert rows[0].split()[:2] == ["2", "8"], rows  # 2 checks, 8 cases
    assert "worked around float-args" not in out  # the per-check lines of before
    assert len(out[out.index("tdiff summary"):].splitlines()) <= 8, out  # everything passed: a few lines

    verbose = _run(project, "-k", "shim or passes", "-v").stdout.str()
    assert verbose.count("interpreter: worked around float-args in 4 case(s)") == 2, verbose  # each check's own
    assert "PASSED  kernels.ops::scaled[shim_a]: 4 cases (4 judged)" in verbose
    labelled = _run(project, "-k", "known", "-v").stdout.str()
    assert "XFAIL   kernels.ops::thrice[known]: 1 cases (1 judged)" in labelled  # pytest's label, not tdiff's status
    full = _run(project, "-k", "shim", "--tdiff-summary", "full").stdout.str()
    assert full.count("interpreter: worked around float-args in 4 case(s)") == 2


def test_a_long_check_shows_its_progress_with_v(project):
    result = _run(project, "-k", "slow", "-v", "--tdiff-progress", "1")
    result.assert_outcomes(passed=1)
    lines = result.stdout.lines
    progress = [ln for ln in lines if ln.startswith("tdiff: running ")]
    assert progress and all("kernels/ops.py::twice[slow]: " in ln for ln in progress), lines
    assert any(" of 3 cases (" in ln for ln in progress), progress
    (done,) = [ln for ln in lines if "twice[slow] PASSED (3 cases" in ln]  # pytest's own line stays whole
    assert done.startswith("kernels/ops.py::twice[slow] PASSED"), done
    quiet = _run(project, "-k", "slow", "-v", "--tdiff-progress", "0").stdout.str()
    assert "tdiff: running" not in quiet


def test_under_xdist_the_controller_reports_checks_that_run_long(project):
    # (a pytest of its own: the controller is what is tested, and this process may itself be an xdist worker)
    result = project.runpytest_subprocess("--tdiff", "-p", "no:cacheprovider", "--tdiff-repro-dir=none", "-k",
                                          "slow or passes", "-n", "2", "--tdiff-progress", "1")
    result.assert_outcomes(passed=2)
    lines = result.stdout.lines
    progress = [ln for ln in lines if ln.startswith("tdiff: running ") and "twice[slow]" in ln]
    assert progress and all(ln.split(": ")[2].startswith("kernels/ops.py::twice[slow] [gw") for ln in progress), lines
    assert any(" of 3 cases (" in ln for ln in progress), progress
    # pytest's progress characters stay on lines of their own, ended with its percentage
    dots = [ln for ln in lines if ln[:1] in (".", "F", "x") and "%]" in ln]
    assert dots and all(set(ln.split("[")[0].strip()) <= {"."} for ln in dots), lines
    assert not list((project.path / ".tdiff" / "progress").glob("*/*.json"))  # the controller cleaned up


def _git(path: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=path, capture_output=True, text=True, check=True).stdout


def test_a_failing_run_leaves_the_checkout_clean_and_promote_moves_an_entry(project):
    _git(project.path, "init", "-q")
    # (pytester's own files, and Triton's cache: pytester makes the project HOME, where ~/.triton goes)
    (project.path / ".gitignore").write_text("stdout\nstderr\nrunpytest-*\n.triton/\n")
    (project.path / "corpus").mkdir()
    (project.path / "corpus" / "README.md").write_text("the corpus CI replays\n")
    _git(project.path, "add", ".")
    _git(project.path, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "project")
    result = project.runpytest_inprocess("--tdiff", "-p", "no:cacheprovider", "-k", "fails")
    result.assert_outcomes(failed=1)
    assert _git(project.path, "status", "--porcelain") == "", "the run left files git sees"
    assert sorted(p.name for p in (project.path / "corpus").iterdir()) == ["README.md"]
    run_dir = project.path / ".tdiff"
    assert (run_dir / ".gitignore").read_text().splitlines()[-1] == "*"
    (entry,) = [p.parent for p in (run_dir / "corpus").rglob("entry.json")]
    assert list((run_dir / "repro").rglob("repro.py"))
    out = result.stdout.str()
    assert f"corpus entry: {os.path.relpath(entry, project.path)}" in out

    again = project.runpytest_inprocess("--tdiff", "-p", "no:cacheprovider", "-k", "fails", "--tdiff-repro-dir=none")
    assert "replayed from corpus entry" in again.stdout.str()  # the bug found stays found here

    from tdiff import cli

    os.chdir(project.path)
    assert cli.main(["corpus", "promote", str(entry)]) == 0
    assert not entry.exists() and (project.path / "corpus" / "thrice" / entry.name / "entry.json").is_file()
    assert _git(project.path, "status", "--porcelain").split() == ["??", "corpus/thrice/"]
    meta = json.loads((project.path / "corpus" / "thrice" / entry.name / "entry.json").read_text())
    assert meta["expect"] == "pass" and meta["versions"]["triton"]
    third = project.runpytest_inprocess("--tdiff", "-p", "no:cacheprovider", "-k", "fails", "--tdiff-repro-dir=none")
    assert "replayed from corpus entry corpus/thrice/" in third.stdout.str().replace(str(project.path) + "/", "")


def test_promote_refuses_a_conflict_and_sets_expect(tmp_path, capsys):
    import numpy as np

    from tdiff import cli
    from tdiff.core.case import Case, to_json

    case, _ = to_json(Case({"n": 3}))
    meta = {"format": 1, "kernel": {"module": "m", "name": "k", "check": "tdiff"}, "case": case,
            "expect": "pass", "divergence": {"kind": "values", "targets": ["returned"]}}
    entry, other = tmp_path / "local" / "k" / "abc", tmp_path / "tracked" / "k" / "abc"
    for folder, expect in ((entry, "pass"), (other, "divergence")):
        folder.mkdir(parents=True)
        (folder / "entry.json").write_text(json.dumps({**meta, "expect": expect}))
        np.savez(folder / "tensors.npz")
    dest = tmp_path / "tracked"
    assert cli.main(["corpus", "promote", str(entry), "--into", str(dest)]) == 1
    assert "CONFLICT" in capsys.readouterr().out and entry.exists()  # left where it is
    assert cli.main(["corpus", "promote", str(entry), "--into", str(dest), "--expect", "divergence"]) == 0
    assert not entry.exists() and "ALREADY" in capsys.readouterr().out


def test_a_failing_verify_shows_its_report_once_in_ci(pytester, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    pytester.makepyfile(test_v='''
        import tdiff
        from tests import kernels as K

        def test_v():
            tdiff.verify(K.masked_tail_bug, profile="ci", corpus_dir=None, repro_dir=None, isolation="none",
                         max_examples=5)
    ''')
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")  # (CI is set: the short summary is not cut)
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert out.count("case: x=float32[1] contiguous") == 1, out
    (short,) = [ln for ln in result.stdout.lines if ln.startswith("FAILED test_v.py::test_v")]
    assert short.endswith("out of bounds on tests.kernels::masked_tail_bug[tdiff] (the report above)"), short


def test_options_of_the_output_are_checked(project):
    bad = project.runpytest_inprocess("--tdiff", "--tdiff-summary", "long")
    assert "--tdiff-summary must be short or full" in bad.stderr.str()
    bad = project.runpytest_inprocess("--tdiff", "--tdiff-progress", "soon")
    assert "--tdiff-progress must be a number of seconds" in bad.stderr.str()


def test_the_plugin_module_is_hooks_only():
    import inspect

    import tdiff.plugin as plugin

    own = [name for name, obj in vars(plugin).items()
           if (inspect.isfunction(obj) or inspect.isclass(obj)) and obj.__module__ == plugin.__name__]
    assert all(name.startswith("pytest_") or name == "_SessionHooks" for name in own), own


def _record(cid: str, **fields: object) -> dict:
    base = {"id": cid, "status": "passed", "shims": {}, "caveat_counts": {}, "caveat_examples": {}, "discarded": {},
            "never_ran": [], "spec_classes": [], "spec_skipped": [], "hang_timeout": None, "other_versions": {},
            "pair_note": None}
    return {**base, **fields}


def test_the_table_counts_each_kind_over_checks_once():
    from tdiff.record.summary import aggregate, table_lines

    records = [
        _record("m::a[tdiff]", shims={"bf16-arith": 3}, caveat_counts={"range-edge": 2},
                caveat_examples={"range-edge": "a vs b: at the edge"}, never_ran=["a.py: line 3 of a"],
                spec_classes=["a argument 0: never compiled misaligned (compiled: 16-byte aligned)"]),
        _record("m::b[tdiff]", shims={"bf16-arith": 5}, caveat_counts={"range-edge": 1},
                caveat_examples={"range-edge": "b vs c: at the edge"}, never_ran=["b.py: line 9 of b"],
                discarded={"interpreter limitation: inline PTX": 3}),
        _record("m::c[tdiff]", spec_skipped=["c argument 1: equal to 1"], other_versions={"triton 3.9.0": 2}),
    ]
    rows = {r.kind: r for r in aggregate(records)}
    assert (rows["interpreter shim bf16-arith"].checks, rows["interpreter shim bf16-arith"].cases) == (
        ["m::a[tdiff]", "m::b[tdiff]"], 8)
    edge = rows["passed with a caveat (range-edge)"]
    assert (len(edge.checks), edge.cases, edge.example) == (2, 3, "a vs b: at the edge")  # the first check's example
    assert (len(rows["kernel code no case ran"].checks), rows["kernel code no case ran"].cases) == (2, None)
    assert rows["not judged: interpreter limitation: inline PTX"].cases == 3
    assert rows["specialization classes no case compiled"].checks == ["m::a[tdiff]"]
    assert rows["specialization classes the compile budget skipped"].checks == ["m::c[tdiff]"]
    assert rows["corpus entries recorded under triton 3.9.0"].cases == 2
    lines = table_lines(list(rows.values()))
    assert len(lines) == 1 + len(rows)  # a header, then one line per kind
    (edge_line,) = [ln for ln in lines if "range-edge" in ln]
    assert edge_line.split()[:2] == ["2", "3"] and edge_line.endswith("(m::a[tdiff] and 1 more)")
    (shim_line,) = [ln for ln in lines if "bf16-arith" in ln]
    assert shim_line.split()[:2] == ["2", "8"]


def test_the_tolerances_checks_declare_are_counted_in_the_table():
    import tdiff
    from tdiff.record.summary import aggregate, record
    from tests import kernels as K

    plain = K.double_kernel.__tdiff_checks__[0]
    declaring = dataclasses.replace(plain, name="declaring", tolerance="exact",
                                    tolerances={"returned": tdiff.Tolerance.preset("reduce", "bfloat16")})
    runner = tdiff.Runner(tdiff.RunOptions(profile="ci", corpus_dir=None, repro_dir=None, isolation="none"))
    assert declaring.declared_tolerances() == ("every output: exact",
                                               "returned: reduce/bfloat16 (rtol=0.0156, scale=0.0312, atol=1.18e-38)")
    rows = {r.kind: r for r in aggregate([record(runner.new_result(c)) for c in (plain, declaring)])}
    row = rows["tolerances the check declares (its own, not tdiff's)"]
    assert row.checks == [declaring.id] and row.example.startswith("every output: exact")
