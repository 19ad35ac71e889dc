"""Permuting the entries of an axis in stored vectors and matrices (for :func:`pydaf.reorder_axes`), written into
given buffers so a memory-mapped or freshly allocated destination is filled in one pass with bounded extra memory.

Permutations are 0-based: entry ``i`` of the result is entry ``permutation[i]`` of the source. Sparse data is 1-based
(Julia's layout), and its moved rows are found through the inverse permutation (``inverse[old] = new``).
"""

from __future__ import annotations

import collections
import importlib
import itertools
import os
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from types import ModuleType

import numpy as np

from .._os.maps import prefetch_pages, release_pages
from .threads import even_bounds, map_all, number_of_threads, run_ranges, threads_for

#: Elements per block of a dense matrix permutation (a block's gather is one temporary of this size).
_DENSE_BLOCK_ELEMENTS = 1 << 22

#: Below this many stored entries numpy and scipy are used (loading the numba kernel costs 0.3-0.7 s per process);
#: above it the numba kernel is 5-10x faster (4.8M entries: 0.06 s against 0.5-0.8 s) and its memory is bounded.
PERMUTE_NUMBA_MIN_ENTRIES = 1 << 20

#: Stored entries per block of a parallel sparse permutation.
_SPARSE_BLOCK_ENTRIES = 1 << 22

#: Stored entries per block when rows move, at least twice the rows (their bucketing is fastest in cache: 2.5-5x faster
#: than 4M-entry blocks, and 16K-entry blocks 5-25% faster than 64K-entry ones).
_SPARSE_ROWS_BLOCK_ENTRIES = 1 << 14


def _kernels() -> ModuleType:
    """The numba kernel: importing it imports numba, so only a large permutation does."""
    return importlib.import_module(f"{__package__}._permute")


def permute_vector_into(source: np.ndarray, permutation: np.ndarray, out: np.ndarray) -> None:
    """``out[i] = source[permutation[i]]`` for a dense vector (numbers or strings).

    Example:
        >>> out = np.empty(3, dtype=np.int64)
        >>> permute_vector_into(np.array([10, 20, 30]), np.array([2, 0, 1]), out)
        >>> out.tolist()
        [30, 10, 20]
    """
    # (mode "clip": the permutation is valid, and numpy's default "raise" gathers into a temporary and copies it to
    # ``out``: 2.5x slower for a 10,000-entry column)
    np.take(source, permutation, out=out, mode="clip")


def permute_sparse_vector_into(nzind: np.ndarray, nzval: np.ndarray, inverse_permutation: np.ndarray,
                               out_nzind: np.ndarray, out_nzval: np.ndarray) -> None:
    """The stored entries of a 1-based sparse vector whose entry ``j`` moves to ``inverse_permutation[j]``.

    Example:
        >>> out_nzind, out_nzval = np.empty(2, dtype=np.int64), np.empty(2)
        >>> permute_sparse_vector_into(np.array([1, 3]), np.array([5.0, 7.0]), np.array([1, 2, 0]), out_nzind,
        ...                            out_nzval)
        >>> out_nzind.tolist(), out_nzval.tolist()
        ([1, 2], [7.0, 5.0])
    """
    positions = np.take(inverse_permutation, np.asarray(nzind, dtype=np.int64) - 1)
    order = np.argsort(positions, kind="stable")
    np.add(positions[order], 1, out=out_nzind, casting="unsafe")
    np.take(nzval, order, out=out_nzval)


def permute_dense_matrix_into(source: np.ndarray, rows_permutation: np.ndarray | None,
                              columns_permutation: np.ndarray | None, out: np.ndarray) -> None:
    """``out[i, j] = source[rows_permutation[i], columns_permutation[j]]`` (an absent permutation keeps that side),
    a block of columns at a time.

    Example:
        >>> out = np.empty((2, 3), order="F")
        >>> permute_dense_matrix_into(np.asfortranarray(np.arange(6.0).reshape(2, 3)), np.array([1, 0]),
        ...                           np.array([2, 0, 1]), out)
        >>> out.tolist()
        [[5.0, 3.0, 4.0], [2.0, 0.0, 1.0]]
    """
    n_rows, n_columns = source.shape
    if source.size >= PERMUTE_NUMBA_MIN_ENTRIES and source.dtype.kind in "biuf" and out.dtype == source.dtype:
        # (the numba kernel, a range of columns per thread: 2-6x faster than numpy's blocks below)
        gather = _dense_gatherer(source, rows_permutation, columns_permutation)
        run_ranges(lambda first, last: gather(first, out[:, first:last]),
                   even_bounds(n_columns, threads_for(source.size)))
        return
    block = max(1, _DENSE_BLOCK_ELEMENTS // max(n_rows, 1))
    for start in range(0, n_columns, block):
        end = min(start + block, n_columns)
        # (Fancy indexing, not np.take(axis=1): that copies a whole column-major source for every block.)
        columns = source[:, start:end] if columns_permutation is None else source[:, columns_permutation[start:end]]
        if rows_permutation is not None:
            columns = columns[rows_permutation, :]
        out[:, start:end] = columns


def permute_csc_into(shape: tuple[int, int], colptr: np.ndarray, rowval: np.ndarray, nzval: np.ndarray,
                     inverse_rows_permutation: np.ndarray | None, columns_permutation: np.ndarray | None,
                     out_colptr: np.ndarray, out_rowval: np.ndarray, out_nzval: np.ndarray) -> None:
    """A 1-based CSC matrix of ``shape`` with its rows moved (row ``r`` to ``inverse_rows_permutation[r]``) and/or its
    columns permuted (column ``j`` of the result is column ``columns_permutation[j]``), written into the ``out_*``
    buffers (of the input's lengths); rows stay sorted within each column.

    Example:
        >>> colptr, rowval, nzval = np.empty(3, np.int64), np.empty(3, np.int64), np.empty(3)
        >>> permute_csc_into((2, 2), np.array([1, 3, 4]), np.array([1, 2, 2]), np.array([1.0, 2.0, 3.0]),
        ...                  np.array([1, 0]), np.array([1, 0]), colptr, rowval, nzval)
        >>> colptr.tolist(), rowval.tolist(), nzval.tolist()
        ([1, 2, 4], [1, 1, 2], [3.0, 2.0, 1.0])
    """
    n_columns = shape[1]
    lengths = np.diff(np.asarray(colptr, dtype=np.int64))
    if columns_permutation is not None:
        lengths = lengths[columns_permutation]
    out_colptr[0] = 1
    np.add(np.cumsum(lengths), 1, out=out_colptr[1:], casting="unsafe")
    if rowval.shape[0] < PERMUTE_NUMBA_MIN_ENTRIES:
        _permute_csc_numpy(shape[0], colptr, rowval, nzval, lengths, inverse_rows_permutation, columns_permutation,
                           out_colptr, out_rowval, out_nzval)
        return
    kernels = _kernels()
    no_permutation = np.empty(0, dtype=np.int64)
    inverse_rows = no_permutation if inverse_rows_permutation is None else inverse_rows_permutation
    columns = no_permutation if columns_permutation is None else columns_permutation
    # Output column blocks of about _SPARSE_BLOCK_ENTRIES entries each; with rows moved, small blocks whose bucketing
    # stays in cache (but big enough that clearing the row counts is cheap). Each thread takes the next block when it
    # is done with one (no wave of blocks waits for its slowest) and reuses its scratch buffers.
    block_entries = _SPARSE_BLOCK_ENTRIES if inverse_rows_permutation is None else max(
        min(_SPARSE_BLOCK_ENTRIES, _SPARSE_ROWS_BLOCK_ENTRIES), 2 * shape[0])
    wanted = np.arange(1, rowval.shape[0] + 1, block_entries, dtype=np.int64)
    firsts = np.searchsorted(out_colptr, wanted, side="right") - 1
    bounds = np.unique(np.concatenate([[0], np.clip(firsts, 0, n_columns), [n_columns]])).astype(np.int64)
    most_entries = int(np.max(np.diff(np.asarray(out_colptr, dtype=np.int64)[bounds]), initial=0))
    blocks = list(itertools.pairwise(bounds.tolist()))
    next_block = itertools.count()  # (``next`` of it is atomic: one C call under the GIL)
    failed = threading.Event()

    def work(_: int) -> None:
        if inverse_rows_permutation is not None:
            counts, new_rows = np.empty(shape[0] + 1, dtype=np.int64), np.empty(most_entries, dtype=np.int64)
            values = np.empty(most_entries, dtype=nzval.dtype)
            small = np.int32 if max(most_entries, n_columns) < 2**31 else np.int64  # (less cache for the block)
            block_columns, order = np.empty(most_entries, dtype=small), np.empty(most_entries, dtype=small)
        try:
            while not failed.is_set() and (index := next(next_block)) < len(blocks):
                first, last = blocks[index]
                if inverse_rows_permutation is None:
                    kernels.permute_csc_columns(colptr, rowval, nzval, inverse_rows, columns, out_colptr, out_rowval,
                                                out_nzval, first, last)
                else:
                    kernels.permute_csc_rows(colptr, rowval, nzval, inverse_rows, columns, out_colptr, out_rowval,
                                             out_nzval, first, last, counts, new_rows, values, block_columns, order)
        except BaseException:
            failed.set()
            raise

    map_all(work, range(min(number_of_threads(), len(blocks))))


def gather_csc_columns(colptr: np.ndarray, rowval: np.ndarray, nzval: np.ndarray,
                       columns: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The ``colptr``, ``rowval`` and ``nzval`` (new arrays, of the input's types) of the 0-based ``columns`` (any
    order, repeats allowed) of a 1-based CSC matrix: each column's entries copied as a run, output blocks on the
    threads, no index per entry. When the columns ascend, the input pages each block read (and the fault-around
    mapped with them) are released once it is done (:func:`~pydaf._os.maps.release_pages`), so a mapped input does
    not stay resident, however scattered the columns.

    Example:
        >>> colptr, rowval, nzval = gather_csc_columns(np.array([1, 3, 3, 4]), np.array([1, 2, 2]),
        ...                                            np.array([5.0, 6.0, 7.0]), np.array([2, 0]))
        >>> colptr.tolist(), rowval.tolist(), nzval.tolist()
        ([1, 2, 4], [2, 1, 2], [7.0, 5.0, 6.0])
    """
    columns = np.asarray(columns, dtype=np.int64)
    starts = np.asarray(colptr, dtype=np.int64)[columns]
    lengths = np.asarray(colptr, dtype=np.int64)[columns + 1] - starts
    out_colptr = np.empty(columns.shape[0] + 1, dtype=colptr.dtype)
    out_colptr[0] = 1
    np.add(np.cumsum(lengths), 1, out=out_colptr[1:], casting="unsafe")
    n_entries = int(lengths.sum())
    out_rowval, out_nzval = np.empty(n_entries, dtype=rowval.dtype), np.empty(n_entries, dtype=nzval.dtype)
    if n_entries < PERMUTE_NUMBA_MIN_ENTRIES:
        positions = np.repeat(starts - 1 - (out_colptr[:-1].astype(np.int64) - 1), lengths) + np.arange(n_entries)
        np.take(rowval, positions, out=out_rowval)
        np.take(nzval, positions, out=out_nzval)
        return out_colptr, out_rowval, out_nzval
    kernels = _kernels()
    no_permutation = np.empty(0, dtype=np.int64)
    wanted = np.arange(1, n_entries + 1, _SPARSE_BLOCK_ENTRIES, dtype=np.int64)
    firsts = np.searchsorted(out_colptr, wanted, side="right") - 1
    ascending = bool(np.all(columns[1:] >= columns[:-1]))
    if ascending:  # (and blocks that span at most _SPARSE_BLOCK_ENTRIES of the input: what is resident at once)
        spanned = np.arange(int(starts[0]), int(starts[-1]) + 1, _SPARSE_BLOCK_ENTRIES, dtype=np.int64)
        firsts = np.concatenate([firsts, np.searchsorted(starts, spanned, side="left")])
    bounds = np.unique(np.concatenate([[0], np.clip(firsts, 0, columns.shape[0]), [columns.shape[0]]])).tolist()

    def run(first_block: int, last_block: int) -> None:
        for block_first, block_last in itertools.pairwise(bounds[first_block:last_block + 1]):
            kernels.permute_csc_columns(colptr, rowval, nzval, no_permutation, columns, out_colptr, out_rowval,
                                        out_nzval, block_first, block_last)
            if ascending:
                read = slice(int(starts[block_first]) - 1, int(starts[block_last - 1] + lengths[block_last - 1]) - 1)
                release_pages(rowval[read])
                release_pages(nzval[read])

    run_ranges(run, even_bounds(len(bounds) - 1, number_of_threads()))
    return out_colptr, out_rowval, out_nzval


def gather_csc_rows(shape: tuple[int, int], colptr: np.ndarray, rowval: np.ndarray, nzval: np.ndarray,
                    rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The ``colptr``, ``rowval`` and ``nzval`` (new arrays, of the input's types) of the distinct 0-based ``rows``
    (in their order) of a 1-based CSC matrix of ``shape``: two passes over its columns (count, then copy) with no
    array per stored entry, so its memory is the result's. A large input is read a block of columns at a time, and
    the pages of each block (mapped from a file) are released once read: selecting a few rows of a mapped matrix does
    not keep the whole of it resident.

    Example:
        >>> colptr, rowval, nzval = gather_csc_rows((3, 2), np.array([1, 3, 4]), np.array([1, 3, 2]),
        ...                                         np.array([5.0, 6.0, 7.0]), np.array([2, 0]))
        >>> colptr.tolist(), rowval.tolist(), nzval.tolist()
        ([1, 3, 3], [1, 2], [6.0, 5.0])
    """
    rows = np.asarray(rows, dtype=np.int64)
    new_rows = np.full(shape[0], -1, dtype=np.int64)
    new_rows[rows] = np.arange(rows.shape[0])
    n_columns = shape[1]
    out_of_order = bool(rows.shape[0] > 1 and np.any(np.diff(rows) < 0))  # (each column's rows sorted again)
    if int(colptr[-1]) - 1 < PERMUTE_NUMBA_MIN_ENTRIES:
        entry_rows = new_rows[np.asarray(rowval, dtype=np.int64) - 1]
        kept = np.flatnonzero(entry_rows >= 0)
        lengths = np.asarray(colptr[1:], dtype=np.int64) - np.asarray(colptr[:-1], dtype=np.int64)
        columns = np.repeat(np.arange(n_columns), lengths)[kept]
        if out_of_order:
            kept = kept[np.lexsort((entry_rows[kept], columns))]
        out_colptr = np.empty(n_columns + 1, dtype=colptr.dtype)
        out_colptr[0] = 1
        np.add(np.cumsum(np.bincount(columns, minlength=n_columns)), 1, out=out_colptr[1:], casting="unsafe")
        return out_colptr, (entry_rows[kept] + 1).astype(rowval.dtype), nzval[kept]
    kernels = _kernels()
    # Blocks of columns of about _SPARSE_BLOCK_ENTRIES stored entries: what each pass holds resident at once.
    wanted = np.arange(1, int(colptr[-1]), _SPARSE_BLOCK_ENTRIES, dtype=np.int64)
    bounds = np.unique(np.concatenate([[0], np.searchsorted(colptr, wanted, side="right") - 1, [n_columns]]))
    bounds = np.clip(bounds, 0, n_columns).tolist()
    blocks = list(itertools.pairwise(bounds))

    def read(first: int, last: int) -> slice:
        return slice(int(colptr[first]) - 1, int(colptr[last]) - 1)

    counts = np.zeros(n_columns, dtype=np.int64)

    def count(first_block: int, last_block: int) -> None:
        for first, last in blocks[first_block:last_block]:
            kernels.count_csc_rows(colptr, rowval, new_rows, counts, first, last)
            release_pages(rowval[read(first, last)])

    ranges = even_bounds(len(blocks), number_of_threads())
    run_ranges(count, ranges)
    out_colptr = np.empty(n_columns + 1, dtype=colptr.dtype)
    out_colptr[0] = 1
    np.add(np.cumsum(counts), 1, out=out_colptr[1:], casting="unsafe")
    n_entries = int(out_colptr[-1]) - 1
    out_rowval, out_nzval = np.empty(n_entries, dtype=rowval.dtype), np.empty(n_entries, dtype=nzval.dtype)

    def gather(first_block: int, last_block: int) -> None:
        for first, last in blocks[first_block:last_block]:
            kernels.gather_csc_rows(colptr, rowval, nzval, new_rows, out_colptr, out_rowval, out_nzval, first, last,
                                    out_of_order)
            release_pages(rowval[read(first, last)])
            release_pages(nzval[read(first, last)])

    run_ranges(gather, ranges)
    return out_colptr, out_rowval, out_nzval


def _permute_csc_numpy(n_rows: int, colptr: np.ndarray, rowval: np.ndarray, nzval: np.ndarray, lengths: np.ndarray,
                       inverse_rows_permutation: np.ndarray | None, columns_permutation: np.ndarray | None,
                       out_colptr: np.ndarray, out_rowval: np.ndarray, out_nzval: np.ndarray) -> None:
    starts = np.asarray(colptr[:-1], dtype=np.int64) - 1
    if columns_permutation is not None:
        starts = starts[columns_permutation]
    out_starts = np.asarray(out_colptr[:-1], dtype=np.int64) - 1
    # The source position of each output entry, before sorting the rows of each column.
    sources = np.arange(int(lengths.sum()), dtype=np.int64) - np.repeat(out_starts - starts, lengths)
    rows = np.asarray(rowval, dtype=np.int64)[sources] - 1
    if inverse_rows_permutation is not None:
        # Sorted within columns by two of scipy's linear counting sorts (to rows, back to columns), carrying each
        # entry's source position as its value: 5-10x faster than sorting (key) pairs.
        import scipy.sparse as sp

        n_entries = sources.shape[0]
        index = np.int32 if max(n_rows, n_entries) < np.iinfo(np.int32).max else np.int64
        unsorted = sp.csc_matrix((sources.astype(index), inverse_rows_permutation[rows].astype(index),
                                  (np.asarray(out_colptr, dtype=np.int64) - 1).astype(index)),
                                 shape=(n_rows, len(lengths)), copy=False)
        resorted = unsorted.tocsr().tocsc()
        rows, sources = resorted.indices, resorted.data
    np.add(rows, 1, out=out_rowval, casting="unsafe")
    np.take(nzval, sources, out=out_nzval)


#: Bytes per block written by :func:`write_permuted_dense` (gathered into one reused buffer, then one ``pwrite``;
#: the buffers of both threads then stay in the last-level cache: 560 MB in 0.13-0.18 s, against 0.16-0.20 s by 8 MB).
_WRITE_BLOCK_BYTES = 4 << 20


def write_permuted_dense(source: np.ndarray, rows_permutation: np.ndarray | None,
                         columns_permutation: np.ndarray | None, fd: int, offset: int = 0,
                         progress: Callable[[int], object] | None = None,
                         written: Callable[[int, int], object] | None = None) -> None:
    """Write ``source`` (a dense vector, or a column-major matrix) permuted as :func:`permute_vector_into` /
    :func:`permute_dense_matrix_into` do, as raw column-major bytes at ``offset`` of the file ``fd``: each block of
    columns is gathered into a buffer and written with ``pwrite`` by one of :func:`number_of_threads` threads, so the
    gathers and writes of several blocks overlap (a fresh file written through a memory map costs a page fault per
    page: 2-3x slower). ``written(at, nbytes)`` is called (on the writing thread) once each block is in the file.
    Numbers only (not ``object`` strings). An ``OSError`` (a full disk) propagates for the caller to translate.

    Example:
        >>> import tempfile
        >>> with tempfile.TemporaryFile() as file:
        ...     write_permuted_dense(np.asfortranarray([[1, 2], [3, 4]], np.int8), np.array([1, 0]), None,
        ...                          file.fileno())
        ...     _ = file.seek(0)
        ...     np.frombuffer(file.read(), np.int8).tolist()
        [3, 1, 4, 2]
    """
    matrix = source.reshape(source.shape[0], 1) if source.ndim == 1 else source
    n_rows, n_columns = matrix.shape
    column_bytes = max(n_rows * matrix.dtype.itemsize, 1)
    block = max(1, min(n_columns, _WRITE_BLOCK_BYTES // column_bytes))
    gather = _dense_gatherer(matrix, rows_permutation, columns_permutation)
    n_threads = threads_for(matrix.size)
    free_buffers: queue.SimpleQueue[np.ndarray] = queue.SimpleQueue()
    for _ in range(n_threads):
        free_buffers.put(np.empty((n_rows, block), dtype=matrix.dtype, order="F"))

    def write_block(start: int) -> int:
        buffer = free_buffers.get()
        try:
            out = buffer[:, :min(start + block, n_columns) - start]
            gather(start, out)
            data = out.reshape(-1, order="F").data.cast("B")
            at = offset + start * column_bytes
            done = 0
            while done < len(data):
                done += os.pwrite(fd, data[done:], at + done)
            if written is not None:
                written(at, len(data))
            return out.size
        finally:
            free_buffers.put(buffer)

    # (the kernel reads the source of a block ahead while earlier blocks are gathered, for data not in the page cache;
    # permuted columns are scattered, one ``madvise`` each: for a matrix that fits in memory several times over, one
    # call for all of it costs less than thousands)
    whole = columns_permutation is not None and matrix.nbytes <= _physical_memory() // 8
    if whole:
        prefetch_pages(matrix)

    def prefetch(start: int) -> None:
        if whole:
            return
        if columns_permutation is None:
            prefetch_pages(matrix[:, start:min(start + block, n_columns)])
        else:
            for column in columns_permutation[start:start + block]:
                prefetch_pages(matrix[:, column])

    starts = range(0, n_columns, block)
    if n_threads == 1:
        for start in starts:
            prefetch(start)
            done = write_block(start)
            if progress is not None:
                progress(done)
        return
    with ThreadPoolExecutor(n_threads, thread_name_prefix="pydaf-permute") as pool:
        pending: collections.deque[Future[int]] = collections.deque()
        try:
            for start in starts:
                prefetch(start)
                pending.append(pool.submit(write_block, start))
                if len(pending) > n_threads:
                    done = pending.popleft().result()
                    if progress is not None:
                        progress(done)
            while pending:
                done = pending.popleft().result()
                if progress is not None:
                    progress(done)
        except BaseException:
            for future in pending:
                future.cancel()
            raise


def _physical_memory() -> int:
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):
        return 0


def _dense_gatherer(matrix: np.ndarray, rows_permutation: np.ndarray | None,
                    columns_permutation: np.ndarray | None) -> Callable[[int, np.ndarray], None]:
    """``gather(start, out)``: fill ``out`` with the permuted columns from ``start`` on (the numba kernel for a large
    matrix: 1.3-2x faster than a ``numpy.take`` per column; both release the GIL)."""
    if matrix.size >= PERMUTE_NUMBA_MIN_ENTRIES and matrix.dtype.kind in "biuf":
        kernel = _kernels().gather_dense_columns
        no_permutation = np.empty(0, dtype=np.int64)
        rows = no_permutation if rows_permutation is None else np.asarray(rows_permutation, dtype=np.int64)
        columns = no_permutation if columns_permutation is None else np.asarray(columns_permutation, dtype=np.int64)

        def gather_numba(start: int, out: np.ndarray) -> None:
            kernel(matrix, rows, columns, out, start)

        return gather_numba

    def gather_numpy(start: int, out: np.ndarray) -> None:
        for index in range(out.shape[1]):
            column = start + index
            source_column = matrix[:, column if columns_permutation is None else columns_permutation[column]]
            if rows_permutation is None:
                out[:, index] = source_column
            else:
                np.take(source_column, rows_permutation, out=out[:, index], mode="clip")

    return gather_numpy
