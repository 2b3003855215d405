"""Reduction: how small tdiff reduces the kernels of its findings and of planted bugs."""
