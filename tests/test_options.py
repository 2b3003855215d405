"""The options table (`tdiff.options.OPTIONS`): every option registered as a flag and an ini key, checked in one
place whichever way it is given, its defaults those of `RunOptions`, an old name still working.
(The manual's options page is generated from the table: tests/test_docs.py.)"""

from __future__ import annotations

import argparse
from pathlib import Path

import hypothesis
import pytest

from tdiff import cli, options
from tdiff.core.settings import PROFILES, RunOptions, hypothesis_profile

ROOT = Path(__file__).resolve().parents[1]
pytest_plugins = ["pytester"]


def test_every_option_is_a_flag_and_an_ini_key_checked_by_the_table():
    flags, inis = {}, []
    options.register(lambda flag, **kw: flags.setdefault(flag, kw), lambda key, *a, **kw: inis.append(key))
    assert set(flags) == {o.flag for o in options.OPTIONS} | {"--tdiff-whole-grid"}
    assert inis == [f"tdiff_{f[len('--tdiff-'):].replace('-', '_')}" for f in flags]
    with pytest.raises(argparse.ArgumentTypeError, match="--tdiff-coverage must be report or require, not 'all'"):
        flags["--tdiff-coverage"]["type"]("all")
    assert flags["--tdiff-coverage"]["type"]("require") == "require"
    assert flags["--tdiff-profile"]["metavar"] == "{" + ",".join(PROFILES) + "}"


#: options whose default the table gives in words, not as a value
IN_WORDS = {"backends", "profile", "examples", "seed", "corpus", "repro-dir", "plan", "database", "compile-ahead",
            "compile-only"}


def test_the_tables_defaults_are_the_run_options():
    for o in options.OPTIONS:
        if o.field is None or o.name in IN_WORDS:
            continue
        if o.type is str and not o.choices:
            value = None if o.default == "off" else Path(o.default)  # (a path or a shard; off: not given)
        else:
            value = o.parse(o.default)
        assert value == getattr(RunOptions(), o.field), o.name
    for name in PROFILES:  # (hypothesis knows tdiff's profiles)
        assert hypothesis.settings.get_profile(hypothesis_profile(name)).max_examples in (20, 50, 400)


def test_an_old_name_still_sets_its_option_and_says_it_is_deprecated():
    with pytest.warns(FutureWarning, match="--tdiff-whole-grid .* is deprecated: it is now --tdiff-batched-threshold"):
        opts = options.build({"whole-grid": "128"}.get, Path("."))
    assert opts.batched_threshold == 128
    assert options.build({"whole-grid": "128", "batched-threshold": "64"}.get, Path(".")).batched_threshold == 64


def test_the_cli_takes_its_options_from_the_table(capsys):
    with pytest.raises(SystemExit):
        cli.main(["replay", "corpus", "--isolation", "bogus"])
    assert "--isolation must be process or none, not 'bogus'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main(["replay", "corpus", "--timeout", "0"])
    assert "--timeout must be positive" in capsys.readouterr().err


def test_an_ini_value_is_checked_as_the_flag_is(pytester):
    pytester.makeini("[pytest]\ntdiff_coverage = all\n")
    bad = pytester.runpytest_subprocess("--tdiff", "--co")
    assert "--tdiff-coverage must be report or require, not 'all'" in bad.stderr.str()
