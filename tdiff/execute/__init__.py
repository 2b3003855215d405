"""Execution: a case turned into a launch plan and run by each backend (compiled, interpreter,
reference) in isolated worker processes, with the compile budget and GPU pinning."""
