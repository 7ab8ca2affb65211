"""The build's chat-model steps against a local fake OpenAI-compatible server: instruction
rephrasing (``rephrase:``) stored beside its template, the VLM verifier of inpaintings
(``verify:``) with its full answer, rejections counted with the VLM's reason, every call cached
(a second build makes none), all-or-nothing parsing and clear errors."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from medibench.build import BuildError, build, read_source
from medibench.build._perception import seeded
from medibench.build._rephrase import parse_rephrasings
from medibench.build._vlm import parse_check
from medibench.cli import app
from medibench.io import write_image
from tests.judges._server import FakeJudgeServer, Reply, first_text

KEY = "sk-build-test-0123456789abcdef"
REJECTED = "The cyst is still visible at the lower edge of the white region."
ACCEPTED = "No cyst is left and the fill matches the tissue around it."


def tiny_source(folder: Path, base_url: str, *, rephrase: str = "", verify: str = "") -> Path:
    """Two 64x64 grey MRI-like PNG items with a dark cyst each; item 0 from the source's
    train split, item 1 from its test split (``split: source``)."""
    rng = np.random.default_rng(0)
    lines = []
    for i, split in enumerate(("train", "test")):
        plane = np.clip(120 + rng.normal(0, 12, (64, 64)), 0, 255).astype(np.uint8)
        label = np.zeros((64, 64), np.uint8)
        label[20 + 2 * i : 34 + 2 * i, 22:36] = 1
        plane[label == 1] = 30
        write_image(folder / f"img{i}.png", plane)
        write_image(folder / f"lab{i}.png", label)
        lines.append(f"  - {{image: img{i}.png, label: lab{i}.png, split: {split}}}")
    steps = ""
    if rephrase is not None:
        steps += f"rephrase: {{model: chat-m, base_url: '{base_url}', n: 2, seed: 7{rephrase}}}\n"
    if verify is not None:
        steps += f"verify: {{model: vlm-m, base_url: '{base_url}', seed: 3{verify}}}\n"
    path = folder / "SOURCE.yaml"
    path.write_text(
        "name: tiny\nmodality: MRI\nlicence: test data\nregion: brain\nitems:\n"
        + "\n".join(lines)
        + "\nlabels: {1: cyst}\nlesions: [cyst]\nbins: [64]\nsplit: source\n"
        + steps,
        encoding="utf-8",
    )
    return path


def rephrasings_of(instruction: str) -> list[str]:
    """The fake's two rephrasings of a template instruction."""
    return [f"Please do this: {instruction}", f"{instruction} Leave the rest as it is."]


class Scripted:
    """The fake chat model: rephrasings per instruction; the VLM rejects the first fill it is
    shown and accepts the others (``verdicts`` overrides, in order)."""

    def __init__(self, verdicts: list[str] | None = None, rephrase: str | None = None) -> None:
        self.verdicts = verdicts
        self.rephrase = rephrase
        self.shown = 0

    def __call__(self, body: dict, n: int) -> Reply:
        text = first_text(body)
        if '{"rephrasings"' in text:
            if self.rephrase is not None:
                return Reply(self.rephrase)
            instruction = re.search(r"Instruction: (.*)\n", text).group(1)
            return Reply(json.dumps({"rephrasings": rephrasings_of(instruction)}))
        self.shown += 1
        if self.verdicts is not None:
            return Reply(self.verdicts[min(self.shown, len(self.verdicts)) - 1])
        if self.shown == 1:
            return Reply(json.dumps({"verdict": "reject", "reason": REJECTED}))
        return Reply(json.dumps({"verdict": "accept", "reason": ACCEPTED}))


@pytest.fixture
def key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def _lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()]


def test_a_build_stores_rephrasings_and_vlm_verdicts_and_a_second_build_calls_nothing(
    tmp_path, key
):
    fake = Scripted()
    with FakeJudgeServer(fake) as server:
        source = tiny_source(tmp_path / "src", server.base_url)
        out = tmp_path / "out"
        result = build("modification", source, out, exports=())
        assert not result.failures and result.samples == 4
        attempts = _lines(out / "attempts.jsonl")
        # the statistics verifier accepted every fill; the VLM rejected the first, with its words
        assert [(a["item"], a["attempt"], a["accepted"]) for a in attempts] == [
            ("img0", 0, False), ("img0", 1, True), ("img1", 0, True)]  # fmt: skip
        first = attempts[0]
        assert first["reason"] == f"vlm: {REJECTED}"
        assert first["vlm"]["answer"] == json.dumps({"verdict": "reject", "reason": REJECTED})
        assert first["vlm"]["verdict"] == "reject" and first["vlm"]["model"] == "vlm-m"
        assert first["vlm"]["prompt"] == "build-inpainting-check@1"
        assert first["statistics"]["mean_ring"] > 100  # the statistics verifier's, kept
        quality = json.loads((out / "report" / "quality.json").read_text())
        assert quality["vlm_verifier"] == {
            "models": ["vlm-m"], "asked": 3, "accepted": 2, "rejected": 1,
            "rejections": [{"item": "img0", "slice": "img0", "lesion": "cyst", "attempt": 0,
                            "reason": REJECTED, "answer": first["vlm"]["answer"]}],
        }  # fmt: skip
        assert quality["acceptance"]["MRI"]["rejection_reasons"] == {"vlm": 1}
        assert REJECTED in (out / "report" / "quality.md").read_text()

        samples = _lines(out / "samples.jsonl")
        templates = {s["sample_id"]: s["instruction"]
                     for p in (out / ".build" / "items").glob("*.json")
                     for s in json.loads(p.read_text())["samples"]}  # fmt: skip
        for s in samples:
            r = s["metadata"]["rephrase"]
            assert r["template"] == templates[s["sample_id"]]
            assert r["rephrasings"] == rephrasings_of(r["template"])  # the fake's answer, stored
            _, rng = seeded("tiny", "rephrase", s["sample_id"], 0)
            assert r["chosen"] == int(rng.integers(2))
            assert s["instruction"] == r["rephrasings"][r["chosen"]]
            assert s["paraphrases"][:2] == [r["rephrasings"][1 - r["chosen"]], r["template"]]
            assert (r["model"], r["seed"], r["prompt"]) == ("chat-m", 7, "build-rephrase@1")
            vlm = s["metadata"]["vlm"]
            assert vlm["verdict"] == "accept" and vlm["reason"] == ACCEPTED
            assert vlm["answer"] == json.dumps({"verdict": "accept", "reason": ACCEPTED})
        assert {s["metadata"]["item"]: s["split"] for s in samples} == {"img0": "train",
                                                                        "img1": "test"}  # fmt: skip
        # the requests: seeded, temperature 0, the collage as one PNG
        verify = [r for r in server.requests if r["model"] == "vlm-m"]
        rephrase = [r for r in server.requests if r["model"] == "chat-m"]
        assert len(verify) == 3 and {(r["seed"], r["temperature"]) for r in verify} == {(3, 0.0)}
        assert len(rephrase) == len(set(templates.values())) == 4
        assert {(r["seed"], r["temperature"]) for r in rephrase} == {(7, 0.0)}
        image = verify[0]["messages"][0]["content"][0]["image_url"]["url"]
        assert image.startswith("data:image/png;base64,")
        assert verify[0]["auth"] == f"Bearer {KEY}"
        assert result.calls == {"verify": {"made": 3, "cached": 0},
                                "rephrase": {"samples": 4, "instructions": 4, "made": 4,
                                             "cached": 0}}  # fmt: skip

        asked = server.count
        again = build("modification", source, out, exports=())
        assert server.count == asked and again.calls["rephrase"]["made"] == 0
        shutil.rmtree(out / ".build" / "items")  # rebuild every item: the VLM's answers cached
        rebuilt = build("modification", source, out, exports=())
        assert server.count == asked
        assert rebuilt.calls["verify"] == {"made": 0, "cached": 3}
        assert _lines(out / "samples.jsonl") == samples
        timeless = [{k: v for k, v in a.items() if k != "elapsed_s"} for a in attempts]
        assert [{k: v for k, v in a.items() if k != "elapsed_s"}
                for a in _lines(out / "attempts.jsonl")] == timeless  # fmt: skip


def test_the_cli_prints_the_calls_and_each_rejection_with_the_vlms_reason(tmp_path, key):
    with FakeJudgeServer(Scripted()) as server:
        source = tiny_source(tmp_path / "src", server.base_url, rephrase=None)
        args = ["build", "modification", "--source", str(source), "--out", str(tmp_path / "o"),
                "--export", "native"]  # fmt: skip
        printed = CliRunner().invoke(app, args)
        assert printed.exit_code == 0, printed.output
        assert "verify calls: 3 made, 0 answered from the cache" in printed.output
        assert "VLM verifier (vlm-m): 3 fills asked, 2 accepted, 1 rejected" in printed.output
        assert f"rejected img0 cyst attempt 0: {REJECTED}" in printed.output
        assert "rephrase" not in printed.output and server.count == 3


def test_a_perception_build_rephrases_and_keeps_the_colour(tmp_path, key):
    with FakeJudgeServer(Scripted()) as server:
        source = tiny_source(tmp_path / "src", server.base_url)
        build("perception", source, tmp_path / "p", exports=())
        samples = _lines(tmp_path / "p" / "samples.jsonl")
        assert server.count == len({s["metadata"]["rephrase"]["template"] for s in samples})
        assert all(s["overlay_color"][0] in s["instruction"] for s in samples)
        assert all(s["instruction"] in rephrasings_of(s["metadata"]["rephrase"]["template"])
                   for s in samples)  # fmt: skip
        assert "vlm" not in json.dumps(samples)  # verify: applies to modification only

    dropped = json.dumps({"rephrasings": ["Highlight the cyst.", "Mark the cyst."]})
    with FakeJudgeServer(Scripted(rephrase=dropped)) as server:
        source = tiny_source(tmp_path / "src2", server.base_url)
        with pytest.raises(BuildError, match=r"sample 'tiny-perception-img\d-cyst' "
                           r"\(instruction '.*'\): the rephrase answer of chat-m: rephrasing 1 "
                           r"\('Highlight the cyst\.'\) does not name the colour '(red|green|"
                           r"blue)'"):  # fmt: skip
            build("perception", source, tmp_path / "p2", exports=())


def test_an_unparsable_vlm_answer_fails_the_item_naming_the_samples_never_an_accept(tmp_path, key):
    with FakeJudgeServer(Scripted(verdicts=["Looks fine to me."])) as server:
        source = tiny_source(tmp_path / "src", server.base_url, rephrase=None)
        result = build("modification", source, tmp_path / "o", exports=())
        assert sorted(result.failures) == ["img0", "img1"] and not result.built
        assert result.failures["img0"] == (
            "item 'img0' slice img0 lesion 'cyst' attempt 0 (samples "
            "tiny-modification-img0-remove-cyst and -add-cyst): the verify answer of vlm-m: "
            "the answer is not one JSON object; the answer was 'Looks fine to me.'"
        )
        assert not (tmp_path / "o" / "samples.jsonl").exists()
        assert not list((tmp_path / "o" / ".build").glob("calls/*/*.json"))  # nothing cached


@pytest.mark.parametrize(
    ("answer", "why"),
    [
        ('{"verdict": "accept"}', r"exactly \['verdict', 'reason'\], got \['verdict'\]"),
        ('{"verdict": "maybe", "reason": "x"}', '\'verdict\' must be "accept" or "reject"'),
        ('{"verdict": "reject", "reason": " "}', "'reason' must be a non-empty string"),
        ('Verdict: accept. {"verdict": "accept", "reason": "ok"}', "not one JSON object"),
    ],
)
def test_the_vlm_answer_is_read_all_or_nothing(answer, why):
    with pytest.raises(ValueError, match=why):
        parse_check(answer)


def test_the_readers_take_fenced_json_and_refuse_short_or_repeated_rephrasings():
    assert parse_check('```json\n{"verdict": "Reject", "reason": "seam"}\n```') == (False, "seam")
    with pytest.raises(ValueError, match="exactly 3 strings, got 2"):
        parse_rephrasings('{"rephrasings": ["a", "b"]}', 3)
    with pytest.raises(ValueError, match="repeat one another"):
        parse_rephrasings('{"rephrasings": ["a", "a"]}', 2)
    with pytest.raises(ValueError, match=r"rephrasing 2 is not a non-empty string \(''\)"):
        parse_rephrasings('{"rephrasings": ["a", ""]}', 2)


def test_a_refusing_vlm_rejects_the_fill(tmp_path, key):
    def refuse(body, n):
        return Reply(None, refusal="I cannot review medical images.")

    with FakeJudgeServer(refuse) as server:
        source = tiny_source(tmp_path / "src", server.base_url, rephrase=None)
        with pytest.raises(BuildError, match="no sample survived the filters"):
            build("modification", source, tmp_path / "o", exports=())
        attempts = _lines(tmp_path / "o" / "attempts.jsonl")
        assert len(attempts) == 6 and not any(a["accepted"] for a in attempts)
        assert {a["reason"] for a in attempts} == {"vlm: refused: I cannot review medical images."}


def test_a_missing_key_a_down_endpoint_and_bad_keys_are_clear_errors(tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("MEDIBENCH_TEST_NO_KEY", raising=False)
    source = tiny_source(tmp_path / "src", "http://127.0.0.1:9/v1",
                         verify=", api_key_env: MEDIBENCH_TEST_NO_KEY", rephrase=None)  # fmt: skip
    needs = r"SOURCE.yaml: verify \(vlm-m\): the chat model needs an API key in the environment"
    with pytest.raises(BuildError, match=needs + " variable MEDIBENCH_TEST_NO_KEY"):
        build("modification", source, tmp_path / "o")
    assert not (tmp_path / "o").exists()

    monkeypatch.setenv("MEDIBENCH_TEST_NO_KEY", KEY)
    no_retry = ", api_key_env: MEDIBENCH_TEST_NO_KEY, max_attempts: 1"
    source = tiny_source(tmp_path / "src", "http://127.0.0.1:9/v1", rephrase=None, verify=no_retry)
    printed = CliRunner().invoke(app, ["build", "modification", "--source", str(source),
                                       "--out", str(tmp_path / "o")])  # fmt: skip
    assert printed.exit_code == 2
    assert re.search(r"verify: the endpoint http://127\.0\.0\.1:9/v1 cannot answer "
                     r"\(http://127\.0\.0\.1:9/v1: connection error", printed.output)  # fmt: skip
    assert "finished items are kept" in printed.output

    base = source.read_text().split("verify:")[0]
    for block, problem in (
        ("rephrase: {model: m, temprature: 0}",
         r"SOURCE.yaml: rephrase: unknown key\(s\) 'temprature'; known keys: model, base_url"),
        ("verify: {model: m, n: 2}", r"SOURCE.yaml: verify: unknown key\(s\) 'n'"),
        ("verify: vlm-m", r"SOURCE.yaml: verify must be a mapping like \{model: NAME\}"),
        ("rephrase: {n: 2}", r"SOURCE.yaml: rephrase needs 'model'"),
        ("rephrase: {model: m, n: 0}", r"SOURCE.yaml: rephrase.n must be an integer from 1 "),
        ("rephrase: {model: m, temperature: hot}",
         r"SOURCE.yaml: rephrase.temperature: Input should be a valid number.*got 'hot'"),
    ):  # fmt: skip
        source.write_text(base + block + "\n")
        with pytest.raises(BuildError, match=problem):
            read_source(source)


def test_a_damaged_cached_answer_is_named_and_a_refused_rephrasing_is_an_error(tmp_path, key):
    with FakeJudgeServer(Scripted()) as server:
        source = tiny_source(tmp_path / "src", server.base_url, verify=None)
        build("transformation", source, tmp_path / "t", exports=())
        damaged = sorted((tmp_path / "t" / ".build" / "calls").glob("*/*.json"))[0]
        damaged.write_text('{"answer": ')
        with pytest.raises(BuildError, match=f"rephrase: the cached answer {damaged} is damaged; "
                           "delete it to ask again"):  # fmt: skip
            build("transformation", source, tmp_path / "t", exports=())

    def refuse(body, n):
        return Reply(None, refusal="I cannot help with that.")

    with FakeJudgeServer(refuse) as server:
        source = tiny_source(tmp_path / "src2", server.base_url, verify=None)
        with pytest.raises(BuildError, match=r"sample 'tiny-transformation-img\d-[a-z0-9-]+'.*: "
                           r"the rephrase answer of chat-m: the model refused \(I cannot help "
                           r"with that\.\); the answer had no text \(and 12 more\)"):  # fmt: skip
            build("transformation", source, tmp_path / "t2", exports=())
