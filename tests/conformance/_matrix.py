"""The conformance matrix: which (family, path) cells medibench supports, and why not where it
does not. The tests run every cell (a supported one must pass, an unsupported one must fail
with its clear error) and ``bench/conformance_table.py`` renders docs/models.md's table from it.
"""

from __future__ import annotations

#: family -> (name in the docs, the Hub repo whose layout and chat template the tiny copy follows)
FAMILIES = {
    "llava": ("LLaVA-1.5", "llava-hf/llava-1.5-7b-hf"),
    "llava_next": ("LLaVA-NeXT", "llava-hf/llava-v1.6-mistral-7b-hf"),
    "llava_onevision": ("LLaVA-OneVision", "llava-hf/llava-onevision-qwen2-0.5b-ov-hf"),
    "qwen2_vl": ("Qwen2-VL", "Qwen/Qwen2-VL-2B-Instruct"),
    "qwen2_5_vl": ("Qwen2.5-VL", "Qwen/Qwen2.5-VL-3B-Instruct"),
    "qwen3_vl": ("Qwen3-VL", "Qwen/Qwen3-VL-2B-Instruct"),
    "gemma3": ("Gemma 3 (MedGemma)", "google/gemma-3-4b-it"),
    "paligemma": ("PaliGemma", "google/paligemma-3b-mix-224"),
    "idefics3": ("Idefics3", "HuggingFaceM4/Idefics3-8B-Llama3"),
    "smolvlm": ("SmolVLM", "HuggingFaceTB/SmolVLM-256M-Instruct"),
    "mllama": ("Llama 3.2 Vision", "meta-llama/Llama-3.2-11B-Vision-Instruct"),
    "internvl": ("InternVL 3", "OpenGVLab/InternVL3-1B-hf"),
}
ANSWERING = ("transformers-vlm", "edit answerer", "medgen vqa")
EDITING = ("ft", "lora", "grace@paper", "grace-tokens", "balancedit", "wise", "mend", "in-context")
#: the families the editing cells run on
EDITED = ("llava", "llava_next", "llava_onevision", "qwen2_vl", "qwen2_5_vl", "qwen3_vl", "gemma3",
          "paligemma", "idefics3", "internvl")  # fmt: skip

#: what a user of the family should know (docs/models.md's notes column)
NOTES = {
    "llava": "no chat template: `USER: <image>\\n{question} ASSISTANT:`",
    "llava_next": "no pad token: pads with `</s>`",
    "llava_onevision": "images only without torchvision",
    "qwen2_vl": "images only without torchvision; `mm_token_type_ids` cover the answer",
    "qwen2_5_vl": "images only without torchvision",
    "qwen3_vl": "images only without torchvision",
    "gemma3": "stops at `<end_of_turn>` (every generation-config eos); one image list per prompt",
    "paligemma": "its own format: `<image>answer en {question}`, answer as the processor's suffix",
    "idefics3": "stops at `<end_of_utterance>`",
    "smolvlm": "without torchvision, a clear error: its processor reads the video processor's "
    "frame settings for images too",
    "mllama": "one prompt per `generate` call (batched decoding breaks its cross-attention mask)",
    "internvl": "images only without torchvision",
}

#: unified families (text and images from one model, ``unified:PATH``): name in the docs, the Hub
#: repo whose layout the tiny copy follows (tests/conformance/test_unified.py runs the cell)
UNIFIED = {"janus": ("Janus-Pro", "deepseek-community/Janus-Pro-1B")}
UNIFIED_NOTES = {
    "janus": "images from text alone: the image mode embeds no input image, so the image prompt "
    "carries the text answer; CFG 5, temperature 1, seeded",
}

_NO_TORCHVISION = "needs torchvision"


def cell(family: str, path: str, *, torchvision: bool) -> tuple[str, str]:
    """``(status, why)`` of a cell: ``supported``, ``not supported`` or ``not tested``."""
    if family == "smolvlm" and not torchvision:
        return "not supported", _NO_TORCHVISION
    if path in EDITING and family not in EDITED:
        return "not tested", "no conformance cell yet"
    return "supported", ""
