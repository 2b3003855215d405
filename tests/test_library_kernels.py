"""Checks on kernels defined elsewhere (a package, an installed library): declared in a test module,
run in worker processes, under xdist and with TRITON_INTERPRET=1 set for the whole run; and tdiff's
tensors as a hypothesis extension."""

import textwrap

import pytest
import torch
from hypothesis import given, settings

from tdiff import strategies as tst

pytest_plugins = ["pytester"]

LIBRARY = textwrap.dedent('''
    import triton
    import triton.language as tl


    @triton.jit
    def scale_kernel(x_ptr, out_ptr, n, factor, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs, mask=offs < n)
        tl.store(out_ptr + offs, x * factor.to(tl.float32), mask=offs < n)


    @triton.autotune(configs=[triton.Config({"BLOCK": 16}), triton.Config({"BLOCK": 32})], key=["n"])
    @triton.jit
    def tuned_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + 1, mask=offs < n)
''')

TESTS = textwrap.dedent('''
    import torch
    import triton

    import tdiff
    from tdiff import strategies as tst
    from mylib import kern


    def launch(kernel, x):
        x = x.contiguous()  # as the library's wrapper does
        out = torch.empty_like(x)
        kernel[(triton.cdiv(x.numel(), 16),)](x, out, x.numel(), 2.5, BLOCK=16)
        return out


    def launch_tuned(kernel, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        kernel[lambda meta: (triton.cdiv(x.numel(), meta["BLOCK"]),)](x, out, x.numel())
        return out


    X = tst.tensors(shape=(tst.sizes(block=16),), values=tst.values(-8, 8, specials=False))
    tdiff.check(launch=launch, reference=lambda x: x * 2.5, x=X)(kern.scale_kernel)
    tdiff.check(launch=launch_tuned, reference=lambda x: x + 1, x=X)(kern.tuned_kernel)


    def test_plain():
        assert kern.scale_kernel is not None
''')


@pytest.fixture
def library_project(pytester):
    pytester.makeini("[pytest]\ntdiff_profile = ci\ntdiff_examples = 5\ntdiff_shrink_budget = 2\ntdiff_corpus = none\n"
                     "tdiff_repro_dir = none\ntdiff_paths = none_here\n")
    pytester.mkdir("mylib")
    pytester.path.joinpath("mylib", "__init__.py").write_text("")
    pytester.path.joinpath("mylib", "kern.py").write_text(LIBRARY)
    pytester.mkdir("tests")
    pytester.path.joinpath("tests", "__init__.py").write_text("")
    pytester.path.joinpath("tests", "test_mylib.py").write_text(TESTS)
    return pytester


def _items(out: str) -> list[str]:
    return sorted(line.split()[0] for line in out.splitlines() if "[tdiff" in line and "::" in line
                  and ("PASSED" in line or "FAILED" in line) and line.startswith("tests/"))


def test_a_check_on_an_imported_kernel_runs_in_workers_once(library_project):
    result = library_project.runpytest_subprocess("--tdiff", "-v", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=3)
    assert _items(result.stdout.str()) == ["tests/test_mylib.py::scale_kernel[tdiff]",
                                           "tests/test_mylib.py::tuned_kernel[tdiff]"]
    assert "check 'tdiff' of kernel" not in result.stdout.str()  # (the old LookupError)


def test_under_xdist(library_project):
    result = library_project.runpytest_subprocess("--tdiff", "-n", "2", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=3)
    assert "tdiff: 2 checks" in result.stdout.str()


def test_with_triton_interpret_set_for_the_whole_run(library_project, monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    result = library_project.runpytest_subprocess("--tdiff", "-v", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=3)
    assert "worked around float-args" in result.stdout.str()  # eps.to(): stock TRITON_INTERPRET=1 fails there


@settings(max_examples=30, deadline=None)
@given(x=tst.torch_tensors(ndim=2, dtype=["float32", "bfloat16"], layouts=["transposed", "split", "padded"]))
def test_torch_tensors_for_plain_given_tests(x):
    assert isinstance(x, torch.Tensor) and x.ndim == 2 and x.dtype in (torch.float32, torch.bfloat16)
    if x.numel() > 1 and min(x.shape) > 1:  # a view of a larger storage, or not row-major
        bigger = x.untyped_storage().nbytes() > x.numel() * x.element_size()
        assert not x.is_contiguous() or x.storage_offset() > 0 or bigger


def test_torch_tensors_refuse_what_needs_a_check():
    with pytest.raises(ValueError, match="like= and named sides"):
        tst.torch_tensors(like="x")
