"""The threads that run numba kernels: serial kernels that release the GIL, one index range per thread.

Serial kernels on a pool of Python threads, rather than ``parallel=True`` kernels: loading a ``parallel=True`` kernel
from numba's cache costs 0.6-0.9 s per process (the first query of a process took 1.2 s), a serial one a few ms.

Example:
    >>> number_of_threads() >= 1
    True
    >>> totals = [0, 0]
    >>> run_ranges(lambda first, last: totals.__setitem__(first // 5, sum(range(first, last))), [0, 5, 10])
    >>> totals
    [10, 35]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import cache

import numpy as np

#: Below this much work (stored entries, or dense values), a kernel runs on the calling thread: handing work to the
#: pool costs ~50-100 µs, the time to stream ~1M values through one core.
PARALLEL_MIN_ENTRIES = 1 << 20


def number_of_threads() -> int:
    """Threads for the kernels: numba's setting (``NUMBA_NUM_THREADS``, the number of cores by default), read without
    starting numba's own thread pool.

    Example:
        >>> isinstance(number_of_threads(), int)
        True
    """
    import numba

    # (numba.config sets its settings as module attributes at import, from the environment: no stub declares them)
    return max(1, int(numba.config.NUMBA_NUM_THREADS))  # type: ignore[attr-defined]


@cache
def thread_pool() -> ThreadPoolExecutor:
    """The process-wide pool of :func:`number_of_threads` threads the kernels run on.

    Example:
        >>> thread_pool().submit(sum, [1, 2]).result()
        3
    """
    return ThreadPoolExecutor(max_workers=number_of_threads(), thread_name_prefix="pydaf-kernels")


def threads_for(work: int) -> int:
    """How many threads to use for this much work (entries or values): one below :data:`PARALLEL_MIN_ENTRIES`.

    Example:
        >>> threads_for(10)
        1
    """
    return 1 if work < PARALLEL_MIN_ENTRIES else number_of_threads()


def even_bounds(total: int, n_ranges: int) -> list[int]:
    """Bounds of ``n_ranges`` (at most ``total``) contiguous ranges of ``[0, total)`` of (nearly) equal sizes.

    Example:
        >>> even_bounds(10, 3)
        [0, 3, 6, 10]
    """
    n_ranges = max(1, min(n_ranges, total))
    return np.linspace(0, total, n_ranges + 1).astype(np.int64).tolist()


def run_ranges(function: Callable[[int, int], object], bounds: Sequence[int]) -> None:
    """Run ``function(bounds[i], bounds[i + 1])`` for each range, concurrently on the pool (the last one on the calling
    thread, which would otherwise only wait); a single range runs on the calling thread. An exception of any range,
    or a Ctrl-C, is raised once all have finished.

    Example:
        >>> seen = []
        >>> run_ranges(lambda first, last: seen.append((first, last)), [0, 4])
        >>> seen
        [(0, 4)]
    """
    n_ranges = len(bounds) - 1
    if n_ranges <= 0:
        return
    if n_ranges == 1:
        function(bounds[0], bounds[1])
        return
    futures = [thread_pool().submit(function, bounds[index], bounds[index + 1]) for index in range(n_ranges - 1)]
    error: BaseException | None = None
    try:
        function(bounds[-2], bounds[-1])
    except BaseException as exception:  # Raised after the other ranges finish (they may use the same buffers).
        error = exception
    for future in futures:  # (every one waited for, even after an error or a Ctrl-C while waiting: the ranges
        while True:           # write into the caller's buffers, which its cleanup may unmap)
            try:
                failure = future.exception()
                break
            except BaseException as interrupt:
                error = error or interrupt
        error = error or failure
    if error is not None:
        raise error
