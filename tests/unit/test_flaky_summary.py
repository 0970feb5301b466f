"""The flakiness check names each test by its own id, whatever run of N failed."""

from tests.flaky import base_id


def test_repeated_runs_are_named_by_their_test():
    assert base_id("tests/unit/test_x.py::test_a[3-20]") == "tests/unit/test_x.py::test_a"
    assert base_id("tests/unit/test_x.py::test_b[p1-3-20]") == "tests/unit/test_x.py::test_b[p1]"
    assert base_id("tests/unit/test_x.py::test_c") == "tests/unit/test_x.py::test_c"
    assert base_id("tests/unit/test_x.py::test_d[fast]") == "tests/unit/test_x.py::test_d[fast]"
