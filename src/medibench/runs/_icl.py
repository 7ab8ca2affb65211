"""In-context demonstrations in a run: the pool, the choice per (sample, k), the leakage rules.

``--icl-k K`` (repeatable) runs each model once per K as its own entry ``NAME@icl-K``
(:func:`entry_name`). For each (sample, draw k) the demonstrations are chosen from the pool
(``--icl-pool``, default the run's own dataset) by ``--icl-select``:

* ``random``: among the allowed candidates; ``same-task`` / ``same-modality``: among those
  with the query's ``task`` / ``modality``; the order is a permutation drawn from a generator
  seeded by (run seed, sample id, draw k), so the K demonstrations are the first K of one
  order: a larger K adds to a smaller one's (the paired ICL comparisons share their examples);
* ``nearest``: the candidates whose input images are closest to the query's (cosine similarity
  of an image embedding: ``--icl-embedding``, default :func:`thumbnail_embedding`, or any
  extractor :func:`medibench.analysis.features.load_extractor` loads), ties in the seeded order.

A candidate is allowed unless (the leakage rules) it is the query (same ``sample_id``, or an
input image with the same decoded pixels: a re-encoded copy under another id counts, and such
items are counted in the stage's summary), shares the query's patient (``source["patient"]``,
``source["patient_id"]`` or ``metadata["patient"]``) or source image (``source["image"]``,
``source["image_id"]``, ``source["url"]`` or ``metadata["item"]``) where both record one, or
comes from the split being evaluated when one is named (``--dataset-option split=NAME``; or,
with another ``--icl-pool``, the evaluated samples' ``split`` values). It must also have what is
shown: an edited image (``target``) for editors, an answer text
(``metadata["expected"]["text"]`` or ``metadata["answer"]``) for answering models.

Fewer allowed candidates than K (a small task under ``same-task``) is that item's, not the
run's, and ``--icl-fallback`` says what it gets: ``refuse`` (the default; K means K) leaves it
unmade with the prediction status :data:`TOO_FEW` (:class:`TooFewDemonstrations` says why);
``random`` fills the rest from the candidates the leakage rules allow whatever the selection
(seeded per (sample, draw) as the choice is, so still nested over K; too few even then is
:data:`TOO_FEW`); ``fewer`` shows those there are. What an item got is stored with its
demonstrations (``fallback``) and counted in the stage's summary.

Every pool image is decoded when the plan is made: one that does not decode stops the run with
one line naming its file and sample (a pool is a curated set; skipping would change what every
query may be shown). An unknown ``--icl-embedding`` is refused then too, listing the valid ones.

What each prediction was shown is stored by :mod:`medibench.runs._demos`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from medibench.models._examples import check_takes_examples
from medibench.runs._config import ICL_FALLBACKS, ICL_SELECTIONS
from medibench.runs._icl_images import THUMBNAIL, load_embedding, pixel_hash, thumbnail_embedding
from medibench.samples import PATIENT_KEYS, Sample

__all__ = [
    "FALLBACKS",
    "SELECTIONS",
    "TOO_FEW",
    "answer_prompt",
    "DemonstrationError",
    "TooFewDemonstrations",
    "IclEntry",
    "IclPlan",
    "check_takes_examples",
    "entry_name",
    "entry_spec",
    "icl_entries",
    "refuse_without_examples",
    "expected_answer",
    "pixel_hash",
    "plan_icl",
    "OWN_POOL",
    "thumbnail_embedding",
]

#: The pool label (``config["icl"]["pool"]``) of a run whose demonstrations are its own samples.
OWN_POOL = "(the run's dataset)"

#: ``--icl-select`` values.
SELECTIONS = ICL_SELECTIONS
#: ``--icl-fallback`` values (the first is the default).
FALLBACKS = ICL_FALLBACKS
#: The prediction status of an item not made for too few eligible demonstrations.
TOO_FEW = "too-few-demonstrations"
_IMAGE_KEYS = (
    ("source", "image"),
    ("source", "image_id"),
    ("source", "url"),  # MedEBench: the case page the image pair comes from
    ("metadata", "item"),
)


class DemonstrationError(ValueError):
    """Too few allowed demonstrations for a sample (its recorded failure), or a bad setting."""


class TooFewDemonstrations(DemonstrationError):
    """Fewer eligible demonstrations than K for a sample, and the fallback does not make it."""


def entry_name(name: str, k: int) -> str:
    """The run entry of model ``name`` with ``k`` demonstrations: ``NAME@icl-K``."""
    return f"{name}@icl-{k}"


def expected_answer(sample: Sample) -> str | None:
    """A sample's expected text answer (``metadata["expected"]["text"]``, else
    ``metadata["answer"]``), or ``None``."""
    expected = sample.metadata.get("expected") or {}
    text = expected.get("text") if isinstance(expected, dict) else None
    text = text if text is not None else sample.metadata.get("answer")
    return text if isinstance(text, str) and text.strip() else None


def answer_prompt(sample: Sample) -> str:
    """The prompt a model answers: the instruction, then the choices of a multiple-choice
    sample (``metadata["choices"]``) one a line, when the instruction does not list them all."""
    prompt = sample.instruction
    choices = [str(c) for c in sample.metadata.get("choices") or []]
    if choices and not all(c.lower() in prompt.lower() for c in choices):
        prompt += "\nOptions:\n" + "\n".join(choices)
    return prompt


@dataclass
class IclPlan:
    """A run's demonstration settings with its pool loaded (:func:`plan_icl`).

    Attributes:
        ks: the ``--icl-k`` values, in order; ``select``, ``embedding``: as the options;
        pool_label: the pool's dataset spec (``"(the run's dataset)"`` by default);
        pool: the candidates, sorted by ``sample_id``; excluded_splits: the split(s) being
        evaluated when named (no candidate comes from them); seed: the run seed;
        fallback: what an item with fewer eligible candidates than K gets (module docstring).
    """

    ks: tuple[int, ...]
    select: str
    embedding: str
    pool_label: str
    pool: list[Sample]
    excluded_splits: frozenset[str]
    seed: int
    fallback: str = "refuse"
    _hashes: dict[str, str | None] = field(default_factory=dict, repr=False)
    _vectors: dict[str, np.ndarray] = field(default_factory=dict, repr=False)
    _identities: dict[tuple[str, str], frozenset] = field(default_factory=dict, repr=False)
    _extractor: Any = field(default=None, repr=False)

    @property
    def asks_examples(self) -> bool:
        """Whether some entry shows demonstrations (a K above 0)."""
        return any(k > 0 for k in self.ks)

    def describe(self, k: int) -> dict[str, Any]:
        """The settings of entry ``k`` as recorded (in its model spec and the run config)."""
        from medibench.models._examples import load_template

        tpl = load_template()
        described = {
            "k": k,
            "pool": self.pool_label,
            "select": self.select,
            "embedding": self.embedding if self.select == "nearest" else None,
            "template": tpl.name,
            "template_sha256": tpl.sha256,
        }
        if self.fallback != FALLBACKS[0]:  # the default is what runs before the option did
            described["fallback"] = self.fallback
        return described

    def entry(self, k: int, model: Any) -> IclEntry | None:
        """The chooser of entry ``k`` for ``model`` (``None`` for K = 0: a plain run)."""
        if k == 0:
            return None
        from medibench.models.compose import is_answering_model

        return IclEntry(self, k, "answer" if is_answering_model(model) else "target")

    def choose(self, sample: Sample, draw: int, k: int, needs: str) -> tuple[Sample, ...]:
        """The ``k`` demonstrations of (``sample``, ``draw``), in the order they are shown
        (fewer or filled at random as the fallback says: :meth:`choose_with_fallback`).

        Raises:
            TooFewDemonstrations: fewer than ``k`` allowed candidates and the fallback does not
                make the item (the message says why).
        """
        return self.choose_with_fallback(sample, draw, k, needs)[0]

    def choose_with_fallback(
        self, sample: Sample, draw: int, k: int, needs: str
    ) -> tuple[tuple[Sample, ...], str | None]:
        """:meth:`choose`'s demonstrations and the fallback they took: ``None`` (``k`` of the
        selection), ``"random"`` (filled from the whole pool) or ``"fewer"``."""
        cands = self.allowed(sample, needs)
        order = self._ordered(sample, draw, cands)
        if len(order) >= k:
            return tuple(cands[i] for i in order[:k]), None
        chosen = [cands[i] for i in order]
        short = (
            f"sample {sample.sample_id!r}: {len(order)} demonstration(s) allowed, {k} asked "
            f"({self._why(needs)}; pool {self.pool_label}, {len(self.pool)} samples)"
        )
        if self.fallback == "fewer":
            return tuple(chosen), "fewer"
        if self.fallback == "random" and self.select != "random":
            taken = {c.sample_id for c in chosen}
            wider = [c for c in self.allowed(sample, needs, select="random")
                     if c.sample_id not in taken]  # fmt: skip
            rank = self._rank("icl-fallback", sample, draw, len(wider))
            chosen += [wider[i] for i in np.argsort(rank)[: k - len(chosen)]]
            if len(chosen) == k:
                return tuple(chosen), "random"
            short += f"; {len(chosen)} with the rest drawn from the whole pool"
        raise TooFewDemonstrations(f"{short}; --icl-fallback {self.fallback}")

    def pixel_copies(self, query: Sample) -> int:
        """Pool samples under another id whose input decodes to the query's pixels (never
        shown to it)."""
        q_hash = self._hash(query.input)
        return sum(
            1
            for c in self.pool
            if c.sample_id != query.sample_id
            and q_hash is not None
            and self._hash(c.input) == q_hash
        )

    def allowed(self, query: Sample, needs: str, select: str | None = None) -> list[Sample]:
        """The pool's candidates for ``query`` under the leakage rules and the selection
        (``select``, default the plan's)."""
        select = select or self.select
        q_ids = _recorded(query)
        q_hash = self._hash(query.input)
        out = []
        for c in self.pool:
            if c.sample_id == query.sample_id or c.split in self.excluded_splits:
                continue
            if needs == "target" and c.target is None:
                continue
            if needs == "answer" and expected_answer(c) is None:
                continue
            if select == "same-task" and c.task != query.task:
                continue
            if select == "same-modality" and c.modality != query.modality:
                continue
            if q_ids and q_ids & self._ids(c):  # the same patient or source image, by any key
                continue
            if q_hash is not None and self._hash(c.input) == q_hash:
                continue
            out.append(c)
        return out

    # -- helpers ------------------------------------------------------------------------------
    def _ordered(self, sample: Sample, draw: int, cands: Sequence[Sample]) -> list[int]:
        """Indices of ``cands`` in the order they are taken: seeded per (sample, draw); for
        ``nearest``, the most similar first, ties in that order."""
        rank = self._rank("icl", sample, draw, len(cands))
        order = [int(i) for i in np.argsort(rank)]
        if self.select == "nearest" and cands:
            sims = self._similarities(sample, cands)
            order = sorted(order, key=lambda i: (-sims[i], rank[i]))
        return order

    def _rank(self, name: str, sample: Sample, draw: int, n: int) -> np.ndarray:
        from medibench.synth._seed import item_rng

        return item_rng(name, self.seed, sample.sample_id, draw).permutation(n)

    def _why(self, needs: str) -> str:
        what = "an edited image (target)" if needs == "target" else "an answer text"
        rules = ["not the query, its patient or its image", f"with {what}"]
        if self.excluded_splits:
            rules.append(f"not from split {', '.join(sorted(self.excluded_splits))}")
        if self.select in ("same-task", "same-modality"):
            rules.append(f"of the same {self.select.removeprefix('same-')}")
        return "candidates " + "; ".join(rules)

    def _ids(self, sample: Sample) -> frozenset[tuple[str, str]]:
        key = (sample.sample_id, sample.input)
        if key not in self._identities:
            self._identities[key] = frozenset(_recorded(sample))
        return self._identities[key]

    def _hash(self, path: str) -> str | None:
        if path not in self._hashes:
            try:
                self._hashes[path] = pixel_hash(path)
            except (OSError, ValueError):  # a query's read error is its own when it is read
                self._hashes[path] = None
        return self._hashes[path]

    def _similarities(self, query: Sample, cands: Sequence[Sample]) -> np.ndarray:
        q = self._vector(query)
        return np.array([float(q @ self._vector(c)) for c in cands])

    def _vector(self, sample: Sample) -> np.ndarray:
        key = sample.input
        if key not in self._vectors:
            from medibench.io import read_image

            if self._extractor is None:
                self._extractor = load_embedding(self.embedding)
            feats = np.asarray(self._extractor([read_image(key, mode="rgb")]), np.float64)
            vec = feats.reshape(-1)
            norm = float(np.linalg.norm(vec))
            self._vectors[key] = vec / norm if norm > 0 else vec
        return self._vectors[key]


@dataclass(frozen=True)
class IclEntry:
    """One ``NAME@icl-K`` entry's chooser: :meth:`choose` per (sample, draw)."""

    plan: IclPlan
    k: int
    needs: str  # "target" (editors) or "answer" (answering models)

    def choose(self, sample: Sample, draw: int) -> tuple[tuple[Sample, ...], str | None]:
        """The demonstrations of (``sample``, ``draw``) and the fallback they took
        (:meth:`IclPlan.choose_with_fallback`)."""
        return self.plan.choose_with_fallback(sample, draw, self.k, self.needs)

    def images_sent(self, sample: Sample, demos: Sequence[Sample]) -> int:
        """Images one request carries: an editor's query and each example's input and edited
        image; an answering model's every input image, the examples' and the query's."""
        if self.needs == "target":
            return 1 + 2 * len(demos)
        return sum(len(s.metadata.get("input_images") or [s.input]) for s in (sample, *demos))


def icl_entries(name: str | None, icl: IclPlan | None) -> list[tuple[int | None, str | None]]:
    """``(K, entry name)`` per run entry of a model named ``name``: ``[(None, name)]`` without
    demonstrations, else one ``NAME@icl-K`` per K (a name known only once the model is built,
    ``None``, stays one entry)."""
    if icl is None:
        return [(None, name)]
    if name is None:
        return [(None, None)]
    return [(k, entry_name(name, k)) for k in icl.ks]


def entry_spec(resolved: dict[str, Any], icl: IclPlan | None, k: int | None) -> dict[str, Any]:
    """The spec recorded for an entry: the model's resolved spec, with its demonstration
    settings (``icl``) for a ``NAME@icl-K`` entry (another pool or selection under the same
    name is then refused, as another spec is)."""
    if icl is None or k is None:
        return resolved
    return {**resolved, "icl": icl.describe(k)}


def refuse_without_examples(spec: Any) -> None:
    """Refuse a model spec whose factory is a class that cannot take examples
    (:class:`~medibench.models._examples.ExamplesNotSupportedError`); a function's model is
    checked once built."""
    import inspect

    from medibench.models._examples import check_takes_examples

    try:
        factory = spec.factory()
    except Exception:  # reported when the model is built
        return
    if inspect.isclass(factory):
        check_takes_examples(factory, spec.name)


def plan_icl(
    ks: Sequence[int],
    *,
    pool: str | None,
    select: str,
    embedding: str,
    dataset: str,
    dataset_options: dict[str, Any],
    samples: Sequence[Sample],
    loaded: Any,
    seed: int,
    fallback: str = FALLBACKS[0],
) -> IclPlan:
    """Load the pool and check the settings (:class:`DemonstrationError` for a bad one).

    ``loaded`` is the run's dataset as loaded: the default pool, unless the run names a split
    (``dataset_options["split"]``): then the same dataset is read without it, every split but
    the evaluated one being a candidate.
    """
    from medibench.datasets import load_dataset

    if select not in SELECTIONS:
        raise DemonstrationError(f"--icl-select must be one of {', '.join(SELECTIONS)}: {select!r}")
    if fallback not in FALLBACKS:
        raise DemonstrationError(
            f"--icl-fallback must be one of {', '.join(FALLBACKS)}: {fallback!r}"
        )
    if any(k < 0 for k in ks) or len(set(ks)) != len(ks):
        raise DemonstrationError(f"--icl-k values must be distinct and >= 0, got {list(ks)}")
    named = dataset_options.get("split")
    excluded = frozenset({str(named)}) if named is not None else frozenset()
    if pool is not None:
        members = list(load_dataset(pool))
        excluded = excluded or frozenset(s.split for s in samples)
        label = pool
    elif named is not None:
        others = {k: v for k, v in dataset_options.items() if k != "split"}
        members, label = list(load_dataset(dataset, **others)), f"{dataset} (every split)"
    else:
        members, label = list(loaded), OWN_POOL
    if not members:
        raise DemonstrationError(f"the demonstration pool {label} has no samples")
    members.sort(key=lambda s: s.sample_id)
    plan = IclPlan(tuple(ks), select, embedding, label, members, excluded, seed, fallback)
    if select == "nearest":
        try:  # loaded now: a bad spec is the run's one-line error, not a traceback later
            plan._extractor = load_embedding(embedding)
        except (ValueError, ImportError, OSError) as exc:
            raise DemonstrationError(
                f"--icl-embedding {embedding!r}: {str(exc).splitlines()[0]} (valid: {THUMBNAIL}"
                ", inception:PATH, hf:PATH, dinov2:PATH, rad-dino:PATH, clip:PATH, "
                "module:callable)"
            ) from None
    if plan.asks_examples:
        for member in members:  # decoded once here, compared with each query later
            try:
                plan._hashes[member.input] = pixel_hash(member.input)
            except (OSError, ValueError) as exc:
                raise DemonstrationError(
                    f"demonstration pool {label}: sample {member.sample_id!r}: "
                    f"{member.input} does not decode as an image ({exc})"
                ) from None
    return plan


# -- helpers ----------------------------------------------------------------------------------
def _recorded(sample: Sample) -> set[tuple[str, str]]:
    """The patient and source-image identifiers ``sample`` records, as ``(kind, value)``
    (a patient id under ``source`` and one under ``metadata`` are the same patient)."""
    out = set()
    for kind, keys in (("patient", PATIENT_KEYS), ("image", _IMAGE_KEYS)):
        for where, key in keys:
            value = getattr(sample, where).get(key)
            if value is not None and str(value) != "":
                out.add((kind if key != "url" else "url", str(value)))
    return out
