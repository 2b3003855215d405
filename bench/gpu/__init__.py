"""GPU sessions and probes: scripts that need the compiled path (a CUDA GPU)."""
