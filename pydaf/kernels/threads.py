"""The threads that run numba kernels: serial kernels that release the GIL, one index range per thread.

Example:
    >>> number_of_threads() >= 1
    True
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from functools import cache


def number_of_threads() -> int:
    """Threads for the kernels: numba's setting (``NUMBA_NUM_THREADS``, the number of cores by default), read without
    starting numba's own thread pool.

    Example:
        >>> isinstance(number_of_threads(), int)
        True
    """
    import numba

    return max(1, int(numba.config.NUMBA_NUM_THREADS))


@cache
def thread_pool() -> ThreadPoolExecutor:
    """The process-wide pool of :func:`number_of_threads` threads the kernels run on.

    Example:
        >>> thread_pool().submit(sum, [1, 2]).result()
        3
    """
    return ThreadPoolExecutor(max_workers=number_of_threads(), thread_name_prefix="pydaf-kernels")
