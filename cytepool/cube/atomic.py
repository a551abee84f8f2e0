"""Atomic publication of a directory: write a hidden sibling, then rename it into place.

A hidden sibling of ``target`` is named ``.<name>.tmp-<pid>-<host>-<token>``:
the writer's process id, its host name and 32 random hex digits. A writer
killed before it published leaves its sibling behind; the next writer of the
same target removes every sibling whose writer is no longer running on this
host (:func:`reclaim_stale_siblings`). Siblings of live processes, of other
hosts (the filesystem may be shared) and without an owner in their name (as
earlier versions wrote them) are never touched.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import hashlib
import os
import re
import shutil
import socket
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Final

from cytepool.errors import CubeExistsError

if TYPE_CHECKING:
    from collections.abc import Iterator

    from cytepool.errors import CytePoolError

__all__ = ["fsync_tree", "hidden_sibling", "publish", "reclaim_stale_siblings", "staging"]

_AT_FDCWD: Final = -100
_RENAME_NOREPLACE: Final = 1
_RENAME_EXCHANGE: Final = 2
_HOST_NAME: Final = re.compile(r"[A-Za-z0-9.-]+")
_OWNER: Final = re.compile(r"(?P<pid>[0-9]+)-(?P<host>.+)-[0-9a-f]{32}")


def _host() -> str:
    """The host name as it goes in a sibling's name; hashed if it holds other characters."""
    name = socket.gethostname()
    if _HOST_NAME.fullmatch(name):
        return name
    return "h" + hashlib.sha256(name.encode()).hexdigest()[:16]


def hidden_sibling(target: Path) -> Path:
    """A new hidden path beside ``target`` on the same filesystem, naming this writer.

    Parameters
    ----------
    target
        The path to be published.

    Returns
    -------
    pathlib.Path
        ``.<name>.tmp-<pid>-<host>-<token>`` in ``target``'s directory;
        nothing is created.
    """
    return target.parent / f".{target.name}.tmp-{os.getpid()}-{_host()}-{uuid.uuid4().hex}"


def _running(pid: int) -> bool:
    """Whether a process ``pid`` exists on this host (one of another user counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def reclaim_stale_siblings(target: Path) -> list[Path]:
    """Remove the hidden siblings of ``target`` left by writers that died on this host.

    Parameters
    ----------
    target
        The path about to be written.

    Returns
    -------
    list of pathlib.Path
        The siblings removed.
    """
    prefix = f".{target.name}.tmp-"
    host = _host()
    try:
        entries = [e for e in target.parent.iterdir() if e.name.startswith(prefix)]
    except OSError:
        return []
    removed = []
    for entry in entries:
        owner = _OWNER.fullmatch(entry.name.removeprefix(prefix))
        if owner is None or owner["host"] != host:
            continue
        pid = int(owner["pid"])
        if pid <= 0 or pid == os.getpid() or _running(pid):
            continue
        with contextlib.suppress(FileNotFoundError):
            _remove(entry)
            removed.append(entry)
    return removed


@contextlib.contextmanager
def staging(target: Path) -> Iterator[Path]:
    """Yield a hidden sibling to write into; remove it if the block fails.

    Stale siblings of ``target`` are reclaimed first (:func:`reclaim_stale_siblings`).

    Parameters
    ----------
    target
        The path to be published.

    Yields
    ------
    pathlib.Path
        The hidden sibling.
    """
    reclaim_stale_siblings(target)
    tmp = hidden_sibling(target)
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_tree(root: Path) -> None:
    """Flush every file below ``root``, then every directory, to disk.

    Parameters
    ----------
    root
        The tree to flush.
    """
    files: list[Path] = []
    dirs: list[Path] = []
    for dirpath, _, filenames in os.walk(root):
        dirs.append(Path(dirpath))
        files.extend(Path(dirpath) / name for name in filenames)
    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(_fsync, files))
        list(pool.map(_fsync, reversed(dirs)))


def _renameat2(src: Path, dst: Path, flags: int) -> bool:
    """``renameat2``; False where the system call or flag is unavailable."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        call = libc.renameat2
    except (OSError, AttributeError):
        return False
    if call(_AT_FDCWD, os.fsencode(src), _AT_FDCWD, os.fsencode(dst), flags) == 0:
        return True
    err = ctypes.get_errno()
    if err in {errno.ENOSYS, errno.EINVAL}:
        return False
    raise OSError(err, os.strerror(err), str(src), None, str(dst))


def publish(
    tmp: Path,
    target: Path,
    *,
    replace: bool,
    exists_error: type[CytePoolError] = CubeExistsError,
) -> None:
    """Rename ``tmp`` to ``target``; with ``replace``, swap atomically and delete the old tree.

    Without ``replace`` the rename refuses an existing target, even one created
    while ``tmp`` was being written.

    Parameters
    ----------
    tmp
        The written tree.
    target
        Where it is published.
    replace
        Replace an existing ``target``.
    exists_error
        The error raised when ``target`` appeared meanwhile.

    Raises
    ------
    CubeExistsError
        (or ``exists_error``) ``target`` exists and ``replace`` is false.
    """
    if not replace:
        msg = f"{target}: appeared while it was being written; nothing was replaced"
        try:
            if _renameat2(tmp, target, _RENAME_NOREPLACE):
                return
        except FileExistsError as exc:
            raise exists_error(msg) from exc
        if target.exists() or target.is_symlink():
            raise exists_error(msg)
        tmp.rename(target)
        return
    if _renameat2(tmp, target, _RENAME_EXCHANGE):
        _remove(tmp)
        return
    old = hidden_sibling(target)
    target.rename(old)
    tmp.rename(target)
    _remove(old)


def _remove(path: Path) -> None:
    """Delete a replaced entry: a symlink itself (not what it points to), or a tree."""
    if path.is_symlink():
        path.unlink()
    else:
        shutil.rmtree(path)
