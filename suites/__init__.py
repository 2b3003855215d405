"""Kernels tdiff tests, each with its `@tdiff.check` declarations (`pytest --tdiff` collects them)."""
