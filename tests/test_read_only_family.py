"""One name per concept (issue 24, deliver 4): the read-only family (an abstract DafReadOnly; the wrapper, views and
read-only chains as siblings) and the cache keys named as Julia's cache vocabulary."""

from __future__ import annotations

import os

import pytest

import pydaf


def _daf() -> pydaf.MemoryDaf:
    return pydaf.MemoryDaf(name="cells!").add_axis("cell", ["A", "B"]).set_vector("cell", "age", [1, 2])


def test_the_wrapper_views_and_chains_are_siblings_under_the_abstract_type() -> None:
    daf = _daf()
    wrapper = daf.read_only()
    view = pydaf.viewer(daf, axes=[("cell", "=")], data=[(("cell", "age"), "=")])
    chain = pydaf.chain_reader([daf, pydaf.MemoryDaf(name="top!").add_axis("cell", ["A", "B"])], name="chain!")
    for reader in (wrapper, view, chain):
        assert isinstance(reader, pydaf.DafReadOnly) and not hasattr(reader, "set_scalar")
    assert type(wrapper) is pydaf.DafReadOnlyWrapper and wrapper.base is daf
    for sibling in (view, chain):
        assert not isinstance(sibling, pydaf.DafReadOnlyWrapper)
        assert not hasattr(sibling, "base")  # not a wrapper: no ``base`` that is None
    assert not isinstance(daf, pydaf.DafReadOnly)
    assert not hasattr(pydaf.DafReadOnly, "base") and "__init__" not in vars(pydaf.DafReadOnly)


def test_a_read_only_open_returns_the_wrapper(tmp_path) -> None:
    path = os.path.join(str(tmp_path), "x.h5df")
    pydaf.H5df(path, "w", name="read-only-family!").add_axis("cell", ["A"]).close()
    with pydaf.H5df(path, "r") as reader:
        assert type(reader) is pydaf.DafReadOnlyWrapper and type(reader.base) is pydaf.H5df
        assert reader.description().splitlines()[1:3] == ["type: ReadOnly", f"base: H5df {reader.base.name}"]
        with pytest.raises(pydaf.DafReadOnlyError) as info:
            reader.set_scalar("x", 1)
        assert f'pydaf.open_daf("{reader.complete_path()}", "r+")' in str(info.value)


def test_views_and_chains_say_how_to_write() -> None:
    daf = _daf()
    view = pydaf.viewer(daf, axes=[("cell", "=")])
    chain = pydaf.chain_reader([daf, pydaf.MemoryDaf(name="top!")], name="chain!")
    for reader, hint in ((view, "(a view is read-only: write to the data set it views)"),
                         (chain, "pydaf.chain_writer writes to its last data set"),
                         (daf.read_only(), "(write through the data set it wraps: its .base)")):
        with pytest.raises(pydaf.DafReadOnlyError) as info:
            reader.set_scalar("x", 1)
        assert hint in str(info.value)


def test_closing_a_view_closes_only_the_view_and_a_wrapper_closes_its_base() -> None:
    daf = _daf()
    view = pydaf.viewer(daf, axes=[("cell", "=")])
    view.close()
    assert view.closed and not daf.closed
    daf.read_only().close()
    assert daf.closed


def test_cache_keys_are_named_as_julia_s_cache_vocabulary() -> None:
    from pydaf import keys
    from pydaf.core import cache

    for kind in ("Axis", "Vector", "Matrix", "Scalar", "Query", "Names"):
        assert hasattr(cache, f"{kind}CacheKey") and not hasattr(cache, f"{kind}Key")
    assert keys.AxisKey is str and keys.VectorKey == tuple[str, str]  # the composition keys, Julia's ``Keys``
    daf = _daf()
    daf.get_np_query("@ cell : age")
    _ = daf.axis_dict("cell")
    assert [type(key).__name__ for key, _ in daf.cache.entries()] == ["AxisCacheKey", "QueryCacheKey"]
    assert [key.sort_key()[0] for key, _ in daf.cache.entries()] == [cache.CacheType.CachedAxis,
                                                                     cache.CacheType.CachedQuery]
