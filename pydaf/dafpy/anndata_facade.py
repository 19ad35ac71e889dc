"""dafpy's ``anndata_facade``: ``DafAnnData``, pydaf's AnnData facade (:class:`pydaf.interop.DafAnnData`) over a dafpy
data set, without a copy (the class lives in :mod:`pydaf.dafpy.data`, beside ``DafReader.as_anndata``).

Example:
    >>> from pydaf.dafpy import example_cells_daf
    >>> from pydaf.dafpy.anndata_facade import DafAnnData
    >>> cells = example_cells_daf()
    >>> adata = DafAnnData(cells, obs_axis="cell", var_axis="gene", x_matrix="UMIs")
    >>> adata.shape, adata.daf is cells
    ((856, 683), True)
"""

from __future__ import annotations

from .data import DafAnnData

__all__ = ["DafAnnData"]
