"""docs/models.md's editing conformance block is the rendering of the cells the tests run."""

from __future__ import annotations

from tests.conformance._editing_cells import CELLS, DOC, FAMILY_PIPELINES, doc_block, render


def test_the_editing_matrix_in_the_docs_is_generated_from_the_tested_cells():
    block = doc_block(DOC.read_text(encoding="utf-8"))
    assert block is not None, f"{DOC} has no <!-- conformance:editing --> block"
    assert block == render(), (
        "docs/models.md's editing matrix is stale: run `python -m tests.conformance._editing_cells`"
    )


def test_every_cell_names_a_known_family_and_path_once():
    keys = [(c.family, c.path) for c in CELLS]
    assert len(keys) == len(set(keys))
    assert {c.family for c in CELLS} == set(FAMILY_PIPELINES)
    assert {c.path for c in CELLS} == {"run", "build", "attention"}
    assert all(c.error for c in CELLS if not c.supported)


def test_a_stale_block_is_told_apart_from_the_rendering(tmp_path):
    from tests.conformance._editing_cells import write_doc

    doc = tmp_path / "models.md"
    doc.write_text("# Models\n\n<!-- conformance:editing -->\nold\n<!-- /conformance:editing -->\n")
    assert doc_block(doc.read_text()) != render()
    assert write_doc(doc) is True and doc_block(doc.read_text()) == render()
    assert write_doc(doc) is False
