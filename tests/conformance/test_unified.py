"""``unified:PATH`` on a tiny Janus-Pro saved as transformers' conversion saves it: ``medibench
run`` on MedGEN's VQA and generation samples answers the first with text and the second with text
and an image, byte for byte what transformers' own Janus calls make, and scores them; the image
mode's guidance is the classifier-free guidance written out here; folders and options it cannot
run are clear errors."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from PIL import Image
from typer.testing import CliRunner

from tests.benchmarks.medgen.answer_data import build_folder, code_scores
from tests.conformance.conftest import image

pytestmark = pytest.mark.filterwarnings("ignore")


def _by_hand(folder, prompt: str, seed: int, *, guidance: float = 5.0, greedy: bool = False):
    """The image transformers' Janus example makes for ``prompt`` (chat template, image mode,
    ``generate``, ``decode_image_tokens``, ``postprocess``); with ``greedy`` the guided tokens
    are chosen here, step by step, from the language model and the generation head:
    ``uncond + guidance * (cond - uncond)``, the unconditional prompt all pad but BOS and BOI."""
    import torch
    import transformers as tf

    processor = tf.AutoProcessor.from_pretrained(folder)
    model = tf.JanusForConditionalGeneration.from_pretrained(folder).eval()
    chat = [{"role": "user", "content": [{"type": "text", "text": prompt}]}]
    text = processor.apply_chat_template(chat, add_generation_prompt=True)
    enc = processor(text=[text], generation_mode="image", return_tensors="pt")
    gen = model.generation_config
    with torch.no_grad():
        if not greedy:
            torch.manual_seed(seed)
            tokens = model.generate(**enc, generation_mode="image", do_sample=True)
        else:
            cond = enc["input_ids"][0]
            keep = (cond == gen.bos_token_id) | (cond == gen.generation_kwargs["boi_token_id"])
            uncond = torch.where(keep, cond, torch.full_like(cond, gen.pad_token_id))
            embeds = model.get_input_embeddings()(torch.stack([cond, uncond]))
            chosen = []
            for _ in range(model.config.vision_config.num_image_tokens):
                hidden = model.model.language_model(inputs_embeds=embeds).last_hidden_state
                c, u = model.model.generation_head(hidden[:, -1])
                chosen.append(int((u + guidance * (c - u)).argmax()))
                step = model.prepare_embeddings_for_image_generation(torch.tensor([chosen[-1]] * 2))
                embeds = torch.cat([embeds, step[:, None]], dim=1)
            tokens = torch.tensor([chosen])
        pixels = model.decode_image_tokens(tokens)[0]  # (H, W, 3) in [-1, 1]
    return np.floor(np.clip((pixels.numpy() * 0.5 + 0.5) * 255, 0, 255)).astype(np.uint8)


@pytest.fixture(scope="module")
def medgen(tmp_path_factory):
    return build_folder(tmp_path_factory.mktemp("medgen") / "data")


def test_run_answers_vqa_with_text_and_generation_with_text_and_an_image(
    unified_folder, medgen, tmp_path
):
    from medibench.cli import app
    from medibench.models import MODELS
    from medibench.runs import RunStore
    from medibench.runs._answers import read_answers

    out = tmp_path / "run"
    result = CliRunner().invoke(app, [
        "run", "--dataset", f"medgen:{medgen}", "--dataset-option", "formats=[vqa, gen]",
        "--model", f"unified:{unified_folder}", "--model-option", "max_new_tokens=3",
        "--out", str(out), "--no-progress"])  # fmt: skip
    assert result.exit_code == 0, result.output
    with RunStore(out) as store:
        rows = {sid: row for (_, sid, _), row in read_answers(store).items()}
        seeds = {p.sample_id: p.seed for p in store.predictions()}
        scores = {s.sample_id: s for s in code_scores(store)}
    inputs = {
        "MultimodalGeneration-disease-prediction-1": ["g1"],
        "VQA-multiple-choice-1": ["q1"],
        "VQA-report-generation-2": ["q2a", "q2b", "q2c"],
    }
    assert sorted(rows) == sorted(scores) == [f"medgen-{s}" for s in inputs]
    gen_id = "medgen-MultimodalGeneration-disease-prediction-1"
    model = MODELS.create("unified", path=unified_folder, max_new_tokens=3)
    for sid, row in rows.items():
        assert row["text"] and (row["image_path"] is not None) == (sid == gen_id)
        assert scores[sid].status == "ok"
        assert [c["role"] for c in row["calls"]] == (["text", "image"] if sid == gen_id
                                                     else ["text"])  # fmt: skip
        shown = [
            np.asarray(Image.open(medgen / "images" / f"{n}.png").convert("RGB"))
            for n in inputs[sid.removeprefix("medgen-")]
        ]
        assert row["text"] == model.text.answer(shown, row["prompt"], seed=seeds[sid])
    made = np.asarray(Image.open(out / rows[gen_id]["image_path"]).convert("RGB"))
    image_prompt = f"{rows[gen_id]['prompt']}\n{rows[gen_id]['text']}"
    assert rows[gen_id]["calls"][1]["prompt"] == image_prompt
    assert made.shape == (16, 16, 3)  # the 4 x 4 token grid, upsampled 4 times by the decoder
    assert np.array_equal(made, _by_hand(unified_folder, image_prompt, seeds[gen_id]))
    reference = np.asarray(Image.open(medgen / "images" / "g1_gt.png").convert("RGB"))
    resized = np.asarray(Image.fromarray(made).resize((28, 24), Image.Resampling.LANCZOS))
    mse = np.mean((resized.astype(np.float64) - reference) ** 2)
    assert scores[gen_id].metrics["psnr"] == pytest.approx(10 * np.log10(255**2 / mse), rel=1e-5)


def test_seeds_and_guidance_are_the_image_modes(unified_folder):
    from medibench.models import MODELS

    model = MODELS.create("unified", path=unified_folder, temperature=0, guidance_scale=3.0)
    greedy = model.make_image("a chest x - ray", seed=0)
    assert np.array_equal(greedy, _by_hand(unified_folder, "a chest x - ray", 0, guidance=3.0,
                                           greedy=True))  # fmt: skip
    assert np.array_equal(greedy, model.make_image("a chest x - ray", seed=1))  # no sampling
    sampled = MODELS.create("unified", path=unified_folder)
    first = sampled.make_image("a chest x - ray", seed=0)
    assert np.array_equal(first, sampled.make_image("a chest x - ray", seed=0))
    assert not np.array_equal(first, sampled.make_image("a chest x - ray", seed=1))


def test_a_vlm_that_makes_no_images_names_its_class_and_what_is_needed(family_folder):
    from medibench.models import MODELS
    from medibench.models.unified import UnsupportedModelError

    with pytest.raises(UnsupportedModelError) as caught:
        MODELS.create("unified", path=family_folder("llava"))
    message = str(caught.value)
    assert "names LlavaForConditionalGeneration (model type 'llava'), which makes no images" in (
        message
    )
    assert message.endswith("makes images: JanusForConditionalGeneration (janus)")


def test_an_image_making_model_of_another_family_is_named_too(tmp_path):
    from medibench.models import MODELS
    from medibench.models.unified import UnsupportedModelError

    config = {"model_type": "emu3", "architectures": ["Emu3ForConditionalGeneration"]}
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(
        UnsupportedModelError,
        match="Emu3ForConditionalGeneration .model type "
        "'emu3'., which makes images, but not through Janus's image mode",
    ):
        MODELS.create("unified", path=tmp_path)


def test_a_missing_processor_or_tokenizer_is_named(unified_folder, tmp_path):
    from medibench.models import MODELS
    from medibench.models.unified import UnsupportedModelError

    for missing in (("processor_config.json",), ("tokenizer.json", "tokenizer_config.json")):
        folder = tmp_path / missing[0]
        shutil.copytree(unified_folder, folder)
        for name in missing:
            (folder / name).unlink()
        with pytest.raises(UnsupportedModelError, match=f"{missing[-1]} is missing"):
            MODELS.create("unified", path=folder)


@pytest.mark.parametrize(("option", "match"), [
    ({"image_prompt": "a lung"}, "image_prompt 'a lung' has neither"),
    ({"guidance_scale": 0.5}, "guidance_scale must be at least 1"),
    ({"temperature": -1}, "temperature must be 0 or more"),
])  # fmt: skip
def test_bad_options_are_named(unified_folder, option, match):
    from medibench.models import MODELS

    with pytest.raises(ValueError, match=match):
        MODELS.create("unified", path=unified_folder, **option)


def test_answers_have_no_image_unless_one_is_wanted(unified_folder):
    from medibench.models import MODELS

    model = MODELS.create("unified", path=unified_folder, max_new_tokens=2,
                          image_prompt="{instruction}")  # fmt: skip
    answer = model.generate([image()], "what is shown ?", seed=0, want_image=False)
    assert answer.image is None and answer.text == model.text.answer(
        [image()], "what is shown ?", seed=0
    )
    from medibench.models._examples import ExamplesNotSupportedError, check_takes_examples

    with pytest.raises(ExamplesNotSupportedError):  # a run asking for demonstrations refuses it
        check_takes_examples(model, model.name)
    made = model.generate([image()], "what is shown ?", seed=0, want_image=True)
    assert made.text == answer.text and made.calls[1]["prompt"] == "what is shown ?"
