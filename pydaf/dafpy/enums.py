"""dafpy's enumerated types in one place (``dafpy.enums.<TAB>`` lists them); each is also a top-level name.

Example:
    >>> from pydaf.dafpy import enums
    >>> sorted(enums.__all__), str(enums.CacheGroup.MappedData.value)
    (['AbnormalHandler', 'CacheGroup', 'LogLevel', 'MergeAction'], 'MappedData')
"""

from __future__ import annotations

from .concat import MergeAction
from .data import CacheGroup
from .generic_functions import AbnormalHandler, LogLevel

__all__ = ["AbnormalHandler", "CacheGroup", "LogLevel", "MergeAction"]
