"""Power: how often tdiff finds planted bugs (mutants of kernels), and how often it cries wolf."""
