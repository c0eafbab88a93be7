"""``opgen clean``: removes the build folders of packages that no longer exist and every published
library but the newest of each kind; leaves alone folders a build holds and anything else."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from pathlib import Path

import pytest

from opgen import backends, build
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


TWICE = """\
name: twice
doc: x times a constant.
inputs: [{name: x, doc: x}]
outputs: [{name: out, doc: o, shape: x, dtype: x}]
dtype_format: {CPU: [[F32_Default, F32_Default]]}
elementwise: {forward: x * 2, grad: {x: dout * 2}}
"""

CHILD = """\
import sys
import mindspore as ms
import numpy as np
import live_ops

print(live_ops.twice(ms.Tensor(np.ones(2, np.float32))).asnumpy().tolist(), flush=True)
sys.stdin.readline()  # the library is edited, rebuilt and cleaned meanwhile
print(live_ops.twice(ms.Tensor(np.ones((3, 4), np.float32))).asnumpy().sum(), flush=True)  # a new shape
"""


def test_clean_and_publish_keep_libraries_a_live_process_loaded(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 25 item 5: a process calls an op; the spec is edited and rebuilt; ``opgen clean``
    runs; the process calls the op with a new shape, which makes MindSpore reopen the library by
    its path: it is still there. It went with the clean before (``couldn't find the AOT binary
    file``); the removal of libraries over an hour old on each publish keeps it too."""
    from opgen.pipeline import generate

    root = tmp_path / "cache"
    spec = tmp_path / "ops" / "twice.yaml"
    spec.parent.mkdir()

    def rebuild(factor: int) -> Path:
        spec.write_text(TWICE.replace("x * 2", f"x * {factor}").replace("dout * 2", f"dout * {factor}"))
        assert not generate([spec.parent], tmp_path / "gen", "live_ops").diagnostics
        return backends.build(tmp_path / "gen" / "live_ops", "aot", quiet=True, build_dir=root)

    first = rebuild(2)
    paths = [str(tmp_path / "gen"), str(Path(__file__).resolve().parents[1])]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(paths), OPGEN_BUILD_DIR=str(root), OPGEN_QUIET="1", GLOG_v="3")
    child = subprocess.Popen([sys.executable, "-c", CHILD], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdin is not None
        assert child.stdout.readline().strip() == "[2.0, 2.0]"
        second = rebuild(3)
        assert second != first
        assert main(["clean", "--build-dir", str(root)]) == 0
        assert f"kept {first}: a running process has loaded it" in capsys.readouterr().out
        for lib in (first, second):  # both over an hour old when a third is published
            os.utime(lib, (lib.stat().st_atime, lib.stat().st_mtime - 7200))
        third = rebuild(4)
        assert first.is_file() and build.is_published(first)  # held: kept
        assert not second.exists() and third.is_file()  # not held: removed on publish
        child.stdin.write("go\n")
        child.stdin.flush()
        out, err = child.communicate(timeout=120)
        assert child.returncode == 0, err
        assert out.strip() == "24.0"  # the first library's x * 2 on 12 elements
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert main(["clean", "-q", "--build-dir", str(root)]) == 0  # the process is gone: now it goes
    assert not first.exists() and third.is_file()
