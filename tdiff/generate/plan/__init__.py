"""Boundaries by construction: a plan of cases that covers every triple of the classes of a check's choice points
that decide memory addressing and every pair of all of them (tdiff's own and those inside user strategies), run
before the random search."""

from .build import ADDRESSING_PAIRS, Coverage, Plan, boundary_plan, realize, seeded_database

__all__ = ["ADDRESSING_PAIRS", "Coverage", "Plan", "boundary_plan", "realize", "seeded_database"]
