"""Trust: what a pass and a failure mean (known truths, seed soaks, mutants of tdiff's own core)."""
