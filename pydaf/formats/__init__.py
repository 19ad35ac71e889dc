"""Storage backends: one module per format, each implementing :mod:`pydaf.formats.base`."""
