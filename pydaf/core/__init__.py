"""The reader/writer API, written once above the storage formats: validation, caching, locks, version counters."""
