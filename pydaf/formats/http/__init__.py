"""HttpDaf: a FilesDaf directory served over HTTP, read-only (Julia's ``HttpDaf``).

:mod:`.format` holds the storage, the facade and the format's registry entry; :mod:`.client` the HTTP requests
(bounded, retried, checked) and :class:`HttpByteSource`, the byte source of one served file.
"""

from .client import ByteCache, HttpByteSource, HttpClient, HttpSettings
from .format import FORMAT, HttpDaf, HttpFormat

__all__ = ["FORMAT", "ByteCache", "HttpByteSource", "HttpClient", "HttpDaf", "HttpFormat", "HttpSettings"]
