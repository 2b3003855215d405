"""The pytest side of tdiff, behind the hooks of `tdiff.plugin` (which only delegates here).

- `session`: `TdiffSession`, the state of one pytest session with `--tdiff` (options, runner, the
  records of the checks that ran);
- `items`: collection (`TdiffModule`, `make_item`) and the check as a test item (`TdiffItem`);
- `ordering`: shards, and the checks that took longest last time first;
- `progress`: what a running check has done so far, shown while it runs (in this process, or from
  xdist workers through a small file each under the run directory);
- `terminal`: pytest's labels for checks and the run's summary;
- `json_report`: the `--tdiff-json` file.

Nothing here imports torch or triton at module level: the xdist controller never needs them.
"""
