"""Fuzz campaigns past one machine: GPU slots per fuzz process, a shared example database (a directory
or a real Redis server), corpora that merge (stable case ids, replaying a union once, `tdiff corpus
merge`), the CI shard split, and the campaign report."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

import tdiff
from tdiff import cli, options
from tdiff.core.case import Case, TensorArg
from tdiff.drive import shard
from tdiff.drive.pipeline import CaseRecord
from tdiff.drive.status import Facts, decide_status
from tdiff.execute import gpus, pinning
from tdiff.record import campaign

from . import fuzz_kernels as FK
from .test_fuzz import _plugin_args

ROOT = Path(__file__).resolve().parents[1]
pytest_plugins = ["pytester"]
HYPOTHESIS = Path(sys.executable).with_name("hypothesis")


def _check():
    (c,) = tdiff.checks_of(FK.doubles_wrongly_past_five)
    return c


def _case(values) -> Case:
    x = np.asarray(values, dtype=np.float32)
    return Case(inputs={"x": TensorArg("float32", x.shape, (1,), 0, x)})


# ---------------------------------------------------------------- GPU slots

def test_slots_are_the_lowest_free_ones_and_pin_gpus_round_robin(tmp_path, monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr(gpus, "device_count", lambda: 3)  # three GPUs, faked
    slots = [pinning.claim_slot(tmp_path) for _ in range(4)]
    try:
        assert [s.index for s in slots] == [0, 1, 2, 3]
        assert [gpus.gpu_for_worker(s.index) for s in slots] == [0, 1, 2, 0]
        slots[1].release()  # a process that ended: the next one takes its slot
        slots[1] = pinning.claim_slot(tmp_path)
        assert slots[1].index == 1
    finally:
        for s in slots:
            s.release()


_HOLDER = textwrap.dedent("""
    import sys
    from tdiff.execute import gpus, pinning
    slot = pinning.claim_slot(sys.argv[1])
    print(slot.index, gpus.gpu_for_worker(slot.index), flush=True)
    sys.stdin.read()  # hold the slot until the test closes stdin
""")


def test_processes_started_together_hold_distinct_slots_and_gpus(tmp_path):
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "5,7", "PYTHONPATH": str(ROOT)}  # two GPUs, by their ids

    def holder() -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-c", _HOLDER, str(tmp_path)], env=env, stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, text=True)

    procs = [holder() for _ in range(4)]
    try:
        held = [tuple(map(int, p.stdout.readline().split())) for p in procs]
        assert sorted(held) == [(0, 5), (1, 7), (2, 5), (3, 7)]
        victim = held.index((1, 7))
        procs[victim].kill()  # killed: the OS drops its lock, and the next process takes its slot
        procs[victim].wait()
        procs.append(holder())
        assert tuple(map(int, procs[-1].stdout.readline().split())) == (1, 7)
    finally:
        for p in procs:
            if p.poll() is None:
                p.stdin.close()
                p.wait(timeout=30)


def test_a_fuzz_process_pins_its_gpu_by_its_slot_and_records_it(pytester, tmp_path, monkeypatch):
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))  # this test's own slot folder
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(pinning, "_held", None)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)  # (a fuzz process, not an xdist worker)
    monkeypatch.setattr(gpus, "device_count", lambda: 2)  # two GPUs, faked
    other = pinning.claim_slot()  # another fuzz process holds slot 0
    try:
        pytester.syspathinsert(str(ROOT))
        pytester.makeini("[pytest]\ntdiff_paths = suites\n")
        pytester.mkdir("suites")
        (pytester.path / "suites" / "planted.py").write_text((ROOT / "tests" / "fuzz_kernels.py").read_text())
        camp = tmp_path / "campaign"
        ran = pytester.runpytest(*_plugin_args(), "--tdiff", "--tdiff-fuzz-targets", "--tdiff-isolation", "none",
                                 "--tdiff-corpus", "none", "--tdiff-repro-dir", "none", "--tdiff-backends",
                                 "interpreter", "--tdiff-campaign", str(camp), "suites/planted.py", "-q")
        ran.assert_outcomes(failed=1)
        found = campaign.aggregate(camp)
        assert [(p["slot"], p["gpu"]) for p in found.processes] == [(1, 1)]
        (c,) = found.checks.values()
        assert c.divergences >= 1 and c.first_divergence_cases is not None
    finally:
        other.release()
        if pinning._held is not None:
            pinning._held.release()


# ---------------------------------------------------------------- the CI shard split

def test_shard_values_are_checked():
    assert shard.parse("2/5") == (2, 5)
    for bad in ("0/3", "4/3", "3", "a/b", "1/0"):
        with pytest.raises(ValueError, match="--tdiff-shard"):
            shard.parse(bad)


def test_a_checks_shard_depends_on_its_id_only():
    # fixed values: a hash that changed with the process (Python's hash()) or the platform would fail here
    ids = [f"suites.k{i}::k{i}[tdiff]" for i in range(6)]
    assert [shard.shard_of(i, 3) for i in ids] == [shard.shard_of(i, 3) for i in reversed(ids)][::-1]
    assert [shard.shard_of(i, 3) for i in ids] == [2, 3, 1, 2, 2, 2]
    code = "from tdiff.drive import shard; print([shard.shard_of(f'suites.k{i}::k{i}[tdiff]', 3) for i in range(6)])"
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONHASHSEED": "123"},
                         capture_output=True, text=True, check=True, cwd=str(ROOT)).stdout
    assert out.strip() == "[2, 3, 1, 2, 2, 2]"


_MANY = "\n".join(textwrap.dedent(f"""
    @tdiff.check(launch=_launch, reference=lambda x: x + {i},
                 x=tst.tensors(shape=(4,), dtype="float32", layouts=["contiguous"]))
    @triton.jit
    def add_{i}(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + {i}, mask=offs < n)
""") for i in range(12))


def test_shards_partition_the_checks(pytester):
    pytester.syspathinsert(str(ROOT))
    pytester.makeini("[pytest]\ntdiff_paths = suites\n")
    pytester.mkdir("suites")
    head = ("import torch\nimport triton\nimport triton.language as tl\nimport tdiff\n"
            "from tdiff import strategies as tst\n\n"
            "def _launch(kernel, x):\n    out = torch.empty_like(x)\n    kernel[(1,)](x, out, 4, BLOCK=4)\n"
            "    return out\n")
    (pytester.path / "suites" / "many_a.py").write_text(head + _MANY)
    (pytester.path / "suites" / "many_b.py").write_text(head + _MANY.replace("add_", "sub_"))
    (pytester.path / "test_plain.py").write_text("def test_plain():\n    pass\n")
    base = [*_plugin_args(), "--tdiff", "--tdiff-corpus", "none", "--co", "-q", "-p", "no:randomly"]

    def collected(*args: str) -> list[str]:
        out = pytester.runpytest(*base, *args).stdout.lines
        return [line for line in out if "::" in line]

    everything = collected("suites", "test_plain.py")
    checks = {n for n in everything if "[tdiff]" in n}
    assert len(checks) == 24
    shards = [set(collected("--tdiff-shard", f"{k}/3", "suites", "test_plain.py")) for k in (1, 2, 3)]
    for s in shards:
        assert "test_plain.py::test_plain" in s  # only checks are split
        assert len(s - {"test_plain.py::test_plain"}) >= 3  # (24 checks in 3 shards: none is nearly empty)
    parts = [s - {"test_plain.py::test_plain"} for s in shards]
    assert set().union(*parts) == checks
    assert sum(len(p) for p in parts) == len(checks)  # disjoint: each check in exactly one shard
    # another collection order gives the same shard
    assert set(collected("--tdiff-shard", "2/3", "suites/many_b.py", "suites/many_a.py")) == parts[1]


def test_a_bad_shard_or_database_is_a_usage_error(pytester):
    pytester.makeini("[pytest]\ntdiff_paths = suites\n")
    for flag, value in (("--tdiff-shard", "4/3"), ("--tdiff-database", "ftp://example/db")):
        result = pytester.runpytest(*_plugin_args(), "--tdiff", flag, value)
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        assert flag in result.stderr.str()


# ---------------------------------------------------------------- the example database

def test_database_values(tmp_path):
    from hypothesis.database import DirectoryBasedExampleDatabase

    from tdiff.drive.database import open_database

    db = open_database("db", tmp_path)
    assert isinstance(db, DirectoryBasedExampleDatabase) and Path(db.path) == tmp_path / "db"
    (tmp_path / "file").write_text("")
    with pytest.raises(ValueError, match="--tdiff-database.*not a directory"):
        open_database("file", tmp_path)
    with pytest.raises(ValueError, match="--tdiff-database.*redis://"):
        open_database("http://example/db", tmp_path)
    pytest.importorskip("redis")
    with pytest.raises(ValueError, match="--tdiff-database.*cannot reach"):
        open_database(f"redis://127.0.0.1:{_free_port()}/0", tmp_path)


def test_a_pytest_run_keeps_its_examples_in_the_given_database(tmp_path):
    given = {"database": "db", "profile": "ci", "isolation": "none", "backends": "interpreter", "corpus": "none",
             "repro-dir": "none", "shrink-budget": "1"}
    opts = options.build(given.get, tmp_path)
    result = tdiff.Runner(opts).run_check(_check())  # (the ci profile is derandomized: the database wins)
    assert result.status == "failed"
    assert list((tmp_path / "db").rglob("*")), "the failing example was saved"


def test_hypofuzz_collects_the_targets_with_the_shared_directory_database(tmp_path):
    pytest.importorskip("hypofuzz")
    code = textwrap.dedent(f"""
        from hypothesis import settings
        from hypofuzz.collection import collect_tests
        r = collect_tests([*{_plugin_args()!r}, "--tdiff", "--tdiff-fuzz-targets", "--tdiff-corpus", "none",
                           "--tdiff-database", {str(tmp_path / "shared-db")!r}, "tests/fuzz_kernels.py"])
        print([t.nodeid for t in r.fuzz_targets], r.not_collected)
        print(settings().database)
    """)
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "PYTEST_XDIST_WORKER", "PYTEST_ADDOPTS")}
    out = subprocess.run([sys.executable, "-c", code], cwd=str(ROOT), env={**env, "PYTHONPATH": str(ROOT)},
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    targets, db = out.stdout.strip().splitlines()[-2:]
    assert targets == "['tests/fuzz_kernels.py::doubles_wrongly_past_five[tdiff]'] {}"
    assert str(tmp_path / "shared-db") in db


# ---------------------------------------------------------------- corpora that merge

def test_a_case_id_is_the_same_in_every_process_and_byte_order():
    case = Case(inputs={"x": TensorArg("float32", (3,), (1,), 0, np.array([1.5, -0.0, np.nan], np.float32)),
                        "n": 3, "alpha": 0.1}, dims={"b": 2, "a": 1})
    swapped = Case(inputs={"alpha": 0.1, "n": 3,  # other insertion orders, big-endian storage
                           "x": TensorArg("float32", (3,), (1,), 0, np.array([1.5, -0.0, np.nan], ">f4"))},
                   dims={"a": 1, "b": 2})
    assert case.digest() == swapped.digest() == "0a946494664d027f"
    code = ("import numpy as np; from tdiff.core.case import Case, TensorArg; "
            "print(Case(inputs={'x': TensorArg('float32', (3,), (1,), 0, np.array([1.5, -0.0, np.nan], np.float32)),"
            " 'n': 3, 'alpha': 0.1}, dims={'b': 2, 'a': 1}).digest())")
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONHASHSEED": "7"},
                         capture_output=True, text=True, check=True, cwd=str(ROOT)).stdout
    assert out.strip() == case.digest()


def test_the_corpus_entries_made_on_other_machines_keep_their_ids_here():
    from tdiff.record.corpus import all_entries

    found = all_entries(ROOT / "corpus")
    assert found, "the repository's corpus"
    for e in found:  # (ids end with the case's digest; some entries were written on the GPU machine)
        assert e.id.endswith(e.load_case().digest()), e.path


@pytest.fixture(scope="module")
def entries(tmp_path_factory):
    """Three corpus entries of the planted bug (its failing cases of 7, 8 and 9 elements), written once."""
    root = tmp_path_factory.mktemp("entries") / "corpus"
    runner = tdiff.Runner(tdiff.RunOptions(isolation="none", corpus_dir=root, repro_dir=None,
                                           backends=("interpreter",)))
    check = _check()
    judge = runner.judge(check)
    for n in (7, 8, 9):
        case = _case(np.ones(n))
        verdict, ev = judge.verdict(case)
        assert verdict.failed
        runner.finish(check, judge, CaseRecord(case, verdict, ev), source="search", write_repro=False)
    found = sorted(p.parent for p in root.rglob("entry.json"))
    assert len(found) == 3
    return found


def _corpus(tmp_path: Path, name: str, entries: list[Path], **edits: object) -> Path:
    root = tmp_path / name
    for e in entries:
        dest = root / e.parent.name / e.name
        shutil.copytree(e, dest)
        meta = json.loads((dest / "entry.json").read_text())
        meta.update({"date": f"copied to {name}", "device": name, **edits})  # history may differ
        (dest / "entry.json").write_text(json.dumps(meta))
    return root


def test_replaying_two_corpora_runs_each_entry_once(entries, tmp_path, capsys):
    c1 = _corpus(tmp_path, "c1", entries[:2])
    c2 = _corpus(tmp_path, "c2", entries[1:])  # entries[1] is in both, found on two machines
    assert cli.main(["replay", str(c1), str(c2), "--isolation", "none", "--backends", "interpreter"]) == 1
    out = capsys.readouterr().out
    assert "4 entries in 2 path(s): 3 to replay, 1 duplicate(s) skipped, 0 conflict(s)" in out
    assert out.count("\nFAILED ") + out.startswith("FAILED ") == 3
    assert "3 failed" in out and "1 duplicate(s) skipped" in out


def test_copies_of_an_entry_that_differ_are_a_conflict(entries, tmp_path, capsys):
    c1 = _corpus(tmp_path, "c1", entries[:2])
    c2 = _corpus(tmp_path, "c2", entries[1:2], expect="divergence")
    assert cli.main(["replay", str(c1), str(c2), "--isolation", "none", "--backends", "interpreter"]) == 1
    out = capsys.readouterr().out
    assert "3 entries in 2 path(s): 1 to replay, 0 duplicate(s) skipped, 1 conflict(s)" in out
    (line,) = [ln for ln in out.splitlines() if ln.startswith("CONFLICT")]
    assert '"expect"' in line and str(c1) in line and str(c2) in line
    assert "1 failed" in out  # the other entry; the conflicting one is replayed from neither


def test_merging_copies_what_is_missing_skips_what_is_there_and_stops_at_conflicts(entries, tmp_path, capsys):
    dest = _corpus(tmp_path, "dest", entries[:2])
    src = _corpus(tmp_path, "src", entries[1:])
    assert cli.main(["corpus", "merge", str(src), "--into", str(dest)]) == 0
    out = capsys.readouterr().out
    assert "1 copied, 1 already there (identical), 0 conflict(s)" in out
    assert sorted(p.name for p in dest.rglob("entry.json")) == ["entry.json"] * 3
    assert {p.parent.name for p in dest.rglob("entry.json")} == {e.name for e in entries}
    assert cli.main(["corpus", "merge", str(src), "--into", str(dest)]) == 0
    assert "0 copied, 2 already there (identical)" in capsys.readouterr().out

    other = _corpus(tmp_path, "other", entries[:1], expect="divergence")
    before = (dest / entries[0].parent.name / entries[0].name / "entry.json").read_text()
    assert cli.main(["corpus", "merge", str(other), "--into", str(dest)]) == 1
    out = capsys.readouterr().out
    assert "0 copied" in out and "1 conflict(s)" in out and '"expect"' in out
    assert (dest / entries[0].parent.name / entries[0].name / "entry.json").read_text() == before

    broken = _corpus(tmp_path, "broken", entries[2:])
    (next(broken.rglob("tensors.npz"))).write_bytes(b"not a zip")
    fresh = tmp_path / "fresh"
    assert cli.main(["corpus", "merge", str(broken), "--into", str(fresh)]) == 1
    assert "UNREADABLE" in capsys.readouterr().out and not list(fresh.rglob("entry.json"))


def test_pytest_replays_several_corpora_each_entry_once(entries, tmp_path):
    c1 = _corpus(tmp_path, "c1", entries[:2])
    c2 = _corpus(tmp_path, "c2", entries[1:])
    given = {"corpus": f"c1{os.pathsep}c2", "isolation": "none", "backends": "interpreter", "repro-dir": "none"}
    opts = options.build(given.get, tmp_path)
    # both named corpora are replayed, after the run directory's, which alone is written
    assert (opts.corpus_dir, opts.corpus_more) == (tmp_path / ".tdiff" / "corpus", (c1, c2))
    assert opts.corpora() == [tmp_path / ".tdiff" / "corpus", c1, c2]
    runner = tdiff.Runner(opts)
    check = _check()
    replays = runner.replay_corpora(check)
    assert sorted(r.entry for r in replays) == sorted(e.name for e in entries)
    assert {r.state for r in replays} == {"failed"}

    c3 = _corpus(tmp_path, "c3", entries[:1], expect="divergence")
    runner = tdiff.Runner(opts.with_(corpus_more=(c1, c3)))
    replays = runner.replay_corpora(check)
    assert decide_status(Facts(replays=replays))[0] == "error"  # (the status the run decides at its end)
    assert any("conflict" in n and '"expect"' in n for r in replays for n in r.notes)
    assert [r.entry for r in replays if r.entry is not None] == [entries[1].name]


# ---------------------------------------------------------------- the campaign report

def _tensor_case(n: int, *tags: str) -> Case:
    return Case(inputs={"x": TensorArg("float32", (n,), (1,), 0, np.zeros(n, np.float32), "contiguous",
                                       ("contiguous", "aligned", "float32", *tags))})


def test_the_campaign_report_adds_up_every_process(tmp_path, capsys):
    key = ("k", (("*fp32", "D"), ("i32", "")), ())
    key2 = ("k", (("*fp32", ""), ("i32", "1")), ())
    a = campaign.Recorder(tmp_path, {"slot": 0, "gpu": 0}, interval=3600)
    a.case("m::k[tdiff]", _tensor_case(4, "nan"), 0.5, True, False, [key])
    a.case("m::k[tdiff]", _tensor_case(5), 0.5, True, True, None, predict=lambda c: (key2,))
    a.case("m::k[tdiff]", _tensor_case(5), 1.0, False, False, None, predict=lambda c: pytest.fail("asked twice"))
    a.case("m::other[tdiff]", _tensor_case(3), 0.25, True, False, [key])
    b = campaign.Recorder(tmp_path, {"slot": 1, "gpu": 1}, interval=3600)
    b.case("m::k[tdiff]", _tensor_case(6, "-0.0"), 2.0, True, False, [key])
    b.close()  # b ends; a is killed: only what it wrote so far counts (its first case and first divergence)
    with open(b.path, "a") as f:
        f.write('{"check": "m::k[tdi')  # a line cut short by a kill

    found = campaign.aggregate(tmp_path)
    assert sorted(p["slot"] for p in found.processes) == [0, 1]
    # each process's own totals (what bench/speed/campaign_rates.py reports): a killed at its first divergence (2 cases
    # of m::k, and m::other's first), b whole
    totals = {p["slot"]: (p["checks"], p["cases"], p["busy_s"]) for p in found.processes}
    assert totals == {0: (2, 3, 1.25), 1: (1, 1, 2.0)}
    k = found.checks["m::k[tdiff]"]
    assert (k.processes, k.cases, k.judged, k.divergences) == (2, 3, 3, 1)
    assert k.rate == pytest.approx(3 / 3.0)
    assert k.first_divergence_cases == 2 and k.first_divergence_case == _tensor_case(5).digest()
    assert k.time_to_first_divergence is not None and 0 <= k.time_to_first_divergence < 60
    assert len(k.specializations) == 2
    assert "k arg 0: *fp32 misaligned" in k.classes and "k arg 1: i32 equal to 1" in k.classes
    assert k.specials() == ["nan", "-0.0"]
    assert found.checks["m::other[tdiff]"].cases == 1
    assert found.problems and "not a JSON line" in found.problems[0]

    a.close()  # now a's last snapshot is written too
    k = campaign.aggregate(tmp_path).checks["m::k[tdiff]"]
    assert (k.cases, k.judged) == (4, 3)

    assert cli.main(["campaign", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("m::k[tdiff]"))
    assert row.split()[:4] == ["m::k[tdiff]", "2", "4", "1.0"] and "(case 2)" in row and row.endswith("nan -0.0")
    assert "`tdiff replay --repro-dir DIR CORPUS`" in out  # the divergence's reproducer: how to get it
    assert cli.main(["campaign", str(tmp_path), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert {c["check"]: c["cases"] for c in data["checks"]} == {"m::k[tdiff]": 4, "m::other[tdiff]": 1}
    assert cli.main(["campaign", str(tmp_path / "nothing")]) == 2


# ---------------------------------------------------------------- two fuzz processes, one Redis server

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def redis_url(tmp_path):
    """A real Redis server of this test's own, on 127.0.0.1, keeping nothing on disk."""
    server = shutil.which("redis-server")
    if server is None:
        pytest.skip("redis-server is not installed (apt-get install redis-server): the shared-database test needs "
                    "a real Redis server")
    redis = pytest.importorskip("redis", reason="the redis package is not installed (pip install 'tdiff[fuzz]')")
    port = _free_port()
    proc = subprocess.Popen([server, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                             "--dir", str(tmp_path)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    client = redis.Redis(host="127.0.0.1", port=port)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"redis-server did not start: {proc.stdout.read().decode()}") from None
                time.sleep(0.1)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _fuzz(tmp_path: Path, name: str, db: str, camp: Path, until) -> str:
    """A bounded `hypothesis fuzz -n 1` with its own corpus, stopped once `until()` holds; its output."""
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "PYTEST_XDIST_WORKER", "PYTEST_ADDOPTS")}
    env["HYPOTHESIS_STORAGE_DIRECTORY"] = str(tmp_path / f"hyp-{name}")  # (no local database is shared)
    env["PYTHONPATH"] = str(ROOT)
    env["TMPDIR"] = str(tmp_path)  # (this test's own GPU slots)
    cmd = [str(HYPOTHESIS), "fuzz", "-n", "1", "--no-dashboard", "--", *_plugin_args(), "--tdiff",
           "--tdiff-fuzz-targets", "--tdiff-isolation", "none", "--tdiff-backends", "interpreter",
           "--tdiff-run-dir", str(tmp_path / name), "--tdiff-repro-dir", "none", "--tdiff-database", db,
           "--tdiff-campaign", str(camp / name), "tests/fuzz_kernels.py"]
    proc = subprocess.Popen(cmd, cwd=str(ROOT), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and not until() and proc.poll() is None:
            time.sleep(0.5)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
        out = proc.communicate(timeout=30)[0].decode(errors="replace")
    return out


def _first_divergence(camp: Path) -> campaign.CheckCampaign | None:
    c = campaign.aggregate(camp).checks.get(_check().id) if camp.is_dir() else None
    return c if c is not None and c.first_divergence_case else None


class _Settled:
    """True once a fuzz process found the divergence and then ran no case and changed no corpus entry
    for a few seconds (its shrinking is over)."""

    def __init__(self, camp: Path, corpus: Path, quiet: float = 4.0) -> None:
        self.camp, self.corpus, self.quiet = camp, corpus, quiet
        self.last, self.since = None, time.monotonic()

    def __call__(self) -> bool:
        found = _first_divergence(self.camp)
        state = (found.cases if found else None, sorted(p.parent.name for p in self.corpus.rglob("entry.json")))
        if state != self.last:
            self.last, self.since = state, time.monotonic()
        return found is not None and len(state[1]) == 1 and time.monotonic() - self.since >= self.quiet


@pytest.mark.skipif(not HYPOTHESIS.exists(), reason="HypoFuzz is not installed")
def test_a_second_fuzz_process_replays_the_first_ones_failure_from_redis(redis_url, tmp_path, capsys):
    pytest.importorskip("hypofuzz")
    import redis

    client = redis.Redis.from_url(redis_url)
    camp = tmp_path / "campaign"

    def failure_saved() -> bool:  # HypoFuzz saved the failure (with its observation, which it replays from)
        return any(b".hypofuzz.failures." in k and k.endswith(b".observation") for k in client.scan_iter())

    settled = _Settled(camp / "corpus1", tmp_path / "corpus1")
    out1 = _fuzz(tmp_path, "corpus1", redis_url, camp, lambda: settled() and failure_saved())
    first = _first_divergence(camp / "corpus1")
    assert first is not None and failure_saved(), out1[-3000:]
    (entry1,) = [p.parent.name for p in (tmp_path / "corpus1").rglob("entry.json")]

    settled = _Settled(camp / "corpus2", tmp_path / "corpus2")
    out2 = _fuzz(tmp_path, "corpus2", redis_url, camp, settled)
    second = _first_divergence(camp / "corpus2")
    assert second is not None, out2[-3000:]
    # the first process lived through its failure (hypothesis >= 6.158 renamed what HypoFuzz reads after
    # shrinking: tdiff.drive.fuzz.hypofuzz_compat), and the second's very first case is that failure as the first
    # process shrank it, read from Redis
    assert "AttributeError" not in out1, out1[-3000:]
    assert second.first_divergence_cases == 1
    assert second.first_divergence_case == entry1, (second.first_divergence_case, entry1, out2[-2000:])
    (entry2,) = [p.parent.name for p in (tmp_path / "corpus2").rglob("entry.json")]

    assert cli.main(["replay", str(tmp_path / "corpus1"), str(tmp_path / "corpus2"), "--isolation", "none",
                     "--backends", "interpreter"]) == 1
    out = capsys.readouterr().out
    if entry1 == entry2:  # both shrank to the same case: one entry, replayed once
        assert "2 entries in 2 path(s): 1 to replay, 1 duplicate(s) skipped, 0 conflict(s)" in out
        assert "1 failed" in out
    else:
        assert "2 entries in 2 path(s): 2 to replay, 0 duplicate(s) skipped, 0 conflict(s)" in out
        assert "2 failed" in out
    assert cli.main(["campaign", str(camp)]) == 0
    assert _check().id in capsys.readouterr().out
