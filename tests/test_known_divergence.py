"""A divergence the corpus already records as known (`"expect": "divergence"`, a finding's xfail check) is not
shrunk or reproduced again on every run: the report names the entry; `tdiff replay --repro-dir` writes its
reproducer on demand."""

import json

import pytest

import tdiff
from tdiff import cli
from tests.test_budget import twice

BACKENDS = ("tests.faulty:FakeCompiledWrong", "interpreter")


def _opts(tmp_path, repro):
    # (no kernel reduction: no test here asserts on it; each reproducer paid up to 30 s for it)
    return tdiff.RunOptions(profile="ci", max_examples=5, isolation="none", backends=BACKENDS, shrink_budget=5,
                            corpus_dir=tmp_path / "corpus", corpus_more=(), repro_dir=tmp_path / repro, reduce_budget=0)


def _known_entry(tmp_path):
    with pytest.raises(tdiff.DivergenceError):
        tdiff.verify(twice, options=_opts(tmp_path, "repro1"))
    (entry,) = (tmp_path / "corpus").glob("*/*/entry.json")
    meta = json.loads(entry.read_text())
    meta["expect"] = "divergence"
    entry.write_text(json.dumps(meta))
    return entry.parent


def test_a_known_divergence_found_again_is_neither_shrunk_nor_reproduced(tmp_path):
    entry = _known_entry(tmp_path)
    assert list((tmp_path / "repro1").glob("*/*/repro.py"))  # the first time: a reproducer
    with pytest.raises(tdiff.DivergenceError) as err:
        tdiff.verify(twice, options=_opts(tmp_path, "repro2"))
    report = str(err.value)
    assert f"reproducer: not written (the known divergence of {entry}" in report, report
    assert "shrunk:" not in report
    assert not list((tmp_path / "repro2").glob("*/*/repro.py"))


def test_tdiff_replay_writes_the_reproducer_of_a_known_entry(tmp_path, capsys):
    entry = _known_entry(tmp_path)
    code = cli.main(["replay", "--backends", ",".join(BACKENDS), "--isolation", "none", "--reduce-budget", "0",
                     "--repro-dir", str(tmp_path / "out"), str(entry)])
    out = capsys.readouterr().out
    assert code == 0 and "KNOWN" in out, out
    (repro,) = (tmp_path / "out").glob("*/*/repro.py")
    assert f"reproducer: {repro}" in out, out
