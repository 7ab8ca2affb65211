"""CoOp training steps per second: medibench's trainer against a plain PyTorch CoOp loop.

Run:  python bench/prompt_tuning.py [--steps 60] [--batch 16] [--width 64] [--layers 2]

Both sides train CoOp (16 context tokens, class token at the end, CE, SGD momentum 0.9) on the
same tiny random-weight ``CLIPModel`` (built from its real config class and saved), the same
48 preprocessed images (3 classes x 16 shots), the same batch size, no augmentation, one
thread. medibench's side is the loop ``medibench calibration train`` runs (``_fit``: per-epoch
learning rate, ``train.jsonl``, a checkpoint after every epoch). The plain side is what a user
would write with ``transformers``: ``[SOS] X ... X name . [EOS]`` tokenised once, the context
spliced into the token embeddings with ``torch.cat``, the text encoder run layer by layer with
a causal mask, the end-of-text token pooled and projected. Each side runs once after one
warm-up step; the ratio medibench / plain is printed (target >= 0.9).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from medibench.prompt_tuning._backbone import load_backbone  # noqa: E402
from medibench.prompt_tuning._losses import parse_losses  # noqa: E402
from medibench.prompt_tuning._methods import DEFAULTS, build_method  # noqa: E402
from medibench.prompt_tuning._tiny import save_tiny_backbone  # noqa: E402
from medibench.prompt_tuning._train import _fit  # noqa: E402

NAMES = ["benign lesion", "malignant lesion", "normal skin"]


def plain_coop(model, tokenizer, pixels, labels, steps: int, batch: int, n_ctx: int = 16):
    """The reference: CoOp as a user writes it on transformers' CLIPModel."""
    text = model.text_model
    prompts = [" ".join(["X"] * n_ctx) + f" {name}." for name in NAMES]
    ids = tokenizer(prompts, padding=True, return_tensors="pt").input_ids
    with torch.no_grad():
        emb = text.embeddings.token_embedding(ids)
    prefix, suffix = emb[:, :1], emb[:, 1 + n_ctx :]
    eot = (ids == tokenizer.eos_token_id).int().argmax(-1)
    ctx = torch.nn.Parameter(torch.randn(n_ctx, emb.shape[-1]) * 0.02)
    opt = torch.optim.SGD([ctx], lr=0.002, momentum=0.9, weight_decay=5e-4)
    length = ids.shape[1]
    mask = torch.full((length, length), torch.finfo(emb.dtype).min).triu(1)[None, None]
    pos = text.embeddings.position_embedding.weight[:length]
    scale = model.logit_scale.exp().detach()
    gen = torch.Generator().manual_seed(0)
    n = len(labels)

    def step(idx):
        with torch.no_grad():
            img = model.get_image_features(pixel_values=pixels[idx])
            img = getattr(img, "pooler_output", img)
        x = torch.cat([prefix, ctx.expand(len(NAMES), -1, -1), suffix], dim=1) + pos
        for layer in text.encoder.layers:
            x = layer(x, mask)
        x = text.final_layer_norm(x)[torch.arange(len(NAMES)), eot]
        t = model.text_projection(x)
        logits = scale * F.normalize(img, dim=-1) @ F.normalize(t, dim=-1).T
        loss = F.cross_entropy(logits, labels[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()

    step(torch.arange(batch))  # warm-up
    t0 = time.perf_counter()
    done = 0
    while done < steps:
        order = torch.randperm(n, generator=gen)
        for b in range(n // batch):
            step(order[b * batch : (b + 1) * batch])
            done += 1
    return done / (time.perf_counter() - t0)


def medibench_coop(backbone, pixels, labels, steps: int, batch: int, out: Path) -> float:
    options = {**DEFAULTS["coop"], "position": "end", "batch_size": batch, "warmup_epochs": 0}
    per_epoch = len(labels) // batch
    options["epochs"] = -(-steps // per_epoch)
    gen = torch.Generator().manual_seed(0)
    method = build_method("coop", backbone, NAMES, "a photo of a {}.", options, gen)
    params = [p for p in method.parameters() if p.requires_grad]
    terms = parse_losses(["ce"])
    warm = {**options, "epochs": 1}
    _fit(method, params, pixels[:batch], labels[:batch], terms, warm, False, gen, out / "w", print)
    t0 = time.perf_counter()
    _fit(method, params, pixels, labels, terms, options, False, gen, out / "m", lambda _m: None)
    return options["epochs"] * per_epoch / (time.perf_counter() - t0)


def main() -> None:
    parser = argparse.ArgumentParser(description="CoOp steps/s: medibench vs a plain loop")
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--width", type=int, default=64)
    parser.add_argument("--layers", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(1)
    import transformers

    with tempfile.TemporaryDirectory() as tmp:
        folder = save_tiny_backbone(
            Path(tmp) / "clip", "clip", width=args.width, layers=args.layers, image_size=64
        )
        backbone = load_backbone(f"clip:{folder}")
        rng = np.random.default_rng(0)
        images = [rng.integers(0, 256, (64, 64, 3), dtype=np.uint8) for _ in range(48)]
        pixels = backbone.image.preprocess(images)
        labels = torch.arange(48) % 3
        for d in ("w", "m"):
            (Path(tmp) / d).mkdir()
        ours = medibench_coop(backbone, pixels, labels, args.steps, args.batch, Path(tmp))
        model = transformers.CLIPModel.from_pretrained(folder).eval().requires_grad_(False)
        plain = plain_coop(model, backbone.tokenizer, pixels, labels, args.steps, args.batch)
    print(
        f"tiny CLIP width {args.width}, {args.layers} layers, 64 px; batch {args.batch}; "
        f"{args.steps} steps; 1 thread"
    )
    print(f"medibench CoOp: {ours:.1f} steps/s")
    print(f"plain CoOp loop: {plain:.1f} steps/s")
    print(f"ratio medibench / plain: {ours / plain:.2f} (target >= 0.9)")


if __name__ == "__main__":
    main()
