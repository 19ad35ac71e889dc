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
from typing import TypeVar

import numpy as np

#: Below this much work (stored entries, or dense values), a kernel runs on the calling thread: handing work to the
#: pool costs ~50-100 µs, the time to stream ~1M values through one core.
PARALLEL_MIN_ENTRIES = 1 << 20

T = TypeVar("T")
R = TypeVar("R")


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


def map_all(function: Callable[[T], R], items: Sequence[T]) -> list[R]:
    """``[function(item) for item in items]``, concurrently on the pool (the last item on the calling thread, which
    would otherwise only wait; a single item runs there alone). An exception of any item, or a Ctrl-C, is raised only
    once every item has finished: the items write into the caller's buffers, which its cleanup may unmap
    (``list(pool.map(...))`` leaves the running ones going on a Ctrl-C, and a kernel then faults on an unmapped
    page).

    Example:
        >>> map_all(lambda number: number * 2, [1, 2, 3])
        [2, 4, 6]
    """
    if len(items) <= 1:
        return [function(item) for item in items]
    futures = [thread_pool().submit(function, item) for item in items[:-1]]
    error: BaseException | None = None
    last: list[R] = []
    try:
        last.append(function(items[-1]))
    except BaseException as exception:
        error = exception
    for future in futures:
        while True:  # (waited for even after a Ctrl-C while waiting)
            try:
                failure = future.exception()
                break
            except BaseException as interrupt:
                error = error or interrupt
        error = error or failure
    if error is not None:
        raise error
    return [future.result() for future in futures] + last


def run_ranges(function: Callable[[int, int], object], bounds: Sequence[int]) -> None:
    """Run ``function(bounds[i], bounds[i + 1])`` for each range by :func:`map_all`.

    Example:
        >>> seen = []
        >>> run_ranges(lambda first, last: seen.append((first, last)), [0, 4])
        >>> seen
        [(0, 4)]
    """
    map_all(lambda index: function(bounds[index], bounds[index + 1]), range(len(bounds) - 1))
