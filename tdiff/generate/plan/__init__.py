"""Boundaries by construction: a plan of cases that covers every pair of boundary classes across a check's
choice points (tdiff's own and those inside user strategies), run before the random search."""

from .build import Coverage, Plan, boundary_plan, realize, seeded_database

__all__ = ["Coverage", "Plan", "boundary_plan", "realize", "seeded_database"]
