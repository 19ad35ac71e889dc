"""The contracts below the data set layer: :mod:`.format`, the storage contract every backend implements (Julia's
``format_*`` functions). It imports nothing from :mod:`pydaf.core`, which is built on it."""
