"""Stage 6 — write: publish a rendered package atomically, rewriting only files that change.

The new package is assembled in a staging directory beside the target (changed files written,
everything else hard-linked from the current package) and swapped in with one atomic directory
exchange, so readers and killed runs only ever see the old or the new package whole.  Stale
files that opgen wrote before (listed in the package's ``.opgen-manifest``) are left out.
Unchanged files keep their bytes, inodes and timestamps, so builds stay incremental.  A lock
file serialises concurrent runs on one output directory.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import os
import shutil
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

MANIFEST = ".opgen-manifest"


@dataclass
class WriteResult:
    """What a write did (or, with ``dry_run``/``check``, would do)."""

    written: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.written or self.removed)


@contextmanager
def locked(directory: Path, timeout: float = 120.0) -> Iterator[None]:
    """Hold an exclusive lock on ``directory`` (a ``.opgen.lock`` file beside it).

    The lock is an ``flock``: the kernel releases it when its holder dies, so a killed run
    never leaves a stale lock behind.

    Raises:
        TimeoutError: when another process holds it for longer than ``timeout`` seconds.
    """
    directory.parent.mkdir(parents=True, exist_ok=True)
    lock_path = directory.parent / f".{directory.name}.opgen.lock"
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{lock_path} is held by another opgen process") from None
                time.sleep(0.05)
        yield
    finally:
        os.close(fd)


def _read_manifest(pkg: Path) -> list[str]:
    try:
        return [ln for ln in (pkg / MANIFEST).read_text(encoding="utf-8").splitlines() if ln]
    except OSError:
        return []


def plan(pkg: Path, files: Mapping[str, str]) -> WriteResult:
    """Compare ``files`` with what is on disk under ``pkg``; touches nothing."""
    result = WriteResult()
    for rel in sorted(files):
        target = pkg / rel
        data = files[rel].encode("utf-8")
        try:
            same = target.read_bytes() == data
        except OSError:
            same = False
        (result.unchanged if same else result.written).append(rel)
    manifest_now = "\n".join(sorted(files)) + "\n"
    for rel in _read_manifest(pkg):
        if rel not in files and (pkg / rel).exists():
            result.removed.append(rel)
    try:
        if (pkg / MANIFEST).read_text(encoding="utf-8") != manifest_now:
            result.written.append(MANIFEST)
    except OSError:
        result.written.append(MANIFEST)
    return result


def write_package(pkg: Path, files: Mapping[str, str]) -> WriteResult:
    """Publish ``files`` (relative path -> text) under ``pkg``, all at once.

    The new package is assembled beside ``pkg`` in a staging directory: changed files are
    written there (not fsync'ed one by one: that made writing a large package take seconds,
    and generated files can always be generated again), every other file of the current package (unchanged outputs,
    ``__pycache__``, anything that is not opgen's) is hard-linked in, so it keeps its bytes,
    inode and timestamps.  Then one ``renameat2(RENAME_EXCHANGE)`` swaps the two directories:
    a reader, or a run killed at any instant, sees either the whole old package or the whole
    new one, never a mix.  Leftovers of a killed run are removed by the next one.

    Call it under :func:`locked` (``opgen.pipeline.generate`` does).
    """
    remove_leftovers(pkg)
    result = plan(pkg, files)
    if not result.changed:
        return result
    pkg.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=_staging_prefix(pkg), dir=pkg.parent))
    try:
        to_write = {rel: files[rel] for rel in result.written if rel != MANIFEST}
        if MANIFEST in result.written or not pkg.is_dir():
            to_write[MANIFEST] = "\n".join(sorted(files)) + "\n"
        if pkg.is_dir():
            _link_tree(pkg, staging, skip=set(to_write) | set(result.removed))
            shutil.copymode(pkg, staging)
        else:
            os.chmod(staging, 0o777 & ~_umask())
        for rel in sorted(to_write):
            staged = staging / rel
            staged.parent.mkdir(parents=True, exist_ok=True)
            staged.write_bytes(to_write[rel].encode("utf-8"))
        if pkg.is_dir():
            _exchange(staging, pkg)  # staging now holds the old package
        else:
            os.rename(staging, pkg)
        _fsync_dir(pkg.parent)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return result


def _staging_prefix(pkg: Path) -> str:
    return f".{pkg.name}.opgen-staging-"


def remove_leftovers(pkg: Path) -> list[Path]:
    """Remove staging directories that killed runs left beside ``pkg``; call under :func:`locked`.

    When the fallback two-step swap was interrupted between its renames (``pkg`` missing), the
    old package is first put back.
    """
    removed = []
    prefix = _staging_prefix(pkg)
    backup = pkg.parent / f".{pkg.name}.opgen-previous"
    if backup.is_dir():
        if not pkg.exists():
            os.rename(backup, pkg)
        else:
            shutil.rmtree(backup, ignore_errors=True)
            removed.append(backup)
    try:
        entries = sorted(pkg.parent.iterdir())
    except OSError:
        return removed
    for entry in entries:
        if entry.name.startswith(prefix) and entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
            removed.append(entry)
    return removed


def _link_tree(src: Path, dst: Path, skip: set[str]) -> None:
    """Recreate ``src`` under ``dst`` with hard links (copies where links are refused), minus ``skip``."""
    for root, dirs, names in os.walk(src):
        rel_root = Path(root).relative_to(src)
        for d in list(dirs):
            s, t = Path(root) / d, dst / rel_root / d
            if s.is_symlink():  # os.walk does not descend into it: keep the link itself
                os.symlink(os.readlink(s), t)
                dirs.remove(d)
                continue
            t.mkdir(exist_ok=True)
            shutil.copymode(s, t)
        for name in names:
            rel = (rel_root / name).as_posix()
            if rel in skip:
                continue
            s, t = Path(root) / name, dst / rel_root / name
            if s.is_symlink():
                os.symlink(os.readlink(s), t)
                continue
            try:
                os.link(s, t)
            except OSError:
                shutil.copy2(s, t)


_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def _exchange(a: Path, b: Path) -> None:
    """Atomically swap two directories (Linux ``renameat2(RENAME_EXCHANGE)``).

    Where the kernel, libc or file system cannot, falls back to two renames with the old
    package parked at ``.<pkg>.opgen-previous`` (put back by :func:`remove_leftovers` if a run
    dies between them).
    """
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        renameat2 = None
    if renameat2 is not None:
        rc = renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE)
        if rc == 0:
            return
        err = ctypes.get_errno()
        if err not in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP):
            raise OSError(err, f"cannot swap {a} and {b}: {os.strerror(err)}")
    backup = b.parent / f".{b.name}.opgen-previous"
    os.rename(b, backup)
    os.rename(a, b)
    os.rename(backup, a)


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
