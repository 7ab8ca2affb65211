import json
import math

import pytest

from medibench.samples import Perspective, Prediction, RecordError, Sample, Score


def _sample(**kw):
    d = dict(
        sample_id="s1",
        benchmark="b",
        input="in.png",
        instruction="Remove the lesion.",
        perspective="modification",
    )
    d.update(kw)
    return d


def test_sample_json_round_trip_keeps_every_field():
    s = Sample.parse(
        _sample(
            target="t.png",
            mask="m.png",
            overlay_color="green",
            paraphrases=["Erase it."],
            source={"licence": "MIT"},
            metadata={"sigma": 3.5},
        )
    )
    assert s.overlay_color == ("green",)
    assert s.perspective is Perspective.modification
    back = Sample.from_json(s.to_json())
    assert back == s
    assert json.loads(s.to_json())["metadata"] == {"sigma": 3.5}


def test_missing_field_error_names_sample_and_field():
    d = _sample()
    del d["instruction"]
    with pytest.raises(RecordError, match=r"Sample sample 's1' \(line 3\): field 'instruction'"):
        Sample.parse(d, where="line 3")


def test_bad_perspective_and_colour_are_named():
    with pytest.raises(RecordError, match="field 'perspective'"):
        Sample.parse(_sample(perspective="painting"))
    with pytest.raises(RecordError, match="field 'overlay_color"):
        Sample.parse(_sample(overlay_color=["purple"]))


def test_unknown_field_and_unsafe_id_are_refused():
    with pytest.raises(RecordError, match="field 'colour'"):
        Sample.parse(_sample(colour="red"))
    with pytest.raises(RecordError, match="file name"):
        Sample.parse(_sample(sample_id="../x"))


def test_not_json_is_a_clear_error():
    with pytest.raises(RecordError, match="not valid JSON"):
        Sample.parse("{oops", where="samples.jsonl line 2")


def test_score_json_writes_inf_as_string_and_reads_it_back():
    s = Score(
        sample_id="a",
        model="m",
        k=1,
        protocol="native",
        protocol_version="1",
        metrics={"psnr": math.inf, "ssim": 0.5, "cp": None},
        error="cp: no ROI mask",
    )
    d = json.loads(s.to_json())
    assert d["metrics"] == {"psnr": "inf", "ssim": 0.5, "cp": None}
    assert set(d) == {
        "sample_id",
        "model",
        "k",
        "protocol",
        "protocol_version",
        "metrics",
        "status",
        "error",
        "notes",
    }
    assert Score.from_json(s.to_json()) == s


def test_score_refuses_nan_metric():
    s = Score(sample_id="a", protocol="p", protocol_version="1", metrics={"x": math.nan})
    with pytest.raises(RecordError, match="NaN"):
        s.to_json()


def test_prediction_k_must_be_non_negative():
    with pytest.raises(RecordError, match="field 'k'"):
        Prediction.parse({"sample_id": "a", "model": "m", "k": -1})
