"""Daf on dask: arrays of stored properties and queries evaluated on a cluster (``pip install "pydaf[dask]"``)."""

try:
    import dask.array  # noqa: F401
except ImportError as error:  # (an optional extra: say how to get it)
    raise ImportError(f'pydaf.dask needs dask: pip install "pydaf[dask]" ({error})') from error

from .arrays import matrix, vector
from .queries import get_np_query, get_query, query
from .sources import DafSource, forget_sources, open_source, source_of
from .store import store_matrix, store_vector

__all__ = ["DafSource", "forget_sources", "get_np_query", "get_query", "matrix", "open_source", "query", "source_of",
           "store_matrix", "store_vector", "vector"]
