"""Interoperability with other formats: AnnData (``.h5ad`` files and in-memory ``anndata.AnnData`` objects).

Example:
    >>> from pydaf.interop import h5ad_as_daf, daf_as_h5ad, anndata_as_daf, daf_as_anndata
"""

from .anndata import anndata_as_daf, daf_as_anndata, daf_as_h5ad, h5ad_as_daf

__all__ = ["anndata_as_daf", "daf_as_anndata", "daf_as_h5ad", "h5ad_as_daf"]
