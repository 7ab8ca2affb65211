"""Benchmark ``medibench train`` against diffusers' own InstructPix2Pix training recipe.

Run:  python bench/train.py [--steps N] [--batch-size B] [--resolution PX] [--method full|lora]
                            [--script PATH/train_instruct_pix2pix.py]

Both train the same tiny random InstructPix2Pix pipeline (tests/models/test_diffusers.py's, saved
locally) on the same 8 triplets at the same batch size and resolution, float32, one thread:

1. ``medibench train`` (:func:`medibench.train.train`), its steps timed by its own log
   (``train.jsonl``'s ``time_per_step_s``: data, loss, backward, clipping, optimizer, logging);
2. the reference: the loop of diffusers' ``examples/instruct_pix2pix/train_instruct_pix2pix.py``
   written out here as that script does each step (captions tokenized and the text encoded,
   edited images encoded by sampling and originals by their mode, DDPM noise at uniform
   timesteps, conditioning dropout with the empty prompt encoded each step, the UNet on the
   concatenated latents, MSE to the noise, ``accelerator.backward``, clipping when gradients
   sync, AdamW step, constant LR scheduler step), with the pixels already in memory as
   [-1, 1] tensors (the script's dataloader work, decoding and torchvision transforms, is left
   out of its time: the comparison is of the training step).

With ``--script PATH`` (a checkout's ``examples/instruct_pix2pix/train_instruct_pix2pix.py``)
the reference is diffusers' real script instead, run as it is in a child process with the same
settings (``--pretrained_model_name_or_path`` the tiny pipeline, ``--dataset_name`` a local
Parquet copy of the triplets with its default columns, ``--resolution``, ``--train_batch_size``,
``--max_train_steps``, ``--learning_rate 1e-4``, ``--conditioning_dropout_prob 0.05``,
``--seed 0``, ``--mixed_precision no``, no checkpoints, one thread), each step timed between
two updates of its ``Steps`` progress bar (its data loading and torchvision transforms
included, as medibench's log includes its own). The script trains full weights only (no
``--method lora``) and needs what it imports (torchvision, ``datasets``); a script that fails
is reported with the end of its output.

Prints the median seconds per step of each (first two steps dropped as warm-up; the fastest of
``--rounds`` alternating rounds, as the load of a shared machine drifts) and the ratio
reference / medibench (steps per second of medibench over the reference's; target >= 1.0).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import json  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(1)


def reference_steps(weights: Path, pixels, prompts, args) -> list[float]:
    """Seconds per step of the diffusers example's recipe (see the module docstring)."""
    import torch.nn.functional as F
    from accelerate import Accelerator
    from diffusers import DDPMScheduler, StableDiffusionInstructPix2PixPipeline
    from diffusers.optimization import get_scheduler

    accelerator = Accelerator(gradient_accumulation_steps=1, mixed_precision="no")
    pipe = StableDiffusionInstructPix2PixPipeline.from_pretrained(
        weights, safety_checker=None, requires_safety_checker=False
    )
    noise_scheduler = DDPMScheduler.from_config(pipe.scheduler.config)
    vae, text_encoder, tokenizer, unet = pipe.vae, pipe.text_encoder, pipe.tokenizer, pipe.unet
    vae.requires_grad_(False)
    text_encoder.requires_grad_(False)
    if args.method == "lora":
        from peft import LoraConfig

        unet.requires_grad_(False)
        unet.add_adapter(
            LoraConfig(
                r=4,
                lora_alpha=4,
                init_lora_weights="gaussian",
                target_modules=["to_k", "to_q", "to_v", "to_out.0"],
            )
        )
    unet.train()
    params = [p for p in unet.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=1e-4, betas=(0.9, 0.999), weight_decay=1e-2, eps=1e-8)
    lr_scheduler = get_scheduler("constant", optimizer=optimizer)
    unet, optimizer, lr_scheduler = accelerator.prepare(unet, optimizer, lr_scheduler)
    generator = torch.Generator().manual_seed(0)
    rng = np.random.default_rng(0)
    p_drop = 0.05

    def tokenize(captions):
        return tokenizer(
            captions,
            max_length=tokenizer.model_max_length,
            padding="max_length",
            truncation=True,
            return_tensors="pt",
        ).input_ids

    times = []
    for _ in range(args.steps):
        t0 = time.perf_counter()
        idx = rng.choice(len(pixels), size=args.batch_size, replace=False)
        original = torch.stack([pixels[i][0] for i in idx])
        edited = torch.stack([pixels[i][1] for i in idx])
        input_ids = tokenize([prompts[i] for i in idx])
        with accelerator.accumulate(unet):
            latents = vae.encode(edited).latent_dist.sample() * vae.config.scaling_factor
            noise = torch.randn_like(latents)
            bsz = latents.shape[0]
            timesteps = torch.randint(0, noise_scheduler.config.num_train_timesteps, (bsz,)).long()
            noisy_latents = noise_scheduler.add_noise(latents, noise, timesteps)
            encoder_hidden_states = text_encoder(input_ids)[0]
            original_image_embeds = vae.encode(original).latent_dist.mode()
            random_p = torch.rand(bsz, generator=generator)
            prompt_mask = (random_p < 2 * p_drop).reshape(bsz, 1, 1)
            null_conditioning = text_encoder(tokenize([""]))[0]
            encoder_hidden_states = torch.where(
                prompt_mask, null_conditioning, encoder_hidden_states
            )
            image_mask = 1 - ((random_p >= p_drop).float() * (random_p < 3 * p_drop).float())
            original_image_embeds = image_mask.reshape(bsz, 1, 1, 1) * original_image_embeds
            model_input = torch.cat([noisy_latents, original_image_embeds], dim=1)
            target = noise  # the tiny pipeline's scheduler predicts epsilon
            model_pred = unet(model_input, timesteps, encoder_hidden_states, return_dict=False)[0]
            loss = F.mse_loss(model_pred.float(), target.float(), reduction="mean")
            accelerator.backward(loss)
            if accelerator.sync_gradients:
                accelerator.clip_grad_norm_(params, 1.0)
            optimizer.step()
            lr_scheduler.step()
            optimizer.zero_grad()
        times.append(time.perf_counter() - t0)
    return times


# The child that runs the script: every update of its "Steps" progress bar (one per optimizer
# step) stamped, the stamps written to a file at exit.
_RUN_SCRIPT = """
import atexit, json, runpy, sys, time
import tqdm.auto
stamps, real = [], tqdm.auto.tqdm.update
def update(self, n=1):
    if getattr(self, "desc", "") == "Steps":
        stamps.append(time.perf_counter())
    return real(self, n)
tqdm.auto.tqdm.update = update
out, script = sys.argv[1], sys.argv[2]
atexit.register(lambda: open(out, "w").write(json.dumps(stamps)))
sys.argv = [script, *sys.argv[3:]]
runpy.run_path(script, run_name="__main__")
"""


def script_command(script: Path, weights: Path, dataset: Path, out: Path, args) -> list[str]:
    """The script's command line with the settings ``medibench_steps`` trains with."""
    return [
        str(script),
        "--pretrained_model_name_or_path", str(weights),
        "--dataset_name", str(dataset),
        "--resolution", str(args.resolution),
        "--train_batch_size", str(args.batch_size),
        "--max_train_steps", str(args.steps),
        "--learning_rate", "1e-4",
        "--conditioning_dropout_prob", "0.05",
        "--lr_scheduler", "constant",
        "--lr_warmup_steps", "0",
        "--seed", "0",
        "--mixed_precision", "no",
        "--checkpointing_steps", str(10**9),
        "--output_dir", str(out),
    ]  # fmt: skip


def script_steps(script: Path, weights: Path, dataset: Path, out: Path, args) -> list[float]:
    """Seconds per step of diffusers' script (the module docstring), from the stamps of its
    progress bar: ``steps - 1`` durations. Raises ``RuntimeError`` with the end of the
    script's output when it fails."""
    import subprocess

    stamps = out.with_suffix(".stamps.json")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    cmd = [sys.executable, "-c", _RUN_SCRIPT, str(stamps)]
    cmd += script_command(script, weights, dataset, out, args)
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        tail = (done.stdout + done.stderr).strip().splitlines()[-15:]
        raise RuntimeError(f"{script} exited with {done.returncode}:\n" + "\n".join(tail))
    times = json.loads(stamps.read_text())
    if len(times) != args.steps:
        raise RuntimeError(f"{script}: {len(times)} progress-bar steps, not {args.steps}")
    return list(np.diff(times))


def script_dataset(samples, folder: Path) -> Path:
    """The triplets as a local Parquet dataset with the script's default columns
    (``input_image``, ``edit_prompt``, ``edited_image``), ``load_dataset(folder)``'s train split."""
    import datasets
    from medibench.datasets import load_images

    rows: dict[str, list] = {"input_image": [], "edit_prompt": [], "edited_image": []}
    for s in samples:
        im = load_images(s)
        rows["input_image"].append(_png(im.input))
        rows["edit_prompt"].append(s.instruction)
        rows["edited_image"].append(_png(im.target))
    features = datasets.Features(
        {"input_image": datasets.Image(), "edit_prompt": datasets.Value("string"),
         "edited_image": datasets.Image()}
    )  # fmt: skip
    (folder / "data").mkdir(parents=True, exist_ok=True)
    datasets.Dataset.from_dict(rows, features=features).to_parquet(
        str(folder / "data" / "train-00000-of-00001.parquet")
    )
    return folder


def _png(array) -> dict[str, object]:
    import io

    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(array).save(buf, format="PNG")
    return {"bytes": buf.getvalue(), "path": None}


def medibench_steps(weights: Path, data: Path, out: Path, args) -> list[float]:
    from medibench.train import TrainConfig, train

    cfg = TrainConfig(
        dataset=f"native:{data}",
        model=f"ip2p:{weights}",
        method=args.method,
        out=out,
        max_steps=args.steps,
        batch_size=args.batch_size,
        bins=(args.resolution,),
        rank=4,
        checkpoint_every=10**9,
    )
    train(cfg)
    lines = (out / "train.jsonl").read_text().splitlines()
    return [json.loads(x)["time_per_step_s"] for x in lines]


def main(argv: list[str] | None = None) -> float:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--resolution", type=int, default=32)
    parser.add_argument("--method", choices=("full", "lora"), default="full")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument(
        "--script",
        type=Path,
        help="diffusers' examples/instruct_pix2pix/train_instruct_pix2pix.py: run it as the "
        "reference instead of the recipe written out here",
    )
    args = parser.parse_args(argv)
    if args.script is not None and not args.script.is_file():
        parser.error(f"--script {args.script}: no such file")
    if args.script is not None and args.method != "full":
        parser.error("--script: diffusers' script trains full weights only; drop --method lora")
    from tests.models.test_diffusers import build_tiny_ip2p
    from tests.train.conftest import make_triplets

    from medibench.datasets import load_dataset, load_images

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        weights = build_tiny_ip2p(root / "weights")
        data = make_triplets(root / "data", size=args.resolution)
        samples = list(load_dataset(f"native:{data}"))
        pixels = []
        for s in samples:
            im = load_images(s)
            pixels.append(
                tuple(
                    torch.from_numpy(x).permute(2, 0, 1).float() / 127.5 - 1
                    for x in (im.input, im.target)
                )
            )
        prompts = [s.instruction for s in samples]
        parquet = script_dataset(samples, root / "parquet") if args.script else None
        # Alternating rounds, each side's fastest median kept: a shared machine's load drifts.
        ref_s = ours_s = float("inf")
        for r in range(args.rounds):
            if args.script is not None and parquet is not None:
                try:
                    ref = script_steps(args.script, weights, parquet, root / f"script{r}", args)
                except RuntimeError as exc:
                    raise SystemExit(f"diffusers' script could not run: {exc}") from None
            else:
                ref = reference_steps(weights, pixels, prompts, args)
            ours = medibench_steps(weights, data, root / f"run{r}", args)
            ref_s = min(ref_s, statistics.median(ref[2:]))
            ours_s = min(ours_s, statistics.median(ours[2:]))
    ratio = ref_s / ours_s
    print(
        f"InstructPix2Pix {args.method}, batch {args.batch_size}, {args.resolution} px, "
        f"{args.steps} steps, CPU 1 thread"
    )
    what = "diffusers' script:       " if args.script else "diffusers example recipe:"
    print(f"  {what} {ref_s * 1000:.1f} ms/step ({1 / ref_s:.2f} steps/s)")
    print(f"  medibench train:          {ours_s * 1000:.1f} ms/step ({1 / ours_s:.2f} steps/s)")
    print(f"  ratio (medibench steps/s over the reference's): {ratio:.2f}x (target >= 1.0)")
    return ratio


if __name__ == "__main__":
    main()
