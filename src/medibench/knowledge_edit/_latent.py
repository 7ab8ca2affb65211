"""Hidden states of edit requests and their probes before and after each edit (``medibench edit
analyze``; the statistics are in :mod:`._latent_stats`).

For each editor of a run, each edit request is edited alone on the original model (a single
edit, whatever setting the run was), and for the request's own prompt and every probe of it the
recorder keeps, before and after the edit:

* the output of each chosen decoder layer at the prompt's last token (the token whose state
  decides the first answer token, and the one a GRACE codebook looks up);
* for a memory-based editor (:class:`~medibench.knowledge_edit._memory.MemoryEditor`), the
  input of its memory's module at that token after the edit, and whether the memory fires for
  it (``fires``) and at what distance; for an editor whose ``memory(model)`` gives an
  :class:`~medibench.knowledge_edit._editing.EditMemory` (``balancedit``, ``wise``), what its
  router reads for each prompt (``query``: BalancEdit's pooled prompt, WISE's activations) and
  whether it fires, at what ``route_distance`` (WISE: its activation score).

Then the edit is undone (bit for bit) and the next starts. The states before any edit depend on
the model alone and are computed once per distinct (image, question).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from medibench.knowledge_edit._answerers import AnswererError, TransformersAnswerer
from medibench.knowledge_edit._editing import EditCase, EditError, Editor, decoder_layers
from medibench.knowledge_edit._memory import MemoryEditor
from medibench.knowledge_edit._tasks import EditRequest

__all__ = ["Recording", "edited_layers", "record_editor", "resolve_layers"]

#: the kind of an edit request's own prompt among its probes' kinds
REQUEST = "request"


@dataclass
class Recording:
    """One editor's states. Row ``i`` of every array is item ``items[i]`` (``edit_id``,
    ``probe_id`` (``None`` for the request's own prompt), ``kind`` (``request`` or the probe's
    kind), ``task_type``); ``pre``/``post``: layer -> ``(n_items, hidden)`` float64;
    ``memory``: ``None`` unless the editor is memory-based, else ``{"site": str, "fired":
    (n,) bool, "distance": (n,) float}`` after each edit; ``failed``: ``(edit_id, error)`` of
    edits that could not be made (their rows are absent)."""

    editor: str
    layers: tuple[int, ...]
    items: list[dict[str, Any]] = field(default_factory=list)
    pre: dict[int, np.ndarray] = field(default_factory=dict)
    post: dict[int, np.ndarray] = field(default_factory=dict)
    memory: dict[str, Any] | None = None
    failed: list[tuple[str, str]] = field(default_factory=list)


def resolve_layers(m: TransformersAnswerer, layers: Sequence[int] | None, editor: Editor,
                   ) -> tuple[int, ...]:  # fmt: skip
    """The decoder layers to record, as non-negative indices: ``layers`` (negative from the
    end), or by default the first, the middle, the last and every layer the editor edits.

    Raises:
        ValueError: a layer outside the model's (naming ``--layers`` and the count).
    """
    n = len(decoder_layers(m))
    if layers is None:
        chosen = {0, n // 2, n - 1, *edited_layers(editor)}
    else:
        bad = [i for i in layers if not -n <= i < n]
        if bad:
            shown = ",".join(map(str, bad))
            raise ValueError(f"--layers {shown}: out of range; the model {m.path} has {n} "
                             f"decoder layers (0..{n - 1}, or -{n}..-1)")  # fmt: skip
        chosen = set(layers)
    return tuple(sorted({i % n for i in chosen}))


def edited_layers(editor: Editor) -> tuple[int, ...]:
    """The decoder layers an editor's config names (``layers`` or ``layer``), as given."""
    config: Any = getattr(editor, "config", None)
    if hasattr(config, "layers"):
        return tuple(int(i) for i in config.layers)
    if hasattr(config, "layer"):
        return (int(config.layer),)
    return ()


class PreStates:
    """States before any edit, per (image, question), shared by the editors of one model."""

    def __init__(self) -> None:
        self.states: dict[tuple[str, str], dict[int, np.ndarray]] = {}


def record_editor(
    m: TransformersAnswerer,
    editor: Editor,
    requests: Sequence[EditRequest],
    image: Callable[[str], np.ndarray],
    layers: tuple[int, ...],
    pre_states: PreStates,
) -> Recording:
    """Edit each request alone, record its states and its probes' before and after, undo
    (module doc). An edit that fails (:class:`EditError`, an error of the model) is recorded in
    ``failed`` and skipped."""
    memory = isinstance(editor, MemoryEditor)
    rec = Recording(editor.name, layers)
    site_name, fired, distance = "", [], []
    pre_rows: dict[int, list[np.ndarray]] = {i: [] for i in layers}
    post_rows: dict[int, list[np.ndarray]] = {i: [] for i in layers}
    for request in requests:
        prompts = [(request.image, request.question)]
        prompts += [(p.image, p.question) for p in request.probes]
        todo = [k for k in dict.fromkeys(prompts) if k not in pre_states.states]
        if todo:
            states, _ = _capture(m, todo, image, layers, None)
            for j, key in enumerate(todo):
                pre_states.states[key] = {i: states[i][j] for i in layers}
        case = EditCase(request.edit_id, image(request.image), request.question, request.target)
        try:
            handle = editor.edit(m, case)
        except (EditError, AnswererError, RuntimeError, ValueError) as exc:
            rec.failed.append((request.edit_id, " ".join(f"{type(exc).__name__}: {exc}".split())))
            continue
        try:
            site = editor.memory_site(m) if isinstance(editor, MemoryEditor) else None
            states, queries = _capture(m, prompts, image, layers, site)
            if isinstance(editor, MemoryEditor):
                lookup = editor.fires(m, queries)
                fired += list(np.asarray(lookup.fired, dtype=bool))
                distance += list(np.asarray(lookup.distance, dtype=np.float64))
            elif (router := editor.memory(m)) is not None:  # balancedit, wise: EditMemory
                memory = True
                site_name = site_name or _router_site(editor)
                # a score that grows towards firing (WISE's activation) is negated: "distance"
                # is lower-is-nearer for every editor, as the statistics read it
                sign = -1.0 if getattr(router, "higher_fires", False) else 1.0
                for key in prompts:
                    hidden = router.query(m, image(key[0]), key[1])
                    fired.append(bool(router.fires(hidden)))
                    distance.append(sign * float(router.route_distance(hidden)))
        finally:
            handle.undo()
        if site is not None:  # named in the model as it is again (no wrapper around it)
            site_name = _module_name(m, site)
        rec.items.append(_item(request, None))
        rec.items += [_item(request, p) for p in request.probes]
        for i in layers:
            pre_rows[i] += [pre_states.states[key][i] for key in prompts]
            post_rows[i] += list(states[i])
    width = _width(m)
    rec.pre = {i: _stack(pre_rows[i], width) for i in layers}
    rec.post = {i: _stack(post_rows[i], width) for i in layers}
    if memory:
        rec.memory = {"site": site_name, "fired": np.asarray(fired, dtype=bool),
                      "distance": np.asarray(distance, dtype=np.float64)}  # fmt: skip
    return rec


# -- helpers ----------------------------------------------------------------------------------


def _router_site(editor: Editor) -> str:
    """Where an :class:`~medibench.knowledge_edit._editing.EditMemory` editor's router sits, as
    its config names it (``layer`` counted from the end when negative, ``module`` in it)."""
    config = getattr(editor, "config", None)
    layer, module = getattr(config, "layer", None), getattr(config, "module", None)
    return f"layer {layer} {module}" if module is not None else editor.name


def _item(request: EditRequest, probe: Any) -> dict[str, Any]:
    if probe is None:
        task = request.probes[0].task_type if request.probes else "T0"
        return {"edit_id": request.edit_id, "probe_id": None, "kind": REQUEST, "task_type": task}
    return {"edit_id": request.edit_id, "probe_id": probe.probe_id, "kind": probe.kind,
            "task_type": probe.task_type}  # fmt: skip


def _capture(
    m: TransformersAnswerer,
    prompts: Sequence[tuple[str, str]],
    image: Callable[[str], np.ndarray],
    layers: tuple[int, ...],
    site: Any,
) -> tuple[dict[int, np.ndarray], Any]:
    """The chosen layers' outputs at each prompt's last token (``(n, hidden)`` float64 per
    layer) and, with ``site``, that module's inputs there (a ``(n, d)`` tensor), from forward
    passes of ``m.batch_size`` prompts (left-padded: the last token is the last position)."""
    torch = m.torch
    modules = decoder_layers(m)
    seen: dict[Any, list[Any]] = {i: [] for i in layers}
    seen["site"] = []

    def layer_hook(i: int) -> Any:
        def hook(_mod: Any, _args: Any, out: Any) -> None:
            hidden = out[0] if isinstance(out, tuple) else out
            seen[i].append(hidden[:, -1, :].detach().double().cpu())

        return hook

    def site_hook(_mod: Any, args: Any, _out: Any) -> None:
        seen["site"].append(args[0][:, -1, :].detach())

    handles = [modules[i].register_forward_hook(layer_hook(i)) for i in layers]
    if site is not None:
        handles.append(site.register_forward_hook(site_hook))
    try:
        for start in range(0, len(prompts), m.batch_size):
            chunk = prompts[start : start + m.batch_size]
            enc = m.encode([image(i) for i, _ in chunk], [q for _, q in chunk])
            with torch.no_grad():
                m.model(**enc)
    finally:
        for h in handles:
            h.remove()
    states = {i: torch.cat(seen[i]).numpy() for i in layers}
    queries = torch.cat(seen["site"]) if site is not None else None
    return states, queries


def _module_name(m: TransformersAnswerer, module: Any) -> str:
    """``module``'s dotted name in the model (its class name if it is not the model's)."""
    names = {id(mod): n for n, mod in m.model.named_modules()}
    return names.get(id(module), type(module).__name__)


def _width(m: TransformersAnswerer) -> int:
    config = m.model.config
    text = getattr(config, "text_config", config)
    return int(text.hidden_size)


def _stack(rows: list[np.ndarray], width: int) -> np.ndarray:
    return np.stack(rows) if rows else np.zeros((0, width))
