"""The values every stage passes along and shares: dtypes, cases, outcomes, kernel objects, run
options, tolerances and what Triton defines about each operation. Imports nothing else of tdiff."""
