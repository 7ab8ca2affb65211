"""Sample properties for --by-bins: values hand-computed on tiny masks and images, and the
errors for an unknown name, a non-numeric metadata value and an unreadable mask."""

import numpy as np
import pytest
from PIL import Image

from medibench.benchmarks.paintbench import factors
from medibench.datasets.properties import (
    PropertyError,
    available_properties,
    find_property,
    property_values,
)
from medibench.samples import Sample


def _sample(sid="s", benchmark="native", **kw):
    base = dict(
        sample_id=sid,
        benchmark=benchmark,
        input="in.png",
        instruction="x",
        perspective="modification",
    )
    return Sample(**{**base, **kw})


def _png(path, array):
    Image.fromarray(array).save(path)
    return str(path)


def test_mask_fraction_is_mask_pixels_over_image_pixels(tmp_path):
    mask = np.zeros((4, 5), np.uint8)
    mask[0, 0] = mask[1, 2] = mask[3, 4] = 255
    grey = np.zeros((2, 4), np.uint8)  # a mask with other levels: binarised at half its maximum
    grey[0, :3] = (255, 100, 128)
    samples = [
        _sample("a", mask=_png(tmp_path / "a.png", mask)),
        _sample("b", mask=_png(tmp_path / "b.png", grey)),
        _sample("c"),  # no mask: no value
    ]
    values, prop = property_values(samples, "mask_fraction")
    assert values == {"a": 3 / 20, "b": 2 / 8}
    assert not prop.categorical


def test_an_unreadable_mask_names_the_sample_and_the_file(tmp_path):
    bad = tmp_path / "broken.png"
    bad.write_bytes(b"not a png")
    with pytest.raises(PropertyError, match=r"mask_fraction of sample 'a': .*broken\.png"):
        property_values([_sample("a", mask=str(bad))], "mask_fraction")


def test_a_numeric_metadata_field_is_a_property():
    samples = [
        _sample("a", metadata={"lesion_mm": 12}),
        _sample("b", metadata={"lesion_mm": 2.5}),
        _sample("c", metadata={}),
    ]
    values, _ = property_values(samples, "metadata.lesion_mm")
    assert values == {"a": 12.0, "b": 2.5}


@pytest.mark.parametrize("value", ["big", True, [1]])
def test_a_non_numeric_metadata_value_names_the_sample(value):
    with pytest.raises(PropertyError, match=r"metadata.size of sample 'b' is .*not a number"):
        property_values(
            [_sample("a", metadata={"size": 1}), _sample("b", metadata={"size": value})],
            "metadata.size",
        )


def test_an_unknown_property_lists_the_available_ones():
    with pytest.raises(PropertyError) as exc:
        find_property("mask_area", ["paintbench"])
    text = str(exc.value)
    assert "unknown sample property 'mask_area'" in text
    for name in (
        "mask_fraction",
        "object_count",
        "background_complexity",
        "color_scheme",
        "metadata.KEY",
    ):
        assert name in text
    assert "object_count" not in str(available_properties(["native"]))


def _paint(tmp_path, sid, answer_changes, condition="baseline", **meta):
    inp = np.zeros((4, 4, 3), np.uint8)
    ans = inp.copy()
    for (y, x), rgb in answer_changes.items():
        ans[y, x] = rgb
    return Sample(
        sample_id=sid,
        benchmark="paintbench",
        instruction="x",
        perspective="modification",
        input=_png(tmp_path / f"{sid}_in.png", inp),
        target=_png(tmp_path / f"{sid}_ans.png", ans),
        task=meta.pop("task", "recolor"),
        metadata={"visual_condition": condition, **meta},
    )


def test_paintbench_edit_region_is_where_input_and_answer_differ(tmp_path):
    # three pixels differ, one of them in one channel only: 3 of 16
    s = _paint(tmp_path, "p", {(0, 0): (255, 0, 0), (1, 1): (0, 0, 1), (3, 2): (9, 9, 9)})
    same = _paint(tmp_path, "q", {})
    values, _ = property_values([s, same], "mask_fraction")
    assert values == {"p": 3 / 16, "q": 0.0}


def test_paintbench_problems_without_a_usable_answer_have_no_edit_region(tmp_path):
    no_answer = _sample(
        "r", benchmark="paintbench", input=_png(tmp_path / "r.png", np.zeros((4, 4, 3), np.uint8))
    )
    small = _paint(tmp_path, "t", {})
    small = small.model_copy(
        update={"target": _png(tmp_path / "t_small.png", np.zeros((2, 2, 3), np.uint8))}
    )
    assert factors.edit_fraction(no_answer) is None
    assert factors.edit_fraction(small) is None


@pytest.mark.parametrize(
    ("condition", "meta", "count", "background", "palette"),
    [
        ("baseline", {"n": 3}, 3.0, "solid", "standard"),
        ("n_xhigh", {"n": 60}, 60.0, None, None),
        ("n_high", {"task": "counting"}, 25.0, None, None),  # no n: the generator's table
        ("n_med", {"task": "pattern"}, 3.0, None, None),
        ("striped", {"n": 3}, None, "striped", None),
        ("nonstandard", {"n": 3}, None, None, "nonstandard"),
        ("horizontal", {"n": 3}, None, None, None),
    ],
)
def test_paintbench_factors_follow_the_generators_visual_conditions(
    condition, meta, count, background, palette
):
    s = _sample(
        "p",
        benchmark="paintbench",
        task=meta.pop("task", "recolor"),
        metadata={"visual_condition": condition, **meta},
    )
    assert factors.object_count(s) == count
    assert factors.background_complexity(s) == background
    assert factors.color_scheme(s) == palette


def test_paintbench_categorical_factors_declare_their_levels():
    props = available_properties(["paintbench"])
    assert props["background_complexity"].levels == ("solid", "striped")
    assert props["color_scheme"].levels == ("standard", "nonstandard")
    assert not props["object_count"].categorical
