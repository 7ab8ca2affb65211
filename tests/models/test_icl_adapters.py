"""In-context demonstrations on the wire: whole runs against the local fake servers check that
each request carries exactly K demonstrations in the documented order and format, that a
re-run sends nothing, and that the images sent count in the cost budget."""

from __future__ import annotations

import base64
import io
import json
import re

import numpy as np
import pytest
from PIL import Image
from tests.benchmarks.medgen.test_vlm_models import tiny_llava  # noqa: F401  (a fixture)
from tests.judges._server import FakeJudgeServer, Reply
from tests.models.fake_image_api import FakeImageAPI
from tests.runs.icl_data import TEMPTING, write_dataset

from medibench.models._examples import Demonstration, load_template
from medibench.runs import RunConfig, RunError, RunStore, run
from medibench.runs._demos import read_demonstrations
from medibench.runs._models import generation_budget

FAST = {"backoff": 0.01, "max_backoff": 0.05, "timeout": 10.0}


@pytest.fixture
def api(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("GEMINI_API_KEY", "gm-test")
    with FakeImageAPI() as server:
        yield server


@pytest.fixture
def data(tmp_path):
    return write_dataset(tmp_path / "tempt", TEMPTING)


def _png(data: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))


def _file(root, name) -> np.ndarray:
    return np.asarray(Image.open(root / "img" / name).convert("RGB"))


def _run(data, out, model, options, **kw):
    opts = tuple(f"{k}={v}" for k, v in options.items())
    cfg = RunConfig(
        dataset=f"native:{data}",
        models=(model,),
        out=out,
        stage="generate",
        model_options=opts,
        **kw,
    )
    return run(cfg, progress=False)


def test_openai_sends_every_demonstration_as_image_array_with_a_prompt_naming_them(
    api, data, tmp_path
):
    out = tmp_path / "run"
    with _run(
        data, out, "openai-image:gpt-image-1", {**FAST, "base_url": f"{api.url}/v1"}, icl_k=(0, 2)
    ) as store:
        shown = read_demonstrations(store)
        preds = {(p.model, p.sample_id): p for p in store.predictions()}
    plain = [r for r in api.requests if "image" in r["files"]]
    with_examples = [r for r in api.requests if "image" not in r["files"]]
    assert len(plain) == len(with_examples) == len(TEMPTING)
    for r in plain:  # K = 0: the request a run without the option sends
        assert [u[0] for u in r["uploads"]] == ["image"]
        assert re.fullmatch(r"Denoise image a\d\.", r["fields"]["prompt"])
    for r in with_examples:
        sid = re.search(r"Instruction: Denoise image (a\d)\.$", r["fields"]["prompt"]).group(1)
        demos = shown[("gpt-image-1@icl-2", sid, 0)]["demo_ids"]
        assert len(demos) == 2
        names = [u[1] for u in r["uploads"]]
        assert [u[0] for u in r["uploads"]] == ["image[]"] * 5
        assert names == [
            "example1_input.png",
            "example1_output.png",
            "example2_input.png",
            "example2_output.png",
            "query.png",
        ]
        expect = [
            _file(data, f"{demos[0]}.png"),
            _file(data, f"{demos[0]}_t.png"),
            _file(data, f"{demos[1]}.png"),
            _file(data, f"{demos[1]}_t.png"),
            _file(data, f"{sid}.png"),
        ]
        for (_, _, mime, raw), want in zip(r["uploads"], expect, strict=True):
            assert mime == "image/png" and np.array_equal(_png(raw), want)
        assert r["fields"]["prompt"] == (
            "You are given 5 images. Images 1 to 4 are 2 worked example(s) of medical image "
            "editing, two images each: an input image and the edited image its instruction "
            "produced.\n"
            f"Example 1: image 1 is the input; image 2 is the result of the instruction: "
            f"Denoise image {demos[0]}.\n"
            f"Example 2: image 3 is the input; image 4 is the result of the instruction: "
            f"Denoise image {demos[1]}.\n"
            "Image 5 is the image to edit. Edit image 5 as this instruction asks, the way the "
            "examples were edited, and return only the edited image.\n"
            f"Instruction: Denoise image {sid}."
        )
        got = np.asarray(Image.open(out / preds[("gpt-image-1@icl-2", sid)].path))
        assert np.array_equal(got, 255 - _file(data, f"{sid}.png"))  # the query was edited
    # a re-run with the same seed sends nothing again
    before = len(api.requests)
    _run(
        data, out, "openai-image:gpt-image-1", {**FAST, "base_url": f"{api.url}/v1"}, icl_k=(0, 2)
    ).close()
    assert len(api.requests) == before


def test_gemini_sends_interleaved_turns_and_the_query_last(api, data, tmp_path):
    with _run(
        data, tmp_path / "run", "gemini-image", {**FAST, "base_url": api.url}, icl_k=(2,)
    ) as store:
        shown = read_demonstrations(store)
        seeds = {p.sample_id: p.seed for p in store.predictions()}
    assert len(api.requests) == len(TEMPTING)
    intro = load_template().text("gemini_intro", k=2)
    for r in api.requests:
        contents = r["json"]["contents"]
        query = contents[-1]["parts"]
        sid = re.fullmatch(r"Denoise image (a\d)\.", query[0]["text"]).group(1)
        demos = shown[("gemini-2.5-flash-image@icl-2", sid, 0)]["demo_ids"]
        assert [c["role"] for c in contents] == ["user", "model", "user", "model", "user"]
        assert contents[0]["parts"][0] == {"text": intro}
        for i, d in enumerate(demos):
            user, model = contents[2 * i]["parts"], contents[2 * i + 1]["parts"]
            assert user[-2] == {"text": f"Denoise image {d}."}
            assert np.array_equal(_inline(user[-1]), _file(data, f"{d}.png"))
            assert len(model) == 1 and np.array_equal(_inline(model[0]), _file(data, f"{d}_t.png"))
        assert np.array_equal(_inline(query[1]), _file(data, f"{sid}.png"))
        assert r["json"]["generationConfig"]["seed"] == seeds[sid]


def _inline(part) -> np.ndarray:
    assert part["inline_data"]["mime_type"] == "image/png"
    return _png(base64.b64decode(part["inline_data"]["data"]))


def test_demonstrations_count_in_the_cost_budget(api, data, tmp_path):
    opts = {**FAST, "base_url": f"{api.url}/v1", "price_per_image": 0.01}
    opts["price_per_input_image"] = 0.001
    out = tmp_path / "run"
    # each request with two demonstrations sends 5 images: 0.015 USD; 0.05 pays for three
    with _run(data, out, "openai-image", opts, icl_k=(2,), max_cost=0.05, workers=1) as store:
        assert len(store.predictions(status="ok")) == 3
    assert len(api.requests) == 3
    with RunStore(out) as store:  # earlier spend, demonstrations included, counts first
        assert generation_budget(store, 1.0).before == pytest.approx(3 * 0.015)
    opts0 = {**opts, "name": "zero"}
    with _run(data, tmp_path / "zero", "openai-image", opts0, icl_k=(0,)) as store:
        assert generation_budget(store, 1.0).before == pytest.approx(len(TEMPTING) * 0.011)


def _answer_dataset(root):
    root.mkdir(parents=True)
    lines = []
    for i in range(4):
        Image.fromarray(np.full((12, 12, 3), 40 * i, np.uint8)).save(root / f"q{i}.png")
        lines.append(
            json.dumps(
                {
                    "sample_id": f"q{i}",
                    "benchmark": "vqa",
                    "input": f"q{i}.png",
                    "instruction": f"what is shown in q{i} ?",
                    "perspective": "perception",
                    "source": {"patient": f"P{i}"},
                    "metadata": {"expected": {"text": f"answer {i}"}},
                }
            )
        )
    (root / "samples.jsonl").write_text("\n".join(lines) + "\n")
    return root


def test_chat_vlm_gets_the_demonstrations_as_prior_turns(tmp_path):
    data = _answer_dataset(tmp_path / "vqa")
    with FakeJudgeServer(lambda body, n: Reply("a lung")) as srv:
        opts = {"base_url": srv.base_url, "api_key_required": False, "max_attempts": 1}
        with _run(data, tmp_path / "run", "openai-chat:tiny", opts, icl_k=(2,)) as store:
            shown = read_demonstrations(store)
            assert len(store.predictions(status="ok")) == 4
        for body in srv.requests:
            messages = body["messages"]
            assert [m["role"] for m in messages] == [
                "user",
                "assistant",
                "user",
                "assistant",
                "user",
            ]
            sid = re.search(r"(q\d)", messages[-1]["content"][-1]["text"]).group(1)
            demos = shown[("tiny@icl-2", sid, 0)]["demo_ids"]
            for i, d in enumerate(demos):
                user = messages[2 * i]["content"]
                assert user[0]["type"] == "image_url" and user[0]["image_url"]["url"].startswith(
                    "data:image/png;base64,"
                )
                assert user[1] == {"type": "text", "text": f"what is shown in {d} ?"}
                assert messages[2 * i + 1]["content"] == f"answer {d[1]}"
            assert row_images(shown, sid) == 3


def row_images(shown, sid):
    return shown[("tiny@icl-2", sid, 0)]["images_sent"]


def test_a_composition_passes_the_demonstrations_to_its_vlm(tmp_path):
    data = _answer_dataset(tmp_path / "vqa")
    with FakeJudgeServer(lambda body, n: Reply("a lung")) as srv:
        opts = {
            "vlm_options": json.dumps({"base_url": srv.base_url, "api_key_required": False}),
        }
        with _run(data, tmp_path / "run", "openai-chat:tiny + identity", opts, icl_k=(1,)):
            pass
        assert all(len(b["messages"]) == 3 for b in srv.requests)
        with RunStore(tmp_path / "run") as store:
            rows = store.records("answers")
        assert all(json.loads(r["calls"])[0]["examples"] for r in rows)
    with pytest.raises(RunError, match="cannot take in-context demonstrations"):
        _run(data, tmp_path / "r2", "tests.runs.icl_data:mean_colour + identity", {}, icl_k=(1,))


def test_transformers_vlm_gets_prior_chat_turns(tiny_llava):  # noqa: F811
    from medibench.models.vlm import TransformersVLM

    vlm = TransformersVLM(tiny_llava, max_new_tokens=2)
    query = np.full((20, 24, 3), 10, np.uint8)
    ex = Demonstration(
        "d1", (np.full((20, 24, 3), 200, np.uint8),), "what is shown ?", answer="a lung"
    )
    calls = []
    original = vlm.processor.__class__.__call__

    def spy(self, *args, **kwargs):
        calls.append((kwargs["images"], kwargs["text"]))
        return original(self, *args, **kwargs)

    vlm.processor.__class__.__call__ = spy
    try:
        first = vlm.answer_with_examples([query], "what is shown ?", [ex], seed=0)
        assert first == vlm.answer_with_examples([query], "what is shown ?", [ex], seed=0)
        vlm.answer([query], "what is shown ?", seed=0)
    finally:
        vlm.processor.__class__.__call__ = original
    (images, text), _, (plain_images, plain_text) = calls  # one list of images per prompt
    assert [np.asarray(im)[0, 0, 0] for im in images[0]] == [200, 10]  # the example's first
    assert text == [
        "user : <image> what is shown ?user : a lunguser : <image> what is shown ? assistant :"
    ]
    assert len(plain_images) == 1 and len(plain_images[0]) == 1
    assert plain_text == ["user : <image> what is shown ? assistant :"]
