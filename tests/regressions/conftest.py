"""Standalone scripts (each `python <file>` exits 0 once its tdiff problem is fixed), run by
tests/test_regressions.py: keep pytest from collecting them."""

collect_ignore_glob = ["*.py"]
