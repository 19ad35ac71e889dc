"""Storage backends: :mod:`.memory`, and one sub-package per stored format (:mod:`.h5df`, :mod:`.zarr`, :mod:`.zip`,
:mod:`.files`; :mod:`.http` only reads), each implementing :mod:`pydaf.abc.format` and registering a
:class:`~pydaf.formats.registry.FormatEntry` through which :func:`~pydaf.open_daf` and the ``pydaf`` command choose
the format of a path.

This package imports every built-in format, so importing any part of it registers them all; the order in which
:func:`~pydaf.formats.registry.guess_format` asks them is each entry's ``priority``, not the order of the imports below.
Third parties register theirs through the ``pydaf.formats`` entry point group (see :mod:`.registry`).
"""

from . import files, h5df, http, memory, zarr, zip  # noqa: F401 - importing a format registers it
