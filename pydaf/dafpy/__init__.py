"""dafpy's API over pydaf: ``import pydaf.dafpy as dafpy`` runs code written for dafpy 0.3.0 (tanaylab's Python
wrapper of Julia's DataAxesFormats.jl) without Julia.

Every public name of dafpy is here, with dafpy's signatures (``None`` for an option means "the default") and return
forms (Python scalars, numpy ``get_np_*``, pandas ``get_pd_*``, ``with`` blocks for ``empty_*``). Each data set is a
thin wrapper of a pydaf data set (its ``.daf``), and every call runs pydaf's own code; the texts (descriptions,
errors) are Julia's, as pydaf's are. What differs from dafpy: no Julia (``julia_import.jl`` raises when used), arrays
are pydaf's read-only zero-copy ones, a sparse matrix in pandas stays sparse, and ``http_daf`` is not supported.

Example:
    >>> import pydaf.dafpy as dp
    >>> cells = dp.example_cells_daf()
    >>> cells["@ donor [ age > 60 & sex = male ]"].size
    29
    >>> dp.Axis("donor") | dp.LookupVector("age") | dp.Max() | cells.get_np_query()
    91
"""

#: The dafpy release whose API this reproduces.
__version__ = "0.3.0"

from . import enums as enums
from .adapters import *  # noqa: F403
from .anndata_facade import *  # noqa: F403
from .anndata_format import *  # noqa: F403
from .concat import *  # noqa: F403
from .copies import *  # noqa: F403
from .data import *  # noqa: F403
from .enums import *  # noqa: F403
from .example_data import *  # noqa: F403
from .formats import *  # noqa: F403
from .generic_functions import *  # noqa: F403
from .julia_import import *  # noqa: F403
from .operations import *  # noqa: F403
from .queries import *  # noqa: F403
from .reconstruction import *  # noqa: F403
from .storage_types import *  # noqa: F403
from .views import *  # noqa: F403
