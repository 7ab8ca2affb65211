"""SLAKE and VQA-RAD, from their official layouts and their Hugging Face Parquet copies.

* SLAKE (``Slake1.0/``): ``{train,validate,test}.json`` (records with ``img_name``,
  ``question``, ``answer``, ``q_lang``, ``modality``, ``location``, ``answer_type``,
  ``content_type``, ``qid``) and ``imgs/<img_name>``. Bilingual: ``language="en"`` keeps the
  English questions, ``"all"`` keeps both (the language is a recorded field either way).
* VQA-RAD (OSF release): ``VQA_RAD Dataset Public.json`` (records with ``qid``,
  ``image_name``, ``question``, ``answer``, ``phrase_type``, ``qid_linked_id``,
  ``question_rephrase``, ``image_organ``, ``answer_type``, ``question_type``) and
  ``VQA_RAD Image Folder/<image_name>``. Test questions are the ``test_freeform`` and
  ``test_para`` ones; a ``para`` question is a rephrasing of its linked ``freeform`` one.
* Parquet copies (``<split>-*.parquet``, read through :mod:`medibench.sources`): ``question``,
  ``answer`` and an ``image`` cell, or SLAKE's ``img_name`` with ``imgs/`` beside the shards;
  the other SLAKE fields are read when present.

Images are copied (bytes unchanged, content-addressed) into the task set's ``images/``. A
question whose image is missing or whose gold answer is empty is a :class:`TaskError` naming
the file, the row and the question.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

from medibench._strings import text_of
from medibench.datasets._base import resolve_inside
from medibench.knowledge_edit._build import VQARow
from medibench.knowledge_edit._tasks import TaskError, store_image
from medibench.sources import (
    ImageCellError,
    SourceError,
    iter_parquet_rows,
    parquet_files,
    resolve_source,
    store_image_cell,
)

__all__ = ["read_slake", "read_vqarad"]

Language = Literal["en", "zh", "all"]
_VQARAD_JSON = "VQA_RAD Dataset Public.json"
_VQARAD_IMAGES = "VQA_RAD Image Folder"


def read_slake(
    path: str | os.PathLike, images: Path, *, split: str = "test", language: Language = "en"
) -> list[VQARow]:
    """SLAKE's questions of ``split`` (official JSON or Parquet copy), images copied into
    ``images``."""
    root = resolve_source(path, what="SLAKE dataset")
    official = _find(root, f"{split}.json")
    if official is not None:
        records = _json_records(official)
        return _slake_rows(official, records, official.parent / "imgs", images, language)
    return _parquet_rows("slake", root, split, images, language)


def read_vqarad(path: str | os.PathLike, images: Path, *, split: str = "test") -> list[VQARow]:
    """VQA-RAD's questions of ``split`` (``test`` or ``train``; official JSON or Parquet
    copy), images copied into ``images``."""
    root = resolve_source(path, what="VQA-RAD dataset")
    official = _find(root, _VQARAD_JSON)
    if official is None:
        return _parquet_rows("vqa-rad", root, split, images, "all")
    records = _json_records(official)
    folder = official.parent / _VQARAD_IMAGES
    rephrased: dict[str, list[str]] = defaultdict(list)
    for rec in records:
        if str(rec.get("phrase_type", "")).endswith("para") and rec.get("qid_linked_id"):
            rephrased[str(rec["qid_linked_id"])].append(str(rec.get("question", "")))
    rows = []
    for i, rec in enumerate(records):
        phrase = str(rec.get("phrase_type", ""))
        if (split == "test") != phrase.startswith("test"):
            continue
        where = f"{official} row {i}"
        qid = str(rec.get("qid", i))
        own = [text_of(rec.get("question_rephrase")).strip()]
        linked = rephrased.get(str(rec.get("qid_linked_id", "")), []) if not phrase.endswith(
            "para") else []  # fmt: skip
        rows.append(
            _row(
                "vqa-rad",
                rec,
                qid,
                where,
                _inside(folder, rec.get("image_name"), where),
                images,
                modality=str(rec.get("image_organ", "")),
                organ=str(rec.get("image_organ", "")),
                language="en",
                rephrases=tuple(q for q in own + linked if q and q != "NULL"),
                extra={"question_type": str(rec.get("question_type", "")), "phrase_type": phrase},
            )  # fmt: skip
        )
    return rows


# -- helpers ----------------------------------------------------------------------------------


def _inside(folder: Path, name: object, where: str) -> Path:
    """The image a row names, which must lie inside the dataset's image ``folder``."""
    return resolve_inside(folder.resolve(), str(name or ""), what=f"{where}, image",
                          error=TaskError)  # fmt: skip


def _find(root: Path, name: str) -> Path | None:
    """``root/name``, or one folder down (``Slake1.0/test.json`` inside a download)."""
    if root.is_file():
        return None
    direct = root / name
    if direct.is_file():
        return direct
    nested = sorted(p for p in root.glob(f"*/{name}") if p.is_file())
    return nested[0] if nested else None


def _json_records(file: Path) -> list[dict[str, Any]]:
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise TaskError(f"{file}: not a readable JSON question file ({exc})") from None
    if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
        raise TaskError(f"{file}: expected a JSON list of question records")
    return data


def _slake_rows(file: Path, records: Iterable[dict], folder: Path, images: Path,
                language: Language) -> list[VQARow]:  # fmt: skip
    rows = []
    for i, rec in enumerate(records):
        lang = str(rec.get("q_lang", "unknown"))
        if language != "all" and lang not in (language, "unknown"):
            continue
        where = f"{file} row {i}"
        rows.append(
            _row(
                "slake",
                rec,
                str(rec.get("qid", i)),
                where,
                _inside(folder, rec.get("img_name"), where),
                images,
                modality=str(rec.get("modality", "")),
                organ=str(rec.get("location", "")),
                language=lang,
                extra={"base_type": str(rec.get("base_type", ""))},
            )  # fmt: skip
        )
    return rows


def _row(source: str, rec: dict, qid: str, where: str, image: Path, images: Path, *,
         modality: str, organ: str, language: str, rephrases: tuple[str, ...] = (),
         extra: dict | None = None) -> VQARow:  # fmt: skip
    question, answer = text_of(rec.get("question")).strip(), text_of(rec.get("answer")).strip()
    if not answer:
        raise TaskError(f"{where}: question {qid} ({question!r}) has an empty gold answer")
    stored = store_image(image, images, where=f"{where}: question {qid} ({question!r})")
    return VQARow(
        source, qid, stored, question, answer, where, modality=modality, organ=organ,
        language=language, answer_type=str(rec.get("answer_type", "")),
        content_type=str(rec.get("content_type", "")), rephrases=rephrases, extra=extra or {},
    )  # fmt: skip


def _parquet_rows(source: str, root: Path, split: str, images: Path,
                  language: Language) -> list[VQARow]:  # fmt: skip
    files = parquet_files(root, what=f"{source} dataset")
    mine = [f for f in files if f.name.startswith(f"{split}-") or f.stem == split]
    if not mine:
        names = ", ".join(f.name for f in files[:5])
        raise SourceError(f"{root}: no Parquet shard of split {split!r} ({split}-*.parquet); "
                          f"found {names}")  # fmt: skip
    rows = []
    for prow in iter_parquet_rows(mine):
        v = prow.values
        if "question" not in v or "answer" not in v:
            raise SourceError(f"{prow.where()}: needs columns 'question' and 'answer'")
        lang = str(v.get("q_lang") or "unknown")
        if language != "all" and lang not in (language, "unknown"):
            continue
        qid = str(v.get("qid") if v.get("qid") is not None else f"{prow.file.stem}-{prow.index}")
        where = prow.where()
        question, answer = text_of(v.get("question")).strip(), text_of(v.get("answer")).strip()
        if not answer:
            raise TaskError(f"{where}: question {qid} ({question!r}) has an empty gold answer")
        if v.get("image") is not None:
            try:
                stored = store_image_cell(v["image"], images, file=prow.file, row=prow.index,
                                          column="image", base=prow.file.parent)  # fmt: skip
            except ImageCellError as exc:
                raise TaskError(f"{where}: question {qid} ({question!r}): {exc}") from None
            rel = _relative(stored, images, where)
        elif v.get("img_name"):
            rel = store_image(_inside(prow.file.parent / "imgs", v["img_name"], where), images,
                              where=f"{where}: question {qid} ({question!r})")  # fmt: skip
        else:
            raise TaskError(f"{where}: question {qid} ({question!r}) has no image "
                            "(no 'image' cell and no 'img_name')")  # fmt: skip
        rows.append(VQARow(
            source, qid, rel, question, answer, where,
            modality=str(v.get("modality") or v.get("image_organ") or ""),
            organ=str(v.get("location") or v.get("image_organ") or ""), language=lang,
            answer_type=text_of(v.get("answer_type")),
            content_type=text_of(v.get("content_type")),
        ))  # fmt: skip
    return rows


def _relative(stored: Path, images: Path, where: str) -> str:
    """A stored image's path relative to the task set; a path cell's file is copied in."""
    try:
        return stored.relative_to(images.parent).as_posix()
    except ValueError:
        return store_image(stored, images, where=where)
