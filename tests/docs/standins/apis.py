"""Paid APIs and judges: one local fake server on 127.0.0.1 stands for OpenAI (chat completions,
image edits) and Gemini (``generateContent``) while a file's blocks run, reached the way the
official SDKs are: ``OPENAI_BASE_URL`` and ``GOOGLE_GEMINI_BASE_URL``, with fake keys. So a
documented ``--model openai-image:...``, ``--model gemini-image ...``, ``--model "openai-chat:...
+ openai-image:..."`` or ``medibench judge`` runs as written.

The server is :class:`tests.models.fake_image_api.FakeImageAPI` (an edit is ``255 - input``, the
query of an in-context request being its last image) with :func:`chat_reply` answering chat
requests by what they are:

- a judge protocol's prompt (every protocol medibench registers, found by its score labels):
  every score it asks for, in the format it asks for (``Name: [Score]/N`` lines, or one JSON
  object when the request sets ``response_format``; the checklist items ``yes``/``no``), each
  value in range and drawn from a hash of the request, so two outputs get different scores;
- the knowledge-edit answer judge: ``{"correct": true}`` when the model answer holds the
  reference answer, else ``{"correct": false}``;
- the plan prompt of a compositional system (``VLM + EDITOR``): its JSON plan, with the
  instruction as the editor's prompt;
- the build's rephrasing request (docs/build.md): the ``n`` rephrasings it asks for, each
  keeping the instruction's words; the build's inpainting check: the first fill a server is
  shown is rejected (:data:`REJECTION`), every other accepted (:class:`ChatReplies`);
- anything else (a VLM's question): one short sentence.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import Any

from tests.docs.standins import ALL
from tests.judges._server import Reply, first_text
from tests.models.fake_image_api import FakeImageAPI

#: The fake keys the blocks run with (the call layer redacts them like real ones).
OPENAI_KEY = "sk-docs-fake-0123456789abcdef"
GEMINI_KEY = "docs-fake-gemini-key-0123456789"
#: A VLM's answer to a question.
VLM_ANSWER = "A frontal chest radiograph; the lungs are clear and no acute finding is seen."

SUBSTITUTIONS = {
    ("README.md", "--model ip2p:/weights/instruct-pix2pix --out runs/medebench"): (
        "--model ip2p:/weights/instruct-pix2pix --model-option steps=2 "
        "--model-option resolution=64 --out runs/medebench",
        "2 denoising steps at 64 px instead of 100 at 512 (same code, less time)",
    ),
    ("docs/judges.md", "--model classical --out runs/starter"): (
        "--model classical --limit 6 --out runs/starter",
        "6 of the starter benchmark's 24 samples (same code, less time)",
    ),
    ("*", "http://host:8000/v1"): (
        "$OPENAI_BASE_URL",
        "a served model (vLLM, sglang) at the user's host: the local fake OpenAI-compatible "
        "server of tests/docs/standins/apis.py",
    ),
}


@contextmanager
def standins(
    file: str, work: Path, env: dict[str, str], cache: Path, blocks: frozenset[int] = ALL
) -> Iterator[None]:
    if file == "README.md" and 5 in blocks:  # the MedEBench run its "Judge with a VLM" judges
        from tests.docs.standins.weights import tiny
        from tests.models.test_diffusers import build_tiny_ip2p

        tiny(env, "instruct-pix2pix", build_tiny_ip2p)
    _protocols()  # built here, once, not by the server's first requests
    with FakeImageAPI(chat=ChatReplies()) as api:
        env.update(
            OPENAI_BASE_URL=f"{api.url}/v1",
            GOOGLE_GEMINI_BASE_URL=api.url,
            OPENAI_API_KEY=OPENAI_KEY,
            GEMINI_API_KEY=GEMINI_KEY,
        )
        yield


def chat_reply(body: dict[str, Any], n: int) -> Reply:
    """The fake's answer to chat request ``body`` (module docstring)."""
    text = first_text(body)
    # the judge model is part of it, so two judges of one output disagree a little
    seen = json.dumps([body["model"], body["messages"]], sort_keys=True)
    digest = hashlib.sha256(seen.encode()).digest()
    verdict = _answer_verdict(text)
    if verdict is not None:
        return Reply(json.dumps({"correct": verdict}))
    fields = _judge_fields(text)
    if fields:
        return Reply(_scores(fields, digest, text, body.get("response_format")))
    if '{"rephrasings"' in text:
        return Reply(json.dumps({"rephrasings": _rephrasings(text)}))
    if _is_check(text):
        return _check_reply(rejected=False)
    if '"edit_prompt"' in text and '"output_text"' in text:
        instruction = text.split("Instruction:", 1)[-1].split("Reply with", 1)[0].strip()
        plan = {"output_text": VLM_ANSWER, "edit_prompt": instruction or "Edit the image."}
        return Reply(json.dumps(plan))
    return Reply(VLM_ANSWER)


# -- the build's chat-model steps ----------------------------------------------------------------
#: The fake VLM's reason for rejecting an inpainting.
REJECTION = "A faint rim of the lesion is still visible at its border."
_WAYS = ("Please {}", "{} Leave everything else as it is.", "Edit the image: {}", "{} Thanks.")


class ChatReplies:
    """:func:`chat_reply`, but the first inpainting check this server is shown is rejected (so
    docs/build.md's block shows a rejection, its reason and the retry)."""

    def __init__(self) -> None:
        self.checks = 0
        self._lock = threading.Lock()

    def __call__(self, body: dict[str, Any], n: int) -> Reply:
        if not _is_check(first_text(body)):
            return chat_reply(body, n)
        with self._lock:
            self.checks += 1
            first = self.checks == 1
        return _check_reply(rejected=first)


def _is_check(text: str) -> bool:
    return '"verdict"' in text and "INPAINTED" in text


def _check_reply(*, rejected: bool) -> Reply:
    reason = REJECTION if rejected else "No lesion is visible and the fill matches the tissue."
    return Reply(json.dumps({"verdict": "reject" if rejected else "accept", "reason": reason}))


def _rephrasings(text: str) -> list[str]:
    instruction = text.split("Instruction: ", 1)[1].split("\n", 1)[0].strip()
    n = int(re.search(r"Write (\d+) different rephrasings", text).group(1))
    low = instruction[0].lower() + instruction[1:]
    return [way.format(low if way.startswith("Please") else instruction) for way in _WAYS[:n]]


# -- the knowledge-edit answer judge ------------------------------------------------------------
_VERDICT = re.compile(r"Reference answer: (?P<gold>.*)\nModel answer: (?P<answer>.*)\n")


def _answer_verdict(text: str) -> bool | None:
    m = _VERDICT.search(text)
    if m is None or '"correct"' not in text:
        return None
    return m.group("gold").strip().lower() in m.group("answer").lower()


# -- the judge protocols ------------------------------------------------------------------------
@cache
def _protocols() -> tuple[Any, ...]:
    """Every registered judge protocol (built once)."""
    from medibench.judges import JUDGES

    return tuple(JUDGES.create(spec) for spec in JUDGES.names())


def _judge_fields(text: str) -> dict[str, tuple[Any, float, float]]:
    """key -> (field, lo, hi) of every protocol whose required scores the prompt all names,
    ranges narrowed to what all of them accept (``@code`` and ``@paper`` share one prompt; the
    ``[Score]/N`` it asks for picks the scale)."""
    asked = {int(n) for n in re.findall(r"\[Score\]/(\d+)", text)}
    out: dict[str, tuple[Any, float, float]] = {}
    for proto in _protocols():
        required = [f for f in proto.fields if f.required]
        if not all(f.label in text or f'"{f.key}"' in text for f in required):
            continue
        if asked and not any(f.hi in asked for f in required if f.kind == "number"):
            continue
        for f in proto.fields:
            _, lo, hi = out.get(f.key, (f, f.lo, f.hi))
            out[f.key] = (f, max(lo, f.lo), min(hi, f.hi))
    return out


def _scores(fields, digest: bytes, text: str, response_format: dict | None) -> str:
    values: dict[str, Any] = {}
    for i, (key, (f, lo, hi)) in enumerate(sorted(fields.items())):
        pick = digest[i % len(digest)]
        if f.kind == "yes_no":
            values[key] = "yes" if pick % 4 else "no"
        else:
            values[key] = int(lo + pick % (int(hi - lo) + 1))
    if response_format is not None:  # a JSON object with the protocol's text keys too
        schema = (response_format.get("json_schema") or {}).get("schema") or {}
        extra = [k for k in schema.get("properties", {}) if k not in values]
        return json.dumps({**{k: "differences as the prompt asks" for k in extra}, **values})
    lines = ["The edited image changes the region the instruction names; the rest is kept."]
    for key, (f, _lo, hi) in sorted(fields.items()):
        v = values[key]
        lines.append(f"{f.label}: {v}" if f.kind == "yes_no" else f"{f.label}: [{v}]/{int(hi)}")
    return "\n".join(lines)


def check(file: str, blocks: frozenset[int], work: Path) -> None:
    """README block 5: the clone's published outputs were judged in their own run folder (every
    output read where it lies, editing accuracy filled for each scored one). docs/build.md block
    3: every sample's instruction is one of the fake's rephrasings of its template, stored beside
    it; every fill shown to the fake VLM has its verdict and full answer in the attempt log."""
    if file == "docs/build.md" and 3 in blocks:
        _check_llm_build(work / "built" / "liver-llm")
    if file != "README.md" or 5 not in blocks:
        return
    from medibench.runs import RunStore

    with RunStore.open_existing(work / "runs" / "medebench-published") as store:
        predictions = store.predictions(status="ok")
        scores = [s for s in store.scores("medebench") if s.status == "ok"]
    clone = (work / "MedEBench" / "generated_images").resolve()
    assert predictions and all(p.path.startswith(str(clone)) for p in predictions)
    assert scores and all(s.metrics.get("ea") is not None for s in scores)


def _check_llm_build(out: Path) -> None:
    samples = [json.loads(x) for x in (out / "samples.jsonl").read_text().splitlines()]
    assert samples
    for s in samples:
        r = s["metadata"]["rephrase"]
        assert len(r["rephrasings"]) == 3 and s["instruction"] == r["rephrasings"][r["chosen"]]
        assert r["template"] in s["paraphrases"] and r["template"] in r["rephrasings"][1]
        assert s["metadata"]["vlm"]["verdict"] == "accept"
    attempts = [json.loads(x) for x in (out / "attempts.jsonl").read_text().splitlines()]
    shown = [a for a in attempts if "vlm" in a]
    assert shown and all(json.loads(a["vlm"]["answer"])["reason"] == a["vlm"]["reason"]
                         for a in shown)  # fmt: skip
    quality = json.loads((out / "report" / "quality.json").read_text())
    verdicts = quality["vlm_verifier"]  # the counts and the rejection docs/build.md shows
    assert (verdicts["asked"], verdicts["accepted"], verdicts["rejected"]) == (4, 3, 1)
    assert [(r["slice"], r["attempt"], r["reason"]) for r in verdicts["rejections"]] == [
        ("ct-s000", 0, REJECTION)]  # fmt: skip
