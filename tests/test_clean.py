"""``opgen clean``: removes the build folders of packages that no longer exist and every published
library but the newest of each kind; leaves alone folders a build holds and anything else."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

import pytest

from opgen import build
from opgen.cli import main


def _folder(root: Path, pkg: Path, libs: dict[str, float], ninja: str = "build.ninja") -> Path:
    """A build folder for package ``pkg`` holding published libraries ``name -> mtime``."""
    folder = build.package_build_dir(pkg, root)
    folder.mkdir(parents=True)
    (folder / ninja).write_text(f"cflags = -O3 -I/opt/opgen/include -I{pkg.resolve()}/csrc\n")
    (folder / "aot").mkdir()
    for name, mtime in libs.items():
        for path in (folder / name, folder / f"{name}.sha256"):
            path.write_bytes(b"x" * 1000)
            os.utime(path, (mtime, mtime))
    return folder


def test_clean(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "cache"
    alive = tmp_path / "generated" / "my_ops"
    (alive / "csrc").mkdir(parents=True)
    kept = _folder(root, alive, {"libmy_ops_aot-aaaaaaaaaaaaaaaa.so": 1000, "libmy_ops_aot-bbbbbbbbbbbbbbbb.so": 2000,
                                 "my_ops_ext-cccccccccccccccc.so": 1500})
    gone = _folder(root, tmp_path / "deleted" / "old_ops", {"libold_ops_aot-dddddddddddddddd.so": 1000},
                   ninja="aot.ninja")  # the layout of older opgen versions
    busy = _folder(root, tmp_path / "deleted" / "busy_ops", {})
    (root / "readme-quickstart").mkdir()  # not a package's build folder: untouched
    lock = os.open(busy / "build.lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(lock, fcntl.LOCK_EX)
    try:
        assert main(["clean", "--dry-run", "--build-dir", str(root)]) == 0
        out = capsys.readouterr().out
        assert f"would remove {gone} (package {tmp_path}/deleted/old_ops no longer exists)" in out
        assert f"would remove {kept}/libmy_ops_aot-aaaaaaaaaaaaaaaa.so" in out
        assert f"skipped {busy}: a build is running in it" in out
        assert "would remove 1 build folder(s) and 1 old library" in out
        assert gone.is_dir() and (kept / "libmy_ops_aot-aaaaaaaaaaaaaaaa.so").is_file()

        assert main(["clean", "--build-dir", str(root)]) == 0
        assert "removed 1 build folder(s) and 1 old library" in capsys.readouterr().out
    finally:
        os.close(lock)
    assert not gone.exists() and busy.is_dir() and (root / "readme-quickstart").is_dir()
    assert sorted(p.name for p in kept.glob("*.so*")) == [
        "libmy_ops_aot-bbbbbbbbbbbbbbbb.so", "libmy_ops_aot-bbbbbbbbbbbbbbbb.so.sha256",
        "my_ops_ext-cccccccccccccccc.so", "my_ops_ext-cccccccccccccccc.so.sha256"]
    assert main(["clean", "-q", "--build-dir", str(root)]) == 0  # the lock is free now
    assert not busy.exists() and kept.is_dir()


def test_clean_reads_the_build_dir_of_tool_opgen(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    gone = _folder(tmp_path / "cache", tmp_path / "deleted" / "x_ops", {})
    (tmp_path / "pyproject.toml").write_text("[tool.opgen]\nbuild-dir = 'cache'\n")
    monkeypatch.chdir(tmp_path)
    assert main(["clean"]) == 0
    assert not gone.exists() and f"in {tmp_path / 'cache'}" in capsys.readouterr().out
