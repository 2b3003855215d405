"""Reach: how many real-library kernels tdiff's interpreter runs."""
