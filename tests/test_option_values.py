"""Options are checked where they are made: a bad value of every option the table (`tdiff.core.option_table.OPTIONS`)
constrains raises the same message given to `RunOptions(...)`, `RunOptions.with_`, `tdiff.verify(kernel, **opts)`,
`@tdiff.check(...)` (its options of the same meaning), a `--tdiff-*` flag, an ini key and the `tdiff` CLI. The cases
are made from the table, so a new option is covered (or this file says what it needs)."""

from __future__ import annotations

import argparse
import inspect
import math
import re
from pathlib import Path
from typing import Any

import pytest

import tdiff
from tdiff import cli, options
from tdiff.core.option_table import OPTIONS, Option, python_name
from tdiff.core.settings import UNFLAGGED, RunOptions
from tdiff.errors import DeclarationError
from tests import kernels as K

#: bad values of options whose flag's words become something else: (in Python, as written on the command line)
BY_HAND: dict[str, tuple[Any, str]] = {
    "backends": (("bogus",), "bogus"),
    "shard": ((3, 2), "3/2"),
}
#: options any word of which is a good flag value (a directory, a database's address): only a Python value of the
#: wrong type is bad
PYTHON_ONLY: dict[str, Any] = {"corpus": 3, "repro-dir": 3, "run-dir": 3, "campaign": 3, "database": "a/dir"}
#: the options `tdiff replay` takes (tdiff.cli.main)
CLI = ("backends", "isolation", "timeout", "reduce-budget")


def constrained(o: Option) -> bool:
    """Whether the table alone says which values are bad (words, a number's type and range)."""
    return bool(o.words) or o.type in (int, float)


def bad_values(o: Option) -> list[tuple[Any, str]]:
    """(in Python, as a flag) bad values of option `o`, made from its entry in the table."""
    if o.type is bool:
        return [("yes", "yes"), (1, "1")]
    if o.words:
        return [(o.words[0][:-1], o.words[0][:-1])]
    out: list[tuple[Any, str]] = [("x", "x")]
    if o.type is int:
        out += [(2.5, "2.5"), (True, "True")]
    if o.minimum is not None or o.positive:
        edge = o.type(o.minimum - 1 if o.minimum is not None else 0)
        out.append((edge, str(edge)))
        if o.type is float:
            out.append((math.nan, "nan"))
    return out


FIELDS = [o for o in OPTIONS if o.field is not None]
CASES = [pytest.param(o, py, flag, id=f"{o.name}={flag}")
         for o in FIELDS for py, flag in (bad_values(o) if constrained(o) else [BY_HAND[o.name]] if o.name in BY_HAND
                                          else [])]


def normal(message: str, name: str, *shown: Any) -> str:
    """`message` with the option's name and the bad value as shown (repr) replaced, to compare what each face
    says; a bool field takes True or False where its flag takes on or off."""
    message = message.replace(name, "<NAME>").replace("True or False (on or off)", "on or off")
    for v in shown:
        message = message.replace(f"not {v!r}", "not <V>").replace(f" {v!r}:", " <V>:")
    return message


def python_error(**given: Any) -> str:
    with pytest.raises(ValueError) as err:
        RunOptions(**given)
    assert type(err.value) is ValueError
    return str(err.value)


def flag_error(o: Option, raw: str) -> str:
    """The message of the flag's value as pytest's ini key and `options.build` check it."""
    with pytest.raises(ValueError) as err:
        options.build({o.name: raw}.get, Path("."))
    assert type(err.value) is ValueError
    return str(err.value)


def test_the_issues_examples_raise_where_they_are_made():
    for given, said in [({"isolation": "proces"}, "RunOptions.isolation (--tdiff-isolation) must be process or none, "
                                                  "not 'proces'"),
                        ({"coverage": "requir"}, "RunOptions.coverage (--tdiff-coverage) must be report or require, "
                                                 "not 'requir'"),
                        ({"timeout": -1}, "RunOptions.timeout (--tdiff-timeout) must be positive, not -1"),
                        ({"profile": "fast"}, "RunOptions.profile (--tdiff-profile) must be ci, dev or thorough, "
                                              "not 'fast'")]:
        assert python_error(**given) == said
    with pytest.raises(ValueError, match=r"^RunOptions.isolation \(--tdiff-isolation\) must be process or none, "
                                         r"not 'nonee'$"):
        tdiff.verify(K.double_kernel, isolation="nonee")


def test_every_option_that_sets_a_field_has_its_bad_values_here():
    missing = [o.name for o in FIELDS if not constrained(o) and o.name not in BY_HAND and o.name not in PYTHON_ONLY]
    assert not missing, f"give a bad value of {missing} in BY_HAND (or PYTHON_ONLY)"


@pytest.mark.parametrize("o,py,raw", CASES)
def test_a_bad_value_raises_the_flags_message_in_run_options(o, py, raw):
    said = python_error(**{o.field: py})
    assert said.startswith(python_name(o)), said
    assert normal(said, python_name(o), py, raw) == normal(flag_error(o, raw), o.flag, raw)


@pytest.mark.parametrize("o,py,raw", CASES)
def test_the_flag_and_its_ini_key_give_that_message(o, py, raw, capsys):
    parser = argparse.ArgumentParser()
    options.register(parser.add_argument, lambda *a, **k: None)
    if o.name in BY_HAND:  # (its words are checked where they become the field's value: in build, as the ini's)
        parser.parse_args([f"{o.flag}={raw}"])
    else:
        with pytest.raises(SystemExit):
            parser.parse_args([f"{o.flag}={raw}"])
        assert f"argument {o.flag}: {flag_error(o, raw)}" in capsys.readouterr().err


@pytest.mark.parametrize("o,py,raw", [c for c in CASES if c.values[0].name in CLI and c.values[0].name not in BY_HAND])
def test_the_cli_gives_that_message(o, py, raw, capsys):
    with pytest.raises(SystemExit):
        cli.main(["replay", "corpus", f"--{o.name}={raw}"])
    expected = normal(flag_error(o, raw), o.flag, raw).replace("<NAME>", f"--{o.name}").replace("<V>", repr(raw))
    assert expected in capsys.readouterr().err


PYTHON_CASES = [pytest.param(o, PYTHON_ONLY[o.name], "", id=f"{o.name}={PYTHON_ONLY[o.name]!r}")
                for o in FIELDS if o.name in PYTHON_ONLY]


@pytest.mark.parametrize("o,py,raw", CASES + PYTHON_CASES)
def test_with_and_verify_give_the_run_options_message(o, py, raw):
    said = python_error(**{o.field: py})
    assert said.startswith(python_name(o)), said
    with pytest.raises(ValueError) as err:
        RunOptions(isolation="none").with_(**{o.field: py})
    assert str(err.value) == said
    with pytest.raises(ValueError) as err:
        tdiff.verify(K.double_kernel, **{o.field: py})
    assert str(err.value) == said


@pytest.mark.parametrize("o,py", [pytest.param(o, py, id=f"{o.field}={py!r}") for o in UNFLAGGED
                                  for py, _ in bad_values(o)])
def test_a_field_no_flag_sets_is_checked_too(o, py):
    said = python_error(**{o.field: py})
    assert said.startswith(f"RunOptions.{o.field} must be "), said
    with pytest.raises(ValueError, match=f"^{re.escape(said)}$"):
        tdiff.verify(K.double_kernel, **{o.field: py})


CHECK_ARGS = set(inspect.signature(tdiff.check).parameters)


@pytest.mark.parametrize("o,py,raw", [c for c in CASES if c.values[0].field in CHECK_ARGS
                                      and c.values[0].type in (int, float)])
def test_a_checks_option_of_the_same_meaning_gives_that_message(o, py, raw):
    with pytest.raises(DeclarationError) as err:
        tdiff.check(launch=lambda kernel, x: None, x=1, **{o.field: py})(K.double_kernel)
    said = python_error(**{o.field: py})
    assert str(err.value).endswith(": " + said.replace(python_name(o), o.field)), str(err.value)


GOOD = [pytest.param(o, v, id=f"{o.name}={v!r}") for o in FIELDS if constrained(o)
        for v in ((True, False) if o.type is bool else o.words or
                  (o.type(o.minimum) if o.minimum is not None else 0.001 if o.positive else o.type(7),))]


@pytest.mark.parametrize("o,value", GOOD)
def test_each_good_value_and_the_edge_of_a_range_is_accepted(o, value):
    assert getattr(RunOptions(**{o.field: value}), o.field) == value
    assert getattr(RunOptions().with_(**{o.field: value}), o.field) == value
    assert o.parse("on" if value is True else "off" if value is False else str(value)) == value


def test_the_defaults_and_none_where_a_field_takes_it_are_accepted():
    default = RunOptions()
    assert default.with_() == default
    RunOptions(**{f: None for f in ("backends", "max_examples", "seed", "compile_ahead", "plan", "gpu", "shard",
                                    "campaign_dir", "corpus_dir", "corpus_more", "database", "repro_dir", "run_dir")})
    RunOptions(backends=["compiled", "interpreter"], run_dir="somewhere", corpus_more=("a", Path("b")), shard=(2, 2),
               database=tdiff_database(), timeout=1, compile_budget=0)
    with pytest.raises(ValueError, match=r"^RunOptions.timeout \(--tdiff-timeout\) must be a number of seconds, "
                                         r"not None$"):
        RunOptions(timeout=None)


def tdiff_database() -> Any:
    from hypothesis.database import InMemoryExampleDatabase

    return InMemoryExampleDatabase()
