"""Answerers: batched generation equals one-at-a-time, module:callable, an OpenAI-compatible
endpoint (a local fake server), and in-context facts in the question."""

from __future__ import annotations

import numpy as np
import pytest

from medibench.io import read_image
from medibench.knowledge_edit import (
    AnswererError,
    CallableAnswerer,
    OpenAIAnswerer,
    load_answerer,
)
from tests.judges._server import FakeJudgeServer, Reply, first_text


def shout(image, question: str) -> str:
    return f"{question.upper()} ({image.shape[0]} px) "


def test_batched_generation_equals_one_at_a_time(tiny, synthetic):
    items = [
        (read_image(synthetic.image_path(p.image)), p.question)
        for r in synthetic.requests[:2]
        for p in r.probes
    ]
    tiny.batch_size = 5  # several batches with left padding of different prompts
    batched = tiny.answer_batch(items)
    assert batched == [tiny.answer(im, q) for im, q in items]
    assert all(isinstance(a, str) for a in batched)


def test_token_accuracy_matches_greedy_generation(tiny, synthetic):
    r = synthetic.requests[0]
    image = read_image(synthetic.image_path(r.image))
    answer = tiny.answer(image, r.question)
    if answer:  # the greedy answer itself is, by construction, the argmax at every token
        assert tiny.token_accuracy(image, r.question, answer) == 1.0
    assert 0.0 <= tiny.token_accuracy(image, r.question, r.target) <= 1.0


def test_module_callable_and_context():
    model = load_answerer("tests.knowledge_edit.test_answerers:shout")
    assert isinstance(model, CallableAnswerer)
    image = np.zeros((5, 5, 3), np.uint8)
    assert model.answer(image, "which side?") == "WHICH SIDE? (5 px)"
    model.context.append("Fact one.")
    assert model.answer(image, "q") == "FACT ONE. Q (5 px)"
    with pytest.raises(FileNotFoundError, match="not a model folder"):
        load_answerer("no-such-model")


def test_callable_that_returns_no_text_is_refused():
    model = CallableAnswerer(lambda image, q: 3, name="bad")
    with pytest.raises(AnswererError, match="bad returned int, not text"):
        model.answer(np.zeros((2, 2, 3), np.uint8), "q")


def test_openai_compatible_endpoint(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-0123456789")
    with FakeJudgeServer(lambda body, n: Reply(content=" left ")) as server:
        model = OpenAIAnswerer("vlm-x", base_url=server.base_url, concurrency=2)
        image = np.full((6, 6, 3), 7, np.uint8)
        assert model.answer_batch([(image, "Which side?"), (image, "Which side now?")]) == [
            "left",
            "left",
        ]
        body = server.requests[0]
        assert body["model"] == "vlm-x" and body["temperature"] == 0.0
        parts = body["messages"][0]["content"]
        assert parts[1]["image_url"]["url"].startswith("data:image/png;base64,")
        assert "Which side" in first_text(body)
    with FakeJudgeServer(lambda body, n: Reply(status=500)) as server:
        model = OpenAIAnswerer("vlm-x", base_url=server.base_url)
        model.config = model.config.model_copy(update={"max_attempts": 1})
        with pytest.raises(AnswererError, match="vlm-x: .*HTTP 500"):
            model.answer(np.zeros((4, 4, 3), np.uint8), "q")


def test_the_processors_chat_template_is_the_prompt(tiny_path, tmp_path):
    import shutil

    from transformers import AutoProcessor

    from medibench.knowledge_edit import TransformersAnswerer

    folder = tmp_path / "chat"
    shutil.copytree(tiny_path, folder)
    processor = AutoProcessor.from_pretrained(folder)
    processor.chat_template = (
        "{% for m in messages %}<s> user : {% for c in m['content'] %}{% if c['type'] == 'image' %}"
        "<image>{% else %} {{ c['text'] }}{% endif %}{% endfor %}{% endfor %}"
        "{% if add_generation_prompt %} assistant :{% endif %}"
    )
    processor.save_pretrained(folder)
    model = TransformersAnswerer(folder, max_new_tokens=2)
    assert model.vlm.template is None  # the chat template writes the prompt
    assert model.prompt_text("which side ?") == "<s> user : <image> which side ? assistant :"
    model.context.append("New fact: x.")
    assert model.prompt_text("q") == "<s> user : <image> New fact: x. q assistant :"
    assert isinstance(model.answer(np.zeros((40, 40, 3), np.uint8), "which side ?"), str)
    plain = TransformersAnswerer(tiny_path, prompt="Q: {question} A:")
    assert plain.prompt_text("which side ?") == "Q: which side ? A:"
