"""A tiny randomly initialised LLaVA (CLIP vision tower + Llama text model) with a word-level
tokenizer, built and saved locally (nothing is downloaded), to try model editing without weights.

    python -m medibench.knowledge_edit.tiny_llava TASKS OUT [--epochs 15]

builds one whose vocabulary covers a task set (``medibench edit tasks``) into ``OUT`` and teaches
it the set's locality probes, so that locality is defined; ``medibench edit run --model OUT``
then edits it. It runs from any folder and needs the extra ``medibench[torch]`` (torch,
transformers). The tests and the benchmarks build their tiny models with the same functions.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from medibench.models._weights import import_transformers

__all__ = ["build_tiny_llava", "main", "taught_items", "teach", "vocabulary"]

SPECIAL = ("<pad>", "<unk>", "<s>", "</s>", "<image>")
BASE_WORDS = ("user", "assistant", ":", "?", ".", ",", '"', "new", "fact", "answer", "to", "is")


def vocabulary(texts: Iterable[str]) -> list[str]:
    """Special tokens, the prompt's words, then every word of ``texts`` (lower case)."""
    words: dict[str, None] = dict.fromkeys([*SPECIAL, *BASE_WORDS])
    for t in texts:
        for w in re.findall(r"\w+|[^\w\s]", t.lower()):
            words.setdefault(w)
    return list(words)


def build_tiny_llava(
    folder: Path, words: list[str], *, seed: int = 0, dtype: str = "float32"
) -> Path:
    """Save a tiny LLaVA and its processor (word-level tokenizer) into ``folder``, its weights
    initialised and saved in ``dtype`` (``"float64"``: the README's editing table, whose
    training then comes out the same on every CPU code path; it loads back in that dtype)."""
    torch, _ = import_transformers("the tiny LLaVA")
    from tokenizers import AddedToken, Tokenizer, models, normalizers, pre_tokenizers
    from transformers import (
        CLIPImageProcessorPil,
        CLIPVisionConfig,
        LlamaConfig,
        LlavaConfig,
        LlavaForConditionalGeneration,
        LlavaProcessor,
        PreTrainedTokenizerFast,
    )

    vocab = {w: i for i, w in enumerate(words)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.add_special_tokens([AddedToken(w, special=True, normalized=False) for w in SPECIAL])
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token="<pad>",
        unk_token="<unk>",
        bos_token="<s>",
        eos_token="</s>",
    )
    image_processor = CLIPImageProcessorPil(
        size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32}
    )
    processor = LlavaProcessor(
        image_processor=image_processor,
        tokenizer=fast,
        patch_size=8,
        vision_feature_select_strategy="default",
        image_token="<image>",
        num_additional_image_tokens=1,
    )
    vision = CLIPVisionConfig(**_tower(16, layers=1, heads=2), image_size=32, patch_size=8)
    text = LlamaConfig(
        **_tower(32, layers=2, heads=2),
        vocab_size=len(words),
        num_key_value_heads=2,
        max_position_embeddings=256,
        pad_token_id=vocab["<pad>"],
        bos_token_id=vocab["<s>"],
        eos_token_id=vocab["</s>"],
        initializer_range=0.5,
    )
    config = LlavaConfig(
        vision_config=vision,
        text_config=text,
        image_token_index=vocab["<image>"],
        vision_feature_select_strategy="default",
        vision_feature_layer=-1,
    )
    torch.manual_seed(seed)
    model = LlavaForConditionalGeneration._from_config(config, dtype=getattr(torch, dtype)).eval()
    model.save_pretrained(folder)
    processor.save_pretrained(folder)
    return folder


def teach(
    folder: Path,
    items: list[tuple[object, str, str]],
    *,
    epochs: int = 30,
    lr: float = 3e-3,
    seed: int = 0,
) -> int:
    """Fine-tune the saved tiny model on ``(image, question, answer)`` items (all weights,
    Adam, teacher forcing) and save it back: a model that is right on some probes before any
    edit, so locality is defined. Returns how many items it then answers right (greedy)."""
    torch, _ = import_transformers("teaching the tiny LLaVA")

    from medibench.knowledge_edit import TransformersAnswerer, exact_match

    torch.manual_seed(seed)
    model = TransformersAnswerer(folder, max_new_tokens=4)
    batches = [model.teacher_batch(im, q, a) for im, q, a in items]
    opt = torch.optim.Adam(model.model.parameters(), lr=lr)
    for _ in range(epochs):
        for batch, n in batches:
            loss = model.forward(batch, n).loss
            opt.zero_grad()
            loss.backward()
            opt.step()
    model.model.eval()
    model.model.save_pretrained(folder)
    answers = model.answer_batch([(im, q) for im, q, _ in items])
    return sum(bool(exact_match(x, a).correct) for x, (_, _, a) in zip(answers, items, strict=True))


def main(argv: list[str] | None = None) -> None:
    """``python -m medibench.knowledge_edit.tiny_llava TASKS OUT``: a tiny LLaVA for a task set
    (its vocabulary), taught the task set's locality probes (for demos and the bench)."""
    import argparse

    from medibench.io import read_image
    from medibench.knowledge_edit import read_taskset
    from medibench.knowledge_edit._build import TEXT_TEMPLATES

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("tasks", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--epochs", type=int, default=15)
    args = parser.parse_args(argv)
    try:
        import_transformers("the tiny LLaVA")
    except ImportError as exc:
        parser.exit(1, f"error: {exc}\n")
    ts = read_taskset(args.tasks)
    texts = [t for r in ts.requests for p in r.probes for t in (p.question, p.answer)]
    build_tiny_llava(args.out, vocabulary([*texts, *TEXT_TEMPLATES]))
    items = taught_items(ts, read_image)
    right = teach(args.out, items, epochs=args.epochs)
    print(f"tiny LLaVA -> {args.out} (right on {right} of {len(items)} taught probes)")


def taught_items(ts, read_image) -> list[tuple[object, str, str]]:
    """The distinct (image, question) of the task set's locality probes, with their answers."""
    seen = {}
    for r in ts.requests:
        for p in r.probes:
            if p.kind == "locality":
                seen.setdefault((p.image, p.question), p.answer)
    return [(read_image(ts.image_path(i)), q, a) for (i, q), a in seen.items()]


def _tower(hidden: int, *, layers: int, heads: int) -> dict[str, int]:
    """A transformer's sizes: ``hidden`` units, an MLP twice as wide, ``layers`` layers of
    ``heads`` attention heads (the keywords CLIP's and Llama's configs share)."""
    return {
        "hidden_size": hidden,
        "intermediate_size": 2 * hidden,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
    }


if __name__ == "__main__":
    main()
