"""Files the scverse tools make (scanpy, scvelo, squidpy, scirpy), made offline by the real tools in ``tmp_path`` (or
shipped in their wheels), round-tripped as a user would: ``h5ad_as_daf`` into an H5df, ``daf_as_h5ad`` back, both
read with ``anndata.read_h5ad``. What docs/design/anndata.md says Daf holds must come back exactly: the obs/var
columns (dtype, categories and their order, ``ordered``, missing entries, values), the index names, X, the layers,
obsp/varp, the numeric obsm/varm, the uns scalars and the colors of categoricals; everything else must have been
reported to the unsupported handler (never dropped silently). scanpy is required (its shipped ``pbmc68k_reduced``
always runs); each other tool's test is skipped, saying so, when the tool is not importable.

Expected values come from anndata's own reading of the input file, never from pydaf.
"""

from __future__ import annotations

import pathlib
import warnings
from typing import Any

import anndata
import anndata.io
import h5py
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

import pydaf
from pydaf.interop import daf_as_anndata, daf_as_h5ad, h5ad_as_daf
from pydaf.interop.content import UnsupportedElementWarning

sc = pytest.importorskip("scanpy", reason="scanpy is part of the test environment")


# Helpers.


def read_source(path: pathlib.Path, modality: str | None) -> anndata.AnnData:
    if modality is None:
        return anndata.read_h5ad(path)
    with h5py.File(path, "r") as file:
        return anndata.io.read_elem(file["mod"][modality])


def round_trip(path: pathlib.Path, tmp_path: pathlib.Path, modality: str | None = None
               ) -> tuple[anndata.AnnData, anndata.AnnData, list[str], pathlib.Path]:
    """(anndata's reading of the file, anndata's reading of pydaf's export, the unsupported-element messages, the
    H5df)."""
    stem = path.stem + (f"-{modality}" if modality else "")
    daf_path, back_path = tmp_path / f"{stem}.h5df", tmp_path / f"{stem}.back.h5ad"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", UnsupportedElementWarning)
        daf = h5ad_as_daf(path, daf_path, modality=modality, progress=False)
    messages = [str(warning.message).splitlines()[0] for warning in caught
                if issubclass(warning.category, UnsupportedElementWarning)]
    daf_as_h5ad(daf, back_path, progress=False)
    daf.close()
    return read_source(path, modality), anndata.read_h5ad(back_path), messages, daf_path


def assert_frames_equal(expected: pd.DataFrame, actual: pd.DataFrame) -> None:
    """Index (values and name), column order, and per column: dtype (categories in order, ``ordered``), the missing
    entries and the values."""
    assert actual.index.name == expected.index.name
    assert list(actual.index) == list(expected.index)
    assert list(actual.columns) == list(expected.columns)
    for column in expected.columns:
        want, got = expected[column], actual[column]
        assert str(got.dtype) == str(want.dtype), column
        if isinstance(want.dtype, pd.CategoricalDtype):
            assert list(got.cat.categories) == list(want.cat.categories), column
            assert got.cat.ordered == want.cat.ordered, column
        assert int(got.isna().sum()) == int(want.isna().sum()), column
    pd.testing.assert_frame_equal(actual, expected, check_exact=True)


def assert_matrices_equal(expected: Any, actual: Any, name: str) -> None:
    """Same kind (ndarray, csr, csc), dtype, shape and values (NaN where NaN)."""
    assert sp.issparse(actual) == sp.issparse(expected), name
    if sp.issparse(expected):
        assert actual.format == expected.format, name
    assert actual.dtype == expected.dtype, name
    assert actual.shape == expected.shape, name
    want = expected.toarray() if sp.issparse(expected) else np.asarray(expected)
    got = actual.toarray() if sp.issparse(actual) else np.asarray(actual)
    assert np.array_equal(got, want, equal_nan=want.dtype.kind in "fc"), name


def assert_members_equal(expected: anndata.AnnData, actual: anndata.AnnData, member: str,
                         keys: list[str] | None = None) -> None:
    wanted = getattr(expected, member)
    keys = list(wanted.keys()) if keys is None else keys
    for key in keys:
        assert key in getattr(actual, member), f"{member}/{key}"
        assert_matrices_equal(wanted[key], getattr(actual, member)[key], f"{member}/{key}")


def assert_kept(expected: anndata.AnnData, actual: anndata.AnnData) -> None:
    """What Daf holds: obs/var, X, layers, obsp/varp, numeric obsm/varm (all of these files' are), raw."""
    assert_frames_equal(expected.obs, actual.obs)
    assert_frames_equal(expected.var, actual.var)
    assert (actual.raw is None) == (expected.raw is None)
    if expected.raw is not None:
        assert_matrices_equal(expected.raw.X, actual.raw.X, "raw/X")
        assert_frames_equal(expected.raw.var, actual.raw.var)
    if expected.X is None:
        assert actual.X is None
    else:
        assert_matrices_equal(expected.X, actual.X, "X")
    for member in ("layers", "obsp", "varp"):
        assert sorted(getattr(actual, member).keys()) == sorted(getattr(expected, member).keys()), member
        assert_members_equal(expected, actual, member)
    for member in ("obsm", "varm"):
        assert_members_equal(expected, actual, member, [key for key, value in getattr(expected, member).items()
                                                       if isinstance(value, np.ndarray) and value.ndim == 2
                                                       and value.dtype.kind in "biuf"])
    # the import's records (categories, colors, index names, obsm encodings, raw_is, ...) never leak into uns
    assert set(actual.uns) <= set(expected.uns), sorted(set(actual.uns) - set(expected.uns))
    for key in actual.uns:
        value = actual.uns[key]
        if np.isscalar(value):
            assert type(value) is type(expected.uns[key]) and value == expected.uns[key], key


def assert_losses_reported(expected: anndata.AnnData, actual: anndata.AnnData, messages: list[str]) -> None:
    """Every uns/obsm/varm key (and raw) that did not come back was named to the unsupported handler."""
    lost = [f"{member}/{key}" for member in ("uns", "obsm", "varm")
            for key in getattr(expected, member) if key not in getattr(actual, member)]
    if expected.raw is not None and actual.raw is None:
        lost.append("raw")
    for element in lost:
        assert any(message.startswith(f"unsupported element: {element}") for message in messages), \
            (element, messages)


def assert_scanpy_steps_agree(expected: anndata.AnnData, daf_path: pathlib.Path) -> None:
    """normalize_total + log1p on daf_as_anndata of the (mapped, read-only) H5df: runs in place, same result."""
    with pydaf.H5df(str(daf_path), "r") as daf:
        ours = daf_as_anndata(daf)
    theirs = expected.copy()
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")  # pbmc68k_reduced's X is scaled (negatives): the same warnings on both sides
        for adata in (ours, theirs):
            sc.pp.normalize_total(adata)
            sc.pp.log1p(adata)
    assert_matrices_equal(theirs.X, ours.X, "X after normalize_total + log1p")


# scanpy.


def scanpy_shipped_pbmc68k_reduced() -> pathlib.Path:
    return pathlib.Path(sc.__file__).parent / "datasets" / "10x_pbmc68k_reduced.h5ad"


def test_scanpy_shipped_pbmc68k_reduced(tmp_path):
    path = scanpy_shipped_pbmc68k_reduced()
    assert path.is_file(), "scanpy's wheel ships datasets/10x_pbmc68k_reduced.h5ad"
    expected, back, messages, daf_path = round_trip(path, tmp_path)
    assert_kept(expected, back)
    # anndata < 0.7 file: its uns/neighbors graph is obsp (as anndata reads it) and its index is named "index"
    assert sorted(back.obsp.keys()) == ["connectivities", "distances"]
    assert expected.obs.index.name == back.obs.index.name == "index"
    assert sorted(back.obsm.keys()) == ["X_pca", "X_umap"] and list(back.varm.keys()) == ["PCs"]
    # categoricals kept, colors with them (fixed-length strings there, as anndata's own re-save also gives objects)
    assert list(back.obs["louvain"].cat.categories) == list(expected.obs["louvain"].cat.categories)
    for key in ("bulk_labels_colors", "louvain_colors"):
        assert back.uns[key].tolist() == expected.uns[key].tolist()
    assert_losses_reported(expected, back, messages)
    assert back.raw.shape == expected.raw.shape == (700, 765)  # (raw.X and raw.var: kept, compared by assert_kept)
    assert not [message for message in messages if "raw" in message], messages
    assert_scanpy_steps_agree(expected, daf_path)


def test_scanpy_processed_pbmc68k_round_trips(tmp_path):
    adata = sc.datasets.pbmc68k_reduced()
    adata.layers["counts"] = sp.csr_matrix(adata.raw.X)
    sc.tl.rank_genes_groups(adata, groupby="bulk_labels", method="t-test")
    adata.obs.index.name, adata.var.index.name = "cell_barcode", "gene_symbol"
    positions = np.arange(adata.n_obs)
    adata.obs["donor"] = pd.Categorical(np.where(positions % 3 == 0, "D2", "D1"), categories=["D2", "D1"])
    adata.obs["stage"] = pd.Categorical(np.array(["early", "mid", "late"])[positions % 3],
                                        categories=["early", "mid", "late"], ordered=True)
    score = adata.obs["S_score"].to_numpy().astype(np.float64)
    score[::7] = np.nan
    adata.obs["score_with_nan"] = score
    adata.obs["umis"] = pd.array(np.where(positions % 5 == 0, None, positions), dtype="Int64")
    adata.obs["qc_pass"] = pd.array(np.where(positions % 11 == 0, None, positions % 2 == 0), dtype="boolean")
    adata.uns["study"], adata.uns["n_top"] = "pbmc68k", 10
    path = tmp_path / "pbmc68k_processed.h5ad"
    adata.write_h5ad(path)

    expected, back, messages, daf_path = round_trip(path, tmp_path)
    assert_kept(expected, back)
    assert back.obs.index.name == "cell_barcode" and back.var.index.name == "gene_symbol"
    assert list(back.obs["donor"].cat.categories) == ["D2", "D1"]
    assert back.obs["stage"].cat.ordered and list(back.obs["stage"].cat.categories) == ["early", "mid", "late"]
    assert int(back.obs["score_with_nan"].isna().sum()) == 100
    assert str(back.obs["umis"].dtype) == "Int64" and int(back.obs["umis"].isna().sum()) == 140
    assert str(back.obs["qc_pass"].dtype) == "boolean" and int(back.obs["qc_pass"].isna().sum()) == 64
    assert (back.uns["study"], back.uns["n_top"]) == ("pbmc68k", 10)
    assert back.uns["louvain_colors"].tolist() == expected.uns["louvain_colors"].tolist()
    assert_losses_reported(expected, back, messages)
    assert any(message.startswith("unsupported element: uns/rank_genes_groups") for message in messages)
    assert_scanpy_steps_agree(expected, daf_path)


# scvelo: spliced/unspliced and the velocity layers.


def test_scvelo_velocity_layers_round_trip(tmp_path):
    scv = pytest.importorskip("scvelo", reason="scvelo is not installed (pip install scvelo)")
    adata = scv.datasets.simulation(n_obs=120, n_vars=8, random_seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        scv.pp.filter_and_normalize(adata, min_shared_counts=0)
        sc.pp.neighbors(adata, n_neighbors=10, use_rep="X", method="gauss")  # umap's kernel compiles for seconds
        scv.pp.moments(adata, n_neighbors=None, n_pcs=None)
        scv.tl.velocity(adata, mode="deterministic")  # "stochastic" fails in scvelo 0.3.4 with numpy 2.4
        scv.tl.velocity_graph(adata, show_progress_bar=False)
    path = tmp_path / "scvelo_simulation.h5ad"
    adata.write_h5ad(path)

    expected, back, messages, _ = round_trip(path, tmp_path)
    assert {"spliced", "unspliced", "Ms", "Mu", "velocity"} <= set(expected.layers.keys())
    assert_kept(expected, back)
    assert_losses_reported(expected, back, messages)
    assert any(message.startswith("unsupported element: uns/velocity_graph") for message in messages)


# squidpy: spatial coordinates, the spatial graph and the Visium-like image dictionary.


def test_squidpy_spatial_neighbors_round_trip(tmp_path):
    sq = pytest.importorskip("squidpy", reason="squidpy is not installed (pip install squidpy)")
    adata = sc.datasets.pbmc68k_reduced()
    side = int(np.ceil(np.sqrt(adata.n_obs)))
    adata.obsm["spatial"] = np.stack(np.divmod(np.arange(adata.n_obs), side), axis=1).astype(np.float64) * 100
    adata.uns["spatial"] = {"lib1": {"images": {"hires": np.zeros((8, 8, 3), dtype=np.uint8)},
                                     "scalefactors": {"tissue_hires_scalef": 0.02, "spot_diameter_fullres": 89.4}}}
    sq.gr.spatial_neighbors(adata, coord_type="generic", n_neighs=6)
    path = tmp_path / "squidpy_spatial.h5ad"
    adata.write_h5ad(path)

    expected, back, messages, _ = round_trip(path, tmp_path)
    assert {"spatial_connectivities", "spatial_distances"} <= set(back.obsp.keys())
    assert "spatial" in back.obsm
    assert_kept(expected, back)
    assert_losses_reported(expected, back, messages)
    assert any(message.startswith("unsupported element: uns/spatial ") for message in messages)


# scirpy: AIRR data (an awkward array in obsm) and its per-cell obs columns.


def scirpy_data(ir: Any) -> pathlib.Path:
    folder = pathlib.Path(ir.__file__).parent / "tests" / "data"
    if not folder.is_dir():
        pytest.skip(f"this scirpy wheel ships no test data: {folder}")
    return folder


def test_scirpy_airr_round_trip(tmp_path):
    ir = pytest.importorskip("scirpy", reason="scirpy is not installed (pip install scirpy)")
    folder = scirpy_data(ir) / "airr"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        adata = ir.io.read_airr([folder / "rearrangement_tra.tsv", folder / "rearrangement_trb.tsv"])
        ir.pp.index_chains(adata)
        ir.tl.chain_qc(adata)
    path = tmp_path / "scirpy_airr.h5ad"
    adata.write_h5ad(path)

    expected, back, messages, _ = round_trip(path, tmp_path)
    assert expected.obs.index.name == "cell_id"
    assert_kept(expected, back)
    assert {"receptor_type", "chain_pairing"} <= set(back.obs.columns)
    assert_losses_reported(expected, back, messages)
    assert any(message.startswith("unsupported element: obsm/airr ") for message in messages)


@pytest.mark.parametrize("modality", ["gex", "airr"])
def test_scirpy_shipped_mudata_modalities_round_trip(tmp_path, modality):
    ir = pytest.importorskip("scirpy", reason="scirpy is not installed (pip install scirpy)")
    path = scirpy_data(ir) / "wu2020_200.h5mu"
    if modality == "airr":
        pytest.importorskip("awkward", reason="anndata reads obsm/airr with awkward")
    expected, back, messages, _ = round_trip(path, tmp_path, modality)
    assert_kept(expected, back)
    assert_losses_reported(expected, back, messages)


def test_scirpy_shipped_legacy_obs_columns_round_trip(tmp_path):
    ir = pytest.importorskip("scirpy", reason="scirpy is not installed (pip install scirpy)")
    path = scirpy_data(ir) / "wu2020_200_v0_11.h5ad"
    expected, back, messages, _ = round_trip(path, tmp_path)
    # 41 categorical obs columns, some with missing entries (NaN among the categories' labels)
    categoricals = [column for column in expected.obs if isinstance(expected.obs[column].dtype, pd.CategoricalDtype)]
    assert len(categoricals) >= 40 and int(expected.obs["IR_VJ_1_d_call"].isna().sum()) == 74
    assert_kept(expected, back)
    assert_losses_reported(expected, back, messages)
