"""tests/_ray_lock.py: a test that starts Ray outside the ``ray`` xdist group is refused by name
(``--dist loadgroup`` would otherwise run it beside the group's tests, a worker waiting on the
lock)."""

import pytest

from tests._ray_lock import RAY_GROUP, only_ray_instance


def test_a_ray_test_outside_the_ray_group_is_refused_by_name():
    pytest.importorskip("ray")
    with pytest.raises(RuntimeError) as err, only_ray_instance():
        pass
    assert str(err.value) == (
        "tests/test_ray_lock.py::test_a_ray_test_outside_the_ray_group_is_refused_by_name starts "
        'Ray without @pytest.mark.xdist_group("ray"): mark it so that one xdist worker runs '
        "every Ray test (tests/_ray_lock.py)"
    )


@RAY_GROUP
def test_a_test_in_the_ray_group_takes_the_lock(tmp_path):
    ray = pytest.importorskip("ray")
    with only_ray_instance():
        assert not ray.is_initialized()
