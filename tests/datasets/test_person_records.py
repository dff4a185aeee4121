"""make_person_records: shape, determinism, and the corruptions it promises."""

import numpy as np
import pytest

pytest.importorskip("pandas")

from sksubsample.datasets import make_person_records


def test_shape_ids_and_determinism():
    a = make_person_records(2000, random_state=0)
    b = make_person_records(2000, random_state=0)
    assert a.frame.shape == (2000, 7)
    assert a.frame.unique_id.tolist() == list(range(2000))
    assert a.frame.equals(b.frame) and np.array_equal(a.target, b.target)
    assert not a.frame.equals(make_person_records(2000, random_state=1).frame)
    plain = make_person_records(300, random_state=0, as_frame=False)
    assert set(plain.frame) == {"unique_id", "first_name", "surname", "dob", "city",
                                "postcode", "email"}


def test_corruptions_households_and_sizes():
    data = make_person_records(20_000, random_state=0)
    frame, target = data.frame, data.target
    sizes = np.bincount(target)
    sizes = sizes[sizes > 0]
    # Heavy-tailed entity sizes: mostly singletons, some large.
    assert 0.5 < np.mean(sizes == 1) < 0.85 and sizes.max() >= 10
    # Missing values at about their rates (binomial sd about 0.003 at this size).
    assert 0.08 < frame.dob.isna().mean() < 0.16
    assert 0.3 < frame.email.isna().mean() < 0.55
    # Records of one person disagree (typos, moves) but mostly agree on the surname.
    same = frame.groupby(target)
    agree = same.surname.nunique(dropna=True)
    assert 0.05 < np.mean(agree[sizes > 1] > 1) < 0.9
    # Households: people of one household share a postcode more often than not.
    people = frame.assign(person=target, household=data.household).drop_duplicates("person")
    multi = people.groupby("household").person.count() > 1
    assert multi.sum() > 100


@pytest.mark.parametrize(("kw", "match"), [
    (dict(n_records=1), "n_records"), (dict(size_law="normal"), "size_law"),
    (dict(size_exponent=1.0), "size_exponent"), (dict(mean_size=0.5), "mean_size"),
    (dict(typo_scale=-1.0), "typo_scale"), (dict(move_rate=1.0), "move_rate"),
    (dict(as_frame="yes"), "as_frame")])
def test_bad_arguments_are_named(kw, match):
    with pytest.raises((ValueError, TypeError), match=match):
        make_person_records(**{"n_records": 100, **kw})
