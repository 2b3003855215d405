"""tdiff's benchmarks, run from the repository root as modules (`python -m bench.power.power`); see bench/README.md."""
