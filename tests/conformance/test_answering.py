"""Answering through ``transformers-vlm:`` and the edit answerers, for every family of
:mod:`tests.conformance._matrix`, on tiny models saved in the Hub layout (nothing downloads)."""

from __future__ import annotations

import pytest

from medibench.models._hf_processor import torchvision_available
from tests.conformance._matrix import FAMILIES, cell
from tests.conformance.conftest import QUESTION, TARGET, image

pytestmark = pytest.mark.filterwarnings("ignore")


def _supported(family: str, path: str) -> bool:
    status, why = cell(family, path, torchvision=torchvision_available())
    if status == "supported":
        return True
    assert status == "not supported", why
    return False


@pytest.mark.parametrize("family", list(FAMILIES))
def test_transformers_vlm_answers_reproducibly_from_the_folder_alone(family, family_folder):
    from medibench.models.vlm import VLMS

    folder = family_folder(family)
    if not _supported(family, "transformers-vlm"):
        from medibench.models._hf_vlm import UnsupportedModelError

        with pytest.raises(UnsupportedModelError, match="torchvision"):
            VLMS.get("transformers-vlm")(folder, max_new_tokens=4)
        return
    vlm = VLMS.get("transformers-vlm")(folder, max_new_tokens=4)
    first = vlm.answer([image()], QUESTION, seed=3)
    again = vlm.answer([image()], QUESTION, seed=3)
    assert first.encode() == again.encode()
    n_tokens = len(vlm.processor.tokenizer(first, add_special_tokens=False)["input_ids"])
    assert n_tokens <= 4  # within max_new_tokens: never the prompt echoed back


@pytest.mark.parametrize("family", list(FAMILIES))
def test_a_taught_answer_comes_back_alone_and_stops_at_the_end_of_turn(family, family_folder,
                                                                       taught_folder):  # fmt: skip
    if not _supported(family, "transformers-vlm"):
        return
    from medibench.knowledge_edit import TransformersAnswerer
    from medibench.models.vlm import TransformersVLM

    folder = taught_folder(family)
    vlm = TransformersVLM(folder, max_new_tokens=6)
    assert vlm.answer([image()], QUESTION, seed=0) == TARGET  # no echo, no markers, it stops
    answerer = TransformersAnswerer(folder, max_new_tokens=6, batch_size=2)
    batched = answerer.answer_batch([(image(), QUESTION), (image(1, (30, 22)), "which organ ?")])
    assert batched[0] == TARGET  # the processor's own batching of two prompts' images
    # the teacher-forced token accuracy of the taught answer: every answer token is the argmax
    assert answerer.token_accuracy(image(), QUESTION, TARGET) == 1.0


@pytest.mark.parametrize("family", list(FAMILIES))
def test_teacher_forcing_labels_exactly_the_answer_and_its_end_of_turn(family, family_folder):
    if not _supported(family, "edit answerer"):
        return
    import torch

    from medibench.knowledge_edit import TransformersAnswerer

    answerer = TransformersAnswerer(family_folder(family))
    batch, n = answerer.teacher_batch(image(), QUESTION, "lung mass")
    ids, labels = batch["input_ids"][0], batch["labels"][0]
    tok = answerer.tokenizer
    assert (labels[:n] == -100).all()
    answer = labels[n:].tolist()
    assert tok.convert_ids_to_tokens(answer) == ["lung", "mass", tok.convert_ids_to_tokens(
        answerer.vlm.end_id)]  # fmt: skip
    assert answer[-1] in answerer.vlm.stop_ids
    per_token = ("attention_mask", "token_type_ids", "mm_token_type_ids", "cross_attention_mask")
    for key in per_token:  # every per-token tensor covers the answer
        if batch.get(key) is not None:
            assert batch[key].shape[:2] == (1, len(ids)), key
    with torch.no_grad():
        logits = answerer.model(**batch).logits[0]
    hand = (logits[n - 1 : -1].argmax(-1) == labels[n:]).float()[:-1].mean().item()
    assert answerer.token_accuracy(image(), QUESTION, "lung mass") == pytest.approx(hand)


def test_qwen2_vl_teacher_forcing_extends_mm_token_type_ids(family_folder):
    from medibench.knowledge_edit import TransformersAnswerer

    answerer = TransformersAnswerer(family_folder("qwen2_vl"))
    batch, n = answerer.teacher_batch(image(), QUESTION, "lung mass")
    types, ids = batch["mm_token_type_ids"][0], batch["input_ids"][0]
    assert types.shape == ids.shape
    image_pad = answerer.tokenizer.convert_tokens_to_ids("<|image_pad|>")
    assert types.tolist() == [int(t == image_pad) for t in ids.tolist()]
    assert types[n:].tolist() == [0, 0, 0]  # the answer and <|im_end|> are text


def test_gemma3_teacher_forcing_extends_token_type_ids(family_folder):
    from medibench.knowledge_edit import TransformersAnswerer

    answerer = TransformersAnswerer(family_folder("gemma3"))
    batch, n = answerer.teacher_batch(image(), QUESTION, "lung")
    assert batch["token_type_ids"].shape == batch["input_ids"].shape
    assert batch["token_type_ids"][0].sum().item() == 4  # the four pooled image tokens only


def test_paligemma_answers_are_its_suffix_with_causal_token_types(family_folder):
    from medibench.knowledge_edit import TransformersAnswerer

    answerer = TransformersAnswerer(family_folder("paligemma"))
    assert answerer.prompt_text(QUESTION) == "<image>answer en what is shown ?"
    batch, n = answerer.teacher_batch(image(), QUESTION, "lung")
    tok = answerer.tokenizer
    ids = batch["input_ids"][0].tolist()
    assert tok.convert_ids_to_tokens(ids[16:]) == ["<bos>", "answer", "en", "what", "is",
                                                   "shown", "?", "lung", "<eos>"]  # fmt: skip
    assert batch["token_type_ids"][0].tolist() == [0] * n + [1, 1]  # the suffix is causal


def test_gemma3_stop_ids_are_every_generation_config_eos(family_folder):
    from medibench.models.vlm import TransformersVLM

    vlm = TransformersVLM(family_folder("gemma3"), max_new_tokens=2)
    tok = vlm.processor.tokenizer
    assert tok.convert_ids_to_tokens(vlm.vlm.stop_ids) == ["<eos>", "<end_of_turn>"]
    assert tok.convert_ids_to_tokens(vlm.vlm.end_id) == "<end_of_turn>"
    chosen = TransformersVLM(family_folder("gemma3"), eos_token_id=tok.eos_token_id)
    assert chosen.vlm.stop_ids == [tok.eos_token_id]  # the user's choice wins


def test_a_tokenizer_without_a_pad_token_pads_with_eos(family_folder):
    from medibench.knowledge_edit import TransformersAnswerer

    folder = family_folder("llava_next")  # Mistral's tokenizer has no pad token
    answerer = TransformersAnswerer(folder, max_new_tokens=3, batch_size=2)
    assert answerer.tokenizer.pad_token == "</s>"
    items = [(image(), QUESTION), (image(2), "which organ is shown in the image ?")]
    assert answerer.answer_batch(items) == [answerer.answer(im, q) for im, q in items]


def test_qwen2_vl_loads_without_torchvision_for_images(family_folder, capfd):
    import transformers

    from medibench.models._hf_processor import load_processor

    assert not torchvision_available()  # this project's CI: a CPU torch without torchvision
    folder = family_folder("qwen2_vl")
    with pytest.raises(Exception):  # noqa: B017 - transformers' own loader needs torchvision
        transformers.AutoProcessor.from_pretrained(folder)
    processor = load_processor(folder)
    assert type(processor).__name__ == "Qwen2VLProcessor" and processor.video_processor is None
    assert "built for images only" in capfd.readouterr().err
    enc = processor(images=[[image()]], text=["<|vision_start|><|image_pad|><|vision_end|>x"])
    assert enc["image_grid_thw"].tolist() == [[1, 2, 4]]


def test_a_text_only_model_is_a_clear_error(tmp_path):
    import transformers
    from typer.testing import CliRunner

    from medibench.cli import app
    from medibench.knowledge_edit._synthetic import synthetic_taskset
    from medibench.models._hf_vlm import UnsupportedModelError
    from medibench.models.vlm import TransformersVLM

    folder = tmp_path / "llama"
    config = transformers.LlamaConfig(vocab_size=16, hidden_size=8, intermediate_size=16,
                                      num_hidden_layers=1, num_attention_heads=2)  # fmt: skip
    transformers.LlamaForCausalLM(config).save_pretrained(folder)
    with pytest.raises(UnsupportedModelError, match="'llama' is not an image-text-to-text"):
        TransformersVLM(folder)
    synthetic_taskset(tmp_path / "tasks", 1, seed=0)
    result = CliRunner().invoke(app, ["edit", "run", "--tasks", str(tmp_path / "tasks"),
                                      "--model", str(folder), "--editor", "ft",
                                      "--run", str(tmp_path / "run")])  # fmt: skip
    assert result.exit_code != 0
    assert isinstance(result.exception, SystemExit)  # an error message and an exit, no crash
    out = " ".join(result.output.split())
    assert "is not an image-text-to-text model" in out and "Traceback" not in out


def test_a_folder_without_chat_template_or_known_format_names_the_prompt_option(
    family_folder, tmp_path
):
    import shutil

    from medibench.knowledge_edit import TransformersAnswerer
    from medibench.models._hf_vlm import UnsupportedModelError

    folder = tmp_path / "idefics3"
    shutil.copytree(family_folder("idefics3"), folder)
    (folder / "chat_template.jinja").unlink()
    with pytest.raises(UnsupportedModelError, match="set one with the prompt option"):
        TransformersAnswerer(folder)
    model = TransformersAnswerer(folder, prompt="User:{images}{question}<end_of_utterance>\n"
                                 "Assistant:")  # fmt: skip
    assert model.prompt_text("q") == "User:<image>q<end_of_utterance>\nAssistant:"


def test_in_context_examples_need_a_chat_template(family_folder):
    from medibench.models._examples import Demonstration, ExamplesNotSupportedError
    from medibench.models.vlm import TransformersVLM

    example = Demonstration("d1", (image(4),), QUESTION, answer=TARGET)
    vlm = TransformersVLM(family_folder("paligemma"), max_new_tokens=2)
    with pytest.raises(ExamplesNotSupportedError, match="no chat template"):
        vlm.answer_with_examples([image()], QUESTION, [example], seed=0)
    assert vlm.answer_with_examples([image()], QUESTION, [], seed=0) == vlm.answer(
        [image()], QUESTION, seed=0)  # fmt: skip
    chat = TransformersVLM(family_folder("qwen2_vl"), max_new_tokens=2)
    text = chat.vlm.chat_text([("user", 1, QUESTION), ("assistant", 0, TARGET),
                               ("user", 1, QUESTION)])  # fmt: skip
    assert text.count("<|vision_start|><|image_pad|><|vision_end|>") == 2
    assert text.endswith("<|im_start|>assistant\n")
    assert isinstance(chat.answer_with_examples([image()], QUESTION, [example], seed=0), str)
