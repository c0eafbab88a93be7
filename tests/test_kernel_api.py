"""docs/kernel-api.md documents every public name of opgen/include/opgen/*.h, and its examples run.

- The public names are read from the headers themselves (tests/header_names.py): a name added
  to a header fails this test until the page names it (``opgen::foo``, or ``View::member``).
  ``python tests/header_names.py`` lists what is missing.
- Its C++ snippets are compiled (g++, -Wall -Werror) into one program and run: every
  ``assert`` in them holds.
- Its specs (also validated by tests/test_doc_examples.py) pass ``opgen test`` on the Custom path
  (reference, forward and gradient in PyNative); the error example raises its ValueError.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from header_names import PAGE, Name, documented, public_names, undocumented  # type: ignore[import-not-found]

from opgen.resources import include_dir

ROOT = Path(__file__).resolve().parents[1]
TEXT = PAGE.read_text(encoding="utf-8")
CXX = os.environ.get("CXX", "g++")


def test_every_public_header_name_is_documented() -> None:
    missing = undocumented()
    assert not missing, "docs/kernel-api.md does not document these public names of opgen/include/opgen:\n" + "\n".join(
        f"  opgen/include/opgen/{n.header}:{n.line}: {n.qualified}" for n in missing)


def test_the_reference_names_only_what_the_headers_have() -> None:
    # the other direction: a name renamed or removed in a header is not left on the page
    names = {n.qualified for n in public_names()}
    tails = names | {"::".join(n.split("::")[-2:]) for n in names}
    reference = TEXT.split("## Reference", 1)[1]
    stale = sorted({m for m in re.findall(r"\b(?:opgen::(?:\w+::)*\w+|(?:ms|aot|math)::\w+)", reference)
                    if m not in tails and "::".join(m.split("::")[-2:]) not in tails})
    assert not stale, f"docs/kernel-api.md names what no header declares: {stale}"


def test_public_names_come_from_the_headers(tmp_path: Path) -> None:
    names = {n.qualified for n in public_names()}
    for expected in ("opgen::View::numel", "opgen::View::dim", "opgen::map", "opgen::parallel_for", "opgen::Error",
                     "opgen::compute_t", "opgen::math::exp", "opgen::ViewList::shapes", "opgen::aot::kOk",
                     "opgen::half::bits", "OPGEN_VECTORIZE_LOOP"):
        assert expected in names
    assert not any("detail" in n or "f32_to_f16_bits" in n or n.endswith("_H_") for n in names)
    assert not any(n.startswith("std::") for n in names)  # the std::common_type specialisations
    # a name a header gains is found, and is undocumented until the page names it
    header = tmp_path / "new.h"
    header.write_text("#pragma once\nnamespace opgen {\nnamespace detail { inline int hidden() { return 0; } }\n"
                      "/// doc\ntemplate <typename T>\ninline T clamp01(T v) { return v < 0 ? 0 : v > 1 ? 1 : v; }\n"
                      "struct Pair {\n  int first = 0;\n private:\n  int secret_ = 0;\n};\n}  // namespace opgen\n")
    found = public_names([header])
    assert [n.qualified for n in found] == ["opgen::clamp01", "opgen::Pair", "opgen::Pair::first"]
    assert found[0] == Name("opgen::clamp01", "new.h", 5)
    assert not documented("opgen::clamp01", TEXT) and documented("opgen::map", TEXT)
    assert not documented("opgen::map", "a map of the world")  # the bare word is not enough


def _snippets() -> list[str]:
    return re.findall(r"```cpp\n(.*?)\n```", TEXT, re.S)


@pytest.mark.skipif(shutil.which(CXX) is None, reason=f"C++ compiler {CXX} not found")
def test_cpp_snippets_compile_and_run(tmp_path: Path) -> None:
    snippets = _snippets()
    assert len(snippets) >= 5
    src = ["#undef NDEBUG", "#include <cassert>", "#include <cmath>", "#include <limits>", "#include <string>",
           "#include <string_view>", "#include <type_traits>", "#include <vector>", '#include "opgen/kernel.h"',
           '#include "opgen/rules.h"', '#include "opgen/aot.h"', '#include "opgen/sym.h"', ""]
    for k, body in enumerate(snippets):
        src += [f"static void snippet_{k}() {{", body, "}", ""]
    src += ["int main() {", *[f"  snippet_{k}();" for k in range(len(snippets))], "  return 0;", "}", ""]
    (tmp_path / "snippets.cc").write_text("\n".join(src))
    exe = tmp_path / "snippets"
    r = subprocess.run([CXX, "-std=c++17", "-O1", "-Wall", "-Wextra", "-Werror", "-Wno-unused-variable", "-pthread",
                        "-D_GLIBCXX_USE_CXX11_ABI=0", f"-I{include_dir()}", str(tmp_path / "snippets.cc"),
                        "-o", str(exe), "-ldl"], text=True, capture_output=True, timeout=300)
    assert r.returncode == 0, r.stderr[-4000:]
    r = subprocess.run([str(exe)], text=True, capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr


def test_spec_examples_pass_opgen_test(capfd: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("mindspore")
    import numpy as np

    from opgen import testing
    from opgen.build import build_root
    from opgen.cli import main

    specs = re.findall(r"```yaml\n(name: .*?)\n```", TEXT, re.S)
    names = [re.match(r"name: (\w+)", s).group(1) for s in specs]  # type: ignore[union-attr]
    assert {"softsign", "sum_axis", "sincos", "checked_log", "total", "attr_types"} <= set(names)
    # a fixed place in the build cache: a second run finds the aot library built
    ops = build_root() / "kernel-api-doc" / "ops"
    shutil.rmtree(ops, ignore_errors=True)
    ops.mkdir(parents=True)
    for name, text in zip(names, specs):
        (ops / f"{name}.yaml").write_text(text + "\n")
    rc = main(["test", str(ops), "-q", "--only", "reference", "--only", "forward/custom-pynative",
               "--only", "grad/custom-pynative"])
    out = capfd.readouterr()
    assert rc == 0, out.out[-4000:] + out.err[-4000:]
    assert f"{len(names)} op(s), {3 * len(names)} checks: {3 * len(names)} passed" in out.out

    import mindspore as ms

    pkg_dir, _ = testing.package_for([ops])
    custom = testing.load_package(pkg_dir).custom
    with pytest.raises(ValueError, match=r"^checked_log\(\): x must be positive, got -2.000000 at index 1$"):
        custom.checked_log(ms.Tensor(np.array([1.0, -2.0], np.float32))).asnumpy()
