import os

import pytest
import torch
import triton  # noqa: F401  (loaded once, first: libtriton aborts when a test's changed HOME or cwd meets its first load)


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (none here): run on the GPU machine")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def run_opts(tmp_path):
    """RunOptions writing nothing outside tmp_path, fast and derandomized; no kernel reduction (tests/test_reduce.py
    turns it on where it is what a test is about: elsewhere it would add up to its budget to every failing check)."""
    from tdiff import RunOptions

    return RunOptions(profile="ci", corpus_dir=tmp_path / "corpus", repro_dir=tmp_path / "out",
                      isolation="none", shrink_budget=20, reduce_budget=0)


@pytest.fixture(autouse=True)
def _quiet_ci(monkeypatch):
    # tests choose their own profile; keep hypothesis from writing a database in the repo
    monkeypatch.setenv("CI", os.environ.get("CI", "true"))
