"""Docs that are generated: the spec reference (from the schema) and the op reference (from ops/)."""

from __future__ import annotations

from pathlib import Path

from opgen import opdoc, signatures, specdoc
from opgen.cli import main
from opgen.pipeline import load_ops

ROOT = Path(__file__).resolve().parents[1]


def test_every_schema_key_is_described() -> None:
    keys = specdoc.keys()
    assert len(keys) > 30
    assert [k.path for k in keys if not k.node.get("description")] == []


def test_spec_reference_is_up_to_date() -> None:
    committed = (ROOT / specdoc.SPEC_REFERENCE).read_text(encoding="utf-8")
    assert committed == specdoc.render(), "docs/spec-reference.md drifted from the schema; " \
        "run 'opgen docs --spec-reference'"


def test_spec_reference_lists_every_key_with_type_and_default() -> None:
    text = specdoc.render()
    for k in specdoc.keys():
        assert f"### `{k.path}`" in text
    assert "| [`inputs[].kind`](#inputskind) | one of `\"required\"`, `\"optional\"`, `\"dynamic\"` |  | " \
           "`\"required\"` |" in text


def test_op_reference_is_up_to_date(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.chdir(ROOT)
    assert main(["docs", "--check", "-q"]) == 0, "docs/ops/opgen_ops.md is stale; run 'opgen docs'"


def test_op_reference_content(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.chdir(ROOT)
    ops, diags = load_ops(["ops/layer_norm.yaml", "ops/concat.yaml", "ops/reduce_sum.yaml"])
    assert not diags
    page = opdoc.render_package(ops, "my_ops")
    assert "my_ops.layer_norm(x: Tensor, gamma: Optional[Tensor] = None, beta: Optional[Tensor] = None, " \
           "eps: float = 1e-05) -> Tuple[Tensor, Tensor, Tensor]" in page
    assert "concat(xs: Sequence[Tensor], axis: int = 0) -> Tensor" in page
    assert "| `mean` | the shape of `x` reduced over axis -1, reduced axes kept as size-1 dims" in page
    assert "| float64 | float64 | float64 | float64 | float64 | float64 |" in page  # type_vars expanded
    assert "| `gamma` | optional | yes |" in page
    assert "```yaml\n# yaml-language-server" in page  # the source YAML


def test_docs_check_reports_a_stale_page(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.chdir(ROOT)
    out = tmp_path / "ref.md"
    assert main(["docs", "--spec-reference", "-o", str(out), "--check", "-q"]) == 1
    assert main(["docs", "--spec-reference", "-o", str(out), "-q"]) == 0
    assert main(["docs", "--spec-reference", "-o", str(out), "--check", "-q"]) == 0


def test_shape_rules_in_words() -> None:
    from opgen import shapes as lang
    from opgen.diagnostics import Location
    from opgen.model import ShapeExpr

    scope = lang.Scope({"x": "required", "y": "required"}, {"reduction": "str"})

    def words(text: str | list[object]) -> str:
        return signatures.shape_in_words(ShapeExpr(str(text), lang.parse_shape(text, scope), Location("t")))

    assert words("broadcast(x, y)") == "the NumPy broadcast of the shape of `x`, the shape of `y`"
    assert words(["x.shape[0]", 3]) == "[`x.shape[0]`, `3`]"
    assert words("x") == "the shape of `x`"
    assert words("[] if reduction != 'none' else x.shape") == \
        "a scalar (0-d) if `reduction != 'none'`, else the shape of `x`"


def test_generated_docstrings_list_one_output_per_line() -> None:
    """A multi-output op's ``Returns:`` has each output on its own line (layer_norm: y, mean, rstd),
    and the torch package's docstring names the autograd Node it records (no autograd::Function)."""
    import re

    for path in ("generated/opgen_ops_torch/__init__.py", "generated/opgen_ops/custom.py",
                 "generated/opgen_ops/function.py"):
        text = (ROOT / path).read_text()
        section = text.split("def layer_norm(", 1)[1].split("Returns:\n", 1)[1].split("\n\n", 1)[0]
        assert [ln.split(" (", 1)[0].strip() for ln in section.splitlines()] == ["y", "mean", "rstd"], path
        assert not re.search(r"\. {4,}\w+ \(Tensor\)", text), path  # two outputs run together on one line
    torch_doc = (ROOT / "generated/opgen_ops_torch/__init__.py").read_text().split('"""', 2)[1]
    assert "torch::autograd::Node" in torch_doc and "autograd::Function" not in torch_doc


def test_spec_reference_gives_each_dtype_in_both_vocabularies() -> None:
    page = (ROOT / "docs/spec-reference.md").read_text()
    assert "| `float32` | `F32_Default` | `torch.float32` | `float` |" in page
    assert "| `bfloat16` | `BF16_Default` | `torch.bfloat16` |" in page
    assert "## Which keys matter to which framework" in page and "| `targets` | not read" in page
