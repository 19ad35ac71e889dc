"""What the benchmarks that time an operation against ``cp`` share: each run is a child process of the script (so its
peak RSS, ``VmHWM``, is the operation's own), outputs are removed and synced between runs, inputs are read once
beforehand (a warm page cache), and the results print as one table of best/median times, speed and peak RSS."""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys

GB = 1e9
MB = 1e6


def peak_rss() -> int:
    """This process's peak resident set (``VmHWM``), in bytes."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def run_child(script: str, *arguments: str) -> tuple[float, int]:
    """Run ``script --child ARGUMENTS...``, which prints its elapsed seconds and :func:`peak_rss`."""
    output = subprocess.run([sys.executable, script, "--child", *arguments], check=True, capture_output=True,
                            text=True).stdout.split()
    return float(output[0]), int(output[1])


def remove(path: str) -> None:
    """Remove a file or directory if it exists, then sync (so its write-back does not slow the next run)."""
    if os.path.isdir(path):
        shutil.rmtree(path)
    elif os.path.exists(path):
        os.remove(path)
    os.sync()


def warm(paths: list[str]) -> None:
    """Read the files once, so every run starts from a warm page cache."""
    for path in paths:
        with open(path, "rb") as file:
            while file.read(64 << 20):
                pass


def print_against_cp(results: dict[str, list[tuple[float, int]]], data_bytes: int) -> None:
    """One row per operation (``cp`` among them): best and median seconds, speed relative to the best ``cp``, and
    the peak RSS in MB and as a fraction of the data."""
    width = max(len("operation"), *map(len, results)) + 1
    best_cp = min(seconds for seconds, _ in results["cp"])
    print(f"{'operation':<{width}} {'best s':>8} {'median s':>9} {'speed vs cp':>12} {'peak RSS MB':>12} "
          f"{'RSS / data':>11}")
    for mode, runs in results.items():
        times = [seconds for seconds, _ in runs]
        peak = max(rss for _, rss in runs)
        print(f"{mode:<{width}} {min(times):>8.3f} {statistics.median(times):>9.3f} {best_cp / min(times):>11.2f}x "
              f"{peak / MB:>12.0f} {peak / data_bytes:>10.1%}")
