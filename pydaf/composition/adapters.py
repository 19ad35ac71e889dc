"""Adapters (Julia's ``Adapters``): run a computation on a renamed, subset view of a data set, and copy a renamed
subset of what it wrote back into the data set.

A computation (see :mod:`pydaf.composition.computations`) names its inputs and outputs generically (``cell``,
``UMIs``, ``quality``); a data set names them its own way. :func:`adapter` bridges the two: it presents the data set
through a read-only view under the names the computation expects (``input_axes``, ``input_data``), chains that view
with an empty ``capture`` data set that receives everything the computation writes, and, when the computation is done,
copies a view of the captured results (``output_axes``, ``output_data``) back into the data set with
:func:`~pydaf.copy_all` (``empty``, ``relayout``, ``overwrite``).

Julia's ``adapter(daf; ...) do adapted ... end`` is, in Python, a ``with`` block (as dafpy's)::

    with pydaf.adapter(daf, input_data=[...], output_data=[...]) as adapted:
        result = computation(adapted)

The copy back happens when the block ends normally; an exception leaves ``daf`` as it was (Julia's ``do`` block
propagates the exception before the copy too). What the block computes stays in its variables (Julia's ``adapter``
returns the block's value; a ``with`` block has none).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager

from ..core.writers import DafWriter
from ..errors import DafMissingError, DafValueError
from ..formats.memory import MemoryDaf
from .chains import chain_writer
from .copies import copy_all
from .views import ViewPairs, viewer

__all__ = ["adapter"]


@contextmanager
def adapter(daf: DafWriter, *, name: str = ".adapter", input_axes: ViewPairs | None = None,
            input_data: ViewPairs | None = None, capture: Callable[..., DafWriter] = MemoryDaf,
            output_axes: ViewPairs | None = None, output_data: ViewPairs | None = None,
            empty: Mapping | Iterable | None = None, relayout: bool = True,
            overwrite: bool = False) -> Iterator[DafWriter]:
    """Present ``daf`` to a computation under the names it expects, and copy what it computes back under ``daf``'s
    names (Julia's ``adapter``; dafpy's context manager, with Julia's ``name``).

    On entry: ``viewer(daf, axes=input_axes, data=input_data)`` (named ``<daf>.input``) chained with ``capture(name=
    "<daf>.capture")`` (a fresh :class:`~pydaf.MemoryDaf` by default; any callable taking ``name=`` that returns an
    empty writable data set) into a write chain named ``<daf>.adapted``, which the ``with`` block receives: it reads the
    renamed inputs and writes into the capture. On normal exit: ``viewer(adapted, axes=output_axes,
    data=output_data)`` (``<daf>.output``) is copied into ``daf`` by :func:`~pydaf.copy_all` with ``empty``,
    ``relayout`` and ``overwrite`` (an existing property of ``daf`` is replaced only with ``overwrite=True``). If the
    block raises, nothing is copied. ``name`` is Julia's label of the step (its ``flame_timed`` timer); pydaf names the
    intermediate data sets after ``daf`` as Julia does.

    The view rules are :func:`~pydaf.viewer`'s: omitted axes are all exposed as they are; omitted data is all exposed.
    At least one of ``input_axes``, ``input_data``, ``output_axes``, ``output_data`` must be given (Julia asserts
    it: otherwise the adapter would copy everything back unchanged); else a :class:`~pydaf.DafValueError`.

    Example:
        >>> import pydaf
        >>> daf = pydaf.MemoryDaf(name="adapter-example!").set_scalar("INPUT", 1)
        >>> with adapter(daf, input_data=[("input", ". INPUT")], output_data=[("OUTPUT", ". output")]) as adapted:
        ...     _ = adapted.set_scalar("output", adapted[". input"] + 1)   # the computation, on generic names
        >>> int(daf.get_scalar("OUTPUT")), sorted(daf.scalars_set())      # only what output_data names came back
        (2, ['INPUT', 'OUTPUT'])
    """
    if input_axes is None and input_data is None and output_axes is None and output_data is None:
        raise DafValueError(f"no-op adapter: {name}\n(give input_axes, input_data, output_axes or output_data: "
                            f"without them the computation would see all of the daf data and all it writes would be "
                            f"copied back as is; call it on the daf data directly)", daf_name=daf.name,
                            daf_preposition="for")
    base_name = daf.name
    input_view = viewer(daf, axes=input_axes, data=input_data, name=f"{base_name}.input")
    captured = capture(name=f"{base_name}.capture")
    adapted = chain_writer([input_view, captured], name=f"{base_name}.adapted")
    # An exception raised in the with block is raised at this yield: the copy below is skipped, as in Julia.
    yield adapted
    output_view = viewer(adapted, axes=output_axes, data=output_data, name=f"{base_name}.output")
    try:
        copy_all(daf, output_view, empty=empty, relayout=relayout, overwrite=overwrite, progress=False)
    except DafMissingError as error:
        if error.problem.startswith("missing entries in the axis:"):
            raise error.with_line("(an output on an axis that input_axes made a subset of needs its other entries: "
                                  "give adapter(..., empty=[(key, value), ...]))") from None
        raise
