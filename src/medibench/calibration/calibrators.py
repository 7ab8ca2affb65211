"""Post-hoc calibrators, fitted on a declared validation split and stored with their parameters.

* ``temperature``: ``softmax(logits / T)``, ``T = exp(s) > 0``, ``s`` fitted by L-BFGS on the
  validation NLL (MVC-Bench's ``TempScaling`` scales as ``logits * exp(t)`` from ``t = 1.5``: the
  same family, ``T = exp(-t)``, from another start).
* ``vector``: ``softmax(logits * w + b)`` (C weights, C biases), and ``matrix``:
  ``softmax(logits @ W + b)``; both by L-BFGS on the NLL from a seeded initialisation (``w = 1``,
  ``W = I``, plus ``N(0, 0.01)`` noise from ``numpy.random.default_rng(seed)``).
* ``histogram``: one-vs-rest histogram binning (Zadrozny and Elkan): ``n_bins`` equal-width bins
  ``(lo, hi]`` per class, each mapped to the validation frequency of that class in the bin (an
  empty bin keeps the score), then rows renormalised.
* ``isotonic``: one-vs-rest isotonic regression (scikit-learn's ``IsotonicRegression``, clipped
  to [0, 1] and to the fitted range), then rows renormalised.

Scaling methods need logits; given probabilities only, they use ``log p`` (``softmax(log p) =
p``, so nothing is lost; recorded as ``logits_from: "log-probabilities"``). A row that the
binning methods map to all zeros becomes uniform.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from medibench.calibration._binning import bin_index
from medibench.calibration._inputs import Predictions, as_predictions
from medibench.calibration.metrics import negative_log_likelihood

__all__ = [
    "METHODS",
    "Calibrator",
    "Method",
    "apply_calibrator",
    "before_after",
    "fit_calibrator",
    "load_calibrator",
    "save_calibrator",
    "validation_split",
]

Method = Literal["temperature", "vector", "matrix", "histogram", "isotonic"]
METHODS: tuple[str, ...] = ("temperature", "vector", "matrix", "histogram", "isotonic")
#: Values of a ``split`` group column that mark the validation rows.
VALIDATION_NAMES = ("val", "valid", "validation")


@dataclass(frozen=True)
class Calibrator:
    """A fitted calibrator: its ``method``, its ``params`` (JSON-ready) and how it was fitted
    (``fitted_on`` source, ``n_val`` samples, ``nll_before`` and ``nll_after`` on them)."""

    method: str
    n_classes: int
    params: dict[str, Any]
    fitted_on: str = ""
    n_val: int = 0
    nll_before: float = float("nan")
    nll_after: float = float("nan")
    settings: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "n_classes": self.n_classes,
            "params": self.params,
            "fitted_on": self.fitted_on,
            "n_val": self.n_val,
            "nll_before": self.nll_before,
            "nll_after": self.nll_after,
            "settings": self.settings,
        }


def validation_split(pred: Predictions | None) -> Predictions:
    """The validation rows: those whose ``split`` column says ``val``/``valid``/``validation``
    when the file has such a column, else the whole file (a file given as the validation split).

    Raises:
        ValueError: no predictions were given, or a ``split`` column without validation rows.
    """
    if pred is None:
        raise ValueError("no validation split: calibrators are fitted on a declared validation set")
    split = pred.groups.get("split")
    if split is None:
        return pred
    rows = np.isin(np.char.lower(split.astype(str)), VALIDATION_NAMES)
    if not rows.any():
        found = ", ".join(sorted({str(v) for v in split})[:5])
        raise ValueError(
            f"{pred.source}: the split column has no validation rows (values: {found}); "
            f"mark them as one of {', '.join(VALIDATION_NAMES)}"
        )
    return pred.subset(rows, source=f"{pred.source} [split=val]")


def fit_calibrator(
    val: Predictions | None,
    method: Method = "temperature",
    *,
    seed: int = 0,
    n_bins: int = 15,
) -> Calibrator:
    """Fit ``method`` on the validation split of ``val`` (see :func:`validation_split`).

    Raises:
        ValueError: an unknown method, no validation split, or a validation split whose labels
            hold a single class (nothing to calibrate against).
    """
    if method not in METHODS:
        raise ValueError(f"unknown calibration method {method!r} (one of {', '.join(METHODS)})")
    val = validation_split(val)
    if np.unique(val.labels).size < 2:
        raise ValueError(
            f"{val.source}: the validation labels hold one class only ({int(val.labels[0])}); "
            "a calibrator needs both right and wrong predictions of several classes"
        )
    logits, origin = _logits(val)
    settings: dict[str, Any] = {"logits_from": origin}
    params: dict[str, Any]
    if method == "temperature":
        params = {"temperature": _fit_scaling("temperature", logits, val.labels, seed)}
    elif method in ("vector", "matrix"):
        params = _fit_scaling(method, logits, val.labels, seed)
        settings["seed"] = seed
    elif method == "histogram":
        params = _fit_histogram(val.probs, val.labels, n_bins)
        settings["n_bins"] = n_bins
    else:
        params = _fit_isotonic(val.probs, val.labels)
    cal = Calibrator(method, val.n_classes, params, val.source, val.n, settings=settings)
    after = apply_calibrator(cal, val)
    return Calibrator(
        method,
        val.n_classes,
        params,
        val.source,
        val.n,
        nll_before=negative_log_likelihood(val.probs, val.labels, logits=val.logits),
        nll_after=negative_log_likelihood(after.probs, after.labels, logits=after.logits),
        settings=settings,
    )


def apply_calibrator(cal: Calibrator, pred: Predictions) -> Predictions:
    """Calibrated predictions (same labels and groups; logits for the scaling methods)."""
    if pred.n_classes != cal.n_classes:
        raise ValueError(
            f"{pred.source}: {pred.n_classes} classes, but the calibrator was fitted on "
            f"{cal.n_classes} ({cal.fitted_on})"
        )
    p = cal.params
    if cal.method in ("temperature", "vector", "matrix"):
        z, _ = _logits(pred)
        if cal.method == "temperature":
            out = z / float(p["temperature"])
        elif cal.method == "vector":
            out = z * np.asarray(p["weights"]) + np.asarray(p["bias"])
        else:
            out = z @ np.asarray(p["weights"]) + np.asarray(p["bias"])
        return as_predictions(pred.labels, logits=out, groups=pred.groups, source=pred.source)
    if cal.method == "histogram":
        probs = _apply_histogram(pred.probs, p)
    elif cal.method == "isotonic":
        probs = np.stack(
            [np.interp(pred.probs[:, c], p["x"][c], p["y"][c]) for c in range(cal.n_classes)],
            axis=1,
        )
    else:
        raise ValueError(f"unknown calibration method {cal.method!r} in the parameters")
    return as_predictions(
        pred.labels, probs=_renormalise(probs), groups=pred.groups, source=pred.source
    )


def before_after(
    cal: Calibrator,
    test: Predictions,
    protocol: str = "calibration@1",
    *,
    by: Sequence[str] = (),
    n_resamples: int = 0,
) -> dict[str, Any]:
    """``{"method", "params", "before": score(test), "after": score(calibrated test)}`` under
    ``protocol`` (:func:`medibench.calibration.score`)."""
    from medibench.calibration.protocols import score

    after = apply_calibrator(cal, test)
    return {
        "method": cal.method,
        "params": cal.params,
        "before": score(test, protocol, by=by, n_resamples=n_resamples),
        "after": score(after, protocol, by=by, n_resamples=n_resamples),
    }


def save_calibrator(cal: Calibrator, path: str | Path) -> Path:
    """Write the calibrator as JSON (atomically)."""
    from medibench.io import atomic_write_text

    return atomic_write_text(path, json.dumps(cal.to_dict(), indent=2) + "\n")


def load_calibrator(path: str | Path) -> Calibrator:
    """Read a calibrator written by :func:`save_calibrator`."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        cal = Calibrator(**data)
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: no such calibrator parameters file") from None
    except (json.JSONDecodeError, TypeError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: not calibrator parameters ({exc})") from exc
    problem = _parameter_problem(cal)
    if problem:
        raise ValueError(f"{path}: not calibrator parameters as 'calibration fit' writes them: "
                         f"{problem}")  # fmt: skip
    return cal


def _parameter_problem(cal: Calibrator) -> str | None:
    """What makes a loaded calibrator unusable (a hand-edited or damaged file), or ``None``."""
    if cal.method not in METHODS:
        return f"method {cal.method!r} is not one of {', '.join(METHODS)}"
    if isinstance(cal.n_classes, bool) or not isinstance(cal.n_classes, int) or cal.n_classes < 2:
        return f"n_classes is {cal.n_classes!r}, not a number of classes (2 or more)"
    if not isinstance(cal.fitted_on, str) or not isinstance(cal.n_val, int):
        return f"fitted_on {cal.fitted_on!r} / n_val {cal.n_val!r}: a source name and a count"
    if not isinstance(cal.params, dict):
        return f"params is {cal.params!r}, not an object"
    c = cal.n_classes
    shapes: dict[str, dict[str, tuple[int, ...]]] = {
        "temperature": {"temperature": ()},
        "vector": {"weights": (c,), "bias": (c,)},
        "matrix": {"weights": (c, c), "bias": (c,)},
        "histogram": {"n_bins": (), "values": (c, -1)},
        "isotonic": {"x": (c, -1), "y": (c, -1)},
    }
    for key, shape in shapes[cal.method].items():
        value = cal.params.get(key)
        rows = value if shape[-1:] == (-1,) and isinstance(value, list) else [value]
        if shape[-1:] == (-1,) and len(rows) != shape[0]:
            return f"params.{key} is {value!r}, not {_shape_words(shape)}"
        for row in rows:  # a per-class list may be ragged (isotonic thresholds)
            want = shape[1:] if shape[-1:] == (-1,) else shape
            try:
                arr = np.asarray(row, dtype=np.float64)
            except (TypeError, ValueError):
                return f"params.{key} is {value!r}, not {_shape_words(shape)}"
            if (
                row is None
                or arr.ndim != len(want)
                or any(w not in (-1, g) for w, g in zip(want, arr.shape, strict=True))
            ):
                return f"params.{key} is {value!r}, not {_shape_words(shape)}"
            ok = np.isfinite(arr) | (np.isnan(arr) if key == "values" else False)
            if not ok.all():  # a histogram's empty bin is NaN (it keeps the score)
                return f"params.{key} holds a value that is not a finite number"
    if cal.method == "temperature" and not float(cal.params["temperature"]) > 0:
        return f"params.temperature is {cal.params['temperature']!r}, not positive"
    if cal.method == "histogram" and not float(cal.params["n_bins"]).is_integer():
        return f"params.n_bins is {cal.params['n_bins']!r}, not a whole number"
    if cal.method == "isotonic" and any(
        len(x) != len(y) for x, y in zip(cal.params["x"], cal.params["y"], strict=True)
    ):
        return "params.x and params.y differ in length for a class"
    return None


def _shape_words(shape: tuple[int, ...]) -> str:
    if not shape:
        return "a number"
    if shape[-1] == -1:
        return f"a list of {shape[0]} lists of numbers (one per class)"
    return "a " + " x ".join(str(n) for n in shape) + " array of numbers"


# --- fitting ---------------------------------------------------------------------------------


def _logits(pred: Predictions) -> tuple[np.ndarray, str]:
    if pred.logits is not None:
        return pred.logits, "logits"
    return np.log(np.maximum(pred.probs, 1e-300)), "log-probabilities"


def _fit_scaling(method: str, z: np.ndarray, y: np.ndarray, seed: int) -> Any:
    from scipy.optimize import minimize

    n, c = z.shape
    onehot = np.zeros_like(z)
    onehot[np.arange(n), y] = 1.0
    rng = np.random.default_rng(seed)

    def nll(u: np.ndarray) -> tuple[float, np.ndarray]:
        top = u.max(axis=1, keepdims=True)
        e = np.exp(u - top)
        s = e.sum(axis=1, keepdims=True)
        loss = float(np.mean(np.log(s[:, 0]) + top[:, 0] - u[onehot > 0]))
        return loss, (e / s - onehot) / n  # loss and dL/du

    if method == "temperature":

        def f_temperature(theta: np.ndarray) -> tuple[float, np.ndarray]:
            u = z * np.exp(-theta[0])
            loss, g = nll(u)
            return loss, np.array([-np.sum(g * u)])

        # to the optimum: scipy's default gtol (1e-5) leaves T path-dependent in its 4th digit
        res = minimize(f_temperature, np.zeros(1), jac=True, method="L-BFGS-B",
                       options={"ftol": 0.0, "gtol": 1e-12})  # fmt: skip
        return float(np.exp(res.x[0]))
    if method == "vector":
        x0 = np.concatenate([1.0 + rng.normal(0, 0.01, c), rng.normal(0, 0.01, c)])

        def f_vector(theta: np.ndarray) -> tuple[float, np.ndarray]:
            w, b = theta[:c], theta[c:]
            loss, g = nll(z * w + b)
            return loss, np.concatenate([(g * z).sum(axis=0), g.sum(axis=0)])

        res = minimize(f_vector, x0, jac=True, method="L-BFGS-B")
        return {"weights": res.x[:c].tolist(), "bias": res.x[c:].tolist()}
    x0 = np.concatenate([(np.eye(c) + rng.normal(0, 0.01, (c, c))).ravel(), rng.normal(0, 0.01, c)])

    def f_matrix(theta: np.ndarray) -> tuple[float, np.ndarray]:
        w, b = theta[: c * c].reshape(c, c), theta[c * c :]
        loss, g = nll(z @ w + b)
        return loss, np.concatenate([(z.T @ g).ravel(), g.sum(axis=0)])

    res = minimize(f_matrix, x0, jac=True, method="L-BFGS-B")
    return {"weights": res.x[: c * c].reshape(c, c).tolist(), "bias": res.x[c * c :].tolist()}


def _fit_histogram(probs: np.ndarray, y: np.ndarray, n_bins: int) -> dict[str, Any]:
    values = []
    for c in range(probs.shape[1]):
        index, _ = bin_index(probs[:, c], n_bins, "right")
        count = np.bincount(index, minlength=n_bins)
        hits = np.bincount(index, weights=(y == c).astype(np.float64), minlength=n_bins)
        with np.errstate(invalid="ignore", divide="ignore"):
            values.append(np.where(count > 0, hits / count, np.nan).tolist())
    return {"n_bins": n_bins, "values": values}


def _apply_histogram(probs: np.ndarray, p: dict[str, Any]) -> np.ndarray:
    out = np.empty_like(probs)
    for c in range(probs.shape[1]):
        index, _ = bin_index(probs[:, c], int(p["n_bins"]), "right")
        v = np.asarray(p["values"][c], dtype=np.float64)[index]
        out[:, c] = np.where(np.isnan(v), probs[:, c], v)  # an empty bin keeps the score
    return out


def _fit_isotonic(probs: np.ndarray, y: np.ndarray) -> dict[str, Any]:
    try:
        from sklearn.isotonic import IsotonicRegression
    except ImportError as exc:
        raise ImportError(
            "isotonic calibration needs scikit-learn: pip install 'medibench[calibration]'"
        ) from exc
    xs, ys = [], []
    for c in range(probs.shape[1]):
        iso = IsotonicRegression(y_min=0.0, y_max=1.0, out_of_bounds="clip")
        iso.fit(probs[:, c], (y == c).astype(np.float64))
        xs.append(np.asarray(iso.X_thresholds_).tolist())
        ys.append(np.asarray(iso.y_thresholds_).tolist())
    return {"x": xs, "y": ys}


def _renormalise(probs: np.ndarray) -> np.ndarray:
    s = probs.sum(axis=1, keepdims=True)
    zero = s[:, 0] <= 0
    return np.where(zero[:, None], 1.0 / probs.shape[1], probs / np.where(s > 0, s, 1.0))
