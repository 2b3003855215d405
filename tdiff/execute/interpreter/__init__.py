"""tdiff's instrumented interpreter: Triton's numpy interpreter with memory, dataflow and coverage
tracing, shims for what stock TRITON_INTERPRET=1 cannot run, and poisoned masked lanes."""
