"""The run directory held by descriptor: ``TARGET/.iobench-<run_id>/`` opened
``O_DIRECTORY|O_NOFOLLOW`` right after iobench creates it, its device and inode recorded, and
the target directory it was made in held open too.

Its removal walks the directory through these descriptors (``openat``/``unlinkat``/
``rmdir(dir_fd=)``, never following a link), so a rename or a swap of TARGET, or of the run
directory itself, can neither redirect the removal to other data (a link named like TARGET
leads nowhere: the names are never resolved again) nor hide iobench's own files (they are
removed wherever the directory was moved). The detached reaper is handed the same
descriptors (``RunDir.from_fds``), not a path.
"""

from __future__ import annotations

import os
import stat

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
_NOFOLLOW_DIR = _DIR | os.O_NOFOLLOW


class RunDir:
    """The run directory ``name`` under the target directory ``root``, held open."""

    def __init__(self, root: str, name: str, root_fd: int, fd: int):
        self.root, self.name = root, name
        self.root_fd, self.fd = root_fd, fd
        st, rst = os.fstat(fd), os.fstat(root_fd)
        self.ident = (st.st_dev, st.st_ino)
        self.root_ident = (rst.st_dev, rst.st_ino)

    @property
    def path(self) -> str:
        return os.path.join(self.root, self.name)

    @classmethod
    def create(cls, root: str, name: str) -> RunDir:
        """mkdir ``root/name`` (FileExistsError when it exists) and hold both open."""
        root_fd = os.open(root, _DIR)
        try:
            os.mkdir(name, 0o755, dir_fd=root_fd)
            try:
                fd = os.open(name, _NOFOLLOW_DIR, dir_fd=root_fd)
            except BaseException:
                os.rmdir(name, dir_fd=root_fd)
                raise
        except BaseException:
            os.close(root_fd)
            raise
        return cls(root, name, root_fd, fd)

    @classmethod
    def from_fds(cls, root: str, name: str, root_fd: int, fd: int, ident: tuple[int, int]):
        """Descriptors handed to another process (the reaper); None unless ``fd`` is still
        the directory of device and inode ``ident``."""
        st = os.fstat(fd)
        if (st.st_dev, st.st_ino) != tuple(ident) or not stat.S_ISDIR(st.st_mode):
            return None
        return cls(root, name, root_fd, fd)

    def close(self) -> None:
        for fd in (self.fd, self.root_fd):
            try:
                os.close(fd)
            except OSError:
                pass
        self.fd = self.root_fd = -1

    # -- where it is now ---------------------------------------------------------------------

    def _is_ours(self, dir_fd: int, name: str) -> bool:
        try:
            st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except OSError:
            return False
        return stat.S_ISDIR(st.st_mode) and (st.st_dev, st.st_ino) == self.ident

    def moved(self) -> str | None:
        """What happened to the target or the run directory since its creation, in words;
        None while ``root/name`` is still this directory (the path resolved by name)."""
        try:
            st = os.stat(self.path)
            if (st.st_dev, st.st_ino) == self.ident:
                return None
        except OSError:
            pass
        try:
            rst = os.stat(self.root)
            root_same = (rst.st_dev, rst.st_ino) == self.root_ident
        except OSError:
            root_same = False
        if not root_same:
            return f"the target {self.root} was renamed or replaced during the run"
        if os.path.islink(self.path):
            return f"the run directory {self.path} was replaced by a symbolic link during the run"
        return f"the run directory {self.path} was renamed or removed during the run"

    def alive(self) -> bool:
        """Whether the directory still exists somewhere (not removed by someone else)."""
        return not _gone(self.fd)

    def _now_at(self) -> str:
        """The directory's path now (the kernel's name for the descriptor), else its first."""
        try:
            now = os.readlink(f"/proc/self/fd/{self.fd}")
        except OSError:
            return self.path
        return self.path if now.endswith(" (deleted)") else now

    # -- removal -----------------------------------------------------------------------------

    def remove(self) -> tuple[bool, list[str], str]:
        """Empty the directory through its descriptor, then remove it where it is: (gone,
        errors as "<file>: <why>", where it was). Nothing outside it is touched."""
        where = self._now_at()
        errors: list[str] = []
        _empty(self.fd, where, errors)
        parent_fd, name = self.root_fd, self.name
        opened = -1
        if not self._is_ours(parent_fd, name):  # moved: find it by its current name
            parent_fd, name = -1, os.path.basename(where)
            try:
                opened = parent_fd = os.open(os.path.dirname(where) or "/", _DIR)
            except OSError:
                pass
        try:
            if parent_fd < 0 or not self._is_ours(parent_fd, name):
                return _gone(self.fd), errors, where
            try:
                os.rmdir(name, dir_fd=parent_fd)
            except FileNotFoundError:
                pass
            except OSError as e:
                if not errors:
                    errors.append(f"{where}: {e.strerror or e}")
                return False, errors, where
            return True, errors, where
        finally:
            if opened >= 0:
                os.close(opened)


def _gone(fd: int) -> bool:
    """Whether the directory open at ``fd`` has been removed (no links left)."""
    try:
        return os.fstat(fd).st_nlink == 0
    except OSError:
        return True


def _empty(dir_fd: int, where: str, errors: list[str]) -> None:
    """Remove everything inside the directory open at ``dir_fd``: links are unlinked, never
    followed; subdirectories opened O_NOFOLLOW from ``dir_fd`` and emptied the same way."""
    try:
        names = [e.name for e in os.scandir(dir_fd)]
    except OSError as e:
        errors.append(f"{where}: {e.strerror or e}")
        return
    for name in names:
        path = os.path.join(where, name)
        try:
            st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            if stat.S_ISDIR(st.st_mode):
                sub = os.open(name, _NOFOLLOW_DIR, dir_fd=dir_fd)
                try:
                    _empty(sub, path, errors)
                finally:
                    os.close(sub)
                os.rmdir(name, dir_fd=dir_fd)
            else:
                os.unlink(name, dir_fd=dir_fd)
        except FileNotFoundError:  # gone already: what we wanted
            continue
        except OSError as e:
            errors.append(f"{path}: {e.strerror or e}")


def remove_at(dir_fd: int, name: str, where: str) -> list[str]:
    """Remove the directory ``name`` in the directory open at ``dir_fd`` and what it holds,
    never following a link (a link in its place is left); the errors, as in ``_empty``."""
    errors: list[str] = []
    try:
        fd = os.open(name, _NOFOLLOW_DIR, dir_fd=dir_fd)
    except OSError:
        return errors  # missing, or not a directory (a link): nothing of ours to remove
    try:
        _empty(fd, where, errors)
    finally:
        os.close(fd)
    try:
        os.rmdir(name, dir_fd=dir_fd)
    except OSError as e:
        if not isinstance(e, FileNotFoundError):
            errors.append(f"{where}: {e.strerror or e}")
    return errors
