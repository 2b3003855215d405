"""tdiff checks on real liger-kernel kernels (liger_kernel.ops), each launched as liger's own wrapper launches it.

Every module skips (pytest.importorskip) where liger-kernel is not installed. Known divergences are in
FINDINGS.md; problems of tdiff itself met while writing these checks are regression scripts in tests/regressions/.
"""
