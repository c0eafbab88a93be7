"""Every op in ops/, every ``opgen test`` check (see docs/testing.md): one pytest test per op
and check, on the committed package generated/opgen_ops (tests/test_cli.py checks that it is
what ops/ generates).

- ``reference``: numpy reference present; its gradients match central differences.
- ``forward/<path>``: every dtype row, random shapes (plain, broadcasting, 0-d, empty) against
  the numpy reference.
- ``grad/<path>``: ms.grad of sum(out * w) against central differences (float64), and the
  float32 row against the float64 gradients.
- ``dtypes/<path>``: a dtype combination outside the rows raises TypeError naming the op.
- ``contracts/<path>``: shapes that break a contract raise ValueError naming the op (ops with contracts).

Paths: ``custom-graph`` (ops.Custom in GRAPH_MODE), ``custom-pynative``, ``function``
(Function<T>, PyNative; the first such test builds the extension).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from opgen import testing
from opgen.model import Op
from opgen.pipeline import load_ops

ROOT = Path(__file__).resolve().parents[1]
OPS, DIAGNOSTICS = load_ops([ROOT / "ops"])


@pytest.fixture(scope="module")
def package(ms) -> testing.Package:  # type: ignore[no-untyped-def]
    import generated.opgen_ops  # noqa: F401  (the same module objects as the other tests)

    return testing.load_package(ROOT / "generated" / "opgen_ops")


def test_every_spec_loads() -> None:
    assert not DIAGNOSTICS, "\n".join(d.format() for d in DIAGNOSTICS)
    assert len(OPS) >= 18


CASES = [(op, check) for op in OPS for check in testing.CHECKS
         if op.requires or not check.startswith("contracts/")]  # contracts/*: ops with contracts


@pytest.mark.parametrize(("op", "check"), CASES, ids=[f"{o.name}-{c}" for o, c in CASES])
def test_op(package: testing.Package, op: Op, check: str) -> None:
    result = testing.run_check(package, op, check)
    if result.status == "n/a":
        pytest.skip("; ".join(result.messages))
    assert result.status == "pass", f"{op.name} {check}:\n" + "\n".join(result.messages)
    assert result.comparisons > 0
