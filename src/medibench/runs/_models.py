"""The models of a run: their names before they are built, their specs.

- Output folders (:func:`medibench._identity.output_folder`) map a model name to
  ``outputs/<folder>``: a readable slug plus 8 hex digits of the name's sha256 (``"m 1"`` ->
  ``m_1-6b4e0fa1``), so two names never share a folder. Prediction rows store their paths, so
  runs written with another naming stay readable.
- :func:`planned_name` is the name a spec will record, known without building the model where
  the factory says it (a ``name`` option or default, a class attribute), so two ``--model``
  entries with one name are refused before anything runs.
- :func:`check_model_specs` refuses a model name that the run already holds with another fully
  resolved spec (factory defaults included, an API model's base URL as the one its calls go to),
  as a changed seed is refused.
- :func:`generation_budget` and :func:`charge_budget`: the run's ``max_cost`` as the call
  layer's :class:`~medibench.calls.CostBudget`, shared by its API models.
"""

from __future__ import annotations

import inspect
import json
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

from medibench.calls import CostBudget
from medibench.runs._store import RunStore, RunStoreError

__all__ = [
    "RUNTIME_KEY",
    "charge_budget",
    "check_model_specs",
    "check_unique_names",
    "generation_budget",
    "planned_name",
    "record_model_specs",
    "record_runtime",
    "resolved_spec",
]

_META_KEY = "model_specs_by_name"
#: The run metadata key of what each model's ``"auto"`` options resolved to (device, dtype).
RUNTIME_KEY = "model_runtime"


def planned_name(spec) -> str | None:
    """The name a :class:`~medibench.models.ModelSpec` will record, or ``None`` if only the
    built model knows it.

    In order: the ``name`` option; the factory's ``name`` parameter default (a string); for a
    ``name`` defaulting to ``None`` beside a ``model`` parameter (the API adapters), the model
    id; a string class attribute ``name``.
    """
    if spec.options.get("name"):
        return str(spec.options["name"])
    try:
        factory = spec.factory()
    except Exception:  # reported when the model is built
        return None
    params = _parameters(factory)
    if "name" in params:
        default = params["name"].default
        if isinstance(default, str) and default:
            return default
        if default is None and "model" in params:
            model_id = spec.options.get("model", params["model"].default)
            return str(model_id) if isinstance(model_id, str) and model_id else None
    attr = getattr(factory, "name", None) if inspect.isclass(factory) else None
    return attr if isinstance(attr, str) and attr else None


def resolved_spec(spec) -> dict[str, Any]:
    """The spec as the factory will see it: ``{"model", "options"}`` with every default the
    factory's signature declares filled in, and then resolved by the factory's
    ``resolve_options`` if it has one (an API model's base URL: the one its calls go to)
    (JSON-safe; non-JSON values by their ``repr``)."""
    options: dict[str, Any] = {}
    try:
        params = _parameters(spec.factory())
    except Exception:
        params = {}
    for name, p in params.items():
        if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.default is not p.empty:
            options[name] = p.default
    options.update(spec.options)
    options = _resolve(spec.model, options)
    return {"model": spec.model, "options": {k: _json_safe(v) for k, v in sorted(options.items())}}


def _resolve(model: str, options: dict[str, Any], environ: Mapping[str, str] | None = None):
    """``options`` through the factory's ``resolve_options`` (what a default stands for on this
    machine: an API model's ``base_url`` of ``None`` is the URL its calls go to), if it has one."""
    from medibench.models._spec import ModelSpec

    try:
        resolve = getattr(ModelSpec(model).factory(), "resolve_options", None)
    except Exception:  # reported when the model is built
        return options
    return resolve(options, environ) if callable(resolve) else options


def check_unique_names(entries: Sequence[tuple[str, str | None]]) -> None:
    """``entries`` are (``--model`` text, planned name); raise ``ValueError`` when two share a
    name (or are the same text, whose name is not known yet)."""
    seen: dict[str, str] = {}
    for text, name in entries:
        key = f"name:{name}" if name is not None else f"spec:{text}"
        if key in seen:
            what = f"resolve to the model name {name!r}" if name is not None else "are the same"
            raise ValueError(
                f"--model {seen[key]!r} and --model {text!r} {what}: one output folder and one "
                "set of results per name; give one of them another name (a 'name' option or a "
                "spec file's name:)"
            )
        seen[key] = text


def check_model_specs(store: RunStore, specs: Mapping[str, dict[str, Any]]) -> None:
    """Raise :class:`RunStoreError` when the run holds one of these names with another spec."""
    recorded = store.get_meta(_META_KEY) or {}
    for name, spec in specs.items():
        before = recorded.get(name)
        if before is not None and not _same_spec(before, spec):
            raise RunStoreError(
                f"{store.run_dir} holds model {name!r} made with spec {_show(before)}, not "
                f"{_show(spec)}; use another --out folder, or give this spec another name"
            )


def _same_spec(before: dict[str, Any], now: dict[str, Any]) -> bool:
    """Equal, or equal but for options the factory gained since ``before`` was recorded that
    are left at a ``None`` default (``price_per_image``, say): those change no output."""
    if before == now:
        return True
    from medibench.models._spec import migrate_options

    with warnings.catch_warnings():  # a run recorded before an option was renamed
        warnings.simplefilter("ignore", FutureWarning)
        old = migrate_options(str(before.get("model")), before.get("options", {}))
    # a base URL recorded as None (before runs recorded the URL used) was the provider's API
    old = _resolve(str(before.get("model")), old, environ={})
    new = now.get("options", {})
    added = set(new) - set(old)
    rest = {k: v for k, v in before.items() if k != "options"}  # model, icl settings
    return (
        rest == {k: v for k, v in now.items() if k != "options"}
        and all(new[k] is None for k in added)
        and {k: v for k, v in new.items() if k not in added} == old
    )


def record_model_specs(store: RunStore, specs: Mapping[str, dict[str, Any]]) -> None:
    """Check (as :func:`check_model_specs`), then store each model's resolved spec."""
    check_model_specs(store, specs)
    recorded = store.get_meta(_META_KEY) or {}
    store.set_meta(_META_KEY, {**recorded, **specs})


def record_runtime(store: RunStore, name: str, model: Any) -> dict[str, Any] | None:
    """Store what ``model.runtime()`` says its ``"auto"`` options resolved to on this machine
    (the diffusers adapters: device, dtype, batch size) under ``model_runtime[name]``; models
    without it record nothing. Returns what was stored."""
    runtime = getattr(model, "runtime", None)
    if not callable(runtime):
        return None
    now = {k: _json_safe(v) for k, v in dict(runtime()).items()}
    recorded = store.get_meta(RUNTIME_KEY) or {}
    store.set_meta(RUNTIME_KEY, {**recorded, name: now})
    return now


def recorded_specs(store: RunStore) -> dict[str, dict[str, Any]]:
    """The resolved spec of each model name the run holds (runs before this record: none)."""
    return dict(store.get_meta(_META_KEY) or {})


def generation_budget(store: RunStore, max_cost: float) -> CostBudget:
    """``max_cost`` (USD) for the run folder's paid model calls; what its earlier runs paid
    counts first: each model's recorded ``price_per_image`` times its answered requests (stored
    outputs, and answers without an image, which are billed too), plus its
    ``price_per_input_image`` per image those requests sent (the in-context demonstrations'
    too, :data:`~medibench.runs._demos.DEMO_TABLE`). A request answered without
    an image and then made again on a re-run is counted once: its row was replaced."""
    from medibench.runs._demos import read_demonstrations

    specs = recorded_specs(store)
    prices = {name: spec.get("options", {}).get("price_per_image") for name, spec in specs.items()}
    per_image = {
        n: spec.get("options", {}).get("price_per_input_image") for n, spec in specs.items()
    }
    shown = read_demonstrations(store)  # a request with demonstrations carried more images
    before = 0.0
    for p in store.predictions():
        price = prices.get(p.model)
        if price is not None and (p.status == "ok" or (p.error or "").startswith("NoImageError")):
            sent = shown.get((p.model, p.sample_id, p.k), {}).get("images_sent", 1)
            before += float(price) + float(per_image.get(p.model) or 0.0) * int(sent)
    return CostBudget(max_cost, before)


def charge_budget(model: Any, name: str, budget: CostBudget) -> None:
    """Make ``model`` charge its paid calls to ``budget``: an API model (one with a
    ``cost_budget``) needs a ``price_per_image`` (``ValueError`` naming it otherwise); a local
    model pays nothing and is left as it is."""
    if not hasattr(model, "cost_budget"):
        return
    if getattr(model, "price_per_image", None) is None:
        raise ValueError(
            f"--max-cost: model {name!r} makes paid calls but has no price: give it "
            "--model-option price_per_image=USD (its provider's price for one edit)"
        )
    model.cost_budget = budget


def _parameters(factory) -> dict[str, inspect.Parameter]:
    try:
        return dict(inspect.signature(factory).parameters)
    except (TypeError, ValueError):
        return {}


def _json_safe(value: Any) -> Any:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)
    return value


def _show(spec: dict[str, Any]) -> str:
    return json.dumps(spec, sort_keys=True)
