"""The learning curve of a training folder: loss by step (``train.jsonl``) beside each
evaluated checkpoint's metrics with their CIs (the runs in ``DIR/eval/step-N/``, summarised by
the report's own :func:`medibench.report.summarize` and the protocols' aggregation).

:func:`training_panel` is a report panel provider (:mod:`medibench.report._panels`): it shows
the curve in the report of a training folder (``medibench report DIR``,
:func:`write_training_report`) and in each of its evaluation runs' reports.
"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

__all__ = ["learning_curve", "training_panel", "write_training_report"]

LOG_FILE = "train.jsonl"
_STEP = re.compile(r"^step-(\d+)$")


def learning_curve(folder: Path) -> dict[str, Any]:
    """``{"loss": [(step, loss)], "evals": [{"step", "run", "protocol", "metrics": {name:
    (mean, ci_low, ci_high)}}]}`` of the training folder ``folder``, evaluations by step."""
    folder = Path(folder)
    loss = []
    for line in (folder / LOG_FILE).read_text(encoding="utf-8").splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:  # a line cut short by a kill
            continue
        loss.append((int(rec["step"]), float(rec["loss"])))
    evals = []
    runs = [
        (int(m.group(1)), p)
        for p in (folder / "eval").glob("step-*")
        if (m := _STEP.match(p.name)) and (p / "run.sqlite").is_file()
    ]
    for step, run in sorted(runs):
        evals += [{"step": step, "run": str(run), **row} for row in _overall(run)]
    return {"loss": loss, "evals": evals}


def training_panel(store: Any, run_dir: Path) -> dict[str, Any] | None:
    """The learning-curve panel of the training that ``run_dir`` is (or whose evaluation it
    is, ``DIR/eval/step-N``), or ``None``."""
    folder = _training_folder(Path(run_dir))
    if folder is None:
        return None
    curve = learning_curve(folder)
    protocols = sorted({e["protocol"] for e in curve["evals"]})
    tables = []
    for proto in protocols:
        rows = [e for e in curve["evals"] if e["protocol"] == proto]
        metrics = sorted({m for e in rows for m in e["metrics"]})
        tables.append(
            {
                "title": f"evaluated checkpoints · {proto}",
                "columns": ["step", "train loss", "samples", *metrics],
                "rows": [
                    [
                        str(e["step"]),
                        _loss_between(curve["loss"], prev, e["step"]),
                        str(e["n"]),
                        *(_cell(e["metrics"].get(m)) for m in metrics),
                    ]
                    for prev, e in zip([0] + [r["step"] for r in rows], rows, strict=False)
                ],
                "notes": [
                    "train loss: mean of the logged losses since the previous evaluation",
                    "metrics: the protocol's overall row, mean [CI] (medibench report)",
                ],
            }
        )
    steps = [s for s, _ in curve["loss"]]
    tables.insert(
        0,
        {
            "title": "training",
            "columns": ["steps logged", "first loss", "last loss", "folder"],
            "rows": [
                [
                    str(len(steps)),
                    _num(curve["loss"][0][1]) if steps else "",
                    _num(curve["loss"][-1][1]) if steps else "",
                    str(folder),
                ]
            ],
            "notes": [],
        },
    )
    return {
        "id": "training",
        "title": "Training: learning curve",
        "summary": f"{len(steps)} steps, {len({e['step'] for e in curve['evals']})} evaluated",
        "tables": tables,
        "figures": [{"title": "loss and metrics by step", "svg": _figure(curve)}],
    }


def write_training_report(folder: Path, out: Path | None = None) -> Path | None:
    """Write ``folder/report/index.html``: the learning-curve panel (no samples of its own;
    each evaluation run has its report: ``medibench report DIR/eval/step-N``). ``None`` when
    ``folder`` is no training folder (a :data:`medibench.report._panels.FOLDER_REPORTS`
    writer)."""
    from medibench.report._html import write_html

    folder = Path(folder)
    if not (folder / LOG_FILE).is_file() or (folder / "run.sqlite").exists():
        return None
    out = Path(out) if out is not None else folder / "report"
    out.mkdir(parents=True, exist_ok=True)
    panel = training_panel(None, folder)
    config = json.loads((folder / "train_config.json").read_text(encoding="utf-8"))
    blob = {"samples": [], "models": [], "metrics": [], "predictions": {}, "scores": {}}
    return write_html(
        out,
        run_dir=folder,
        meta={"config": config},
        sections=[],
        blob=blob,
        settings={},
        counts={"samples": 0, "models": 0, "predictions": 0, "scores": 0},
        build_seconds=0.0,
        panels=[{"tables": [], "figures": [], **panel}],
    )


# -- helpers ----------------------------------------------------------------------------------
def _training_folder(run_dir: Path) -> Path | None:
    if (run_dir / LOG_FILE).is_file():
        return run_dir
    parent = run_dir.parent
    if _STEP.match(run_dir.name) and parent.name == "eval" and (parent.parent / LOG_FILE).is_file():
        return parent.parent
    return None


def _overall(run: Path) -> list[dict[str, Any]]:
    """One row per protocol: its overall summary row of the run at ``run``."""
    from medibench.protocols import load_protocol
    from medibench.report import summarize
    from medibench.runs import RunStore

    with RunStore.open_existing(run) as store:
        scores = store.scores()
        samples = {s.sample_id: s for s in store.samples()}
    out = []
    for name, version in sorted({(s.protocol, s.protocol_version) for s in scores}):
        proto = load_protocol(f"{name}@{version}")
        mine = [s for s in scores if (s.protocol, s.protocol_version) == (name, version)]
        rows = summarize(
            mine,
            samples,
            proto.aggregation,
            metrics=list(proto.metric_names),
            applicable=getattr(proto, "applicable_metrics", None),
        )
        overall = next((r for r in rows if r["by"] == "all"), None)
        if overall is None:
            continue
        metrics = {
            m: (overall.get(m), overall.get(f"{m}_ci_low"), overall.get(f"{m}_ci_high"))
            for m in proto.metric_names
            if overall.get(m) is not None
        }
        out.append({"protocol": f"{name}@{version}", "n": overall["n"], "metrics": metrics})
    return out


def _loss_between(loss: list[tuple[int, float]], after: int, upto: int) -> str:
    window = [v for s, v in loss if after < s <= upto]
    return _num(sum(window) / len(window)) if window else ""


def _cell(value: tuple[float | None, ...] | None) -> str:
    if value is None or value[0] is None:
        return ""
    mean, low, high = value
    return _num(mean) + (f" [{_num(low)}, {_num(high)}]" if low is not None else "")


def _num(v: float | None) -> str:
    return "" if v is None else f"{v:.4g}"


def _figure(curve: dict[str, Any]) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metrics = sorted({(e["protocol"], m) for e in curve["evals"] for m in e["metrics"]})
    fig, axes = plt.subplots(
        1, 1 + len(metrics), figsize=(3.2 * (1 + len(metrics)), 2.6), squeeze=False
    )
    ax = axes[0][0]
    if curve["loss"]:
        ax.plot(*zip(*curve["loss"], strict=True), lw=1)
    ax.set(title="train loss", xlabel="step")
    for ax, (proto, m) in zip(axes[0][1:], metrics, strict=True):
        pts = [
            (e["step"], *e["metrics"][m])
            for e in curve["evals"]
            if e["protocol"] == proto and m in e["metrics"]
        ]
        xs, ys = [p[0] for p in pts], [p[1] for p in pts]
        lo = [p[1] - p[2] if p[2] is not None else 0 for p in pts]
        hi = [p[3] - p[1] if p[3] is not None else 0 for p in pts]
        ax.errorbar(xs, ys, yerr=[lo, hi], marker="o", capsize=3)
        ax.set(title=f"{m} ({proto})", xlabel="step")
    fig.tight_layout()
    buf = io.StringIO()
    fig.savefig(buf, format="svg")
    plt.close(fig)
    text = buf.getvalue()
    return text[text.find("<svg") :]
