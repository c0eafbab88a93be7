"""``opgen clean``: free the build cache (``$OPGEN_BUILD_DIR``, default ``~/.cache/opgen``).

Two things go:

- the build folder of a generated package that no longer exists (the folder is keyed by the
  package's absolute path; its ninja files name the package's ``csrc/``);
- in the build folder of a package that exists, every published library but the newest of each
  kind (``lib<pkg>_aot-<hash>.so``, ``<pkg>_ext-<hash>.so``) with its ``.sha256`` record: each
  edit of the specs publishes a new one.

A process that loaded an older library may still open it again (MindSpore reopens an aot library
by its path for each new shape or dtype), so every process holds a shared lock on the libraries it
loaded (:func:`opgen.build.hold_library`), and a library whose lock is held is kept
(:func:`opgen.build.remove_unused_library`), as is the folder of a vanished package while one of
its libraries is held.  A folder whose build lock another process holds (a build is running) is
left alone.  Nothing else under the build root is touched.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from . import build

_CSRC = re.compile(r"-I(\S+)/csrc(?:\s|$)")


@dataclass
class Cleaned:
    """What :func:`clean` removed (or would remove, with ``dry_run``) and the bytes freed."""

    folders: list[tuple[Path, str]] = field(default_factory=list)
    """(build folder, the package it was for)."""
    libraries: list[Path] = field(default_factory=list)
    busy: list[Path] = field(default_factory=list)
    """Folders skipped because a build holds their lock."""
    in_use: list[Path] = field(default_factory=list)
    """Libraries kept because a running process holds them (and so their folder)."""
    freed: int = 0


def package_of(folder: Path) -> str | None:
    """The generated package a build folder was made for, from its ninja files; None if not a build folder."""
    for name in ("build.ninja", "aot.ninja", "ext.ninja"):
        try:
            text = (folder / name).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        m = _CSRC.search(text)
        if m:
            return m.group(1)
    return None


def _size(path: Path) -> int:
    if path.is_symlink() or path.is_file():
        return path.lstat().st_size
    total = 0
    for root, _dirs, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(root, f)).st_size
            except OSError:
                pass
    return total


def _locked(folder: Path) -> bool:
    """Whether another process holds ``folder``'s build lock."""
    lock = folder / "build.lock"
    if not lock.exists():
        return False
    try:
        fd = os.open(lock, os.O_RDWR)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


def _old_libraries(folder: Path) -> list[Path]:
    """Published libraries of ``folder`` but the newest of each kind."""
    old: list[Path] = []
    groups: dict[str, list[Path]] = {}
    for lib in folder.glob("*-*.so"):
        m = re.fullmatch(r"(.+)-[0-9a-f]{16}\.so", lib.name)
        if m and lib.is_file():
            groups.setdefault(m.group(1), []).append(lib)
    for libs in groups.values():
        libs.sort(key=lambda p: (p.stat().st_mtime, p.name))
        old.extend(libs[:-1])
    return sorted(old)


def clean(root: Path | None = None, *, dry_run: bool = False) -> Cleaned:
    """Remove the build folders of vanished packages and old published libraries under ``root``."""
    root = root or build.build_root()
    done = Cleaned()
    if not root.is_dir():
        return done
    for folder in sorted(p for p in root.iterdir() if p.is_dir() and not p.is_symlink()):
        pkg = package_of(folder)
        if pkg is None:
            continue  # not a package's build folder (readme-quickstart, test/...): not ours to judge
        exists = (Path(pkg) / "csrc").is_dir() and build.package_build_dir(Path(pkg), root) == folder
        if _locked(folder):
            done.busy.append(folder)
            continue
        if not exists:
            held = [lib for lib in sorted(folder.glob("*.so")) if build.library_in_use(lib)]
            if held:
                done.in_use.extend(held)
                continue
            done.freed += _size(folder)
            done.folders.append((folder, pkg))
            if not dry_run:
                shutil.rmtree(folder, ignore_errors=True)
            continue
        for lib in _old_libraries(folder):
            record = lib.with_name(lib.name + ".sha256")
            size = _size(lib) + (_size(record) if record.exists() else 0)
            if build.library_in_use(lib) if dry_run else not build.remove_unused_library(lib):
                done.in_use.append(lib)
                continue
            done.freed += size
            done.libraries.append(lib)
    return done


def human(n: int) -> str:
    """``n`` bytes as ``12.3 MB``."""
    size = float(n)
    for unit in ("B", "kB", "MB", "GB"):
        if size < 1000 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    return f"{n} B"  # pragma: no cover
