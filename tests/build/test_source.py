"""SOURCE.yaml: every key checked, errors naming the key, the item and what is expected."""

from __future__ import annotations

import pytest

from medibench.build import BuildError, read_source
from medibench.build._source import SOURCE_KEYS

GOOD = """\
name: brain
modality: MRI
licence: CC0
items:
  - {image: t1.nii.gz, label: tissue.nii.gz, patient: p1}
labels: {1: grey matter, 2: white matter}
lesions: [white matter]
split: {by: patient, test: 0.2, seed: 0}
"""


def _write(tmp_path, text):
    path = tmp_path / "SOURCE.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_good_source_is_read_with_defaults_and_absolute_paths(tmp_path):
    spec = read_source(_write(tmp_path, GOOD))
    assert spec.name == "brain" and spec.modality == "MRI" and spec.licence == "CC0"
    assert spec.labels == {1: "grey matter", 2: "white matter"}
    assert spec.lesions == ("white matter",)
    (item,) = spec.items
    assert item.id == "t1" and item.patient == "p1"
    assert item.image == tmp_path.resolve() / "t1.nii.gz"
    assert (spec.axis, spec.min_fraction, spec.max_fraction) == (2, 0.01, 0.9)
    assert spec.bins == (128, 256, 512) and spec.dedupe_bits == 0
    assert (spec.split.by, spec.split.test, spec.split.val, spec.split.seed) == (
        "patient", 0.2, 0.0, 0)  # fmt: skip


def test_an_unknown_key_names_it_and_the_known_ones(tmp_path):
    with pytest.raises(BuildError) as info:
        read_source(_write(tmp_path, GOOD + "colour: red\n"))
    message = str(info.value)
    assert "unknown key(s) 'colour'" in message
    assert "known keys: " + ", ".join(SOURCE_KEYS) in message


def test_an_unknown_item_or_split_key_is_named_too(tmp_path):
    bad_item = GOOD.replace("patient: p1}", "patient: p1, mask: m.png}")
    with pytest.raises(BuildError, match=r"items\[0\]: unknown key\(s\) 'mask'; known keys: image"):
        read_source(_write(tmp_path, bad_item))
    bad_split = GOOD.replace("seed: 0}", "seed: 0, train: 0.8}")
    with pytest.raises(BuildError, match=r"split: unknown key\(s\) 'train'; known keys: by, test"):
        read_source(_write(tmp_path, bad_split))


@pytest.mark.parametrize("field", ["by", "test"])
def test_a_split_field_missing_is_named(tmp_path, field):
    text = GOOD.replace("by: patient, " if field == "by" else "test: 0.2, ", "")
    with pytest.raises(BuildError, match=f"split is missing the field '{field}'"):
        read_source(_write(tmp_path, text))


def test_a_missing_split_or_name_is_a_missing_required_key(tmp_path):
    text = GOOD.replace("split: {by: patient, test: 0.2, seed: 0}\n", "")
    with pytest.raises(BuildError, match=r"missing required key\(s\) split"):
        read_source(_write(tmp_path, text))


def test_values_are_checked(tmp_path):
    cases = {
        "axis: 3\n": "'axis' must be one of",
        "min_fraction: 2\n": "'min_fraction' must be a number in",
        "bins: [100]\n": "'bins' must be a list of sizes",
        "window: [40]\n": "'window' must be a list of two numbers",
        "missing_labels: ignore\n": "'missing_labels' must be one of",
    }
    for extra, message in cases.items():
        with pytest.raises(BuildError, match=message):
            read_source(_write(tmp_path, GOOD + extra))
    with pytest.raises(BuildError, match=r"lesions \['tumour'\] are not label names"):
        read_source(_write(tmp_path, GOOD.replace("[white matter]", "[tumour]")))
    with pytest.raises(BuildError, match="split.by' must be one of"):
        read_source(_write(tmp_path, GOOD.replace("by: patient", "by: scanner")))
    with pytest.raises(BuildError, match="name 'my brain' must be usable in sample ids"):
        read_source(_write(tmp_path, GOOD.replace("name: brain", "name: my brain")))


def test_glob_items_with_a_label_pattern(tmp_path):
    for stem in ("b", "a"):
        (tmp_path / "img").mkdir(exist_ok=True)
        (tmp_path / "img" / f"{stem}.png").write_bytes(b"x")
    text = GOOD.replace(
        "  - {image: t1.nii.gz, label: tissue.nii.gz, patient: p1}\n",
        "  glob: img/*.png\n  label: lab/{stem}_mask.png\n  patient: '{stem}'\n",
    ).replace("items:\n", "items:\n")
    spec = read_source(_write(tmp_path, text))
    assert [it.id for it in spec.items] == ["a", "b"]
    assert spec.items[0].label == tmp_path.resolve() / "lab" / "a_mask.png"
    assert [it.patient for it in spec.items] == ["a", "b"]
    with pytest.raises(BuildError, match="matches no file"):
        read_source(_write(tmp_path, text.replace("img/*.png", "nothing/*.png")))


def test_a_glob_takes_each_items_split_from_its_folder(tmp_path):
    for split, stem in (("train", "a"), ("test", "b")):
        (tmp_path / "img" / split).mkdir(parents=True)
        (tmp_path / "img" / split / f"{stem}.png").write_bytes(b"x")
    text = GOOD.replace(
        "  - {image: t1.nii.gz, label: tissue.nii.gz, patient: p1}\n",
        "  glob: img/*/*.png\n  label: lab/{stem}_mask.png\n  split: '{parent}'\n",
    ).replace("split: {by: patient, test: 0.2, seed: 0}", "split: source")
    spec = read_source(_write(tmp_path, text))
    assert spec.split.by == "source"
    assert [(it.id, it.split) for it in spec.items] == [("b", "test"), ("a", "train")]


def test_not_yaml_and_missing_file(tmp_path):
    with pytest.raises(BuildError, match="does not exist"):
        read_source(tmp_path / "nope.yaml")
    with pytest.raises(BuildError, match="not valid YAML"):
        read_source(_write(tmp_path, "name: [unclosed\n"))


@pytest.mark.parametrize(
    ("image", "why"),
    [
        ("../t1.nii.gz", r"path '\.\./t1\.nii\.gz' escapes the dataset folder"),
        ("a/../../t1.nii.gz", "path '.*' escapes the dataset folder"),
        ("/etc/hostname", "path '/etc/hostname' is absolute; item paths must be relative"),
        ("C:/t1.nii.gz", "path '.*' is absolute"),
    ],
)
def test_an_item_path_out_of_the_yaml_folder_is_refused_naming_the_item(tmp_path, image, why):
    text = GOOD.replace("image: t1.nii.gz", f"image: '{image}'")
    with pytest.raises(BuildError, match=rf"items\[0\]: {why}"):
        read_source(_write(tmp_path, text))


def test_a_glob_out_of_the_yaml_folder_is_refused_and_a_linked_folder_is_followed(tmp_path):
    outside, inside = tmp_path / "outside", tmp_path / "src"
    outside.mkdir()
    inside.mkdir()
    (outside / "t1.nii.gz").write_bytes(b"")
    glob = GOOD.replace("items:\n  - {image: t1.nii.gz, label: tissue.nii.gz, patient: p1}\n",
                        "items: {glob: '../outside/*.nii.gz', label: '{stem}_seg.nii.gz'}\n")
    with pytest.raises(BuildError, match=r"escapes the dataset folder"):
        read_source(_write(inside, glob))
    (inside / "raw").symlink_to(outside)  # the user's own link to data kept elsewhere
    linked = glob.replace("../outside/", "raw/")
    (item,) = read_source(_write(inside, linked)).items
    assert item.image == inside.resolve() / "raw" / "t1.nii.gz"
