from hypothesis import given
from hypothesis import strategies as st

from recovery_lib.io.cut_policies import FreeCut, fair_share, make_cut_policy
from recovery_lib.io.exceptions import InvalidSourceOption

backlogs = st.dictionaries(
    st.tuples(st.sampled_from(["a", "b"]), st.integers(0, 7).map(str)),
    st.integers(0, 5000),
    max_size=12,
)


@given(backlogs, st.one_of(st.none(), st.integers(1, 20000)))
def test_fair_share_never_exceeds_backlog_or_limit_and_takes_all_it_may(backlog, max_rows):
    take = fair_share(backlog, max_rows)
    assert set(take) == set(backlog)
    assert all(0 <= take[k] <= backlog[k] for k in backlog)
    expected = sum(backlog.values()) if max_rows is None else min(max_rows, sum(backlog.values()))
    assert sum(take.values()) == expected


@given(backlogs, st.integers(1, 20000))
def test_fair_share_is_deterministic(backlog, max_rows):
    assert fair_share(backlog, max_rows) == fair_share(
        dict(reversed(list(backlog.items()))), max_rows
    )


def test_free_cut_bounds_each_partition_between_start_and_available():
    cut = FreeCut({})
    start = {"t": {"0": 10, "1": 0}}
    available = {"t": {"0": 110, "1": 5}, "u": {"0": 3}}
    end = cut.cut(start, available, max_rows=50)
    assert sum(end["t"][p] - start["t"][p] for p in ("0", "1")) + (end["u"]["0"] - 3) == 50
    assert end["t"]["1"] == 5  # small partition fully taken
    assert end["u"]["0"] == 3  # unseen partition: starts at its available end when not in start


def test_free_cut_without_limit_takes_everything():
    end = FreeCut({}).cut({"t": {"0": 1}}, {"t": {"0": 9}}, None)
    assert end == {"t": {"0": 9}}


def test_unknown_cut_policy_names_the_choices():
    try:
        make_cut_policy("nope", {})
    except InvalidSourceOption as exc:
        assert "free" in str(exc)
    else:
        raise AssertionError("expected InvalidSourceOption")
