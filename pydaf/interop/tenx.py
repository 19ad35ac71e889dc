"""10x Genomics Cell Ranger feature-barcode matrices (``filtered_feature_bc_matrix.h5``, ``raw_feature_bc_matrix.h5``;
Cell Ranger 2 and ≥ 3) imported into Daf data sets as ``scanpy.read_10x_h5`` reads them into an AnnData, but streamed
into the destination: axes ``cell`` and ``gene`` (feature names made unique as ``var_names_make_unique`` does), the
matrix ``UMIs`` stored ``(gene, cell)`` as the file holds it, the features' datasets as ``gene`` vectors, and
scanpy's filtering (``gex_only``, ``genome``).

Design: docs/design/anndata.md.

Example:
    >>> import os, tempfile, h5py, numpy as np
    >>> path = os.path.join(tempfile.mkdtemp(), "filtered_feature_bc_matrix.h5")
    >>> with h5py.File(path, "w") as file:
    ...     matrix = file.create_group("matrix")
    ...     _ = matrix.create_dataset("barcodes", data=np.array([b"AAAC-1", b"AAAG-1"]))
    ...     _ = matrix.create_dataset("shape", data=np.array([2, 2], dtype=np.int32))  # features x barcodes
    ...     _ = matrix.create_dataset("data", data=np.array([3, 1, 2], dtype=np.int32))
    ...     _ = matrix.create_dataset("indices", data=np.array([0, 1, 1]))
    ...     _ = matrix.create_dataset("indptr", data=np.array([0, 2, 3]))
    ...     features = matrix.create_group("features")
    ...     _ = features.create_dataset("id", data=np.array([b"ENSG1", b"ENSG2"]))
    ...     _ = features.create_dataset("name", data=np.array([b"CD3E", b"CD3E"]))
    ...     _ = features.create_dataset("feature_type", data=np.array([b"Gene Expression"] * 2))
    >>> daf = tenx_as_daf(path, progress=False)
    >>> daf.axis_vector("gene").tolist(), daf.get_matrix("cell", "gene", "UMIs").toarray().tolist()
    (['CD3E', 'CD3E-1'], [[3, 1], [0, 2]])
"""

from __future__ import annotations

import os

import h5py
import numpy as np

from ..composition.destinations import build_daf
from ..core.writers import DafWriter
from ..errors import DafError, DafFormatError, DafMissingError, DafValueError
from ..open import is_tenx_h5, tenx_layout
from .content import Content, content_as_daf, open_source, sort_columns
from .h5ad_elements import Column, MatrixSource, Unsupported, read_element, read_guarded, require_stored_size

__all__ = ["is_tenx_h5", "make_names_unique", "tenx_as_daf"]

#: The Daf names of scanpy's obs, var and X for a 10x matrix.
DEFAULT_NAMES = ("cell", "gene", "UMIs")

#: The feature type scanpy's ``gex_only`` keeps.
GENE_EXPRESSION = "Gene Expression"

# The datasets of a Cell Ranger 2 genome group.

# The features datasets scanpy turns into named columns (or the index), not copied under their own name.
_NAMED_FEATURES = ("name", "feature_type", "id", "gene_id", "_all_tag_keys")


def make_names_unique(names: np.ndarray, join: str = "-") -> np.ndarray:
    """Names made unique as anndata's ``make_index_unique`` (``var_names_make_unique``) does: the first of equal
    names is kept, the next ones get ``-1``, ``-2``, … skipping any that is already a name.

    Example:
        >>> make_names_unique(np.array(["a", "b", "a", "a-1", "a"], dtype=object)).tolist()
        ['a', 'b', 'a-2', 'a-1', 'a-3']
    """
    values = np.asarray(names, dtype=object).copy()
    if len(set(values.tolist())) == len(values):
        return values
    taken = set(values.tolist())
    seen: set[str] = set()
    counters: dict[str, int] = {}
    for position, value in enumerate(values.tolist()):
        if value not in seen:
            seen.add(value)
            continue
        while True:
            counters[value] = counters.get(value, 0) + 1
            candidate = f"{value}{join}{counters[value]}"
            if candidate not in taken:
                taken.add(candidate)
                values[position] = candidate
                break
    return values


def _texts(group: h5py.Group, name: str) -> np.ndarray:
    value = read_element(group[name])
    if not isinstance(value, Column) or value.values.dtype != object:
        raise DafFormatError(f"the 10x dataset: {group[name].name}\nin the file: {group.file.filename}\nis not a "
                             "vector of strings")
    return value.values


def _matrix_source(group: h5py.Group, n_cells: int, n_features: int, mask: np.ndarray | None) -> MatrixSource:
    """The features x barcodes CSC arrays, which are the cells x features CSR matrix AnnData (and scanpy) has."""
    data, indices, indptr = group["data"], group["indices"], group["indptr"]
    for part in (data, indices, indptr):
        if not isinstance(part, h5py.Dataset) or part.ndim != 1:
            raise DafFormatError(f"the 10x matrix part: {part.name}\nin the file: {group.file.filename}\nis not a "
                                 "1-dimensional dataset")
    if indices.dtype.kind not in "iu" or indptr.dtype.kind not in "iu" or data.dtype.kind not in "biuf":
        raise DafFormatError(f"the 10x matrix: {group.name}\nin the file: {group.file.filename}\nhas the types: "
                             f"{data.dtype} data, {indices.dtype} indices, {indptr.dtype} indptr")
    for part in (data, indices, indptr):
        require_stored_size(part)  # (a declared nnz is no allocation before it is known to be stored)
    if indices.shape != data.shape or indptr.shape != (n_cells + 1,):
        raise DafFormatError(f"the 10x matrix: {group.name}\nin the file: {group.file.filename}\nhas {data.shape[0]} "
                             f"data values, {indices.shape[0]} indices and {indptr.shape[0]} indptr entries for "
                             f"{n_cells} barcodes")
    kept = n_features if mask is None else int(mask.sum())
    return MatrixSource("csr", (n_cells, kept), data.dtype, data, indices, indptr, index_mask=mask)


def _shape(group: h5py.Group) -> tuple[int, int]:
    require_stored_size(group["shape"])
    shape = np.asarray(group["shape"][()]).ravel()
    if shape.shape != (2,) or shape.dtype.kind not in "iu" or (shape < 0).any():
        raise DafFormatError(f"invalid 10x shape: {shape.tolist()}\nin the file: {group.file.filename}\n(expected 2 "
                             "non-negative integers: features, barcodes)")
    return int(shape[0]), int(shape[1])


def _require_length(group: h5py.Group, name: str, values: np.ndarray, expected: int, what: str) -> None:
    """Refuse a dataset of names whose length is not the matrix's declared shape says (a declared size is checked
    against the data before anything of that size is allocated)."""
    if values.shape != (expected,):
        raise DafFormatError(f"the 10x dataset: {group[name].name}\nin the file: {group.file.filename}\nhas "
                             f"{values.shape[0]} entries, but the 10x shape declares {expected} {what}")


def _read_v3(file: h5py.File, genome: str | None, gex_only: bool, origin: str) -> Content:
    content = Content(origin=origin)
    matrix = file["matrix"]
    n_features, n_cells = _shape(matrix)
    features = matrix["features"]
    barcodes = Column(_texts(matrix, "barcodes"))
    obs: dict[str, Column | Unsupported] = {"_index": barcodes}
    if "filtered_barcodes" in matrix:
        require_stored_size(matrix["filtered_barcodes"])
        obs["filtered_barcodes"] = Column(np.asarray(matrix["filtered_barcodes"][()]).astype(bool))
    names, feature_types = Column(_texts(features, "name")), Column(_texts(features, "feature_type"))
    _require_length(features, "name", names.values, n_features, "features")
    _require_length(features, "feature_type", feature_types.values, n_features, "features")
    _require_length(matrix, "barcodes", barcodes.values, n_cells, "barcodes")
    var: dict[str, Column | Unsupported] = {"_index": names}
    if "gene_id" in features:  # a probe-barcode matrix
        var["gene_ids"], var["probe_ids"] = Column(_texts(features, "gene_id")), Column(_texts(features, "id"))
    else:
        var["gene_ids"] = Column(_texts(features, "id"))
    var["feature_types"] = feature_types
    for key, element in features.items():
        if key in _NAMED_FEATURES:
            continue
        value = read_element(element) if isinstance(element, h5py.Dataset) else Unsupported("not a dataset")
        if isinstance(value, Column) and value.values.shape != (n_features,):
            value = Unsupported(f"{value.values.shape[0]} entries for {n_features} features")
        elif isinstance(value, Column) and value.values.dtype.kind not in "bO":
            value = Column(value.values.astype(str).astype(object))  # scanpy reads them as strings
        var[key] = value if isinstance(value, Column | Unsupported) else Unsupported("not a vector")
    mask = np.ones(n_features, dtype=bool)
    if genome is not None:
        genomes = var.get("genome")
        if not isinstance(genomes, Column):
            raise DafMissingError(f"missing genome: {genome}\nin the 10x file: {file.filename}\n(its features have "
                                  "no genome)")
        if genome not in set(genomes.values.tolist()):
            raise DafMissingError(f"missing genome: {genome}\nin the 10x file: {file.filename}\n(its genomes: "
                                  f"{', '.join(dict.fromkeys(genomes.values.tolist()))})")
        mask &= genomes.values == genome
    if gex_only:
        mask &= feature_types.values == GENE_EXPRESSION
    for key, column in var.items():
        if isinstance(column, Column) and column.values.shape == (n_features,):
            var[key] = Column(column.values[mask])
    var["_index"] = Column(make_names_unique(names.values[mask]))
    content.obs = sort_columns(content, "obs", obs)
    content.var = sort_columns(content, "var", var)
    content.matrices.append(("X", "X", _matrix_source(matrix, n_cells, n_features, None if mask.all() else mask)))
    return content


def _read_v2(file: h5py.File, genome: str | None, origin: str) -> Content:
    genomes = list(file)
    if genome is None:
        if len(genomes) != 1:
            raise DafValueError(f"no genome given for the 10x file: {file.filename}\n(it holds several: "
                                f"{', '.join(genomes)})")
        genome = genomes[0]
    elif genome not in genomes:
        raise DafMissingError(f"missing genome: {genome}\nin the 10x file: {file.filename}\n(its genomes: "
                              f"{', '.join(genomes)})")
    group = file[genome]
    content = Content(origin=origin)
    n_features, n_cells = _shape(group)
    barcodes, gene_names = _texts(group, "barcodes"), _texts(group, "gene_names")
    _require_length(group, "barcodes", barcodes, n_cells, "barcodes")
    _require_length(group, "gene_names", gene_names, n_features, "features")
    content.obs = sort_columns(content, "obs", {"_index": Column(barcodes)})
    content.var = sort_columns(content, "var", {"_index": Column(make_names_unique(gene_names)),
                                                "gene_ids": Column(_texts(group, "genes"))})
    content.matrices.append(("X", "X", _matrix_source(group, n_cells, n_features, None)))
    return content


def tenx_as_daf(path: str | os.PathLike, destination: DafWriter | str | os.PathLike | None = None, *,
                name: str | None = None, obs_is: str | None = None, var_is: str | None = None,
                X_is: str | None = None, genome: str | None = None, gex_only: bool = True,
                unsupported_handler: str = "warn", relayout: bool = False, overwrite: bool = False,
                progress: bool = True) -> DafWriter:
    """Import a 10x Cell Ranger ``.h5`` matrix (see the module docstring) into ``destination`` (a
    :class:`~pydaf.DafWriter`, a path whose name says its format, built aside and moved into place when complete,
    replacing an existing data set only with ``overwrite``, or ``None`` for a new :class:`~pydaf.MemoryDaf`), which is
    returned. The data set is named ``name``, by default the file's name without its suffix.

    Example:
        >>> tenx_as_daf("/no/such/matrix.h5")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        pydaf.errors.DafFormatError: can't open the 10x file: /no/such/matrix.h5
        ...
    """
    text = os.fspath(path)
    file = open_source(text, destination, "10x")
    origin = f"the 10x file: {text}"
    with file:
        try:
            layout = read_guarded(file, tenx_layout)
            if layout is None:
                raise DafFormatError(f"not a 10x Cell Ranger matrix: {text}\n(expected a /matrix group with "
                                     "barcodes and features, or genome groups with barcodes, genes and gene_names)")
            if layout == "v3":
                content = _read_v3(file, genome, gex_only, origin)
            else:
                content = _read_v2(file, genome, origin)
        except DafError:
            raise
        except Exception as error:  # a missing or damaged dataset
            raise DafFormatError(f"can't read {origin}\n({type(error).__name__}: {error})") from error
        if name is None:
            name = os.path.splitext(os.path.basename(text))[0]

        def fill(daf: DafWriter | None) -> DafWriter:
            return content_as_daf(content, daf, name=name, obs_is=obs_is, var_is=var_is, X_is=X_is,
                                  defaults=DEFAULT_NAMES, unsupported_handler=unsupported_handler, relayout=relayout,
                                  progress=progress)

        if destination is None or isinstance(destination, DafWriter):
            return fill(destination)
        return build_daf(destination, fill, name=name, overwrite=overwrite)  # (the overwrite rule is build_daf's)
