"""Packed (chunked and compressed) properties: the dual-format shard FilesDaf, ZipDaf, HttpDaf and ZarrDaf share
(docs/spec/FORMATS.md §4). :mod:`.shard` reads one shard through any :class:`~pydaf._os.byte_sources.ByteSource`."""

from .shard import (
    PACKED_COMPRESSIONS,
    PackedLayout,
    descriptor_layout,
    is_packed_descriptor,
    packed_layout,
    read_packed_array,
)

__all__ = ["PACKED_COMPRESSIONS", "PackedLayout", "descriptor_layout", "is_packed_descriptor", "packed_layout",
           "read_packed_array"]
