"""The text tier: BLEU against NLTK, EM/F1, option normalisation, clinical entities, pass
rates by hand, BERTScore against bert_score on a tiny random BERT, RadGraph's skip rules."""

from __future__ import annotations

import math
import random

import pytest

from medibench.metrics.text import (
    CLINICAL_ENTITIES,
    CLINICAL_ENTITIES_VERSION,
    BERTScore,
    RadGraphF1,
    bleu,
    choice_of,
    clinical_entities,
    closed_form_answer,
    entity_metrics,
    passes,
    report_text,
    task_accuracy,
    token_em_f1,
)

nltk_bleu = pytest.importorskip("nltk.translate.bleu_score")

_WORDS = "the a lung left right pleural effusion is no mass seen normal heart size of".split()


def _nltk(candidate: str, reference: str) -> float:
    smooth = nltk_bleu.SmoothingFunction().method1
    return float(
        nltk_bleu.sentence_bleu([reference.split()], candidate.split(), smoothing_function=smooth)
    )


@pytest.mark.parametrize(
    "cand, ref",
    [
        ("the cat sat on the mat", "the cat sat on a mat"),
        ("no pleural effusion", "no pleural effusion or pneumothorax is seen"),
        ("mass", "mass"),  # shorter than every n-gram order above 1
        ("completely different words here", "the heart is normal"),
        ("", "the heart is normal"),
        ("the heart is normal in size", ""),
        ("a a a a a", "a a"),  # clipping
    ],
)
def test_bleu_equals_nltk_method1(cand, ref):
    assert bleu(cand, ref) == pytest.approx(_nltk(cand, ref), abs=1e-12)


def test_bleu_equals_nltk_on_random_sentences():
    rng = random.Random(7)
    for _ in range(200):
        cand = " ".join(rng.choices(_WORDS, k=rng.randint(0, 12)))
        ref = " ".join(rng.choices(_WORDS, k=rng.randint(1, 12)))
        assert bleu(cand, ref) == pytest.approx(_nltk(cand, ref), abs=1e-12), (cand, ref)


def test_bleu_by_hand():
    # c = r = 3: p1 = 3/3, p2 = 1/2, p3 = 0 -> 0.1/1, p4 = 0 -> 0.1/1 (no 4-gram: denominator 1)
    expected = math.exp((math.log(1) + math.log(0.5) + math.log(0.1) + math.log(0.1)) / 4)
    assert bleu("a b d", "a b c d") == pytest.approx(expected * math.exp(1 - 4 / 3))
    assert bleu("x y", "a b") == 0.0
    with pytest.raises(ValueError, match="max_order"):
        bleu("a", "a", max_order=0)


def test_token_em_f1_code_and_squad():
    assert token_em_f1("Left  Lung", "left lung") == (1.0, 1.0)
    # tokens: [the, mass, is, large] vs [a, large, mass]: overlap 2, P 2/4, R 2/3
    em, f1 = token_em_f1("The mass is large", "a large mass")
    assert em == 0.0 and f1 == pytest.approx(2 * 0.5 * (2 / 3) / (0.5 + 2 / 3))
    # SQuAD drops the articles and punctuation: [mass, is, large] vs [large, mass]
    em, f1 = token_em_f1("The mass is large.", "a large mass", normalization="squad")
    assert f1 == pytest.approx(2 * (2 / 3) * 1 / (2 / 3 + 1))
    assert token_em_f1("The mass.", "mass", normalization="squad") == (1.0, 1.0)
    assert token_em_f1("", "") == (1.0, 1.0)
    assert token_em_f1("...", "mass") == (0.0, 0.0)
    with pytest.raises(ValueError, match="normalization"):
        token_em_f1("a", "a", normalization="bleu")  # type: ignore[arg-type]


def test_option_normalisation():
    choices = ["A. Normal chest", "B) Pneumonia", "C: Effusion"]
    for said in ("B", " b ", "b.", "B) pneumonia", "pneumonia", "B. PNEUMONIA"):
        assert closed_form_answer(said, choices) == "b. pneumonia", said
    assert task_accuracy("multiple-choice", "b", "B) Pneumonia", choices) == 1.0
    assert task_accuracy("multiple-choice", "C", "B) Pneumonia", choices) == 0.0
    assert task_accuracy("blank-filling", " Left  LUNG", "left lung") == 1.0
    assert task_accuracy("report-generation", "x", "y") is None
    assert choice_of("D", choices) is None and choice_of("c", choices) == "c. effusion"


def test_report_sections_are_serialised_in_the_code_order():
    answer = {"impression": "No acute disease.", "Findings": "Lungs  clear.", "ZEBRA": ["a", "b"]}
    assert report_text(answer) == (
        "Findings: Lungs clear.\nimpression: No acute disease.\nZEBRA: a; b"
    )
    assert report_text({"FINDINGS": {"LUNGS": "clear", "HEART": "normal"}}) == (
        "FINDINGS:\n  HEART: normal\n  LUNGS: clear"
    )
    assert report_text("  two   spaces ") == "two spaces"


def test_clinical_entities_list_and_metrics_by_hand():
    assert len(CLINICAL_ENTITIES) == 28 and "3450b8ef" in CLINICAL_ENTITIES_VERSION
    assert clinical_entities("Small left pleural effusion; CT shows a renal cyst") == {
        "pleura",
        "pleural effusion",
        "ct",
        "kidney",
        "cyst",
    }
    assert clinical_entities("massive") == set()  # not inside a longer word
    # response {lungs, mass, heart}; reference {lungs, nodule}: overlap 1
    m = entity_metrics("lung mass and cardiac", "pulmonary nodule")
    assert (m.precision, m.recall) == pytest.approx((1 / 3, 1 / 2))
    assert m.f1 == pytest.approx(2 * (1 / 3) * 0.5 / (1 / 3 + 0.5))
    assert m.hallucination_rate == pytest.approx(2 / 3) and m.omission_rate == 0.5
    assert m.hallucinated == ("heart", "mass") and m.omitted == ("nodule",)
    none = entity_metrics("looks fine", "all fine")
    assert (none.precision, none.f1, none.hallucination_rate, none.factual_precision) == (
        1.0,
        1.0,
        0.0,
        1.0,
    )
    one = entity_metrics("looks fine", "a lung nodule")
    assert (one.precision, one.recall, one.omission_rate, one.hallucination_rate) == (
        0.0,
        0.0,
        1.0,
        0.0,
    )


def test_pass_thresholds_are_the_codes():
    assert passes("bleu", 0.09) == 1.0 and passes("bleu", 0.0899) == 0.0
    assert passes("entity_hallucination_rate", 0.1) == 1.0
    assert passes("entity_hallucination_rate", 0.11) == 0.0
    assert passes("bertscore", 0.9) == 1.0
    with pytest.raises(KeyError, match="known"):
        passes("rouge", 0.5)


# -- model plug-ins ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory):
    transformers = pytest.importorskip("transformers")
    import torch

    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp("tiny-bert")
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *sorted(set(_WORDS)), "cat", "mat"]
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n")
    config = transformers.BertConfig(
        vocab_size=len(vocab),
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=64,
    )
    transformers.BertModel(config).save_pretrained(folder)
    tokenizer = transformers.BertTokenizer(str(folder / "vocab.txt"), model_max_length=64)
    tokenizer.save_pretrained(folder)
    return folder


def test_bertscore_equals_bert_score_package(tiny_bert):
    bert_score = pytest.importorskip("bert_score")
    cands = ["the heart is normal", "left pleural effusion", "no mass seen in the lung"]
    refs = ["normal heart size", "right pleural effusion is seen", "no mass"]
    for layers in (1, 2):
        ours = BERTScore(tiny_bert, num_layers=layers)
        p, r, f = bert_score.score(
            cands,
            refs,
            model_type=str(tiny_bert),
            num_layers=layers,
            idf=False,
            rescale_with_baseline=False,
            batch_size=1,
            device="cpu",
        )
        for i, (c, ref) in enumerate(zip(cands, refs, strict=True)):
            got = ours.score(c, ref)
            assert got == pytest.approx((float(p[i]), float(r[i]), float(f[i])), abs=1e-5)
    assert BERTScore(tiny_bert, num_layers=2)("", "the heart") == 0.0


def test_bertscore_missing_model_names_the_file(tmp_path):
    with pytest.raises(FileNotFoundError, match=str(tmp_path / "nope")):
        BERTScore(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="config.json"):
        BERTScore(tmp_path / "empty")


def test_bertscore_layer_out_of_range(tiny_bert):
    with pytest.raises(ValueError, match="num_layers must be in 0..2"):
        BERTScore(tiny_bert, num_layers=12)


def test_radgraph_rules_with_a_scripted_scorer(tmp_path):
    calls = []

    def scorer(*, hyps, refs):
        calls.append((hyps, refs))
        has = [{"entities": {"1": {}}}]
        return (0.2, 0.35, 0.3), None, has, has

    rg = RadGraphF1(scorer=scorer)
    assert rg("no effusion", "the lungs are clear today")[0] is None  # 2 tokens
    assert calls == []
    value, why = rg("the lungs are clear", {"FINDINGS": "Lungs clear.", "IMPRESSION": "Normal"})
    assert value == 0.35 and why is None
    assert calls[0] == (["the lungs are clear"], ["FINDINGS: Lungs clear.\nIMPRESSION: Normal"])
    empty = RadGraphF1(scorer=lambda **_: (0.0, None, [{}], [{"entities": {}}]))
    assert empty("a b c d e", "f g h i j") == (
        None,
        "RadGraph F1 skipped: neither text has a RadGraph entity",
    )
    with pytest.raises(FileNotFoundError, match=str(tmp_path / "rg")):
        RadGraphF1(tmp_path / "rg")
