"""The worker processes a fit run by a test's child process leaves (read from /proc)."""

import os

__all__ = ["workers"]


def workers():
    """Child processes other than the resource trackers (which exit with this process)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read()
        except OSError:
            continue
        if ppid == os.getpid() and b"resource_tracker" not in cmdline:
            found.append(int(entry))
    return found
