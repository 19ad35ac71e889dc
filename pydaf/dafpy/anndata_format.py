"""dafpy's ``anndata_format``: convert ``.h5ad`` files to and from data sets (pydaf's :mod:`pydaf.interop`).

Example:
    >>> import tempfile
    >>> from pydaf.dafpy import daf_as_h5ad, h5ad_as_daf, memory_daf
    >>> daf = memory_daf(name="example!").add_axis("cell", ["A", "B"]).add_axis("gene", ["X"])
    >>> daf = daf.set_matrix("gene", "cell", "UMIs", np.array([[1, 2]]))
    >>> path = tempfile.mkdtemp() + "/example.h5ad"
    >>> daf_as_h5ad(daf, obs_is="cell", var_is="gene", X_is="UMIs", h5ad=path)
    >>> h5ad_as_daf(path, obs_is="cell", var_is="gene", X_is="UMIs").get_np_matrix("gene", "cell", "UMIs").tolist()
    [[1, 2]]
"""

from __future__ import annotations

import numpy as np

from ..interop.anndata import daf_as_h5ad as pydaf_daf_as_h5ad
from ..interop.anndata import h5ad_as_daf as pydaf_h5ad_as_daf
from .data import DafReader, DafWriter, unwrap
from .generic_functions import AbnormalHandler
from .julia_import import _given

__all__ = ["daf_as_h5ad", "h5ad_as_daf"]

_HANDLERS = {AbnormalHandler.IgnoreHandler: "ignore", AbnormalHandler.WarnHandler: "warn",
             AbnormalHandler.ErrorHandler: "error"}

_ = np  # (the module's example uses numpy)


def h5ad_as_daf(h5ad: str, *, name: str | None = None, obs_is: str | None = None, var_is: str | None = None,
                X_is: str | None = None, unsupported_handler: AbnormalHandler | None = None) -> DafWriter:
    """The content of an ``.h5ad`` file as an in-memory data set (``obs_is``/``var_is``: the names of its axes;
    ``X_is``: of ``X``; ``unsupported_handler``: what to do with what Daf can't hold, by default warn)."""
    handler = None if unsupported_handler is None else _HANDLERS[AbnormalHandler(unsupported_handler)]
    return DafWriter(pydaf_h5ad_as_daf(h5ad, name=name, obs_is=obs_is, var_is=var_is, X_is=X_is,
                                       **_given(unsupported_handler=handler), progress=False))


def daf_as_h5ad(daf: DafReader, *, obs_is: str | None = None, var_is: str | None = None, X_is: str | None = None,
                h5ad: str) -> None:
    """Write a data set as an ``.h5ad`` file (refusing to replace an existing file)."""
    pydaf_daf_as_h5ad(unwrap(daf), h5ad, obs_is=obs_is, var_is=var_is, X_is=X_is, progress=False)
