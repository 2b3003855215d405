"""A check's record (`CheckRecord`): built once from its result, written as JSON by `to_record` and read back by
`from_record` alone; the summary's readers take the typed record, never a dict by its keys."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import tdiff
from tdiff.record.check_record import CheckRecord, DivergenceRecord, PlanRecord
from tdiff.record.status import Status
from tdiff.record.summary import aggregate, check_lines, problem_lines, record, total_lines
from tests.test_budget import twice

ROOT = Path(__file__).resolve().parent.parent


def _result():
    opts = tdiff.RunOptions(profile="ci", max_examples=5, corpus_dir=None, repro_dir=None, isolation="none",
                            backends=("tests.faulty:FakeCompiledWrong", "interpreter"), shrink_budget=0)
    (check,) = tdiff.checks_of(twice)
    return tdiff.Runner(opts).run_check(check)


def test_a_real_checks_record_reads_back_equal_through_json():
    result = _result()
    assert result.status == Status.FAILED and result.divergences  # (a record with a divergence in it)
    rec = CheckRecord.of(result)
    assert CheckRecord.from_record(rec.to_record()) == rec
    assert CheckRecord.from_record(json.loads(json.dumps(rec.to_record()))) == rec  # (what travels from xdist)
    data = record(result)
    assert data == rec.to_record() and data["status"] == "failed" and type(data["status"]) is str
    assert list(data) == [f.name for f in dataclasses.fields(CheckRecord)]  # (the record's keys, in its order)
    assert data["divergences"][0]["verdict"] == result.failures[0].verdict.label


def test_the_summary_reads_the_typed_record_as_it_read_the_dict():
    rec = CheckRecord.of(_result())
    as_dict = rec.to_record()
    assert not hasattr(rec, "__getitem__")  # (a reader that reads a key fails on the typed record)
    assert check_lines(rec) == check_lines(as_dict) and problem_lines(rec, "FAILED") == problem_lines(as_dict, "FAILED")
    assert total_lines([rec], ["FAILED"]) == total_lines([as_dict], ["FAILED"])
    assert [r.as_json() for r in aggregate([rec])] == [r.as_json() for r in aggregate([as_dict])]
    relabelled = dataclasses.replace(rec, divergences=(DivergenceRecord("compiled wrong", finding=False),))
    assert "compiled wrong" in problem_lines(relabelled, "FAILED")[0]


#: where a check's record is read: outside `to_record`/`from_record`, by its fields, never by a string key
READERS = ("tdiff/record/summary.py", "tdiff/pytest_plugin/json_report.py", "tdiff/pytest_plugin/terminal.py",
           "tdiff/pytest_plugin/session.py", "tdiff/pytest_plugin/items.py", "tdiff/cli.py")
#: a string key read off a record (`s["cases"]`, `record.get("id")`, `d['repro']`, `summary["wall"]`)
KEY_READ = re.compile(r"""\b(s|d|r|rec|record|records|summary|summaries|blob)(\[["']|\.get\(["'])""")


def test_no_reader_reads_a_record_by_a_string_key():
    found = [f"{path}:{n}: {line.strip()}" for path in READERS
             for n, line in enumerate((ROOT / path).read_text().splitlines(), 1) if KEY_READ.search(line)]
    assert not found, "\n".join(found)
    assert KEY_READ.search('    x = s["cases"]') and KEY_READ.search("d.get('repro')")  # (the pattern finds one)


def test_a_check_result_is_assembled_in_one_place():
    # (its fields set once: `Runner.new_result` says what the check is, `Runner.run_check` completes it)
    import pytest

    result = _result()
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.status = Status.PASSED  # type: ignore[misc]
    made = [f"{p.relative_to(ROOT)}:{n}" for p in sorted((ROOT / "tdiff").rglob("*.py"))
            for n, line in enumerate(p.read_text().splitlines(), 1)
            if re.search(r"\bCheckResult\(|replace\(\s*result\b", line)]
    assert [m.split(":")[0] for m in made] == ["tdiff/drive/runner.py"] * 2, made


def test_the_plan_reads_back_typed_and_keeps_every_key():
    data = {"rows": 3, "cap": 3, "pairs": 10, "covered": 8, "triples": 4, "triples_covered": 4, "missing": ["a"],
            "seconds": 0.5, "cache": "built"}
    plan = PlanRecord.from_record(data)
    assert plan.uncovered and (plan.cache, plan.seconds, plan.pairs) == ("built", 0.5, 10)
    assert plan.to_record() == data
    assert not PlanRecord.from_record({**data, "covered": 10}).uncovered
    assert PlanRecord.from_record({**data, "covered": 10, "triples_covered": 3}).uncovered
    assert not PlanRecord.from_record({}).uncovered and PlanRecord.from_record(None).to_record() == {}
    rec = CheckRecord(id="m::k[tdiff]", plan=plan)
    assert CheckRecord.from_record(json.loads(json.dumps(rec.to_record()))) == rec
