"""A throwaway project for pytester: an ini and a `kernels` package holding one module of checks."""


def kernel_project(pytester, source: str, **ini: object):
    """Write `kernels/ops.py` from `source` and a pytest.ini with `tdiff_paths = kernels` and `ini`."""
    _forget_earlier_projects()
    lines = ["[pytest]", "tdiff_paths = kernels", *(f"{k} = {v}" for k, v in ini.items())]
    pytester.makeini("\n".join(lines))
    pytester.mkdir("kernels")
    pytester.path.joinpath("kernels", "__init__.py").write_text("")
    pytester.path.joinpath("kernels", "ops.py").write_text(source)
    return pytester


def import_all_of_tdiff() -> None:
    """Import every module of tdiff (and so torch and Triton) now, for a test module that runs pytest in this
    process (`pytester.runpytest_inprocess`): pytester takes sys.modules back to what it was before each run, so a
    tdiff module first imported inside one run is imported afresh by the next, while the kernels it imports still
    hold the first copy (a second `tdiff.declaration`, whose registry holds no checks: the run collects nothing)."""
    import importlib
    import pkgutil

    import tdiff

    for found in pkgutil.walk_packages(tdiff.__path__, "tdiff."):
        importlib.import_module(found.name)


def _forget_earlier_projects() -> None:
    """Forget the checks an earlier project declared in this process: where pytest runs in this process
    (`runpytest_inprocess`), each project's `kernels.ops` declares its checks in tdiff's registry, by module name,
    and a later project's module of the same name would otherwise collect them too."""
    from tdiff import declaration

    for key in [k for k in declaration._REGISTRY if k[0] == "kernels" or k[0].startswith("kernels.")]:
        del declaration._REGISTRY[key]
