"""The boundary plan kept between runs (tdiff.drive.plan_cache): built once, loaded after, the very same planned
cases; built again where the declaration changed or the stored plan no longer draws its cases; the check's own plan
in every profile."""

import json

import hypothesis

import tdiff
from tdiff.declaration import checks_of
from tdiff.drive import plan_cache
from tdiff.drive.pipeline import drawn_cases
from tdiff.drive.search import planned
from tests import plan_kernels as P


class _Result:
    def __init__(self) -> None:
        self.notes: list[str] = []
        self.plan: dict = {}
        self.plan_line = ""


def _plan(check, opts):
    settings = tdiff.core.settings.hypothesis_settings(opts, check.max_examples)
    result = _Result()
    _, cases = planned(check, drawn_cases(check, opts), settings, opts, b"key", result)
    return result.plan, [c.digest() for c in cases]


def _opts(tmp_path, **kw):
    return tdiff.RunOptions(profile="ci", run_dir=tmp_path / "run", **kw)


def test_a_plan_is_built_once_and_loaded_after_with_the_same_cases(tmp_path):
    (check,) = checks_of(P.knob_kernel)
    first, built = _plan(check, _opts(tmp_path))
    assert first["cache"] == "built" and first["seconds"] >= 0 and built
    (stored,) = (tmp_path / "run" / plan_cache.FOLDER).glob("*.json")
    assert (tmp_path / "run" / ".gitignore").exists()  # (never committed)
    second, loaded = _plan(check, _opts(tmp_path))
    assert second["cache"] == "loaded" and loaded == built
    same = [k for k in first if k not in ("cache", "seconds")]
    assert {k: second[k] for k in same} == {k: first[k] for k in same}  # the same coverage, reported alike
    # another plan size is another plan
    other, _ = _plan(check, _opts(tmp_path, plan=3))
    assert other["cache"] == "built" and other["rows"] <= 3


def test_a_stored_plan_that_no_longer_draws_its_cases_is_built_again(tmp_path):
    (check,) = checks_of(P.knob_kernel)
    _, built = _plan(check, _opts(tmp_path))
    (stored,) = (tmp_path / "run" / plan_cache.FOLDER).glob("*.json")
    data = json.loads(stored.read_text())
    data["digests"][0] = "0" * 16  # (as a strategy changed elsewhere would: the choices draw another case)
    stored.write_text(json.dumps(data))
    again, cases = _plan(check, _opts(tmp_path))
    assert again["cache"] == "built" and cases == built
    assert json.loads(stored.read_text())["digests"][0] != "0" * 16  # stored over


def test_the_key_follows_the_declaration(tmp_path):
    (check,) = checks_of(P.knob_kernel)
    (bug,) = checks_of(P.knob_pair_bug)
    params = (10, 4, 1, True)
    assert plan_cache.key(check, params) == plan_cache.key(check, params)
    assert plan_cache.key(check, params) != plan_cache.key(check, (10, 4, 2, True))
    assert plan_cache.key(check, params) != plan_cache.key(bug, params)
    import dataclasses

    narrower = dataclasses.replace(check, strategies={**check.strategies, "x": hypothesis.strategies.just(1)})
    assert plan_cache.key(check, params) != plan_cache.key(narrower, params)


def test_a_plan_is_the_check_ids_in_every_profile_and_kept(tmp_path, monkeypatch):
    # (the dev profile draws its random search at random; its plan is the check's, as in ci)
    monkeypatch.delenv("CI", raising=False)
    (check,) = checks_of(P.knob_kernel)
    dev = tdiff.RunOptions(profile="dev", run_dir=tmp_path / "run", database=None)
    first, built = _plan(check, dev)
    again, loaded = _plan(check, dev)
    assert (first["cache"], again["cache"]) == ("built", "loaded") and built == loaded
    other, rebuilt = _plan(check, tdiff.RunOptions(profile="dev", run_dir=tmp_path / "other", database=None))
    assert other["cache"] == "built" and rebuilt == built  # (another run directory: built again, the same plan)


def test_the_json_totals_count_plans_by_how_they_came():
    from tdiff.pytest_plugin.json_report import _plans

    plans = [{"cache": "built", "seconds": 0.5}, {"cache": "loaded", "seconds": 0.1},
             {"cache": "loaded", "seconds": 0.2}, {}, None]
    from tdiff.record.check_record import CheckRecord, PlanRecord

    records = [CheckRecord(id=f"m::k[{i}]", plan=PlanRecord.from_record(p)) for i, p in enumerate(plans)]
    assert _plans(records) == {"built": 1, "loaded": 2, "seconds": 0.8}


def test_a_declaration_whose_key_cannot_be_read_is_planned_not_kept(tmp_path, monkeypatch):
    def unreadable(check, params):
        raise OSError("source not found")

    monkeypatch.setattr(plan_cache, "key", unreadable)
    (check,) = checks_of(P.knob_kernel)
    plan, cases = _plan(check, _opts(tmp_path))
    assert plan["cache"] == "built" and plan["rows"] >= 1 and cases
    assert not (tmp_path / "run" / plan_cache.FOLDER).exists()
