"""Zero-shot CLIP classification with a tiny random CLIP saved to a local folder."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from medibench.calibration.zero_shot import (  # noqa: E402
    ZeroShotCLIP,
    zero_shot_by_template,
    zero_shot_predictions,
)

CLASSES = ["grey matter", "white matter", "csf"]
TEMPLATES = ["a brain mri of {}.", "{} tissue", "an image of {}"]


@pytest.fixture(scope="module")
def tiny_clip(tmp_path_factory):
    """A randomly initialised CLIP (16-d, one layer) with a character-level CLIP tokenizer."""
    from medibench.prompt_tuning._tiny import char_vocab

    torch.set_num_threads(1)
    vocab = char_vocab()
    tokenizer = transformers.CLIPTokenizer(vocab=vocab, merges=[], model_max_length=48)
    end = vocab["<|endoftext|>"]
    config = transformers.CLIPConfig(
        text_config=dict(
            vocab_size=len(vocab),
            hidden_size=16,
            intermediate_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            max_position_embeddings=48,
            eos_token_id=end,
            bos_token_id=vocab["<|startoftext|>"],
            pad_token_id=end,
        ),
        vision_config=dict(
            hidden_size=16,
            intermediate_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            image_size=32,
            patch_size=8,
        ),
        projection_dim=8,
    )
    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp("tiny_clip")
    transformers.CLIPModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    transformers.CLIPImageProcessor(
        size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32}
    ).save_pretrained(folder)
    return folder


def images(n: int = 6):
    rng = np.random.default_rng(0)
    return [rng.integers(0, 256, (40, 36, 3), dtype=np.uint8) for _ in range(n)]


def test_one_template_equals_clip_logits_per_image(tiny_clip):
    clip = ZeroShotCLIP(tiny_clip)
    ims = images()
    pred = zero_shot_predictions(clip, ims, [0, 1, 2, 0, 1, 2], CLASSES, templates=[TEMPLATES[0]])
    texts = [TEMPLATES[0].format(c) for c in CLASSES]
    enc = clip.tokenizer(texts, padding=True, return_tensors="pt")
    pixels = clip.processor(images=[clip_rgb(i) for i in ims], return_tensors="pt").pixel_values
    with torch.no_grad():
        ref = clip.model(**enc, pixel_values=pixels).logits_per_image.double().numpy()
    np.testing.assert_allclose(pred.logits, ref, rtol=1e-5, atol=1e-5)
    assert pred.probs.shape == (6, 3) and pred.labels.tolist() == [0, 1, 2, 0, 1, 2]


def test_templates_are_ensembled_and_kept_apart(tiny_clip):
    clip = ZeroShotCLIP(tiny_clip)
    ims = images(4)
    labels = [0, 1, 2, 1]
    ens = zero_shot_predictions(clip, ims, labels, CLASSES, templates=TEMPLATES)
    img = clip.image_embeddings(ims)
    cls = np.stack(
        [clip.text_embeddings([t.format(c) for t in TEMPLATES]).mean(0) for c in CLASSES]
    )
    cls /= np.linalg.norm(cls, axis=1, keepdims=True)
    np.testing.assert_allclose(ens.logits, clip.logit_scale * img @ cls.T, rtol=1e-5, atol=1e-5)
    per = zero_shot_by_template(clip, ims, labels, CLASSES, TEMPLATES)
    assert per.n == 12 and sorted(set(per.groups["template"])) == sorted(TEMPLATES)
    one = per.subset(per.groups["template"] == TEMPLATES[1])
    alone = zero_shot_predictions(clip, ims, labels, CLASSES, templates=[TEMPLATES[1]])
    np.testing.assert_allclose(one.logits, alone.logits, rtol=1e-5, atol=1e-5)


def test_bad_inputs(tiny_clip, tmp_path):
    with pytest.raises(FileNotFoundError, match="no CLIP model here"):
        ZeroShotCLIP(tmp_path)
    clip = ZeroShotCLIP(tiny_clip)
    with pytest.raises(ValueError, match="exactly one"):
        zero_shot_predictions(clip, images(2), [0, 1], CLASSES, templates=["no slot"])
    with pytest.raises(ValueError, match="at least 2 class names"):
        zero_shot_predictions(clip, images(2), [0, 0], ["one"])
    with pytest.raises(ValueError, match="2 images but 3 labels"):
        zero_shot_predictions(clip, images(2), [0, 1, 2], CLASSES)


def clip_rgb(image):
    from PIL import Image

    return Image.fromarray(image)
