"""``open_daf``: open a data set of any registered storage format, chosen by its path (see :mod:`.formats.registry`)."""

from __future__ import annotations

import os
import shlex
from typing import Any

import h5py

from .core.readers import DafReader
from .errors import DafError, DafFormatError
from .formats.registry import guess_format


def open_daf(path: str | os.PathLike, mode: str = "r", *, name: str | None = None, packed: bool = False) -> DafReader:
    """Open a data set in the format that recognises ``path`` (:func:`~pydaf.formats.registry.guess_format`): an
    HDF5 file or a path ending with ``.h5df`` or holding ``.h5dfs#/group`` as :class:`~pydaf.H5df`; a Zarr group's
    directory or a path ending with ``.daf.zarr``, ``.daf.zarr.zip`` or holding ``.dafs.zarr.zip#/group`` as a
    :class:`~pydaf.ZarrDaf`; another directory or a new path as a :class:`~pydaf.FilesDaf`. Mode ``r`` returns a
    read-only data set. An AnnData, MuData or 10x file that can't be opened is a :class:`~pydaf.DafFormatError`
    saying what it is and how to convert it (:func:`foreign_file_hint`). ``packed`` (Julia's) makes the data set's
    writes pack by default (the format's constructor's ``packed=``).

    Example:
        >>> import pydaf, tempfile, os
        >>> folder = tempfile.mkdtemp()
        >>> type(pydaf.open_daf(os.path.join(folder, "x.h5df"), "w")).__name__, type(
        ...     pydaf.open_daf(os.path.join(folder, "x.daf"), "w")).__name__
        ('H5df', 'FilesDaf')
    """
    text = os.fspath(path)
    try:
        return guess_format(text).open(text, mode, name=name, **({"packed": True} if packed else {}))
    except DafError:
        hint = foreign_file_hint(text)
        if hint is None:
            raise
        raise DafFormatError(hint) from None


def foreign_file_hint(path: str | os.PathLike) -> str | None:
    """If ``path`` is an AnnData ``.h5ad``, a MuData ``.h5mu`` or a 10x Cell Ranger ``.h5`` file (which ``pydaf
    convert`` reads, but which are not Daf data sets), a message saying so and giving the command that converts it;
    else ``None``.

    Example:
        >>> print(foreign_file_hint("/data/pbmc.h5ad"))
        not a Daf data set but an AnnData file: /data/pbmc.h5ad
        (convert it first: pydaf convert /data/pbmc.h5ad /data/pbmc.h5df
        or in Python: pydaf.interop.h5ad_as_daf('/data/pbmc.h5ad', '/data/pbmc.h5df'))
        >>> foreign_file_hint("/data/cells.h5df") is None
        True
    """
    text = os.fspath(path)
    kind = foreign_file_kind(text)
    if kind is None:
        return None
    target = os.path.splitext(text)[0] + ".h5df"
    command = f"pydaf convert {shlex.quote(text)} {shlex.quote(target)}"
    if kind == "mudata":
        modalities = _modalities(text)
        listed = f"; its modalities: {', '.join(modalities)}" if modalities else ""
        modality = modalities[0] if modalities else "NAME"
        return (f"not a Daf data set but a MuData file: {text}\n(convert one of its modalities first: {command} "
                f"--modality {shlex.quote(modality)}{listed}\nor in Python: pydaf.interop.h5ad_as_daf({text!r}, "
                f"{target!r}, modality={modality!r}))")
    if kind == "tenx":
        return (f"not a Daf data set but a 10x Cell Ranger matrix: {text}\n(convert it first: {command}\n"
                f"or in Python: pydaf.interop.tenx_as_daf({text!r}, {target!r}))")
    return (f"not a Daf data set but an AnnData file: {text}\n(convert it first: {command}\n"
            f"or in Python: pydaf.interop.h5ad_as_daf({text!r}, {target!r}))")


def outside_reference(file: h5py.File) -> str | None:
    """The first element of ``file`` that refers to another file (an external link, a dataset stored in external files,
    a virtual dataset), as ``"<path> (<what>)"``, else ``None``. Found by walking the links without following any
    (opening an external link's target, or reading an external dataset, would open any file it names: a FIFO there
    blocks forever, a device is read). AnnData, MuData and Cell Ranger write none of these.

    Example:
        >>> import tempfile, numpy as np
        >>> with h5py.File(os.path.join(tempfile.mkdtemp(), "x.h5ad"), "w") as file:
        ...     _ = file.create_dataset("obs/n", data=np.arange(3))
        ...     print(outside_reference(file))
        ...     file["uns"] = h5py.ExternalLink("/dev/zero", "/x")
        ...     outside_reference(file)
        None
        '/uns (an external link to: /dev/zero)'
    """
    found: list[str] = []

    def visit(name: str, link: Any) -> bool | None:
        if isinstance(link, h5py.ExternalLink):
            found.append(f"/{name} (an external link to: {link.filename})")
        elif isinstance(link, h5py.HardLink):
            item = h5py.h5o.open(file.id, name.encode())
            if isinstance(item, h5py.h5d.DatasetID):
                dcpl = item.get_create_plist()
                if dcpl.get_layout() == h5py.h5d.VIRTUAL:
                    source = dcpl.get_virtual_filename(0) if dcpl.get_virtual_count() else "none"
                    found.append(f"/{name} (a virtual dataset, mapping the file: {source})")
                elif dcpl.get_external_count():
                    found.append(f"/{name} (a dataset stored in the external file: "
                                 f"{os.fsdecode(dcpl.get_external(0)[0])})")
        return True if found else None

    file.visititems_links(visit)
    return found[0] if found else None


# What h5py raises on a damaged file while we only look at it: a hint is then left out, never a crash (h5py turns
# some libhdf5 failures into RuntimeError, and a failed lock release into SystemError).
_SNIFF_ERRORS = (OSError, KeyError, ValueError, TypeError, RuntimeError, SystemError)


def foreign_file_kind(path: str | os.PathLike) -> str | None:
    """``"anndata"``, ``"mudata"`` or ``"tenx"`` if ``path`` is such a file (by its suffix, else its content: an
    HDF5 file with AnnData's or MuData's ``encoding-type``, or a 10x matrix's groups), else ``None``.

    Example:
        >>> foreign_file_kind("/data/pbmc.h5ad"), foreign_file_kind("/data/cells.h5df")
        ('anndata', None)
    """
    text = os.fspath(path)
    if text.endswith(".h5ad"):
        return "anndata"
    if text.endswith(".h5mu"):
        return "mudata"
    if not os.path.isfile(text) or not h5py.is_hdf5(text):
        return None
    if is_tenx_h5(text):
        return "tenx"
    try:
        with h5py.File(text, "r") as file:
            if outside_reference(file) is not None:  # (a lookup would follow it into another file: not sniffed)
                return None
            encoding = file.attrs.get("encoding-type")
            encoding = encoding.decode() if isinstance(encoding, bytes) else encoding
            if encoding == "MuData" or isinstance(file.get("mod"), h5py.Group):
                return "mudata"
            if encoding == "anndata" or ("obs" in file and "var" in file and "daf" not in file):
                return "anndata"
    except _SNIFF_ERRORS:  # unreadable here: no hint
        return None
    return None


def _modalities(text: str) -> list[str]:
    try:
        with h5py.File(text, "r") as file:
            if outside_reference(file) is not None:
                return []
            modalities = file.get("mod")
            return sorted(modalities) if isinstance(modalities, h5py.Group) else []
    except _SNIFF_ERRORS:
        return []


_V2_MEMBERS = ("barcodes", "data", "indices", "indptr", "shape", "genes", "gene_names")


def is_tenx_h5(path: str | os.PathLike) -> bool:
    """Whether ``path`` is an existing 10x Cell Ranger ``.h5`` matrix (by its suffix and content).

    Example:
        >>> is_tenx_h5("missing.h5"), is_tenx_h5("cells.h5ad")
        (False, False)
    """
    text = os.fspath(path)
    if not text.endswith(".h5") or not os.path.isfile(text) or not h5py.is_hdf5(text):
        return False
    try:
        with h5py.File(text, "r") as file:
            return outside_reference(file) is None and tenx_layout(file) is not None
    except _SNIFF_ERRORS:
        return False


def tenx_layout(file: h5py.File) -> str | None:
    """The layout of a 10x Cell Ranger matrix file (``"v3"``: a ``matrix`` group; ``"v2"``: a group per genome), or
    ``None`` if it is not one (recognised here so that :func:`open_daf` can name such a file without importing
    :mod:`pydaf.interop`)."""
    matrix = file.get("matrix")
    if isinstance(matrix, h5py.Group) and "barcodes" in matrix and "features" in matrix:
        return "v3"
    groups = [file[name] for name in file]
    if groups and all(isinstance(group, h5py.Group) and all(member in group for member in _V2_MEMBERS)
                      for group in groups):
        return "v2"
    return None
