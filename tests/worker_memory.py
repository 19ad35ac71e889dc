"""A process's memory as Linux reports it (``/proc/self/status``), for tests that run these on dask workers
(``client.run(reset_peak)``): the peak resident set (``VmHWM``), which counts the file pages a process maps."""

from __future__ import annotations


def status_bytes(name: str) -> int:
    """A ``/proc/self/status`` field given in kB (``VmRSS``, ``VmHWM``, ``RssAnon``...), in bytes."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(name + ":"):
                return int(line.split()[1]) * 1024
    raise AssertionError(name)


def reset_peak() -> int:
    """Reset this process's peak RSS (``VmHWM``) to its current RSS (Linux ``clear_refs``); returns it."""
    with open("/proc/self/clear_refs", "w") as clear:
        clear.write("5")
    return status_bytes("VmHWM")


def peak_rss() -> int:
    """This process's peak RSS since it started or since :func:`reset_peak`."""
    return status_bytes("VmHWM")
