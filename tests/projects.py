"""A throwaway project for pytester: an ini and a `kernels` package holding one module of checks."""


def kernel_project(pytester, source: str, **ini: object):
    """Write `kernels/ops.py` from `source` and a pytest.ini with `tdiff_paths = kernels` and `ini`."""
    lines = ["[pytest]", "tdiff_paths = kernels", *(f"{k} = {v}" for k, v in ini.items())]
    pytester.makeini("\n".join(lines))
    pytester.mkdir("kernels")
    pytester.path.joinpath("kernels", "__init__.py").write_text("")
    pytester.path.joinpath("kernels", "ops.py").write_text(source)
    return pytester
