"""Stage 6 — write: publish a rendered package atomically, rewriting only files that change.

All files are first written to a staging directory beside the target; then each changed file
is moved into place with ``os.replace`` (atomic per file), and stale files that opgen wrote
before (listed in the package's ``.opgen-manifest``) are removed.  Unchanged files keep their
bytes and timestamps, so builds stay incremental.  A lock file serialises concurrent runs on
one output directory.
"""

from __future__ import annotations

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
    """Publish ``files`` (relative path -> text) under ``pkg``.

    Every new or changed file is staged in full first; only then are files moved into place,
    so an interrupted (killed) run leaves each file either old or new, never truncated, and a
    reader never sees a partial file.  Files are not fsync'ed one by one (that made writing a
    large package take seconds): generated files can always be generated again.
    """
    result = plan(pkg, files)
    if not result.changed:
        return result
    pkg.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".opgen-staging-", dir=pkg.parent))
    try:
        to_write = {rel: files[rel] for rel in result.written if rel != MANIFEST}
        if MANIFEST in result.written:
            to_write[MANIFEST] = "\n".join(sorted(files)) + "\n"
        made: set[Path] = set()

        def ensure_dir(d: Path) -> None:
            if d not in made:
                d.mkdir(parents=True, exist_ok=True)
                made.add(d)

        for rel, text in to_write.items():
            staged = staging / rel
            ensure_dir(staged.parent)
            staged.write_bytes(text.encode("utf-8"))
        for rel in sorted(to_write):
            target = pkg / rel
            ensure_dir(target.parent)
            os.replace(staging / rel, target)
        for rel in result.removed:
            try:
                (pkg / rel).unlink()
            except FileNotFoundError:
                pass
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return result
