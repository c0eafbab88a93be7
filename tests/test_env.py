"""``OPGEN_*`` environment variables (issue 25 item 10): a value that does not parse is an error
naming the variable, from the command line and from the library; one parser reads them all."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from opgen import build, env, runtime

ROOT = Path(__file__).resolve().parents[1]

BAD = {"OPGEN_CHECK": "2", "OPGEN_JOBS": "abc", "OPGEN_LOCK_TIMEOUT": "abc", "OPGEN_OPS_PER_UNIT": "x",
       "OPGEN_NUM_THREADS": "0", "OPGEN_ISA": "avx9", "OPGEN_QUIET": "maybe"}


def test_cli_names_every_bad_variable(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "opgen", "build", "generated/opgen_ops", "--build-dir",
                           str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, PYTHONPATH=str(ROOT), **BAD))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == len(BAD), proc.stderr
    for name, value in BAD.items():
        assert any(ln.startswith(f"opgen: error: {name}={value!r} is not ") for ln in lines), (name, lines)
    assert ("opgen: error: OPGEN_CHECK='2' is not 1 or 0 (also true/false, yes/no, on/off) (OPGEN_CHECK: build "
            "and load the checked mode (bounds-checked views)); fix it or unset it") in lines
    assert "OPGEN_ISA='avx9' is not one of baseline, avx2, avx512" in proc.stderr
    assert not list(tmp_path.iterdir())  # nothing built


@pytest.mark.parametrize("name, value, read", [
    ("OPGEN_JOBS", "abc", build.default_jobs),
    ("OPGEN_JOBS", "0", build.default_jobs),
    ("OPGEN_OPS_PER_UNIT", "x", build.env_ops_per_unit),
    ("OPGEN_LOCK_TIMEOUT", "abc", build._lock_timeout),
    ("OPGEN_LOCK_TIMEOUT", "-1", build._lock_timeout),
    ("OPGEN_LOCK_TIMEOUT", "nan", build._lock_timeout),
    ("OPGEN_CHECK", "2", runtime.checked),
    ("OPGEN_SANITIZE", "y", build.sanitize_flags),
    ("OPGEN_NUM_THREADS", "many", env.check_kernel_variables),
])
def test_library_readers_raise_naming_the_variable(name: str, value: str, read: object,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(env.EnvError, match=f"^{name}={value!r} is not "):
        read()  # type: ignore[operator]


def test_good_values_parse(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in {"OPGEN_JOBS": " 3 ", "OPGEN_CHECK": "off", "OPGEN_LOCK_TIMEOUT": "0.5",
                        "OPGEN_SANITIZE": "", "OPGEN_ISA": "avx2", "OPGEN_PCH": "Yes"}.items():
        monkeypatch.setenv(name, value)
    assert env.check_all() == []
    assert build.default_jobs() == 3 and build._lock_timeout() == 0.5
    assert not runtime.checked() and build.sanitize_flags() == () and env.flag("OPGEN_PCH")
    assert env.choice("OPGEN_ISA") == "avx2"


def test_every_variable_is_read_through_env() -> None:
    """No module of opgen/ but env.py reads an OPGEN_* variable; the kernels' own (getenv in
    opgen/include) are listed as kernel variables; every listed variable is read somewhere."""
    opgen_dir = ROOT / "opgen"
    direct = re.compile(r"""(?:environ\.get\(|getenv\()\s*["'](OPGEN_\w+)|environ\[\s*["'](OPGEN_\w+)["']\](?!\s*=)""")
    read_by_name = re.compile(r"""_?env\.(?:flag|count|seconds|path|command|choice)\(\s*["'](OPGEN_\w+)""")
    used: set[str] = set()
    for path in opgen_dir.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        if path.name != "env.py":
            assert not direct.findall(text), (path, direct.findall(text))  # writes (opgen test's) are fine
        used |= set(read_by_name.findall(text))
        used |= {n for n in re.findall(r"env_flag\(\"(OPGEN_\w+)", text)}
    kernel = set()
    for path in (opgen_dir / "include").rglob("*.h"):
        kernel |= set(re.findall(r"getenv\(\"(OPGEN_\w+)\"\)", path.read_text(encoding="utf-8")))
    assert kernel == {v.name for v in env.VARIABLES.values() if v.kernel}
    assert used | kernel == set(env.VARIABLES)
