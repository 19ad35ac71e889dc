"""Storage backends: one module per format, each implementing :mod:`pydaf.formats.base` and ending with its entry in
:mod:`pydaf.formats.registry` (``FORMAT = register_format(FormatEntry(...))``), through which :func:`~pydaf.open_daf`
and the ``pydaf`` command choose the format of a path.

This package imports nothing: :mod:`pydaf.core` imports :mod:`pydaf.formats.base`, which runs this ``__init__``
first, so importing the format modules here would be an import cycle. ``import pydaf`` imports (and so registers)
every built-in format.
"""
