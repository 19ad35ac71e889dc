"""Julia's DataAxesFormats.jl and pydaf on the same data, in one process (through ``juliacall``), without copying
numbers: :func:`to_julia` (a pydaf data set as a Julia Daf), :func:`from_julia` (a Julia Daf as a pydaf data set),
:func:`julia_query` (a query evaluated by Julia, in pydaf's result forms).

Importing this package neither starts Julia nor imports juliacall; the first call that needs Julia does, with the Julia
:func:`find_julia` finds (one already installed: pydaf never lets juliacall download one), or raises
:class:`DafJuliaUnavailableError` saying why. Needs ``pip install 'pydaf[julia]'`` and an instantiated Julia project
(the repository's ``julia/`` kit: see ``julia/README.md``). Handing data over by path, without juliacall, needs only
the files: ``pydaf manifest`` and ``julia/verify.jl``.

Example:
    >>> import pydaf, pydaf.julia
    >>> plan = pydaf.julia.julia_plan(pydaf.MemoryDaf(name="empty!"))  # what to_julia would do, without Julia
    >>> type(plan).__name__, plan.name
    ('JuliaMemoryPlan', 'empty!')
"""

from .errors import DafJuliaError, DafJuliaUnavailableError, DafJuliaVersionError
from .handoff import JuliaReader, JuliaWriter, from_julia, julia_query, to_julia
from .plan import ArrayForm, JuliaArrayPlan, JuliaBuffer, JuliaMemoryPlan, JuliaOpenPlan, julia_plan
from .setup import (
    JuliaSetup,
    check_juliacall_pairing,
    find_julia,
    julia_unavailable_reason,
    juliacall_environment,
    start_julia,
)

__all__ = [
    "ArrayForm",
    "DafJuliaError",
    "DafJuliaUnavailableError",
    "DafJuliaVersionError",
    "JuliaArrayPlan",
    "JuliaBuffer",
    "JuliaMemoryPlan",
    "JuliaOpenPlan",
    "JuliaReader",
    "JuliaSetup",
    "JuliaWriter",
    "check_juliacall_pairing",
    "find_julia",
    "from_julia",
    "julia_plan",
    "julia_query",
    "julia_unavailable_reason",
    "juliacall_environment",
    "start_julia",
    "to_julia",
]
