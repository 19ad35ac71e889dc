"""numba kernels that run directly on stored data (1-based Julia CSC, column-major dense), mapped or in memory.

Kernels compile lazily on first use and cache their machine code on disk, so importing pydaf stays fast and a second
process does not recompile.
"""
