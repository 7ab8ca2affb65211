"""``medibench calibration train``: few-shot prompt tuning of one method on one backbone, then
predictions for every evaluation set.

The output folder ``DIR``:

* ``config.json``: every choice (dataset, shots, seed, method and its resolved options,
  losses, template, epochs, learning rate, batch size, schedule, augmentation, backbone and the
  SHA-256 of its weights, class names, versions) and notes (a lowered prompt depth);
* ``shots.json``: the few-shot ids per class (the same seed gives the same ids everywhere);
* ``train.jsonl``: one line per step: ``step``, ``epoch``, ``lr``, ``loss`` and each term
  (written with each checkpoint, so it always matches it);
* ``checkpoint.pt`` (at the end of an epoch, at most every :data:`CHECKPOINT_SECONDS`, and
  after the last; a killed run resumes from it, bit-identically) and
  ``prompt.pt`` (the learned parameters, ``torch.save`` of the method's ``state_dict``);
* ``predictions/NAME.npz`` per evaluation set (``logits``, ``probs``, ``labels``, ``ids``,
  ``domain`` = NAME) and ``predictions.npz`` with every set stacked (plus ``method``, ``seed``,
  ``template``, ``backbone``, ``loss`` columns), both read by ``medibench calibration score``;
* ``done.json``: written last; a run with it is complete and is not redone.

Training: SGD on the method's parameters only; per epoch a seeded permutation of the shots in
batches (the last incomplete batch dropped, as Dassl's loader); MVC-Bench's augmentation
(random resized crop, scale 0.08-1, ratio 3/4-4/3, and a horizontal flip with p = 0.5, on the
processed pixels) unless ``augment=False``.
"""

from __future__ import annotations

import json
import math
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from medibench.prompt_tuning._data import LabelledImages, few_shot_indices, read_labelled
from medibench.prompt_tuning._losses import parse_losses
from medibench.prompt_tuning._methods import DEFAULTS, build_method
from medibench.prompt_tuning._predict import predict_logits, preprocess_all, write_predictions

__all__ = ["TrainSettings", "train"]

DEFAULT_TEMPLATE = "a photo of a {}."
#: A checkpoint (and the ``train.jsonl`` lines since the last one) is written at the end of an
#: epoch when this many seconds passed since the last, and after the last epoch.
CHECKPOINT_SECONDS = 30.0


@dataclass
class TrainSettings:
    """What ``medibench calibration train`` was asked (``None``: the method's default)."""

    dataset: str
    backbone: str
    method: str
    out: str
    shots: int = 16
    seed: int = 1
    losses: list[str] = field(default_factory=lambda: ["ce"])
    template: str = DEFAULT_TEMPLATE
    epochs: int | None = None
    lr: float | None = None
    batch_size: int | None = None
    evals: dict[str, str] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)
    augment: bool = True
    device: str = "cpu"
    teacher_templates: str | None = None


def train(settings: TrainSettings, *, log: Any = None) -> dict[str, Any]:
    """Train, evaluate and write ``settings.out`` (module doc); returns ``done.json``'s content.

    Raises:
        ValueError: an unknown method or option, a bad loss spec or template, too many shots,
            an output folder that holds a different run.
        RuntimeError: the backbone's weights changed during training (a bug, never expected).
    """
    say = log or (lambda _msg: None)
    out = Path(settings.out)
    if settings.method not in DEFAULTS:
        raise ValueError(f"unknown method {settings.method!r} (one of {', '.join(DEFAULTS)})")
    options = _options(settings)
    terms = parse_losses(settings.losses)
    settings_record = {
        k: v
        for k, v in asdict(settings).items()
        if k != "device" and not (k == "teacher_templates" and v is None)  # runs made before it
    }
    choice = {
        "settings": settings_record,
        "options": options,
        "losses": [{"name": t.label, **t.options} for t in terms],
    }
    done = out / "done.json"
    if done.is_file():
        result = json.loads(done.read_text("utf-8"))
        if result.get("choice") == json.loads(json.dumps(choice)):
            say(f"{out}: already done")
            return result
        raise ValueError(f"{out} holds a finished run with other settings; use another --out")
    data = read_labelled(settings.dataset)
    shots = few_shot_indices(data, settings.shots, settings.seed)
    from medibench.prompt_tuning._backbone import fingerprint, load_backbone

    backbone = load_backbone(settings.backbone)
    before = fingerprint(backbone)
    torch.manual_seed(settings.seed)
    gen = torch.Generator().manual_seed(settings.seed)
    method = build_method(
        settings.method, backbone, data.class_names, settings.template, options, gen
    )
    _check_losses(terms, method)
    _to_device(backbone, method, settings.device)
    config = _config(settings, choice, data, shots, backbone, before, method)
    out.mkdir(parents=True, exist_ok=True)
    _check_same_run(out / "config.json", config)
    _write_json(out / "config.json", config)
    _write_json(out / "shots.json", _shots_record(data, shots, settings))
    train_set = data.subset(shots)
    params = [p for p in method.parameters() if p.requires_grad]
    if options["epochs"] > 0 and params:
        pixels = preprocess_all(backbone, train_set).to(settings.device)
        labels = torch.as_tensor(train_set.labels).to(settings.device)
        _fit(method, params, pixels, labels, terms, options, settings.augment, gen, out, say)
    method.finish()
    torch.save(method.state_dict(), out / "prompt.pt")
    if fingerprint(backbone) != before:
        raise RuntimeError("the backbone's weights changed during training")
    evals = {name: read_labelled(spec) for name, spec in settings.evals.items()}
    if not evals:
        evals = {"test": _rest(data, shots)}
    scores = {}
    parts = []
    for name, eval_data in evals.items():
        spec = settings.evals.get(name, "the images beside the shots")
        if eval_data.class_names != data.class_names:
            raise ValueError(
                f"--eval {name}={spec}: classes {eval_data.class_names} differ from the training "
                f"dataset's {data.class_names}"
            )
        logits = predict_logits(method, backbone, eval_data, device=settings.device)
        parts.append((name, eval_data, logits))
        scores[name] = float((logits.argmax(1) == eval_data.labels).mean())
        say(f"{name}: {len(eval_data)} images, accuracy {scores[name]:.4f}")
    write_predictions(out, parts, _columns(settings))
    result = {
        "choice": choice,
        "accuracy": scores,
        "evals": {k: settings.evals.get(k, "rest") for k in evals},
    }
    _write_json(done, result)
    return result


def _fit(method, params, pixels, labels, terms, options, augment, gen, out: Path, say) -> None:
    opt = _optimizer(params, options)
    epochs, n = int(options["epochs"]), len(labels)
    batch = min(int(options["batch_size"]), n)
    per_epoch = n // batch
    start, step = 0, 0
    ckpt, log_path = out / "checkpoint.pt", out / "train.jsonl"
    if ckpt.is_file():
        state = torch.load(ckpt, weights_only=False, map_location=pixels.device)
        method.load_state_dict(state["method"])
        opt.load_state_dict(state["optim"])
        gen.set_state(state["gen"])
        torch.set_rng_state(state["torch_rng"])
        if state.get("gpa") is not None:
            method.load_gpa_state(state["gpa"])
        start, step = state["epoch"], state["step"]
        _truncate_log(log_path, step, say)
        say(f"resuming at epoch {start + 1} (step {step}) from {ckpt}")
    elif log_path.exists():
        log_path.unlink()
    method.train()
    pending: list[dict[str, Any]] = []
    saved = time.monotonic()
    for epoch in range(start, epochs):
        lr = _lr(options, epoch)
        for group in opt.param_groups:
            group["lr"] = lr
        order = torch.randperm(n, generator=gen)
        lines = []
        for b in range(per_epoch):
            idx = order[b * batch : (b + 1) * batch]
            x = _augment(pixels[idx], gen) if augment else pixels[idx]
            y = labels[idx]
            result = method(x)
            context = _loss_context(method, result, x, terms)
            values = {t.label: t(result.logits, y, **context) for t in terms}
            values.update(result.terms)
            loss = sum(values.values())
            opt.zero_grad(set_to_none=True)
            if method.projects_gradient:
                general = method.general_loss(result)
                _projected_backward(params, loss, general, float(options["lambda"]))
                values["prograd_kl"] = general.detach()
            else:
                loss.backward()
            opt.step()
            step += 1
            lines.append(
                {
                    "step": step,
                    "epoch": epoch + 1,
                    "lr": lr,
                    "loss": float(loss.detach()),
                    **{k: float(v.detach()) for k, v in values.items()},
                }
            )
        method.end_epoch(epoch, epochs)
        pending += lines
        last = epoch + 1 == epochs
        if last or time.monotonic() - saved >= CHECKPOINT_SECONDS:
            _append_lines(log_path, pending)
            pending = []
            state = {
                "epoch": epoch + 1,
                "step": step,
                "method": method.state_dict(),
                "optim": opt.state_dict(),
                "gen": gen.get_state(),
                "torch_rng": torch.get_rng_state(),
                "gpa": method.gpa_state() if hasattr(method, "gpa_state") else None,
            }
            tmp = ckpt.with_name(f".{ckpt.name}.tmp")  # a killed save: the lock removes it
            torch.save(state, tmp)
            os.replace(tmp, ckpt)
            saved = time.monotonic()
        if lines:
            say(f"epoch {epoch + 1}/{epochs}: loss {lines[-1]['loss']:.4f}, lr {lr:.6g}")
    method.eval()


def _optimizer(params, options: dict[str, Any]) -> torch.optim.Optimizer:
    """SGD (momentum, weight decay) or Adam (weight decay, ``adam_eps``), as Dassl builds them."""
    name = options["optimizer"]
    if name == "sgd":
        return torch.optim.SGD(
            params,
            lr=options["lr"],
            momentum=options["momentum"],
            weight_decay=options["weight_decay"],
        )
    if name == "adam":
        return torch.optim.Adam(
            params,
            lr=options["lr"],
            weight_decay=options["weight_decay"],
            eps=float(options.get("adam_eps", 1e-8)),
        )
    raise ValueError(f"--set optimizer={name!r}: sgd or adam")


def _loss_context(method, result, x: torch.Tensor, terms) -> dict[str, torch.Tensor]:
    """What the loss terms read besides the logits: the batch's zero-shot logits, the prompted
    class text features (L2-normalised) and the frozen ones."""
    needs = {k for t in terms for k in t.needs}
    context: dict[str, torch.Tensor] = {}
    if "zs_logits" in needs:
        context["zs_logits"] = method.zero_shot_logits(x)
    if "text" in needs and result.text is not None:
        context["text"] = torch.nn.functional.normalize(result.text, dim=-1)
    if "zs_text" in needs:
        context["zs_text"] = method.zs_text
    return context


def _check_losses(terms, method) -> None:
    """Refuse, before training, a loss on text features with a method that has none shared by
    the batch (CoCoOp's are per image)."""
    for t in terms:
        if "text" in t.needs and not method.has_class_text:
            raise ValueError(
                f"--loss {t.label}: reads the class text features, which {method.name} does not "
                "have (one set per image); use it with another method"
            )


def _to_device(backbone: Any, method: Any, device: str) -> None:
    """Move the towers (``nn.Module`` ones) and the method to ``device`` (``cpu``, ``cuda``)."""
    try:
        target = torch.device(device)
    except RuntimeError as exc:
        raise ValueError(f"--device {device!r}: {exc}") from None
    if target.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"--device {device}: this torch has no CUDA device")
    for tower in (backbone.image, backbone.text):
        if isinstance(tower, torch.nn.Module):
            tower.to(target)
    method.to(target)


def _projected_backward(params, loss, general, lam: float) -> None:
    """ProGrad: ``g <- g - lam * (g . u) u`` per parameter where ``g . u < 0``, ``u`` the unit
    gradient of the general (zero-shot KL) loss."""
    general_grads = torch.autograd.grad(general, params, retain_graph=True, allow_unused=True)
    loss.backward()
    for p, gg in zip(params, general_grads, strict=True):
        if gg is None or p.grad is None:
            continue
        norm = torch.linalg.vector_norm(gg)
        if norm == 0:
            continue
        u = gg / norm
        dot = torch.dot(p.grad.flatten(), u.flatten())
        if dot < 0:
            p.grad = p.grad - lam * dot * u


def _lr(options: dict[str, Any], epoch: int) -> float:
    """Warm-up epochs at ``warmup_lr``, then ``lr * (1 + cos(pi * epoch / epochs)) / 2``."""
    if epoch < int(options["warmup_epochs"]):
        return float(options["warmup_lr"])
    return float(options["lr"]) * 0.5 * (1.0 + math.cos(math.pi * epoch / int(options["epochs"])))


def _augment(x: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """Random resized crop (scale 0.08-1, ratio 3/4-4/3, back to the input size) and a
    horizontal flip with p = 0.5, per image, drawn from ``gen``."""
    _, _, h, w = x.shape
    out = []
    for img in x:
        r = torch.rand(4, generator=gen).tolist()
        area = h * w * (0.08 + 0.92 * r[0])
        ratio = math.exp(math.log(3 / 4) + (math.log(4 / 3) - math.log(3 / 4)) * r[1])
        ch = max(1, min(h, round(math.sqrt(area / ratio))))
        cw = max(1, min(w, round(math.sqrt(area * ratio))))
        top, left = int(r[2] * (h - ch + 1)), int(r[3] * (w - cw + 1))
        crop = img[:, top : top + ch, left : left + cw].unsqueeze(0)
        crop = torch.nn.functional.interpolate(
            crop, size=(h, w), mode="bilinear", align_corners=False
        )[0]
        if float(torch.rand(1, generator=gen)) < 0.5:
            crop = crop.flip(-1)
        out.append(crop)
    return torch.stack(out)


def _options(settings: TrainSettings) -> dict[str, Any]:
    options = dict(DEFAULTS[settings.method])
    unknown = sorted(set(settings.options) - set(options))
    if unknown:
        raise ValueError(
            f"--set {', '.join(unknown)}: not an option of {settings.method} "
            f"(options: {', '.join(sorted(options))})"
        )
    options.update(settings.options)
    for key in ("epochs", "lr", "batch_size", "teacher_templates"):
        if getattr(settings, key) is not None:
            if key not in options:
                raise ValueError(
                    f"--{key.replace('_', '-')}: {settings.method} has no frozen teacher "
                    "(promptsrc has)"
                )
            options[key] = getattr(settings, key)
    defaults = DEFAULTS[settings.method]
    for key, value in options.items():
        given = key in _TRAIN_FLAGS and getattr(settings, key) is not None
        name = f"--{key.replace('_', '-')}" if given else f"--set {key}"
        _check_option(name, value, defaults[key], key)
    if options["batch_size"] < 1:
        raise ValueError(f"--batch-size={options['batch_size']}: must be >= 1")
    return options


#: Options with their own flag (``--lr``); the others are set with ``--set KEY=VALUE``.
_TRAIN_FLAGS = ("epochs", "lr", "batch_size", "teacher_templates")
#: Options that must be >= 1 when given (``None``: the method's own choice).
_AT_LEAST_ONE = ("n_ctx", "n_ctx_vision", "depth", "text_depth", "vision_depth")


def _check_option(name: str, value: Any, default: Any, key: str) -> None:
    """Refuse, before any training, a value training cannot use: text for a number, NaN or
    infinity, a negative rate, a context length below 1."""
    numeric = isinstance(default, (int, float)) and not isinstance(default, bool)
    numeric = numeric or key in _AT_LEAST_ONE
    if not numeric or (value is None and default is None):
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{name}={value!r}: expected a number")
    if not math.isfinite(value):
        raise ValueError(f"{name}={value}: must be a finite number")
    if key in _AT_LEAST_ONE and (value < 1 or value != int(value)):
        raise ValueError(f"{name}={value}: must be a whole number >= 1")
    if value < 0:
        raise ValueError(f"{name}={value}: must be >= 0")


def _config(settings, choice, data: LabelledImages, shots, backbone, digest, method) -> dict:
    import transformers

    return {
        **choice,
        "device": settings.device,
        "class_names": data.class_names,
        "n_train_pool": len(data),
        "n_shots_total": len(shots),
        "backbone": {
            "spec": backbone.spec,
            "family": backbone.family,
            "sha256": digest,
            "logit_scale": backbone.scale,
            "logit_bias": backbone.bias,
        },
        "notes": method.notes,
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__},
    }


def _check_same_run(path: Path, config: dict) -> None:
    if path.is_file():
        old = json.loads(path.read_text("utf-8"))
        if old.get("settings") != config["settings"] or old.get("options") != config["options"]:
            raise ValueError(f"{path.parent} holds a run with other settings; use another --out")


def _shots_record(data: LabelledImages, shots: list[int], settings: TrainSettings) -> dict:
    by_class: dict[str, list[str]] = {name: [] for name in data.class_names}
    for i in shots:
        by_class[data.class_names[int(data.labels[i])]].append(data.ids[i])
    return {
        "dataset": settings.dataset,
        "shots": settings.shots,
        "seed": settings.seed,
        "ids": by_class,
    }


def _rest(data: LabelledImages, shots: list[int]) -> LabelledImages:
    rest = sorted(set(range(len(data))) - set(shots))
    if not rest:
        raise ValueError("no --eval set given and no image left beside the shots to evaluate on")
    return data.subset(rest)


def _columns(settings: TrainSettings) -> dict[str, str]:
    return {
        "method": settings.method,
        "seed": str(settings.seed),
        "template": settings.template,
        "backbone": settings.backbone,
        "loss": "+".join(settings.losses or ["ce"]),
    }


def _truncate_log(path: Path, step: int, say: Any) -> None:
    """Keep the lines up to the checkpoint's ``step``; a last line a kill tore is dropped (and
    rewritten by the resumed run), with a note."""
    if not path.is_file():
        return
    lines = [ln for ln in path.read_text("utf-8").splitlines() if ln.strip()]
    keep = []
    for number, line in enumerate(lines, 1):
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            if number < len(lines):
                raise ValueError(
                    f"{path} line {number}: not a JSON line (only the last line can be torn "
                    "by a kill); remove the folder to train again"
                ) from None
            say(f"note: {path} line {number} was torn by a kill; dropped, training rewrites it")
            continue
        if record["step"] <= step:
            keep.append(line)
    _write_text(path, "".join(ln + "\n" for ln in keep))


def _append_lines(path: Path, records: list[dict[str, Any]]) -> None:
    """Append ``records`` to the JSON-lines file ``path`` in one write, flushed to disk, so a
    kill tears at most the last line (which :func:`_truncate_log` drops on resume)."""
    text = "".join(json.dumps(r) + "\n" for r in records)
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())


def _write_text(path: Path, text: str) -> None:
    from medibench.io import atomic_write_text

    atomic_write_text(path, text)


def _write_json(path: Path, data: Any) -> None:
    _write_text(path, json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")
