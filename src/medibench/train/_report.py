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

from medibench.train._eval import BASE_STEP

__all__ = ["EMA_BETA", "ema", "learning_curve", "training_panel", "write_training_report"]

LOG_FILE = "train.jsonl"
#: The smoothing of the loss curve drawn over the raw trace (:func:`ema`).
EMA_BETA = 0.9
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
    svg, drawn = _figure(curve)
    evaluated = sorted({e["step"] for e in curve["evals"]})
    base = "step 0: the base model, before training; " if BASE_STEP in evaluated else ""
    title = (
        f"loss (raw, and its EMA with beta {EMA_BETA}) and each metric by step, mean with its "
        f"CI; {base}y axes from 0 unless a panel says otherwise"
    )
    figure = {
        "title": title,
        "svg": svg,
        "data": {"kind": "learning-curve", "steps": ",".join(map(str, evaluated)),
                 "drawn": json.dumps(drawn)},
    }  # fmt: skip
    return {
        "id": "training",
        "title": "Training: learning curve",
        "summary": f"{len(steps)} steps, {len(evaluated)} evaluated",
        "tables": tables,
        "figures": [figure],
    }


def write_training_report(folder: Path, out: Path | None = None) -> Path | None:
    """Write ``folder/report/index.html``: the learning-curve panel (no samples of its own;
    each evaluation run has its report: ``medibench report DIR/eval/step-N``). ``None`` when
    ``folder`` is no training folder (a :data:`medibench.report._panels.FOLDER_REPORTS`
    writer)."""
    from medibench.report._browser import browser_pages
    from medibench.report._html import write_html

    folder = Path(folder)
    if not (folder / LOG_FILE).is_file() or (folder / "run.sqlite").exists():
        return None
    out = Path(out) if out is not None else folder / "report"
    out.mkdir(parents=True, exist_ok=True)
    panel = training_panel(None, folder) or {}  # never None: the folder holds its log
    config = json.loads((folder / "train_config.json").read_text(encoding="utf-8"))
    blob: dict[str, Any] = {
        "samples": [], "models": [], "metrics": [], "predictions": {}, "scores": {}
    }  # fmt: skip
    return write_html(
        out,
        run_dir=folder,
        meta={"config": config},
        sections=[],
        head=browser_pages(blob)[0],
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


def ema(values: list[float], beta: float = EMA_BETA) -> list[float]:
    """The exponential moving average of ``values``: ``s_1 = v_1``, ``s_t = beta * s_{t-1} +
    (1 - beta) * v_t`` (the smoothed loss drawn over the raw trace)."""
    out: list[float] = []
    for v in values:
        out.append(v if not out else beta * out[-1] + (1 - beta) * v)
    return out


def _figure(curve: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The learning-curve SVG and what it draws (read back from the plotted lines): ``{"loss":
    [[step, raw]], "ema": [[step, smoothed]], "metrics": {"metric (protocol)": [[step, mean]]},
    "from_zero": {panel: bool}}``. Each y axis starts at 0 unless a value is negative (then the
    panel's title says so); the x axis starts at step 0, the base model's evaluation."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metrics = sorted({(e["protocol"], m) for e in curve["evals"] for m in e["metrics"]})
    fig, axes = plt.subplots(
        1, 1 + len(metrics), figsize=(3.2 * (1 + len(metrics)), 2.8), squeeze=False
    )
    drawn: dict[str, Any] = {"loss": [], "ema": [], "metrics": {}, "from_zero": {}}
    last = max([s for s, _ in curve["loss"]] + [e["step"] for e in curve["evals"]] + [1])
    ax = axes[0][0]
    if curve["loss"]:
        steps, raw = (list(v) for v in zip(*curve["loss"], strict=True))
        (line,) = ax.plot(steps, raw, lw=0.8, alpha=0.35, color="C0", label="raw")
        drawn["loss"] = _read_back(line)
        (line,) = ax.plot(steps, ema(raw), lw=1.6, color="C0", label=f"EMA, beta {EMA_BETA}")
        drawn["ema"] = _read_back(line)
        ax.legend(fontsize=7, frameon=False)
    drawn["from_zero"]["train loss"] = _from_zero(ax, [v for _, v in curve["loss"]], "train loss")
    ax.set(xlabel="step")
    ax.set_xlim(0, last * 1.04)
    for ax, (proto, m) in zip(axes[0][1:], metrics, strict=True):
        pts = [
            (e["step"], *e["metrics"][m])
            for e in curve["evals"]
            if e["protocol"] == proto and m in e["metrics"]
        ]
        xs, ys = [p[0] for p in pts], [p[1] for p in pts]
        lo = [p[1] - p[2] if p[2] is not None else 0 for p in pts]
        hi = [p[3] - p[1] if p[3] is not None else 0 for p in pts]
        bars = ax.errorbar(xs, ys, yerr=[lo, hi], marker="o", capsize=3)
        name = f"{m} ({proto})"
        drawn["metrics"][name] = _read_back(bars.lines[0])
        base = [(x, y) for x, y in zip(xs, ys, strict=True) if x == BASE_STEP]
        if base:  # the base model, before any training step
            ax.plot(*base[0], marker="s", markersize=7, mfc="white", mec="C3", ls="none",
                    label="base model (step 0)")  # fmt: skip
            ax.legend(fontsize=7, frameon=False)
        drawn["from_zero"][name] = _from_zero(
            ax, [v for p in pts for v in (p[1], p[2]) if v is not None], name
        )
        ax.set(xlabel="step")
        ax.set_xlim(0 - last * 0.04, last * 1.04)
    fig.tight_layout()
    buf = io.StringIO()
    fig.savefig(buf, format="svg")
    plt.close(fig)
    text = buf.getvalue()
    return text[text.find("<svg") :], drawn


def _from_zero(ax: Any, values: list[float], title: str) -> bool:
    """Start ``ax``'s y axis at 0 when no value is negative; otherwise say so in the title."""
    if values and min(values) < 0:
        ax.set_title(f"{title}\n(y axis not from 0: negative values)", fontsize=9)
        return False
    ax.set_ylim(bottom=0)
    ax.set_title(title, fontsize=9)
    return True


def _read_back(line: Any) -> list[list[float]]:
    xs, ys = line.get_data()
    return [[float(x), float(y)] for x, y in zip(xs, ys, strict=True)]
