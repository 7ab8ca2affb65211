"""The docs' fake API server answers every judge, the answer judge, a compositional system's
planner and a VLM in a form their own parsers accept."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from medibench.io import write_image
from medibench.judges import JUDGES
from medibench.judges._parsing import parse_answer
from medibench.knowledge_edit._judge import JUDGE_PROMPT, parse_verdict
from medibench.models.compose import PLAN_PROMPT, parse_plan
from medibench.samples import Sample
from tests.docs.standins import apis


def _sample(folder: Path, fmt: str | None) -> tuple[Sample, Path]:
    rng = np.random.default_rng(0)
    for name in ("in", "gt", "out"):
        write_image(folder / f"{name}.png", rng.integers(0, 255, (20, 20, 3), dtype=np.uint8))
    (folder / "out.txt").write_text("A small nodule in the right upper lobe.", encoding="utf-8")
    sample = Sample(
        sample_id="s0",
        benchmark="medgen" if fmt else "medebench",
        input=str(folder / "in.png"),
        target=str(folder / "gt.png"),
        instruction="Remove the nodule.",
        description="The nodule is gone.",
        task="lesion removal",
        modality="chest X-ray",
        perspective="modification",
        metadata={"format": fmt, "expected": {"text": "no nodule"}} if fmt else {},
    )
    return sample, folder / "out.png"


@pytest.mark.parametrize("mode", ["none", "json_object", "json_schema"])
@pytest.mark.parametrize("spec", sorted(JUDGES.names()))
def test_every_judge_protocol_gets_an_answer_its_parser_takes(spec, mode, tmp_path):
    judge = JUDGES.create(spec)
    fmt = "VQA" if spec.startswith("medgen-checklist@code") else None
    fmt = fmt or ("ImageEdit" if spec.startswith("medgen") else None)
    sample, prediction = _sample(tmp_path, fmt)
    paths = [p for _, p in judge.images(sample, prediction)]
    messages, _ = judge.messages(
        sample, paths, structured=mode != "none", max_side=64, oversize="resize"
    )
    body = {"model": "j", "messages": messages, "response_format": judge.response_format(mode)}
    if mode == "none":
        del body["response_format"]
    reply = apis.chat_reply(body, 1)
    parsed = parse_answer(reply.content, judge.fields)
    assert parsed.status == "ok", (reply.content, parsed.problems)
    required = [f for f in judge.fields if f.required]
    assert all(f.lo <= parsed.scores[f.key] <= f.hi for f in required)
    if mode == "json_schema":  # the schema's text keys come back too
        assert set(json.loads(reply.content)) >= set(judge.text_keys)


def test_scores_follow_the_request_so_two_outputs_differ(tmp_path):
    judge = JUDGES.create("medebench-judge@paper-structure")
    answers = set()
    for seed in range(4):
        sample, prediction = _sample(tmp_path / str(seed), None)
        write_image(prediction, np.full((20, 20, 3), 40 * seed, np.uint8))
        paths = [p for _, p in judge.images(sample, prediction)]
        messages, _ = judge.messages(
            sample, paths, structured=False, max_side=64, oversize="resize"
        )
        answers.add(apis.chat_reply({"model": "j", "messages": messages}, 1).content)
    assert len(answers) == 4


def _ask(text: str) -> str:
    return apis.chat_reply(
        {"model": "v", "messages": [{"role": "user", "content": text}]}, 1
    ).content


def test_the_answer_judge_the_planner_and_a_question():
    right = JUDGE_PROMPT.format(question="Which side?", gold="left", answer="The left lung.")
    wrong = JUDGE_PROMPT.format(question="Which side?", gold="left", answer="Right.")
    assert (parse_verdict(_ask(right)), parse_verdict(_ask(wrong))) == (True, False)
    text, edit = parse_plan(_ask(PLAN_PROMPT.format(instruction="Add a small nodule.")))
    assert text == apis.VLM_ANSWER and edit == "Add a small nodule."
    assert _ask("What modality is this image?") == apis.VLM_ANSWER


def test_the_server_is_reached_through_the_sdk_variables(tmp_path):
    import httpx

    env: dict[str, str] = {}
    with apis.standins("docs/judges.md", tmp_path, env, tmp_path):
        url = env["OPENAI_BASE_URL"]
        assert url.startswith("http://127.0.0.1:") and url.endswith("/v1")
        assert env["GOOGLE_GEMINI_BASE_URL"] == url.removesuffix("/v1")
        body = {"model": "v", "messages": [{"role": "user", "content": "What is shown?"}]}
        answer = httpx.post(f"{url}/chat/completions", json=body, timeout=10).json()
    assert answer["choices"][0]["message"]["content"] == apis.VLM_ANSWER
    assert env["OPENAI_API_KEY"].startswith("sk-docs-fake")
