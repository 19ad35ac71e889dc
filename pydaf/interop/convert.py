"""``pydaf convert``: between ``.h5ad`` files and Daf data sets of any backend, chosen by the paths; also from the
modalities of MuData ``.h5mu`` files and from 10x Cell Ranger ``.h5`` matrices (recognised by their content).

The destination's format is the one its name says (``x.h5df``, ``x.h5dfs#/group``, ``x.daf.zarr``, ``x.daf.zarr.zip``,
``x.dafs.zarr.zip#/group``, ``x.daf.zip``, ``x.dafs.zip#/group``, ``x.daf`` for a FilesDaf directory, ``x.h5ad``), or
an existing destination's, or ``format`` (:func:`~pydaf.composition.destinations.resolve_format`): a new name that says
none (``out.h5``, ``out.zarr``) is refused. The destination is written safely: it is built aside and moved into place
only when complete (:mod:`pydaf.composition.destinations`); an existing destination is replaced only with ``overwrite``,
and only if it is a Daf data set (or an h5ad file, for an h5ad destination); a source and destination sharing their
storage (the same path, the same file through a link, the same group, one inside the other) are refused.

Example:
    >>> import os, tempfile, pydaf
    >>> folder = tempfile.mkdtemp()
    >>> pydaf.H5df(os.path.join(folder, "a.h5df"), "w").set_scalar("organism", "human").flush()
    >>> convert(os.path.join(folder, "a.h5df"), os.path.join(folder, "b.daf"), progress=False)
    >>> pydaf.open_daf(os.path.join(folder, "b.daf")).get_scalar("organism"), sorted(os.listdir(folder))
    ('human', ['a.h5df', 'b.daf'])
    >>> convert(os.path.join(folder, "a.h5df"), os.path.join(folder, "c.h5"), format="h5df", progress=False)
    >>> type(pydaf.open_daf(os.path.join(folder, "c.h5")).base).__name__
    'H5df'
"""

from __future__ import annotations

import os

from .._os.files import refuse_special_file
from ..composition.copies import copy_all
from ..composition.destinations import (
    ANNDATA,
    build_daf,
    check_destination,
    clean_leftovers,
    is_h5ad,
    require_distinct,
    storage_of,
)
from ..errors import DafFormatError, DafUnknownFormatError, DafValueError
from ..formats.incomplete_copy import clear_incomplete_copy
from ..formats.paths import storage_path
from ..formats.registry import guess_format
from ..formats.zarr.convert import convert_linked, is_linkable_pair
from ..open import open_daf
from .anndata import daf_as_h5ad, h5ad_as_daf
from .tenx import is_tenx_h5, tenx_as_daf

__all__ = ["convert"]


def _is_mudata(path: str | os.PathLike) -> bool:
    return os.fspath(path).endswith(".h5mu")


def convert(source: str | os.PathLike, destination: str | os.PathLike, *, obs_is: str | None = None,
            var_is: str | None = None, X_is: str | None = None, relayout: bool = False, unsupported: str = "warn",
            modality: str | None = None, genome: str | None = None, gex_only: bool = True, format: str | None = None,
            overwrite: bool = False, obsm: bool = True, varm: bool = True, raw: bool = True,
            progress: bool = True, packed: bool = False) -> None:
    """Convert ``source`` into ``destination`` (see the module docstring): an ``.h5ad`` (or the ``modality`` of an
    ``.h5mu``) into a Daf data set, a 10x ``.h5`` matrix into a Daf data set (``genome``, ``gex_only``: see
    :func:`~pydaf.interop.tenx.tenx_as_daf`), a Daf data set into an ``.h5ad``, or a Daf data set into another (every
    property copied in the layouts it is stored). ``obs_is``/``var_is``/``X_is``, ``relayout``, ``unsupported`` and
    ``obsm``/``varm``/``raw`` are those of :func:`~pydaf.interop.h5ad_as_daf`. ``format`` names the destination's
    format (one of :func:`~pydaf.composition.destinations.format_names`) when its name says none; an existing
    destination is replaced only with ``overwrite`` (a :class:`~pydaf.DafExistsError` otherwise, before anything is
    read). With ``packed``, the destination Daf data set is written packed (every property large enough chunked and
    compressed with the ``DAF_PACKED_*`` knobs, docs/design/packed.md); an ``.h5ad`` destination can't be packed.

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
    refuse_special_file(storage_path(source), what="the source to convert")  # (opening a FIFO would block)
    if _is_mudata(destination):
        raise DafValueError(f"can't convert into the MuData file: {os.fspath(destination)}\n(pydaf imports the "
                            "modalities of MuData files; it writes .h5ad files)")
    tenx = is_tenx_h5(source)
    if modality is not None and not _is_mudata(source):
        raise DafValueError(f"--modality only applies to conversions from .h5mu files, not: {os.fspath(source)}")
    if not (obsm and varm) and not (is_h5ad(source) or _is_mudata(source)):
        raise DafValueError(f"--no-obsm and --no-varm only apply to conversions from .h5ad and .h5mu files, not: "
                            f"{os.fspath(source)}")
    if not raw and not (is_h5ad(source) or _is_mudata(source)):
        raise DafValueError(f"--no-raw only applies to conversions from .h5ad and .h5mu files, not: "
                            f"{os.fspath(source)}")
    if (genome is not None or not gex_only) and not tenx:
        raise DafValueError(f"--genome and --all-features only apply to conversions from 10x .h5 files, not: "
                            f"{os.fspath(source)}")
    if not (tenx or _is_mudata(source) or is_h5ad(source)):
        try:
            guess_format(os.fspath(source))
        except DafFormatError as error:
            raise error.with_line("- AnnData: an .h5ad file (for convert)") from None
    require_distinct(source, destination)
    try:
        kind = check_destination(destination, format=format, overwrite=overwrite)
    except DafUnknownFormatError as error:
        raise error.with_line("- AnnData: an .h5ad file (for convert)") from None
    if packed and kind == ANNDATA:
        raise DafValueError(f"can't write a packed AnnData file: {os.fspath(destination)}\n(packing, chunked "
                            "compressed Daf properties, is for Daf data sets: H5df, FilesDaf, ZipDaf or ZarrDaf; "
                            "drop --packed, or convert into one of those)")
    if (is_h5ad(source) or _is_mudata(source) or tenx) and kind == ANNDATA:
        raise DafValueError(f"nothing to convert from: {os.fspath(source)}\nto: {os.fspath(destination)}\n(both are "
                            "AnnData files: convert into a Daf data set)")
    if tenx or is_h5ad(source) or _is_mudata(source):
        # Read into the data set build_daf fills aside (its format and overwrite rules are build_daf's).
        if tenx:
            def fill(daf):
                tenx_as_daf(source, daf, genome=genome, gex_only=gex_only, unsupported_handler=unsupported,
                            relayout=relayout, progress=progress, **names)
        else:
            def fill(daf):
                h5ad_as_daf(source, daf, modality=modality, unsupported_handler=unsupported, relayout=relayout,
                            obsm=obsm, varm=varm, raw=raw, progress=progress, **names)
        build_daf(destination, fill, format=kind, overwrite=overwrite, packed=packed)
        return
    if any(value is not None for value in names.values()) and kind != ANNDATA:
        raise DafValueError("--obs-is, --var-is and --X-is only apply to conversions from or to h5ad")
    if format is None and is_linkable_pair(source, destination) and not relayout and not packed:
        clean_leftovers(destination)  # (what killed conversions into it left)
        convert_linked(source, destination, progress=progress)  # FilesDaf <-> ZarrDaf directories: hard links
        clear_incomplete_copy(destination)  # (the data set a killed copy left incomplete is replaced)
        return
    if storage_of(source).path == storage_of(destination).path and storage_of(source).path.endswith(
            (".h5df", ".h5dfs")):
        # Two groups of one HDF5 file: open it writable once (HDF5 refuses to open for writing a file this process
        # holds open read-only), and read the source through a read-only view.
        source_daf = open_daf(source, "r+").read_only()
    else:
        source_daf = open_daf(source, "r")
    if kind == ANNDATA:
        daf_as_h5ad(source_daf, destination, overwrite=overwrite, progress=progress, **names)
    else:
        build_daf(destination, lambda daf: copy_all(daf, source_daf, relayout=relayout, progress=progress),
                  name=source_daf.name, format=kind, overwrite=overwrite, packed=packed)
