"""Outcomes built in tests from a display label, as a backend playing that part would make them."""

from __future__ import annotations

from typing import Any

from tdiff.core.backend_spec import role_of
from tdiff.core.outcome import Outcome


def outcome(label: str, **fields: Any) -> Outcome:
    """An outcome labelled `label`, playing the part the label names."""
    return Outcome(label, role=role_of(label), **fields)
