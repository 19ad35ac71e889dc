"""Interoperability with other formats: AnnData (``.h5ad`` files, the modalities of MuData ``.h5mu`` files and
in-memory ``anndata.AnnData`` objects) and 10x Cell Ranger ``.h5`` matrices.

Example:
    >>> from pydaf.interop import h5ad_as_daf, daf_as_h5ad, anndata_as_daf, daf_as_anndata, tenx_as_daf
"""

from .anndata import anndata_as_daf, daf_as_anndata, daf_as_h5ad, h5ad_as_daf
from .tenx import tenx_as_daf

__all__ = ["anndata_as_daf", "daf_as_anndata", "daf_as_h5ad", "h5ad_as_daf", "tenx_as_daf"]
