"""The records that flow through medibench: ``Sample``, ``Prediction`` and ``Score``.

A :class:`Sample` is one editing problem (input image, instruction, target image, ROI mask and
metadata; docs/protocols.md). A :class:`Prediction` is one model output for a sample and draw ``k``.
A :class:`Score` is the metric values a protocol computed for one prediction; its JSON form is the
stable score-record schema that ``medibench score`` and ``medibench export`` write.

Records are frozen pydantic models. Building one from bad data raises :class:`RecordError`, whose
message names the record kind, the sample id (when known) and the offending field.
"""

from __future__ import annotations

import json
import math
from enum import Enum
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

__all__ = [
    "Perspective",
    "Sample",
    "Prediction",
    "Score",
    "RecordError",
    "OVERLAY_COLORS",
    "PATIENT_KEYS",
    "patient_of",
    "sample_field",
]

#: Pure overlay colours used by perception tasks (MieDB-100k convention), RGB order.
OVERLAY_COLORS: dict[str, tuple[int, int, int]] = {
    "red": (255, 0, 0),
    "green": (0, 255, 0),
    "blue": (0, 0, 255),
}


class Perspective(str, Enum):
    """The three editing perspectives (MieDB-100k): what kind of change is asked."""

    perception = "perception"
    modification = "modification"
    transformation = "transformation"


class RecordError(ValueError):
    """A record could not be built: names the record kind, the sample and the field."""


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    @classmethod
    def parse(cls, data: dict[str, Any] | str, *, where: str | None = None):
        """Build a record from a dict or a JSON string; errors name the sample and the field.

        ``where`` (for example ``"samples.jsonl line 3"``) is added to the message.
        """
        if isinstance(data, str):
            try:
                data = json.loads(data)
            except json.JSONDecodeError as exc:
                raise RecordError(f"{cls.__name__}{_at(where)}: not valid JSON ({exc})") from exc
        if not isinstance(data, dict):
            raise RecordError(f"{cls.__name__}{_at(where)}: expected a JSON object")
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            sid = data.get("sample_id")
            problems = "; ".join(
                f"field '{'.'.join(str(p) for p in err['loc']) or '?'}': {err['msg']}"
                for err in exc.errors()
            )
            who = f" sample '{sid}'" if sid is not None else ""
            raise RecordError(f"{cls.__name__}{who}{_at(where)}: {problems}") from None

    def to_json(self) -> str:
        """One-line JSON, keys in declaration order."""
        return self.model_dump_json()

    @classmethod
    def from_json(cls, text: str):
        return cls.parse(text)


def _at(where: str | None) -> str:
    return f" ({where})" if where else ""


class Sample(_Record):
    """One editing sample (docs/protocols.md).

    Image paths are strings: relative to the dataset root in a manifest, absolute once a dataset
    adapter has resolved them. ``mask`` is single-channel, any non-zero pixel is inside the ROI.
    """

    sample_id: str = Field(min_length=1)
    benchmark: str = Field(min_length=1)
    input: str = Field(min_length=1, description="input image path")
    instruction: str = Field(min_length=1)
    target: str | None = Field(default=None, description="target image path")
    mask: str | None = Field(default=None, description="ROI mask path")
    split: str = "test"
    task: str = ""
    region: str = ""
    modality: str = ""
    perspective: Perspective
    description: str | None = None
    paraphrases: tuple[str, ...] = ()
    overlay_color: tuple[Literal["red", "green", "blue"], ...] = ()
    source: dict[str, str] = Field(default_factory=dict)
    metadata: dict[str, Any] = Field(default_factory=dict)

    @field_validator("sample_id")
    @classmethod
    def _id_is_filename_safe(cls, v: str) -> str:
        bad = set(v) & set('/\\:*?"<>|\n\t')
        if bad or v in {".", ".."}:
            raise ValueError(f"sample_id {v!r} must be usable as a file name (no {sorted(bad)})")
        return v

    @field_validator("overlay_color", mode="before")
    @classmethod
    def _one_colour_is_a_list(cls, v: Any) -> Any:
        return (v,) if isinstance(v, str) else v


class Prediction(_Record):
    """One model output for a sample and draw ``k`` (0-based), with the seed it was made with."""

    sample_id: str = Field(min_length=1)
    model: str = Field(min_length=1)
    k: int = Field(ge=0)
    path: str | None = None
    seed: int | None = None
    # refused: the model declined the edit; too-few-demonstrations: not asked, fewer eligible
    # in-context demonstrations than K (--icl-fallback refuse)
    status: Literal["ok", "error", "refused", "too-few-demonstrations"] = "ok"
    error: str | None = None
    elapsed_s: float | None = None


class Score(_Record):
    """Metric values for one prediction under one protocol: the stable score-record schema.

    ``metrics`` maps a metric name to a float or ``None``; a metric that could not be computed is
    ``None`` with the reason in ``error`` (never 0). ``status`` is ``"missing"`` when the
    prediction does not exist and ``"error"`` when scoring failed as a whole. ``notes`` records
    what the protocol did to the inputs (a resize, for instance).
    """

    sample_id: str = Field(min_length=1)
    model: str | None = None
    k: int = Field(default=0, ge=0)
    protocol: str = Field(min_length=1)
    protocol_version: str = Field(min_length=1)
    metrics: dict[str, float | None] = Field(default_factory=dict)
    status: Literal["ok", "missing", "error"] = "ok"
    error: str | None = None
    notes: tuple[str, ...] = ()
    #: ``{metric: reason}`` for the ``None`` metrics: what ``error`` says, kept apart so the
    #: run store holds it as data (its ``reasons`` column). Not part of the JSON record.
    reasons: dict[str, str] = Field(default_factory=dict, exclude=True)

    @model_validator(mode="after")
    def _error_and_reasons_agree(self) -> Score:
        # Given reasons write the error text; a record given only the text (an older caller, a
        # JSON record) reads its reasons from it.
        if self.reasons and self.error is None:
            object.__setattr__(self, "error", join_reasons(self.reasons))
        elif not self.reasons and self.error and self.status == "ok":
            object.__setattr__(self, "reasons", reasons_from_error(self.error))
        return self

    def to_json(self) -> str:
        # JSON has no inf/nan: PSNR of identical images is +inf, written as the string "inf".
        d = self.model_dump()
        d["metrics"] = {k: _json_float(v) for k, v in self.metrics.items()}
        return json.dumps(d, allow_nan=False)

    @classmethod
    def from_json(cls, text: str) -> Score:
        d = json.loads(text)
        d["metrics"] = {k: _float_from_json(v) for k, v in d.get("metrics", {}).items()}
        return cls.parse(d)


def _json_float(v: float | None) -> float | str | None:
    if v is None:
        return None
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    if math.isnan(v):
        raise RecordError("a metric value is NaN: record it as null with a reason instead")
    return float(v)


def _float_from_json(v: Any) -> float | None:
    if isinstance(v, str) and v in {"inf", "-inf"}:
        return float(v)
    return v


def join_reasons(reasons: dict[str, str]) -> str | None:
    """Per-metric reasons as a score record's ``error`` text (``"cp: no ROI mask; ..."``)."""
    return "; ".join(f"{m}: {why}" for m, why in reasons.items()) or None


def reasons_from_error(error: str | None) -> dict[str, str]:
    """The ``{metric: reason}`` an ``error`` text made by :func:`join_reasons` holds; ``{}``
    when the text is not made of ``"metric: reason"`` parts (a whole-row error)."""
    reasons: dict[str, str] = {}
    for part in (error or "").split("; "):
        name, sep, why = part.partition(": ")
        if not sep or not name or " " in name:
            return {}
        reasons[name] = why
    return reasons


def sample_field(sample: Sample, field: str) -> Any:
    """A sample's field by name, or ``metadata.<key>``; enums give their value."""
    if field.startswith("metadata."):
        return sample.metadata.get(field.removeprefix("metadata."), "")
    value = getattr(sample, field)
    return getattr(value, "value", value)


#: Where a sample records its patient, in the order read: ``(record attribute, key)``.
PATIENT_KEYS = (("source", "patient"), ("source", "patient_id"), ("metadata", "patient"))


def patient_of(sample: Sample) -> str | None:
    """The patient id ``sample`` records (``source["patient"]``, ``source["patient_id"]`` or
    ``metadata["patient"]``, the first present and not empty), as text; ``None`` without one."""
    for where, key in PATIENT_KEYS:
        value = getattr(sample, where).get(key)
        if value is not None and str(value) != "":
            return str(value)
    return None
