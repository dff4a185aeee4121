"""Where the package's caches may write, and how they write.

Both caches of the package (the measured costs, :mod:`._calibration`, and numba's compiled code,
:mod:`._numba`) are optional: a read-only install, a home folder that cannot be written, or no
home folder at all (``HOME`` unset and no entry for the user in the password database) must
leave every fit working. The rules they share live here: the user's cache folder when there is
one, else a folder of this user's own in the temporary folder, and files replaced whole, so
that a reader (another process) never sees half of one.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path

__all__ = ["private_temp_folder", "replace_text", "user_cache_folder", "writable"]


def user_cache_folder():
    """The user's cache folder (``$XDG_CACHE_HOME``, else ``~/.cache``), or None when there is
    no home folder to put it in (``Path.home()`` raises when ``HOME`` is unset and the user has
    no entry in the password database)."""
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg and os.path.isabs(xdg):
        return Path(xdg)
    try:
        return Path.home() / ".cache"
    except (RuntimeError, KeyError, OSError):
        return None


def writable(folder):
    """Whether files can be created in ``folder`` (made if missing): the test numba's own
    cache locators use, a file created and removed."""
    try:
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        tempfile.TemporaryFile(dir=folder).close()
    except OSError:
        return False
    return True


def private_temp_folder(name):
    """A folder ``name`` of this user's own in the temporary folder (made with mode 0700), or
    None when none can be had.

    The temporary folder is shared by every user of the machine: a folder there is used only if
    this user owns it and nobody else may write in it (another user could otherwise plant the
    files a cache reads, machine code among them).
    """
    uid = os.getuid() if hasattr(os, "getuid") else None
    folder = Path(tempfile.gettempdir()) / (f"{name}-{uid}" if uid is not None else name)
    try:
        folder.mkdir(mode=0o700, exist_ok=True)
        info = os.lstat(folder)
    except OSError:
        return None
    if (not stat.S_ISDIR(info.st_mode) or (uid is not None and info.st_uid != uid)
            or info.st_mode & 0o022):
        return None
    return folder if writable(folder) else None


def replace_text(path, text):
    """Write ``text`` to ``path`` whole: into a new file beside it, flushed to the disk, then
    renamed over ``path`` (atomic), so a reader sees the old content or the new, never a part.
    Raises ``OSError`` when the folder cannot be written (``path`` is then unchanged)."""
    path = Path(path)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.",
                                         suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
