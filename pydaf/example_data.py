"""Julia's example data sets (``ExampleData``): 856 cells of 95 donors with the UMIs of 683 genes, and their grouping
into 7 metacells of 4 types, as the doctests of Daf use them.

The data are Julia's ``test/example_data`` text files (DataAxesFormats.jl, MIT license; see ``pydaf/data/README.md``),
decoded once into the typed arrays of ``pydaf/data/example_data.npz`` (by ``tools/make_example_data.py``), so a data
set is built in milliseconds, with the types and layouts Julia gives them.

Example:
    >>> import pydaf
    >>> cells = pydaf.example_cells_daf()
    >>> cells.axis_length("cell"), cells.get_vector("donor", "age").dtype, cells.get_scalar("organism")
    (856, dtype('uint32'), 'human')
"""

from __future__ import annotations

import threading
from importlib import resources

import numpy as np

from .composition.chains import chain_writer
from .core.writers import DafWriter
from .formats.memory import MemoryDaf

__all__ = ["example_cells_daf", "example_chain_daf", "example_metacells_daf"]

_ARCHIVE = "example_data.npz"
_arrays: dict[str, np.ndarray] | None = None
_arrays_lock = threading.Lock()


def _example_arrays() -> dict[str, np.ndarray]:
    """The arrays of the archive, read once (strings as read-only ``object`` arrays of ``str``, as Daf holds them)."""
    global _arrays
    with _arrays_lock:
        if _arrays is None:
            with resources.files("pydaf").joinpath("data", _ARCHIVE).open("rb") as file, \
                    np.load(file, allow_pickle=False) as archive:
                arrays = {}
                for key in archive["order"].tolist():
                    array = archive[key]
                    if array.dtype.kind == "U":
                        array = array.astype(object)
                    array.flags.writeable = False
                    arrays[key] = array
            _arrays = arrays
        return _arrays


def _fill(daf: DafWriter, which: str) -> DafWriter:
    """Build the data set as Julia's ``example_daf`` does: axes, then vectors, then matrices (integer matrices in both
    layouts, the others only as stored)."""
    for key, array in _example_arrays().items():
        owner, kind, *names = key.split("/")
        if owner != which:
            continue
        if kind == "axis":
            daf.add_axis(names[0], array)
        elif kind == "vector":
            daf.set_vector(names[0], names[1], array)
        else:
            rows_axis, columns_axis, name = names
            daf.set_matrix(rows_axis, columns_axis, name, array, relayout=array.dtype.kind in "iu")
    return daf


def example_cells_daf(*, name: str = "cells!") -> MemoryDaf:
    """The cells example (Julia's ``example_cells_daf``): scalars ``organism`` and ``reference``; axes ``cell`` (856),
    ``donor`` (95), ``experiment`` (23) and ``gene`` (683); vectors ``cell: donor, experiment``, ``donor: age``
    (``UInt32``), ``sex``, ``gene: is_lateral`` (``Bool``); the ``UInt8`` matrix ``UMIs`` in both layouts.

    Example:
        >>> import pydaf
        >>> pydaf.example_cells_daf().get_matrix("cell", "gene", "UMIs").shape
        (856, 683)
    """
    daf = _fill(MemoryDaf(name=name), "cells")
    daf.set_scalar("organism", "human").set_scalar("reference", "test")
    return daf  # type: ignore[return-value]


def example_metacells_daf(*, name: str = "metacells!") -> MemoryDaf:
    """The metacells example (Julia's ``example_metacells_daf``): axes ``cell`` (856), ``gene`` (683), ``metacell``
    (7) and ``type`` (4); vectors ``cell: metacell`` (empty for cells in no metacell), ``gene: is_marker``,
    ``metacell: type``, ``type: color``; ``Float32`` matrices ``fraction`` (``gene,metacell``) and ``edge_weight``
    (``metacell,metacell``).

    Example:
        >>> import pydaf
        >>> pydaf.example_metacells_daf().axis_vector("type").tolist()
        ['memory-B', 'MEBEMP-E', 'MEBEMP-L', 'MPP']
    """
    return _fill(MemoryDaf(name=name), "metacells")  # type: ignore[return-value]


def example_chain_daf(*, name: str = "chain!") -> DafWriter:
    """A write chain of fresh cells and metacells examples (Julia's ``example_chain_daf``).

    Example:
        >>> import pydaf
        >>> chain = pydaf.example_chain_daf()
        >>> chain.get_vector("cell", "donor")[0], chain.get_vector("cell", "metacell")[0]
        ('N89', 'M756.63')
    """
    return chain_writer([example_cells_daf(), example_metacells_daf()], name=name)
