"""A memory map's pages mapped ahead in a thread of their own (``mapped_ahead``)."""

import os
import sys
import threading
import time

import numpy as np
import pytest

from sksubsample.algorithms.stores import mapped_ahead

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="MADV_POPULATE_READ is Linux's")


def _resident_kb(path):
    """The resident kilobytes of this process's mappings of ``path`` (/proc/self/smaps)."""
    total, inside = 0, False
    with open("/proc/self/smaps") as smaps:
        for line in smaps:
            fields = line.split()
            if "-" in fields[0] and len(fields) >= 5:  # a mapping's header line
                inside = fields[-1] == str(path)
            elif inside and fields[0] == "Rss:":
                total += int(fields[1])
    return total


def _kernel_version():
    release = os.uname().release.split("-")[0].split(".")
    return tuple(int(part) for part in release[:2] if part.isdigit())


def _threads():
    return [t for t in threading.enumerate() if t.name == "sksubsample-map-ahead"]


def _wait_for(condition, seconds=10.0):
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.01)
    return condition()


@linux_only
def test_a_memory_maps_pages_are_mapped_within_the_block_and_the_thread_ends(tmp_path):
    path = tmp_path / "X.npy"
    np.save(path, np.ones((1 << 18, 20), dtype=np.float32))  # 20 MB
    X = np.load(path, mmap_mode="r")
    size_kb = X.nbytes // 1024
    # Negative control: without it, no page is mapped until a row is read.
    time.sleep(0.1)
    assert _resident_kb(path) < size_kb // 10
    with mapped_ahead(X):
        mapped = _wait_for(lambda: _resident_kb(path) >= size_kb)
    if _kernel_version() < (5, 14):  # (which refuses the advice: nothing mapped, nothing lost)
        pytest.skip("MADV_POPULATE_READ came with Linux 5.14")
    assert mapped
    assert not _threads()
    np.testing.assert_array_equal(X[-3:], 1.0)


@linux_only
def test_a_file_cut_short_stops_the_mapping_without_a_signal(tmp_path):
    # Truncated under the map: the advice fails where a read would raise SIGBUS, and the
    # thread ends; the block goes on.
    path = tmp_path / "X.npy"
    np.save(path, np.ones((1 << 18, 20), dtype=np.float32))
    X = np.load(path, mmap_mode="r")
    with open(path, "r+b") as f:
        f.truncate(4096)
    with mapped_ahead(X):
        assert _wait_for(lambda: not _threads())
    assert not _threads()


def test_arrays_in_memory_are_left_as_they_are(tmp_path):
    # An array in memory, and a copy of a memory map (a memmap by class, in memory): no thread.
    path = tmp_path / "X.npy"
    np.save(path, np.ones((1000, 3)))
    for values in (np.ones((1000, 3)), np.load(path, mmap_mode="r").copy()):
        with mapped_ahead(values):
            assert not _threads()
