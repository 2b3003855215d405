"""Speed: where a run's time goes (cases per second, phases, compiles, launchers, CPU by process)."""
