"""Exceptions tdiff raises to its users."""

from __future__ import annotations


class TdiffError(Exception):
    """Base class of tdiff's own errors."""


class DeclarationError(TdiffError, TypeError):
    """A `@tdiff.check` declaration is wrong: names the kernel and the argument."""


class CorpusError(TdiffError):
    """A corpus entry cannot be read or replayed."""


class DivergenceError(AssertionError):
    """Raised by `tdiff.verify` when two backends disagree; its message is the report."""

    def __init__(self, message: str, results: list | None = None) -> None:
        super().__init__(message)
        self.results = results or []
