"""The demo data set of ``pydaf demo``: a deterministic synthetic single-cell-like H5df, written the way large data
should be (the UMI matrix filled straight into the file's map, column block by column block)."""

from __future__ import annotations

import numpy as np

from .errors import DafValueError
from .formats.h5df.format import H5df

#: The most cells x genes the demo writes (about 10% are non-zeros, each stored in both layouts: ~2 GB at most).
MAX_DEMO_VALUES = 10**9


def require_demo_sizes(n_cells: int, n_genes: int, n_types: int = 8) -> None:
    """Refuse demo sizes that make no data set (fewer than 1 of each) or too large a one (more than
    :data:`MAX_DEMO_VALUES` cells x genes), before anything is written.

    Example:
        >>> require_demo_sizes(-5, 10)
        Traceback (most recent call last):
        ...
        pydaf.errors.DafValueError: invalid number of cells: -5
        (expected at least 1)
    """
    for count, what in ((n_cells, "cells"), (n_genes, "genes"), (n_types, "types")):
        if isinstance(count, bool) or not isinstance(count, int | np.integer) or count < 1:
            raise DafValueError(f"invalid number of {what}: {count}\n(expected at least 1)")
    if n_cells * n_genes > MAX_DEMO_VALUES:
        raise DafValueError(f"the demo is too large: {n_cells:,} cells x {n_genes:,} genes\n(at most "
                            f"{MAX_DEMO_VALUES:,} values in all)")


def build_demo(path: str, *, n_cells: int = 20_000, n_genes: int = 2_000, n_types: int = 8, seed: int = 123,
               progress: bool = True) -> None:
    """Write a deterministic synthetic single-cell-like data set as H5df: a cells x genes sparse UMI matrix (~90%
    zeros, both layouts), per-cell and per-gene vectors, and a ``type`` axis with its own vectors.

    Example:
        >>> import os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "demo.h5df")
        >>> build_demo(path, n_cells=100, n_genes=50, progress=False)
        >>> import pydaf
        >>> pydaf.H5df(path, "r").axis_length("cell")
        100
    """
    from tqdm.auto import tqdm  # only the demo needs it, not the start-up of every command

    require_demo_sizes(n_cells, n_genes, n_types)
    generator = np.random.default_rng(seed)
    daf = H5df(path, "w", name="demo!")
    daf.set_scalar("organism", "synthetic").set_scalar("seed", seed)
    daf.add_axis("cell", [f"cell{index:06d}" for index in range(n_cells)])
    daf.add_axis("gene", [f"gene{index:05d}" for index in range(n_genes)])
    daf.add_axis("type", [f"type{index}" for index in range(n_types)])
    daf.set_vector("type", "color", [f"#{(index * 2654435761) % 0xFFFFFF:06x}" for index in range(n_types)])
    cell_types = generator.integers(0, n_types, n_cells)
    daf.set_vector("cell", "type", np.array([f"type{index}" for index in cell_types], dtype=object))
    daf.set_vector("cell", "donor_age", generator.integers(20, 90, n_cells).astype(np.uint8))
    daf.set_vector("gene", "is_lateral", generator.random(n_genes) < 0.1)

    # Per column (gene), ~10% of the cells have counts; written straight into the file's map, column block by block.
    column_nnz = generator.binomial(n_cells, 0.1, n_genes)
    nnz = int(column_nnz.sum())
    with daf.empty_sparse_matrix("cell", "gene", "UMIs", "UInt16", nnz, "Int64") as (colptr, rowval, nzval):
        colptr[1:] = np.cumsum(column_nnz) + 1
        for gene in tqdm(range(n_genes), desc="UMIs", unit="gene", disable=not progress, mininterval=0.5):
            start, stop = int(colptr[gene]) - 1, int(colptr[gene + 1]) - 1
            rowval[start:stop] = np.sort(generator.choice(n_cells, stop - start, replace=False)) + 1
            nzval[start:stop] = generator.geometric(0.3, stop - start)
    daf.relayout_matrix("cell", "gene", "UMIs")
    daf.set_vector("cell", "total_UMIs", np.asarray(daf.get_matrix("cell", "gene", "UMIs").sum(axis=1)).ravel(),
                   eltype="UInt32")
    daf.set_matrix("type", "gene", "mean_UMIs", np.zeros((n_types, n_genes), np.float32))
    daf.flush()
