"""MuData ``.h5mu`` files: each modality is an AnnData stored in the group ``/mod/<name>``, which
:func:`~pydaf.interop.h5ad_as_daf` imports when given ``modality=name`` (``pydaf convert --modality``).

The MuData's own ``obs``/``var`` (the union of its modalities' entries, with prefixed column names) and its
``obsmap``/``varmap`` have no Daf equivalent of their own: a modality is imported as the AnnData it is. A MuData file
without a modality is refused with the list of its modalities, rather than read as an empty AnnData.

Example:
    >>> import os, tempfile, h5py
    >>> path = os.path.join(tempfile.mkdtemp(), "x.h5mu")
    >>> with h5py.File(path, "w") as file:
    ...     _ = file.create_group("mod/rna"), file.create_group("mod/atac")
    ...     modalities_of(file)
    ['atac', 'rna']
"""

from __future__ import annotations

import h5py

from ..errors import DafFormatError, DafMissingError, DafValueError
from .h5ad_elements import read_guarded

__all__ = ["anndata_root", "modalities_of"]


def modalities_of(file: h5py.File) -> list[str] | None:
    """The modalities of a MuData file (in its ``mod-order`` when it records one), or ``None`` if it is not one
    (it has no ``/mod`` group).

    Example:
        >>> import os, tempfile
        >>> with h5py.File(os.path.join(tempfile.mkdtemp(), "x.h5ad"), "w") as file:
        ...     print(modalities_of(file))
        None
    """
    def read(root: h5py.File) -> list[str] | None:
        mod = root.get("mod")
        if not isinstance(mod, h5py.Group):
            return None
        names = list(mod)
        order = mod.attrs.get("mod-order")
        listed = [item.decode() if isinstance(item, bytes) else str(item)
                  for item in (order.tolist() if hasattr(order, "tolist") else [])] if order is not None else []
        return [name for name in listed if name in names] + [name for name in names if name not in listed]

    return read_guarded(file, read)


def anndata_root(file: h5py.File, modality: str | None, path: str) -> tuple[h5py.Group, str]:
    """The group holding the AnnData to import (the file itself, or ``/mod/<modality>`` of a MuData file) and how
    messages name it.

    Example:
        >>> import os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "x.h5mu")
        >>> with h5py.File(path, "w") as file:
        ...     _ = file.create_group("mod/rna")
        ...     anndata_root(file, None, path)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        pydaf.errors.DafValueError: no modality given for the MuData file: ...x.h5mu
        (its modalities: rna)
    """
    modalities = modalities_of(file)
    if modalities is None:
        if modality is not None:
            raise DafValueError(f"can't import the modality: {modality}\nfrom the file: {path}\n(it is not a MuData "
                                "file: it has no /mod group)")
        return file, f"the AnnData file: {path}"
    listed = ", ".join(modalities) if modalities else "none"
    if modality is None:
        raise DafValueError(f"no modality given for the MuData file: {path}\n(its modalities: {listed})")
    if modality not in modalities:
        raise DafMissingError(f"missing modality: {modality}\nin the MuData file: {path}\n(its modalities: {listed})")
    root = file["mod"][modality]
    if not isinstance(root, h5py.Group):
        raise DafFormatError(f"the modality: {modality}\nof the MuData file: {path}\nis not a group")
    return root, f"the modality: {modality}\nof the MuData file: {path}"
