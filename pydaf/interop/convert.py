"""``pydaf convert``: between ``.h5ad`` files and Daf data sets of any backend, chosen by the paths; also from the
modalities of MuData ``.h5mu`` files and from 10x Cell Ranger ``.h5`` matrices (recognised by their content).

The destination is replaced, safely: it is built aside and moved into place only when complete
(:mod:`pydaf.interop.destinations`), an existing destination is replaced only if it is a Daf data set (or empty), and a
source and destination sharing their storage (the same path, the same file through a link, the same group, one inside
the other) are refused.

Example:
    >>> import os, tempfile, pydaf
    >>> folder = tempfile.mkdtemp()
    >>> pydaf.H5df(os.path.join(folder, "a.h5df"), "w").set_scalar("organism", "human").flush()
    >>> convert(os.path.join(folder, "a.h5df"), os.path.join(folder, "b.daf"), progress=False)
    >>> pydaf.open_daf(os.path.join(folder, "b.daf")).get_scalar("organism"), sorted(os.listdir(folder))
    ('human', ['a.h5df', 'b.daf'])
"""

from __future__ import annotations

import os

from ..composition.copies import copy_all
from ..errors import DafFormatError, DafValueError
from ..formats.registry import guess_format
from ..formats.zarr_convert import convert_linked, is_linkable_pair
from ..open import open_daf
from .anndata import daf_as_h5ad, h5ad_as_daf
from .destinations import build_daf, is_h5ad, require_distinct, storage_of
from .tenx import is_tenx_h5, tenx_as_daf

__all__ = ["convert"]


def _is_mudata(path: str | os.PathLike) -> bool:
    return os.fspath(path).endswith(".h5mu")


def convert(source: str | os.PathLike, destination: str | os.PathLike, *, obs_is: str | None = None,
            var_is: str | None = None, X_is: str | None = None, relayout: bool = False, unsupported: str = "warn",
            modality: str | None = None, genome: str | None = None, gex_only: bool = True,
            progress: bool = True) -> None:
    """Convert ``source`` into ``destination`` (see the module docstring): an ``.h5ad`` (or the ``modality`` of an
    ``.h5mu``) into a Daf data set, a 10x ``.h5`` matrix into a Daf data set (``genome``, ``gex_only``: see
    :func:`~pydaf.interop.tenx.tenx_as_daf`), a Daf data set into an ``.h5ad``, or a Daf data set into another (every
    property copied in the layouts it is stored). ``obs_is``/``var_is``/``X_is``, ``relayout`` and ``unsupported``
    are those of :func:`~pydaf.interop.h5ad_as_daf`.

    Example:
        >>> import os, tempfile, pydaf
        >>> path = os.path.join(tempfile.mkdtemp(), "a.h5df")
        >>> pydaf.H5df(path, "w").add_axis("cell", ["A"]).flush()
        >>> convert(path, path, progress=False)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        pydaf.errors.DafModeError: can't convert: ...a.h5df
        into: ...a.h5df
        (the destination and the source share their storage; replacing one would destroy the other)
    """
    names = {"obs_is": obs_is, "var_is": var_is, "X_is": X_is}
    if _is_mudata(destination):
        raise DafValueError(f"can't convert into the MuData file: {os.fspath(destination)}\n(pydaf imports the "
                            "modalities of MuData files; it writes .h5ad files)")
    tenx = is_tenx_h5(source)
    if modality is not None and not _is_mudata(source):
        raise DafValueError(f"--modality only applies to conversions from .h5mu files, not: {os.fspath(source)}")
    if (genome is not None or not gex_only) and not tenx:
        raise DafValueError(f"--genome and --all-features only apply to conversions from 10x .h5 files, not: "
                            f"{os.fspath(source)}")
    for path in (destination,) if tenx or _is_mudata(source) else (source, destination):
        if not is_h5ad(path):
            try:
                guess_format(os.fspath(path))
            except DafFormatError as error:
                raise DafFormatError(f"{error}\n- AnnData: an .h5ad file (for convert)") from None
    if (is_h5ad(source) or _is_mudata(source) or tenx) and is_h5ad(destination):
        raise DafValueError(f"nothing to convert from: {os.fspath(source)}\nto: {os.fspath(destination)}\n(both are "
                            "AnnData files: convert into a Daf data set)")
    require_distinct(source, destination)
    if tenx:
        tenx_as_daf(source, destination, genome=genome, gex_only=gex_only, unsupported_handler=unsupported,
                    relayout=relayout, progress=progress, **names)
        return
    if is_h5ad(source) or _is_mudata(source):
        h5ad_as_daf(source, destination, modality=modality, unsupported_handler=unsupported, relayout=relayout,
                    progress=progress, **names)
        return
    if any(value is not None for value in names.values()) and not is_h5ad(destination):
        raise DafValueError("--obs-is, --var-is and --X-is only apply to conversions from or to h5ad")
    if is_linkable_pair(source, destination) and not relayout:  # FilesDaf <-> ZarrDaf directories: hard links
        convert_linked(source, destination, progress=progress)
        return
    if storage_of(source).path == storage_of(destination).path and storage_of(source).path.endswith(
            (".h5df", ".h5dfs")):
        # Two groups of one HDF5 file: open it writable once (HDF5 refuses to open for writing a file this process
        # holds open read-only), and read the source through a read-only view.
        source_daf = open_daf(source, "r+").read_only()
    else:
        source_daf = open_daf(source, "r")
    if is_h5ad(destination):
        daf_as_h5ad(source_daf, destination, progress=progress, **names)
    else:
        build_daf(destination, lambda daf: copy_all(daf, source_daf, relayout=relayout, progress=progress),
                  name=source_daf.name)
