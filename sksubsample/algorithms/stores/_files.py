"""Whether the file under a memory map is still the one a fit began with.

A memory map reads its file as the pages are touched. If the file is truncated while mapped,
touching a row past its new end kills the process with SIGBUS; if it is overwritten in place
(``np.save`` to the same path) or replaced, the rows read change without a word. A
:class:`FileStamp` records the file's identity, size and modification time when the store is
made (before the set-up reads it), and :meth:`FileStamp.check` compares them again before rows
are touched: a pass's read unit, a chain's refill of its buffer. A change between that check
and the read itself is not seen by the check; a read past the end of a file cut short then is
answered with zeros by :mod:`._truncation`, and the next check raises.
"""

from __future__ import annotations

import os
from typing import NamedTuple

__all__ = ["FileStamp"]


class FileStamp(NamedTuple):
    """A file's device, inode, size and modification time (ns), and its path."""

    path: str
    device: int
    inode: int
    size: int
    mtime_ns: int

    @classmethod
    def of(cls, path):
        st = os.stat(path)
        return cls(os.fspath(path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)

    def check(self, rows, what="X"):
        """Raise ``RuntimeError`` naming the file and ``rows`` (a description of the rows
        about to be read) when the file is no longer the one stamped."""
        try:
            now = FileStamp.of(self.path)
        except OSError as exc:
            raise RuntimeError(
                f"the file of {what}, {self.path}, cannot be read any more ({exc}) while "
                f"reading {rows}: fit again once the file is back") from None
        if now == self:
            return
        if (now.device, now.inode) != (self.device, self.inode):
            change = "was replaced by another file"
        elif now.size < self.size:
            change = f"was truncated from {self.size} to {now.size} bytes"
        elif now.size != self.size:
            change = f"changed size from {self.size} to {now.size} bytes"
        else:
            change = "was written to (its modification time changed)"
        raise RuntimeError(
            f"the file of {what}, {self.path}, {change} since the fit began, while reading "
            f"{rows}: the draws would mix two data sets (or the process would die reading "
            f"past the end of the file). Keep the file unchanged during a fit (write a new "
            f"file and fit again)")
