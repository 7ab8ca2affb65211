"""The one decision "is this path inside the folder": :func:`inside_problem` (and
:func:`resolve_inside`, which raises on it), checked against the file system as it is, links
and chains of links included."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from medibench.datasets import DatasetError, inside_problem, resolve_inside

OUT = [
    ("../x", "escapes the dataset folder"),
    ("..", "escapes the dataset folder"),
    ("a/../../x", "escapes the dataset folder"),
    ("a/b/../../../x", "escapes the dataset folder"),
    ("./../x", "escapes the dataset folder"),
    ("a/./../../x", "escapes the dataset folder"),
    ("../../x", "escapes the dataset folder"),
    ("/etc/hostname", "is absolute"),
    ("//etc/hostname", "is absolute"),
    ("/", "is absolute"),
    ("\\x", "is absolute"),
    ("C:/x", "is absolute"),
    ("C:\\x", "is absolute"),
    ("c:x", "is absolute"),
    ("a\x00b", "contains a NUL character"),
    ("up/x", "through a symbolic link"),  # up -> ..
    ("l3/x", "through a symbolic link"),  # l -> ., l2 -> l/.., l3 -> l2/..
    ("l2", "through a symbolic link"),
    ("abs/x", "through a symbolic link"),  # abs -> /tmp-like absolute folder
    ("d/up/up/x", "through a symbolic link"),  # d/up -> the folder, then up -> out
]
IN = [
    "x",
    "a/x",
    "a/../x",
    "./x",
    "a/b/../../x",
    "l/x",
    "l/l/l/x",
    "d/../x",
    "in/x",
    "a b/x",
    "d/up/x",
    "../root/x",
]  # a link back to the folder; out and straight back in


@pytest.fixture
def root(tmp_path) -> Path:
    root = tmp_path / "root"
    (root / "d").mkdir(parents=True)
    (tmp_path / "outside").mkdir()
    os.symlink("..", root / "up")
    os.symlink("..", root / "d" / "up")
    os.symlink(".", root / "l")
    os.symlink("l/..", root / "l2")
    os.symlink("l2/..", root / "l3")
    os.symlink(tmp_path / "outside", root / "abs")
    os.symlink("d", root / "in")
    return root.resolve()


@pytest.mark.parametrize(("relative", "why"), OUT)
def test_a_path_out_of_the_folder_is_named_with_why(root, relative, why):
    problem = inside_problem(root, relative)
    assert problem is not None and why in problem
    with pytest.raises(DatasetError, match="^row 3: path '") as info:
        resolve_inside(root, relative, what="row 3")
    assert why in str(info.value)


@pytest.mark.parametrize("relative", IN)
def test_a_path_inside_is_resolved(root, relative):
    assert inside_problem(root, relative) is None
    resolved = resolve_inside(root, relative, what="row 3")
    assert resolved == root or root in resolved.parents


@pytest.mark.parametrize(("relative", "why"), [x for x in OUT if "symbolic" not in x[1]])
def test_following_links_still_refuses_absolute_and_dotdot(root, relative, why):
    assert why in (inside_problem(root, relative, follow_links=True) or "")


def test_following_links_lets_a_users_own_link_out(root):
    assert inside_problem(root, "abs/x", follow_links=True) is None
    assert resolve_inside(root, "abs/x", what="w", follow_links=True) == root / "abs" / "x"


def test_the_error_type_is_the_callers(root):
    with pytest.raises(KeyError):
        resolve_inside(root, "../x", what="w", error=KeyError)
