#!/usr/bin/env bash
# Sanitizer mode: build the generated ops with -fsanitize=address,undefined (OPGEN_SANITIZE=1)
# and run the op tests with the ASan runtime preloaded into python; any report fails the run.
#
#   bash scripts/sanitize.sh                      # aot library and Function<T> extension
#   SANITIZE_KINDS=aot bash scripts/sanitize.sh   # the aot library (Custom path) only
#
# Builds go to .opgen-build/sanitize (gitignored), so instrumented objects never mix with normal
# ones. The first run takes several minutes on 2 cores (instrumented -O3 -g compiles of the
# MindSpore headers for the extension), later runs seconds. See docs/robustness.md.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh

export OPGEN_SANITIZE=1
export OPGEN_BUILD_DIR="${OPGEN_BUILD_DIR:-$PWD/.opgen-build/sanitize}"
kinds="${SANITIZE_KINDS:-aot ext}"
log="${OPGEN_BUILD_DIR}/sanitize.log"
mkdir -p "$OPGEN_BUILD_DIR"

# 1. Build first, without the ASan runtime (the compilers are not instrumented).
for kind in $kinds; do
  .venv/bin/python -m opgen build generated/opgen_ops --only "$kind" -q  # this checkout's opgen
done
# shellcheck disable=SC2086
.venv/bin/python tests/misuse_runner.py --prepare .pytest_cache/d/opgen-misuse $kinds

# 2. Run the op tests with the ASan runtime loaded first: MindSpore and python are not
#    instrumented, our kernels, bindings and opgen's headers are. Leaks are not checked (python
#    and MindSpore keep allocations until exit by design). Any ASan or UBSan report aborts the
#    process it happens in; -s keeps reports of the pytest process itself on the terminal.
tests=(tests/test_custom_path.py tests/test_misuse.py tests/test_sanitize.py)
if [[ " $kinds " == *" ext "* ]]; then
  tests+=(tests/test_function_path.py)
else
  export OPGEN_MISUSE_PATHS=custom
fi
# libstdc++ too: python does not link it, and ASan resolves the real __cxa_throw when it starts;
# without it the first C++ exception (MindSpore's, pybind11's) dies in a failed ASan CHECK.
asan="$(${CXX:-g++} -print-file-name=libasan.so) $(${CXX:-g++} -print-file-name=libstdc++.so)"
set +e
LD_PRELOAD="$asan" \
ASAN_OPTIONS="detect_leaks=0" \
UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:suppressions=$PWD/scripts/ubsan.supp" \
  .venv/bin/python -m pytest -q -s "${tests[@]}" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
set -e

# test_sanitize.py plants two bugs on purpose; its reports stay in its subprocesses' captured
# output, so every report in this log came from the op tests.
findings=$(grep -c -E "ERROR: AddressSanitizer|runtime error:" "$log" || true)
echo "sanitize: kinds=[$kinds] pytest exit=$status findings=$findings (log: $log)"
[ "$findings" = 0 ] || exit 1
exit "$status"
