"""Interoperability with other formats: AnnData (``.h5ad`` files, the modalities of MuData ``.h5mu`` files and
in-memory ``anndata.AnnData`` objects) and 10x Cell Ranger ``.h5`` matrices.

Example:
    >>> from pydaf.interop import h5ad_as_daf, daf_as_h5ad, anndata_as_daf, daf_as_anndata, tenx_as_daf
    >>> from pydaf.interop import DafAnnData  # a Daf data set seen as an AnnData, without a copy
"""

from typing import TYPE_CHECKING

from .anndata import anndata_as_daf, daf_as_anndata, daf_as_h5ad, h5ad_as_daf
from .tenx import tenx_as_daf

__all__ = ["DafAnnData", "anndata_as_daf", "daf_as_anndata", "daf_as_h5ad", "h5ad_as_daf", "tenx_as_daf"]


if TYPE_CHECKING:
    from .anndata_facade import DafAnnData


def __getattr__(name: str) -> object:
    # The AnnData facade imports pandas and scipy: only when asked for.
    if name == "DafAnnData":
        from .anndata_facade import DafAnnData

        return DafAnnData
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
