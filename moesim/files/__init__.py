"""Output files: every output appears whole or not at all, and only a regular file is replaced.

Every file the package writes goes through :func:`atomic_path` (or a ``write_*_atomic``
helper), and every output path a user names is checked first by :func:`check_writable`.
The rules, by what the destination is:

- **A regular file, or a new name:** the writer gets a temporary path in the destination's
  own folder (so the final rename stays on one filesystem and is atomic); the path is renamed
  over the destination only when the writer returned. The temporary name is hidden and ends
  in ``.tmp`` (``.results.json.1f3a9c2e.tmp``, the name cut short where it would pass the
  filesystem's NAME_MAX), so globs such as ``*.json`` never see a half-written file, even one
  left by a killed process. A writer that picks its format from the file name (matplotlib's
  ``savefig``) must be told the format explicitly.
- **A symbolic link** is followed: the file it points to is replaced, the link is kept.
- **A character device** (``/dev/null``, ``/dev/full``, a terminal) is written through: the
  writer writes a temporary file in the system's temporary folder, whose bytes are then copied
  into the device. The device is never renamed over nor removed, and no file is made beside it.
- **A FIFO, a socket, a block device or a folder** is refused with one line, before any work
  (:func:`check_writable`) and again just before the rename (it may have appeared meanwhile).
- **A regular file of another kind** (a grid TOML where a timeline goes) is kept: an output
  whose files all begin alike refuses, with :func:`check_replaceable`, a file that does not.
- **A name longer than the filesystem allows** (a name over NAME_MAX, a path over PATH_MAX) is
  refused by :func:`check_writable` by its length, before any call that would fail on it.

A destination that cannot be written raises :class:`moesim.errors.InputError` naming the path
and the cause, which the CLI prints on one line (exit 2): a missing or read-only folder, or a
write that fails for want of space or quota, on a read-only filesystem, for lack of
permission, on a name too long or on an I/O error (``ENOSPC``, ``EDQUOT``, ``EFBIG``,
``EROFS``, ``EACCES``, ``EPERM``, ``ENAMETOOLONG``, ``EIO``), whether it happens while the
temporary file is made, written, flushed or renamed (``out.json cannot be written: No space
left on device``). The temporary file is then removed and an old destination is left as it was.
"""

from __future__ import annotations

from moesim.files.atomic import atomic_path, write_bytes_atomic, write_json_atomic, write_text_atomic
from moesim.files.checks import check_replaceable, check_writable

__all__ = ["atomic_path", "write_text_atomic", "write_bytes_atomic", "write_json_atomic", "check_writable",
           "check_replaceable"]
