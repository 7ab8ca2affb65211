"""Calibration inputs a hostile or unlucky user gives: every one is one line naming the file
and the problem, exit 2 (never "Aborted." or a traceback); a CSV with a byte-order mark reads
as the same CSV without one; two prediction files of one name scored into one run keep their
own reliability diagrams."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest
from typer.testing import CliRunner

from medibench.calibration import as_predictions, load_predictions, save_predictions
from medibench.calibration._report import diagram_folder
from medibench.calibration.calibrators import (
    METHODS,
    fit_calibrator,
    load_calibrator,
    save_calibrator,
)
from medibench.cli import app
from tests.calibration.conftest import make_logits

runner = CliRunner()


def _csv_text() -> str:
    return "label,prob_0,prob_1\n0,0.8,0.2\n1,0.3,0.7\n1,0.4,0.6\n"


def _npz_bytes() -> bytes:
    buf = io.BytesIO()
    np.savez(buf, labels=np.array([0, 1]), probs=np.array([[0.9, 0.1], [0.2, 0.8]]))
    return buf.getvalue()


BAD_FILES = {
    "empty.npz": (b"", "empty file (0 bytes)"),
    "corrupt.npz": (b"PK\x03\x04" + b"\x00" * 40, "not a readable .npz file"),
    "text.npz": (b"label,prob_0\n0,1\n", "not a readable .npz file"),
    "cut.npz": (_npz_bytes()[:-30], "not a readable .npz file"),
    "latin1.csv": ("label,prob_0,prob_1,site\n0,0.5,0.5,Zürich\n".encode("latin-1"),
                   "not UTF-8 text (byte 0xfc on line 2); save the CSV as UTF-8"),
    "utf16.csv": (_csv_text().encode("utf-16"), "not UTF-8 text (byte 0xff on line 1)"),
    "empty.csv": (b"", "empty CSV file"),
    "nul.csv": (b"label,prob_0,prob_1\n0,0.5\x00,0.5\n", "is not a number"),
    "ragged.csv": (b"label,prob_0,prob_1\n0,0.5\n", "line 2 has 2 fields, the header has 3"),
    "twice.csv": (b"label,label,prob_0,prob_1\n0,0,0.5,0.5\n", "names a column twice"),
    "nan.csv": (b"label,prob_0,prob_1\n0,nan,0.5\n", "not finite"),
    "words.csv": (b"label,prob_0,prob_1\n0,high,low\n", "'high' is not a number"),
    "nolabel.csv": (b"prob_0,prob_1\n0.5,0.5\n", "no labels"),
    "sum.csv": (b"label,prob_0,prob_1\n0,0.9,0.9\n", "probabilities sum to 1.8"),
    "label.csv": (b"label,prob_0,prob_1\n7,0.5,0.5\n", "label 7 is out of range"),
    "oneclass.csv": (b"label,prob_0\n0,1\n", "at least 2 classes"),
    "header.csv": (b"label,prob_0,prob_1\n", "no samples"),
    "gap.csv": (b"label,prob_0,prob_2\n0,0.5,0.5\n", "column prob_1 is missing"),
    "notes.txt": (b"hello", "unknown predictions format '.txt'"),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(BAD_FILES))
@pytest.mark.parametrize("command", ["score", "diagram", "fit"])
def test_a_bad_predictions_file_is_one_line_naming_it(tmp_path, name, command):
    data, words = BAD_FILES[name]
    path = tmp_path / name
    path.write_bytes(data)
    args = {"score": ["score", str(path)],
            "diagram": ["diagram", str(path), "--out", str(tmp_path / "d")],
            "fit": ["fit", "--val", str(path), "--out", str(tmp_path / "p.json")],
            }[command]  # fmt: skip
    res = runner.invoke(app, ["calibration", *args])
    assert res.exit_code == 2, res.output
    assert res.exception is None or isinstance(res.exception, SystemExit)
    text = " ".join(res.output.split())
    assert "Aborted" not in text and str(path) in text and words in text


def test_a_csv_with_a_byte_order_mark_reads_as_without(tmp_path):
    plain, bom = tmp_path / "plain.csv", tmp_path / "bom.csv"
    plain.write_text(_csv_text(), encoding="utf-8")
    bom.write_text(_csv_text(), encoding="utf-8-sig")
    assert bom.read_bytes().startswith(b"\xef\xbb\xbf")
    a, b = load_predictions(plain), load_predictions(bom)
    assert np.array_equal(a.labels, b.labels) and np.array_equal(a.probs, b.probs)
    assert a.labels.tolist() == [0, 1, 1]


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--json", "{tmp}"], "--json {tmp} is a folder"),
        (["--run", "{tmp}/p.csv"], "is a file; give a run folder"),
    ],
)
def test_score_output_options_are_checked_before_scoring(tmp_path, args, words):
    pred = tmp_path / "p.csv"
    pred.write_text(_csv_text())
    args = [a.format(tmp=tmp_path) for a in args]
    res = runner.invoke(app, ["calibration", "score", str(pred), *args])
    assert res.exit_code == 2, res.output
    assert res.exception is None or isinstance(res.exception, SystemExit)
    assert words.format(tmp=tmp_path) in " ".join(res.output.split())


def test_fit_apply_and_diagram_outputs_are_checked(tmp_path):
    pred = tmp_path / "p.csv"
    pred.write_text(_csv_text())
    fit = runner.invoke(app, ["calibration", "fit", "--val", str(pred), "--out", str(tmp_path)])
    assert fit.exit_code == 2 and "--out" in fit.output and "is a folder" in fit.output
    made = runner.invoke(app, ["calibration", "diagram", str(pred), "--out", str(pred)])
    assert made.exit_code == 2 and "is a file" in made.output
    params = tmp_path / "t.json"
    assert runner.invoke(app, ["calibration", "fit", "--val", str(pred), "--out",
                               str(params)]).exit_code == 0  # fmt: skip
    applied = runner.invoke(app, ["calibration", "apply", str(params), str(pred), "--out",
                                  str(tmp_path)])  # fmt: skip
    assert applied.exit_code == 2 and "is a folder" in applied.output


def test_two_prediction_files_of_one_name_keep_their_own_diagrams(tmp_path):
    run = tmp_path / "run"
    made = []
    for i, folder in enumerate(("a", "b")):
        z, y = make_logits(200, 3, seed=i, temper=0.3 + i)
        (tmp_path / folder).mkdir()
        path = save_predictions(as_predictions(y, logits=z), tmp_path / folder / "preds.npz")
        res = runner.invoke(app, ["calibration", "score", str(path), "--run", str(run),
                                  "--resamples", "0"])  # fmt: skip
        assert res.exit_code == 0, res.output
        made.append(path)
    first, second = (diagram_folder(run, str(p)) for p in made)
    assert first != second and first.name.startswith("preds.npz-")
    svgs = [{p.name: p.read_bytes() for p in f.glob("*.svg")} for f in (first, second)]
    assert svgs[0] and svgs[0].keys() == svgs[1].keys()
    assert svgs[0] != svgs[1]  # each file its own diagram: B's did not replace A's
    from medibench.calibration._report import calibration_panel
    from medibench.runs import RunStore

    with RunStore(run) as store:
        panel = calibration_panel(store, run)
    assert panel is not None
    titles = [t["title"] for t in panel["tables"]]
    assert titles == [f"{made[0]} · calibration@1", f"{made[1]} · calibration@1"]
    # each diagram shows the two files side by side, each part its own file's drawing
    pairs = [f["parts"] for f in panel["figures"]]
    assert pairs and all([p["title"] for p in parts] == [str(m) for m in made] for parts in pairs)
    assert all(parts[0]["svg"] != parts[1]["svg"] for parts in pairs)


@pytest.mark.parametrize(("resamples", "by", "words"), [
    ("10000000", [], "10,000,000 bootstrap resamples of 1,000 predictions draw "
                     "10,000,000,000 indices, more than the 5,000,000,000"),
    ("3000000", ["--by", "domain"], "draw 6,000,000,000 indices (and as many again for the "
                                    "groups of --by)"),
])  # fmt: skip
def test_a_bootstrap_of_hours_is_refused_before_it_starts(tmp_path, resamples, by, words):
    """docs/calibration.md: more than 5 billion indices in all is refused (it would run hours)."""
    logits, labels = make_logits(1000, 3, 0)
    pred = as_predictions(labels, logits=logits, groups={"domain": ["a", "b"] * 500})
    path = tmp_path / "pred.npz"
    save_predictions(pred, path)
    res = runner.invoke(app, ["calibration", "score", str(path), "--resamples", resamples, *by])
    assert res.exit_code == 2, res.output
    assert words in " ".join(res.output.split())
    assert "use fewer resamples (--resamples), or 0 for no intervals" in " ".join(
        res.output.split())


TAMPERED = {
    "null temperature": (lambda d: d["params"].update(temperature=None),
                         "params.temperature is None, not a number"),
    "null n_classes": (lambda d: d.update(n_classes=None), "n_classes is None"),
    "null params": (lambda d: d.update(params=None), "params is None, not an object"),
    "zero temperature": (lambda d: d["params"].update(temperature=0),
                         "params.temperature is 0, not positive"),
    "unknown method": (lambda d: d.update(method="platt"), "method 'platt' is not one of"),
    "nan temperature": (lambda d: d["params"].update(temperature=float("nan")),
                        "params.temperature holds a value that is not a finite number"),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(TAMPERED))
def test_apply_with_tampered_parameters_names_the_parameters_file(tmp_path, case):
    """A hand-edited params.json is blamed, not the predictions ("fitted on None (None)")."""
    pred = tmp_path / "p.csv"
    pred.write_text(_csv_text())
    params = tmp_path / "params.json"
    assert runner.invoke(app, ["calibration", "fit", "--val", str(pred), "--out",
                               str(params)]).exit_code == 0  # fmt: skip
    data = json.loads(params.read_text())
    change, words = TAMPERED[case]
    change(data)
    params.write_text(json.dumps(data))
    res = runner.invoke(app, ["calibration", "apply", str(params), str(pred), "--out",
                              str(tmp_path / "out.npz")])  # fmt: skip
    said = " ".join(res.output.split())
    assert res.exit_code == 2, res.output
    assert f"{params.name}: not calibrator parameters as 'calibration fit' writes them" in said
    assert words in said and "fitted on None" not in said


def test_saved_parameters_of_every_method_load_back(tmp_path):
    z, y = make_logits(120, 3, seed=4)
    val = as_predictions(y, logits=z)
    for method in METHODS:
        path = save_calibrator(fit_calibrator(val, method), tmp_path / f"{method}.json")
        back = load_calibrator(path).to_dict()  # NaN (a histogram's empty bin) != NaN: as text
        assert json.dumps(back, sort_keys=True) == json.dumps(json.loads(path.read_text()),
                                                              sort_keys=True)  # fmt: skip
