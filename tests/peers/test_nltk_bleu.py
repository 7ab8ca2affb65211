"""NLTK's BLEU tests (``nltk/test/unit/translate/test_bleu.py``: ``TestBLEU``,
``TestBLEUFringeCases``), their sentences and expected values, through
:func:`medibench.metrics.text.bleu` (one reference, whitespace tokens, uniform weights over
1..``max_order``-grams, smoothing method1 always: MedGEN-Bench's setting).

Where NLTK's test scores *unsmoothed* BLEU of a sentence with a missing n-gram order (0.0),
medibench's method1 smoothing gives a small positive value: a deliberate difference, marked.
NLTK's multi-reference cases are restated with the one reference that carries the matches."""

from __future__ import annotations

import pytest

from medibench.metrics.text import bleu

SMOOTHED = pytest.mark.xfail(
    strict=True,
    reason="medibench's bleu always applies smoothing method1 (MedGEN-Bench's eval.py setting); "
    "NLTK's test expects the unsmoothed 0 when an n-gram order has no match",
)


def test_zero_matches():
    hyp = "John loves Mary"
    for n in range(1, 3):
        assert (
            bleu(hyp, "The candidate has no alignment to any of the references", max_order=n) == 0
        )


def test_full_matches():
    for n in range(1, 3):
        assert bleu("John loves Mary", "John loves Mary", max_order=n) == 1.0


def test_modified_unigram_precision_the_star_example():
    # "the the the the the the the" against "the cat is on the mat": clipped 2 of 7 (= 0.2857);
    # the hypothesis is longer than the reference, so BLEU-1 is that precision
    assert bleu("the the the the the the the", "the cat is on the mat", max_order=1) == (
        pytest.approx(0.28571428, abs=1e-4)
    )


def test_empty_hypothesis_references_and_both():
    ref = "The candidate has no alignment to any of the references"
    assert bleu("", ref) == 0
    assert bleu("John loves Mary", "") == 0
    assert bleu("", "") == 0


@SMOOTHED
def test_partial_matches_hypothesis_longer_than_reference():
    assert bleu("John loves Mary who loves Mike", "John loves Mary") == pytest.approx(0.0, abs=1e-4)


@SMOOTHED
def test_case_where_n_is_bigger_than_hypothesis_length():
    assert bleu("John loves Mary", "John loves Mary ?") == pytest.approx(0.0, abs=1e-4)


@SMOOTHED
def test_reference_or_hypothesis_shorter_than_fourgrams():
    assert bleu("let go it", "let it go") == pytest.approx(0.0, abs=1e-4)
