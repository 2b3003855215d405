"""tdiff checks on real FlagGems (flag-gems 5.0.2) kernels.

`_gems.py` loads the library (with stand-ins for its GPU queries on CPU machines only); FINDINGS.md
(at the repository's root) lists what the checks found; the tdiff problems met while writing them
are regression scripts in tests/regressions/.
"""
