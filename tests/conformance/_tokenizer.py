"""A word-level tokenizer for the conformance models, built offline with ``tokenizers``.

Each family's tiny model gets the same small vocabulary of medical words, plus its own special
tokens (image placeholders, turn markers) as added special tokens, wrapped in transformers'
fast tokenizer class and saved in the Hub layout (``tokenizer.json``, ``tokenizer_config.json``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

#: Words every conformance model knows (questions, answers and the templates' plain words).
WORDS = (
    "what", "is", "shown", "in", "the", "image", "?", "which", "organ", "a", "lung", "heart",
    "liver", "brain", "kidney", "mass", "normal", "left", "right", "yes", "no", "answer", "en",
    "new", "fact", ":", "to", ".", ",", '"', "user", "assistant", "model", "system", "you",
    "are", "helpful", "abnormality", "modality", "ct", "mri", "x", "-", "ray", "scan", "of",
    "there", "pneumonia", "effusion", "fracture", "tumor", "present", "absent", "chest",
    # the synthetic edit task set's questions, rephrasings, statements and answers
    "how", "many", "lesions", "lesion", "are", "this", "number", "side", "highlighted",
    "or", "on", "colour", "looking", "at", "briefly", "highlight", "zero", "one", "two",
    "three", "four", "red", "green", "blue", "s",
)  # fmt: skip


def word_tokenizer(
    specials: Sequence[str],
    *,
    bos: str | None,
    eos: str,
    pad: str | None,
    extra_words: Sequence[str] = (),
    named: dict[str, str] | None = None,
    lowercase: bool = True,
) -> Any:
    """A ``PreTrainedTokenizerFast`` over ``<unk>``, ``specials`` (in order, special tokens)
    and :data:`WORDS` + ``extra_words``; ``named`` are extra special-token attributes
    (``image_token``, ``boi_token``, ...) the family's processor reads."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    specials = list(dict.fromkeys(["<unk>", *specials]))
    vocab: dict[str, int] = {}
    for w in [*specials, *WORDS, *extra_words]:
        vocab.setdefault(w, len(vocab))
    raw = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    if lowercase:
        raw.normalizer = normalizers.Lowercase()
    raw.pre_tokenizer = pre_tokenizers.Whitespace()
    raw.decoder = decoders.WordPiece(prefix="##", cleanup=True)  # words joined by spaces
    raw.add_special_tokens([AddedToken(w, special=True, normalized=False) for w in specials])
    kwargs: dict[str, Any] = {"unk_token": "<unk>", "eos_token": eos}
    if bos is not None:
        kwargs["bos_token"] = bos
    if pad is not None:
        kwargs["pad_token"] = pad
    if named:
        kwargs["extra_special_tokens"] = dict(named)
    return PreTrainedTokenizerFast(tokenizer_object=raw, **kwargs)
