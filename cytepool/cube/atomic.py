"""Atomic publication of a directory: write a hidden sibling, then rename it into place."""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import shutil
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Final

from cytepool.errors import CubeExistsError

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["fsync_tree", "hidden_sibling", "publish", "staging"]

_AT_FDCWD: Final = -100
_RENAME_NOREPLACE: Final = 1
_RENAME_EXCHANGE: Final = 2


def hidden_sibling(target: Path) -> Path:
    """A new hidden path beside ``target`` on the same filesystem.

    Parameters
    ----------
    target
        The path to be published.

    Returns
    -------
    pathlib.Path
        ``.<name>.<random>`` in ``target``'s directory; nothing is created.
    """
    return target.parent / f".{target.name}.tmp-{uuid.uuid4().hex}"


@contextlib.contextmanager
def staging(target: Path) -> Iterator[Path]:
    """Yield a hidden sibling to write into; remove it if the block fails.

    Parameters
    ----------
    target
        The path to be published.

    Yields
    ------
    pathlib.Path
        The hidden sibling.
    """
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


def publish(tmp: Path, target: Path, *, replace: bool) -> None:
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

    Raises
    ------
    CubeExistsError
        ``target`` exists and ``replace`` is false.
    """
    if not replace:
        try:
            if _renameat2(tmp, target, _RENAME_NOREPLACE):
                return
        except FileExistsError as exc:
            msg = f"{target}: appeared while the cube was written; nothing was replaced"
            raise CubeExistsError(msg) from exc
        if target.exists():
            msg = f"{target}: appeared while the cube was written; nothing was replaced"
            raise CubeExistsError(msg)
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
