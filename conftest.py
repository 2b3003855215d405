"""Root conftest: makes `suites` and `tests` importable from the repository root (and in tdiff's workers)."""
