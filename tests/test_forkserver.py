"""Workers forked from preloaded zygotes (tdiff.execute.forkserver): a worker forks from a process that imported
torch, Triton and tdiff once, one per host for every test process of a run; a crash in one reports as a started
worker's does; a GPU zygote whose CUDA is initialized refuses to fork; TDIFF_FORKSERVER=0 keeps fresh
interpreters."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest
import torch

from tdiff.core.backend_spec import BackendSpec
from tdiff.core.case import Case
from tdiff.execute import forkserver
from tdiff.execute.workers import Job, Pool
from tdiff.strategies import tensor_arg
from tests import kernels as K


def _case(first):
    return Case({"x": tensor_arg(torch.tensor([first, 0.5, 0.25, 0.125]))})


@pytest.fixture
def pool():
    p = Pool()
    yield p
    p.close()


@pytest.mark.skipif(not forkserver.enabled(), reason="no fork here (or TDIFF_FORKSERVER=0)")
def test_cpu_lanes_fork_from_the_zygote_and_a_restart_forks_again(pool):
    ref = K.hang_kernel.__tdiff_checks__[0].ref()
    assert pool.run(Job(ref, BackendSpec("interpreter"), _case(-1.0)), timeout=120).error is None
    assert pool.run(Job(ref, BackendSpec("reference"), _case(-1.0)), timeout=120).error is None
    cpu, ref_lane = pool.workers["cpu"], pool.workers["ref"]
    assert isinstance(cpu.proc, forkserver.Forked) and isinstance(ref_lane.proc, forkserver.Forked)
    zygote = forkserver.zygote()
    first = cpu.proc.pid
    hung = pool.run(Job(ref, BackendSpec("interpreter"), _case(1.0)), timeout=2)  # killed on its timeout
    assert hung.error is not None and hung.error.kind == "timeout"
    t0 = time.monotonic()
    assert pool.run(Job(ref, BackendSpec("interpreter"), _case(-1.0)), timeout=120).error is None
    assert isinstance(cpu.proc, forkserver.Forked) and cpu.proc.pid != first and cpu.starts == 2
    assert forkserver.zygote() is zygote  # the same zygote forked the new worker: no import paid again
    print(f"\nrestart and one case: {time.monotonic() - t0:.2f} s")


@pytest.mark.skipif(not forkserver.enabled(), reason="no fork here (or TDIFF_FORKSERVER=0)")
def test_a_forked_worker_that_dies_reports_its_signal(pool):
    ref = K.hang_kernel.__tdiff_checks__[0].ref()
    spec = BackendSpec("interpreter")
    assert pool.run(Job(ref, spec, _case(-1.0)), timeout=120).error is None
    w = pool.workers["cpu"]
    w.submit(Job(ref, spec, _case(1.0)))  # spins
    time.sleep(0.5)
    os.kill(w.proc.pid, signal.SIGSEGV)
    out = w.collect(Job(ref, spec, _case(1.0)), time.monotonic() + 60, 60)
    assert out.error is not None and out.error.kind == "crash" and "SIGSEGV" in out.error.message, out.error


@pytest.mark.skipif(not os.path.exists("/proc/self/comm"), reason="no /proc/PID/comm")
@pytest.mark.parametrize("fork", [True, False])
def test_a_worker_is_named_for_its_lane(pool, monkeypatch, fork):
    # (what top and ps show, and bench/speed/cpu_by_process.py reads: a fork carries the zygote's command line and
    # environment, its lane only in its name)
    if not fork:
        monkeypatch.setenv("TDIFF_FORKSERVER", "0")
    elif not forkserver.enabled():
        pytest.skip("no fork here (or TDIFF_FORKSERVER=0)")
    ref = K.hang_kernel.__tdiff_checks__[0].ref()
    assert pool.run(Job(ref, BackendSpec("interpreter"), _case(-1.0)), timeout=120).error is None
    assert pool.run(Job(ref, BackendSpec("reference"), _case(-1.0)), timeout=120).error is None
    for lane in ("cpu", "ref"):
        w = pool.workers[lane]
        assert isinstance(w.proc, forkserver.Forked) is fork
        with open(f"/proc/{w.proc.pid}/comm") as f:
            assert f.read().strip() == f"tdiff-{lane}"


def test_off_every_worker_is_a_fresh_interpreter(pool, monkeypatch):
    monkeypatch.setenv("TDIFF_FORKSERVER", "0")
    ref = K.hang_kernel.__tdiff_checks__[0].ref()
    assert pool.run(Job(ref, BackendSpec("interpreter"), _case(-1.0)), timeout=120).error is None
    assert isinstance(pool.workers["cpu"].proc, subprocess.Popen)


def test_each_lane_forks_from_the_zygote_of_its_kind(pool):
    assert pool.worker("gpu").zygote_kind == "gpu" and pool.worker("compile0").zygote_kind == "gpu"
    assert pool.worker("cpu").zygote_kind == "cpu" and pool.worker("ref").zygote_kind == "cpu"
    assert all(pool.worker(lane).forks == forkserver.enabled() for lane in ("gpu", "compile0", "cpu", "ref"))


@pytest.mark.skipif(not forkserver.enabled(), reason="no fork here (or TDIFF_FORKSERVER=0)")
def test_after_collection_the_lanes_that_see_the_gpu_fork_at_once_the_others_on_their_first_case(pool):
    # (collection is over: the GPU zygote has been sent every module of the checks; its workers set up CUDA now)
    pool.start_gpu_lanes(["cpu", "gpu", "ref", "compile0"])
    for lane in ("gpu", "compile0"):
        assert pool.worker(lane).alive and isinstance(pool.worker(lane).proc, forkserver.Forked)
    assert not pool.worker("cpu").alive and not pool.worker("ref").alive


def test_a_test_process_warms_the_compile_workers_its_checks_will_use_on_a_gpu_only():
    from tdiff.core.backend_spec import BackendSpec, default_backends
    from tdiff.execute import ahead
    from tdiff.pytest_plugin.session import lanes_to_warm

    assert lanes_to_warm(default_backends(False), None, gpu=False) == ["cpu", "ref"]
    n = ahead.auto_workers()
    assert lanes_to_warm(default_backends(True), None, gpu=True) == ["cpu", "gpu", "ref", *ahead.lanes(n)]
    assert lanes_to_warm(default_backends(True), 2, gpu=True)[-2:] == ["compile0", "compile1"]
    assert lanes_to_warm(default_backends(True), 0, gpu=True) == ["cpu", "gpu", "ref"]  # (compile-ahead off)
    variant = [BackendSpec.parse("compiled[num_warps=2]"), BackendSpec.parse("interpreter")]
    assert lanes_to_warm(variant, None, gpu=True) == ["cpu", "gpu", "ref"]  # (no compile worker serves a variant)


# a test process of a run: forks a worker from the host's zygote and says where it came from
_TEST_PROCESS = """
import json, sys, time
from tdiff.execute import forkserver
from tdiff.execute.workers import Pool
w = Pool().worker("cpu")
w.start()
ppid = int(next(line for line in open(f"/proc/{w.proc.pid}/status") if line.startswith("PPid")).split()[1])
print(json.dumps({"worker": w.proc.pid, "parent": ppid, "connected": forkserver.zygote().proc is None}), flush=True)
sys.stdin.readline()
"""


@pytest.mark.skipif(not forkserver.enabled() or not os.path.exists("/proc/self/status"), reason="no fork or /proc")
def test_the_test_processes_of_a_run_fork_from_the_one_zygote_of_the_host(tmp_path):
    owner = forkserver.Zygote.start(dict(os.environ), "cpu", listen=True)
    try:
        env = dict(os.environ, **{forkserver.ADDRESS_ENV["cpu"]: f"{os.getpid()}:{owner.address}"})
        procs = [subprocess.Popen([sys.executable, "-c", _TEST_PROCESS], env=env, stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True) for _ in range(2)]
        said = [json.loads(p.stdout.readline()) for p in procs]
        assert [s["parent"] for s in said] == [owner.proc.pid] * 2 and all(s["connected"] for s in said), said
        procs[0].communicate("\n", timeout=60)  # a test process that ends takes its workers with it
        deadline = time.monotonic() + 10
        while _running(said[0]["worker"]) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _running(said[0]["worker"]) and _running(said[1]["worker"])
        procs[1].communicate("\n", timeout=60)
        # a process those start (a run inside the run, its modules its own) starts its own zygote
        inner = subprocess.run([sys.executable, "-c", "import subprocess, sys; sys.exit(subprocess.run([sys.executable,"
                                " '-c', sys.argv[1]], input='\\n', text=True).returncode)", _TEST_PROCESS],
                               env=env, capture_output=True, text=True, timeout=120)
        said = json.loads(inner.stdout.splitlines()[-1])
        assert said["parent"] != owner.proc.pid and not said["connected"], said
    finally:
        owner.close()
    assert owner.proc.poll() is not None and not os.path.exists(owner.address)  # the zygote goes with its owner


def _running(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            return not any(line.startswith("State:") and "Z" in line.split()[1] for line in f)
    except FileNotFoundError:
        return False


def test_a_gpu_zygote_whose_cuda_is_initialized_refuses_to_fork(monkeypatch):
    assert forkserver._refusal("cpu") == ""
    monkeypatch.setattr(forkserver, "cuda_initialized", lambda: False)
    assert forkserver._refusal("gpu") == ""
    monkeypatch.setattr(forkserver, "cuda_initialized", lambda: True)
    assert "CUDA is initialized" in forkserver._refusal("gpu") and forkserver._refusal("cpu") == ""


_SCRIPT = """\
import atexit, json, os, sys
import helper
import triton.language as tl
atexit.register(lambda: print("exit functions ran"))
print(json.dumps({"sigmoid": type(tl.sigmoid).__name__, "argv": sys.argv, "path0": sys.path[0], "file": __file__,
                  "name": __name__, "cwd": os.getcwd(),
                  "env": os.environ.get("TDIFF_TEST_VALUE"), "helper": helper.WHERE, "stdin": sys.stdin.read(),
                  "path": [p for p in sys.path[1:] if "site-packages" not in p]}))
sys.stdout.flush()
how = sys.argv[1]
if how == "raise":
    raise ValueError("boom")
if how == "message":
    sys.exit("a message")
if how == "code":
    sys.exit(3)
if how == "segfault":
    import signal
    os.kill(os.getpid(), signal.SIGSEGV)
if how == "hang":
    import time
    time.sleep(60)
"""


@pytest.mark.skipif(not forkserver.enabled(), reason="no fork here (or TDIFF_FORKSERVER=0)")
@pytest.mark.parametrize("how", ["ok", "interpreted", "raise", "message", "code", "segfault"])
def test_a_forked_script_run_is_what_a_fresh_interpreter_gives(tmp_path, how):
    """`run_script` (how tdiff runs a reproducer before keeping it) forks the script from a zygote: the same exit
    code, output, `sys.argv`, path, `__main__`, working directory, environment and traceback as `python script`;
    with TRITON_INTERPRET=1, Triton's own `@jit` functions interpreted ones (they are made as Triton is imported)."""
    (tmp_path / "s.py").write_text(_SCRIPT)
    (tmp_path / "helper.py").write_text("WHERE = 'next to the script'\n")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"} | {"TDIFF_TEST_VALUE": "asked"}
    if how == "interpreted":
        env["TRITON_INTERPRET"] = "1"
    forked = forkserver.run_script(["s.py", how], tmp_path, env=env, timeout=120)
    fresh = subprocess.run([sys.executable, "s.py", how], cwd=tmp_path, env=env, capture_output=True, text=True,
                           timeout=120, stdin=subprocess.DEVNULL)
    assert (forked.returncode, forked.stdout, forked.stderr) == (fresh.returncode, fresh.stdout, fresh.stderr)
    said = json.loads(forked.stdout.splitlines()[0])
    assert said["argv"] == ["s.py", how] and said["env"] == "asked" and said["helper"] == "next to the script"
    assert said["sigmoid"] == ("InterpretedFunction" if how == "interpreted" else "JITFunction")
    codes = {"ok": 0, "interpreted": 0, "raise": 1, "message": 1, "code": 3, "segfault": -signal.SIGSEGV}
    assert codes[how] == forked.returncode


@pytest.mark.skipif(not forkserver.enabled(), reason="no fork here (or TDIFF_FORKSERVER=0)")
def test_a_forked_script_is_forked_and_past_its_timeout_killed(tmp_path, monkeypatch):
    (tmp_path / "s.py").write_text(_SCRIPT)
    (tmp_path / "helper.py").write_text("WHERE = 1\n")
    forkserver.run_script(["s.py", "ok"], tmp_path, timeout=120)  # (the zygote started)
    started = []
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: started.append(a))
    t0 = time.monotonic()
    assert forkserver.run_script(["s.py", "ok"], tmp_path, timeout=120).returncode == 0
    assert time.monotonic() - t0 < 1.0 and not started  # forked: no fresh interpreter, no imports paid
    with pytest.raises(subprocess.TimeoutExpired) as timed_out:
        forkserver.run_script(["s.py", "hang"], tmp_path, timeout=2)
    assert '"argv"' in timed_out.value.output and time.monotonic() - t0 < 30
    # an environment a fresh interpreter would start differently in: a zygote of its own
    zygotes = dict(forkserver._script_zygotes)
    forkserver.run_script(["s.py", "ok"], tmp_path, env={**os.environ, "PYTHONPATH": str(tmp_path)}, timeout=120)
    assert len(forkserver._script_zygotes) == len(zygotes) + 1 and not started
    monkeypatch.setenv("TDIFF_FORKSERVER", "0")  # off: a fresh interpreter
    forkserver.run_script(["s.py", "ok"], tmp_path, timeout=120)
    assert started and started[0][0][1:] == ["s.py", "ok"]


@pytest.mark.skipif(not forkserver.enabled(), reason="no fork here (or TDIFF_FORKSERVER=0)")
def test_a_fork_starts_with_the_zygotes_imports_out_of_the_collectors_scans(tmp_path):
    # gc.freeze before each fork: a child's collections skip torch's and Triton's objects (a forked worker's case
    # on a one-program softmax: 5.05 ms against 3.93 ms, median of 7 runs each, this 2-core machine)
    (tmp_path / "s.py").write_text("import gc\nprint(gc.get_freeze_count())\n")
    frozen = int(forkserver.run_script(["s.py"], tmp_path, timeout=120).stdout)
    fresh = subprocess.run([sys.executable, "s.py"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert frozen > 100_000 and int(fresh.stdout) == 0, (frozen, fresh.stdout)


def test_a_worker_freezes_the_objects_of_what_a_case_imported():
    # a GPU worker imports its checks' modules on its first case (its zygote preloads none): frozen after that case
    code = ("import gc, sys\nfrom tdiff.execute import worker_main as w\n"
            "n = len(sys.modules); w._freeze_imports(n); before = gc.get_freeze_count()\n"
            "import xml.dom.minidom\nw._freeze_imports(n); print(before, gc.get_freeze_count())\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    before, after = map(int, out.stdout.split())
    assert before == 0 and after > 1000, out


@pytest.mark.skipif(not forkserver.enabled(), reason="no fork here (or TDIFF_FORKSERVER=0)")
def test_workers_that_could_not_be_forked_are_counted_and_shown(monkeypatch):
    """A zygote that cannot fork costs time, not results: the workers start as fresh interpreters, and the check's
    result, its record and the run's table say how many and why (never silent)."""
    import tdiff
    from tdiff.record.check_record import CheckRecord
    from tdiff.record.summary import aggregate, table_lines

    def refuse(*_a, **_k):
        raise OSError("planted refusal")

    monkeypatch.setattr(forkserver.Zygote, "fork", refuse)
    forkserver.take_fresh()  # (what earlier tests left)
    (check,) = K.double_kernel.__tdiff_checks__
    options = tdiff.RunOptions(isolation="process", corpus_dir=None, repro_dir=None, max_examples=2)

    def run():
        pool = Pool()
        try:
            return tdiff.Runner(options, executor=pool).run_check(check)
        finally:
            pool.close()

    result = run()
    assert result.status.value == "passed", result.why
    (why,) = result.fresh_workers
    assert "planted refusal" in why and result.fresh_workers[why] >= 2  # (the interpreter's and the reference's)
    record = CheckRecord.of(result)
    assert record.to_record()["fresh_workers"] == dict(result.fresh_workers)
    assert any("workers started as fresh interpreters" in line and "planted refusal" in line
               for line in table_lines(aggregate([record])))
    # forking turned off is the user's choice, not a fallback: nothing counted
    monkeypatch.setenv("TDIFF_FORKSERVER", "0")
    assert not run().fresh_workers


_SHOW_MODULES = "import json, os, sys; print(json.dumps({'ppid': os.getppid(), 'zpkg': sorted(m for m in sys.modules " \
                "if m.startswith('zpkg'))}))\n"


@pytest.mark.skipif(not forkserver.enabled(), reason="no fork here (or TDIFF_FORKSERVER=0)")
def test_a_gpu_zygote_preloads_the_modules_that_leave_cuda_alone_and_serves_on_from_a_checkpoint(tmp_path):
    # zpkg.driver's import counts as initializing CUDA (TDIFF_ZYGOTE_TAINTING: this machine may have no GPU)
    pkg = tmp_path / "zpkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "clean.py").write_text("VALUE = 1\n")
    (pkg / "driver.py").write_text("")
    (pkg / "uses_driver.py").write_text("from . import driver\n")
    log = tmp_path / "imported.txt"
    (pkg / "also_uses_driver.py").write_text(f"import zpkg.driver as d\nopen({str(log)!r}, 'a').write('imported')\n")
    (pkg / "later.py").write_text("def f():\n    import zpkg.driver\n")  # (in a function: not run at import)
    (tmp_path / "show.py").write_text(_SHOW_MODULES)
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env |= {"PYTHONPATH": str(tmp_path), "TDIFF_ZYGOTE_TAINTING": "zpkg.driver", "PYTORCH_NVML_BASED_CUDA_CHECK": "1"}
    z = forkserver.Zygote.start(env, "gpu")
    try:
        z.preload(["zpkg.clean", "zpkg.uses_driver", "zpkg.also_uses_driver", "zpkg.later"])
        with open(tmp_path / "out", "w+b") as out, open(tmp_path / "err", "w+b") as err:
            child = z.start_script([str(tmp_path / "show.py")], str(tmp_path), env, out.fileno(), err.fileno())
            assert child.wait(120) == 0, (tmp_path / "err").read_text()
        said = json.loads((tmp_path / "out").read_text())
        assert said["zpkg"] == ["zpkg", "zpkg.clean", "zpkg.later"], said
        assert not log.exists()  # skipped unimported: its source names a module of the import that initialized CUDA
        assert said["ppid"] != z.proc.pid and z.proc.poll() is None  # forked by the checkpoint; the first stands by
        with open(f"/proc/{z.proc.pid}/cmdline", "rb") as f:
            assert b"poll" in f.read()  # (a fresh interpreter that holds none of the imports, nor CUDA)
    finally:
        z.close()
    assert z.proc.poll() is not None  # the one that stood by goes with its owner


def test_what_a_module_imports_as_it_is_imported_is_read_from_its_source(tmp_path, monkeypatch):
    pkg = tmp_path / "rpkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("from .. import base\n")
    (pkg / "sub" / "leaf.py").write_text("try:\n    from ..other import thing\nexcept ImportError:\n    pass\n"
                                         "def f():\n    import gpu_lib\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert forkserver._imports_any("rpkg.sub.leaf", {"rpkg.other"})  # relative, in a try block
    assert forkserver._imports_any("rpkg.sub.leaf", {"rpkg.other.thing"})
    assert not forkserver._imports_any("rpkg.sub.leaf", {"gpu_lib"})  # only in a function
    assert forkserver._imports_any("rpkg.sub", {"rpkg.base"})  # a package's __init__
    assert forkserver._imports_any("rpkg.sub.leaf", {"rpkg.sub"})  # in a package of them
    assert not forkserver._imports_any("rpkg.sub.leaf", set()) and not forkserver._imports_any("nowhere.x", {"y"})
