"""Synthetic person records for entity resolution: people, households, and corrupted copies.

:func:`make_person_records` draws a population of people living in households, then the
records a register would hold of them: each person appears in a number of records drawn from a
heavy-tailed law, and each record is a copy of the person's attributes (first name, surname,
date of birth, city, postcode, email) with the corruptions of real registers: typing errors,
missing values, an earlier address after a move, a changed email, day and month swapped.
Households make the problem hard the way real data is: their members share a surname, an
address and often an email domain; twins share a date of birth as well.

Names are pseudo-words built from syllables (no list of real names ships with the package):
what matters for record linkage is their frequency law (a few very common surnames, a long tail
of rare ones) and that typing errors produce near neighbours, which the syllables give.
"""

from __future__ import annotations

import numbers

import numpy as np
from sklearn.utils import Bunch

from .._utils import as_generator, check_flag, check_int

__all__ = ["make_person_records"]

FIELDS = ("first_name", "surname", "dob", "city", "postcode", "email")

_ONSETS = ("b", "br", "c", "ch", "d", "dr", "f", "fl", "g", "gr", "h", "j", "k", "kl", "l",
           "m", "n", "p", "pr", "r", "s", "sh", "sl", "st", "t", "th", "tr", "v", "w", "z")
_VOWELS = ("a", "e", "i", "o", "u", "ai", "ea", "ie", "ou", "y", "ar", "el", "or")
_CODAS = ("", "n", "r", "l", "s", "th", "m", "nd", "rt", "ck", "ll", "ss", "x", "nn", "sk")
_FIRST_ENDS = ("", "a", "e", "ie", "o", "an", "en", "in", "ia", "el", "on", "is", "y", "ette")
_SURNAME_ENDS = ("", "son", "ton", "ley", "man", "er", "ford", "well", "wood", "s", "ing",
                 "ham", "by", "ett", "ard")
_DOMAIN_ENDS = (".com", ".net", ".org", ".co", ".io")
_LETTERS = np.array(list("abcdefghijklmnopqrstuvwxyz"))
_POSTCODE_LETTERS = np.array(list("ABDEFGHJLNPQRSTUWXYZ"))
_POSTCODE_CHARS = np.array(list("ABDEFGHJLNPQRSTUWXYZ0123456789"))

#: Default corruption rates per field: a typing error, a missing value.
_TYPO = {"first_name": 0.15, "surname": 0.12, "dob": 0.10, "city": 0.05, "postcode": 0.08,
         "email": 0.06}
_MISSING = {"first_name": 0.04, "surname": 0.02, "dob": 0.12, "city": 0.10, "postcode": 0.08,
            "email": 0.25}


def _pseudo_words(rng, n, n_syllables, ends, longest=10):
    """``n`` distinct pseudo-words of ``n_syllables`` syllables (a range) and an ending, of 3
    to ``longest`` letters."""
    words = set()
    out = []
    while len(out) < n:
        k = rng.integers(n_syllables[0], n_syllables[1] + 1)
        parts = [_ONSETS[rng.integers(len(_ONSETS))] + _VOWELS[rng.integers(len(_VOWELS))]
                 + _CODAS[rng.integers(len(_CODAS))] for _ in range(k)]
        word = "".join(parts) + ends[rng.integers(len(ends))]
        if 3 <= len(word) <= longest and word not in words:
            words.add(word)
            out.append(word)
    return np.array(out, dtype=object)


def _zipf_weights(n, exponent, offset):
    """``p_k ∝ (k + offset)^-exponent`` for ``k = 1..n``: a Zipf law with a flattened head."""
    w = (np.arange(1, n + 1) + offset) ** -float(exponent)
    return w / w.sum()


def _typo(rng, word, letters=_LETTERS):
    """One typing error: a substitution, deletion, insertion or transposition of letters."""
    if len(word) < 2:
        return word + letters[rng.integers(letters.size)]
    kind = rng.integers(4)
    p = int(rng.integers(len(word)))
    if kind == 0:
        return word[:p] + letters[rng.integers(letters.size)] + word[p + 1:]
    if kind == 1:
        return word[:p] + word[p + 1:]
    if kind == 2:
        return word[:p] + letters[rng.integers(letters.size)] + word[p:]
    p = min(p, len(word) - 2)
    return word[:p] + word[p + 1] + word[p] + word[p + 2:]


def _dob_error(rng, dob):
    """A date-of-birth error: day and month swapped (when both are months), or a digit off."""
    y, m, d = dob.split("-")
    if int(d) <= 12 and d != m and rng.random() < 0.4:
        return f"{y}-{d}-{m}"
    digits = list(y + m + d)
    for _ in range(10):
        p = int(rng.integers(len(digits)))
        new = digits.copy()
        new[p] = str((int(new[p]) + rng.choice((-1, 1))) % 10)
        cand = "".join(new)
        mm, dd = int(cand[4:6]), int(cand[6:])
        if 1 <= mm <= 12 and 1 <= dd <= 28:
            return f"{cand[:4]}-{cand[4:6]}-{cand[6:]}"
    return dob


def _entity_sizes(rng, n_people, law, exponent, mean, largest):
    if law == "zipf":
        sizes = rng.zipf(exponent, size=n_people)
    else:  # geometric of the given mean (>= 1)
        sizes = rng.geometric(1.0 / mean, size=n_people)
    return np.minimum(sizes, largest)


def _check_rate(value, name):
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number in [0, 1), got {type(value).__name__}")
    value = float(value)
    if not 0.0 <= value < 1.0:
        raise ValueError(f"{name} must lie in [0, 1), got {value!r}")
    return value


def make_person_records(n_records=5000, *, size_law="zipf", size_exponent=2.2, mean_size=2.0,
                        max_entity_size=40, typo_scale=1.0, missing_scale=1.0, move_rate=0.3,
                        twin_rate=0.03, random_state=None, as_frame=True):
    """Synthetic person records with typos, missing values, moves, households and twins.

    People live in households of 1 to 7 members (sizes as in a census: a third alone, a third
    in pairs, the rest in families); members share an address (city and postcode), usually the
    surname (85 %) and often the email domain; children are born 18 to 42 years after their
    parents, and in a family with two children or more the first two are twins (same date of
    birth and surname, their own first names) with probability ``twin_rate``. Each person
    appears in a number of records drawn from ``size_law`` (most once or twice, a few many
    times); each record copies the person's attributes and corrupts them independently:

    * a typing error (a letter substituted, deleted, inserted or two transposed; for dates a
      digit off by one or day and month swapped) with a per-field probability (first name
      15 %, surname 12 %, date of birth 10 %, city 5 %, postcode 8 %, email 6 %) times
      ``typo_scale``;
    * a missing value (first name 4 %, surname 2 %, date of birth 12 %, city 10 %, postcode
      8 %, email 25 %, and a quarter of the people have no email at all) times
      ``missing_scale``;
    * a short form of the first name (its first three or four letters, 6 % of the records),
      first name and surname swapped (2 %);
    * with probability ``move_rate`` a person has moved: each of their records holds the
      earlier address (another postcode, in another city half of the time) with probability
      0.5, and then a different email with probability 0.5.

    Some children carry a parent's first name (8 %), and a quarter of the households of two
    or more share one family email address.

    Parameters
    ----------
    n_records : int >= 2, default 5000
        Records to draw (people are drawn until their records reach it; the last person's
        records are cut to fit).
    size_law : {"zipf", "geometric"}, default "zipf"
        Law of the records per person: Zipf of exponent ``size_exponent`` (``P(k) ∝ k^-s``),
        or geometric of mean ``mean_size``; both capped at ``max_entity_size``.
    size_exponent : float > 1, default 2.2
        Exponent of the Zipf law (2.2: 70 % of the people once, mean about 2 records).
    mean_size : float >= 1, default 2.0
        Mean of the geometric law.
    max_entity_size : int >= 1, default 40
        Most records of one person.
    typo_scale, missing_scale : float >= 0, default 1.0
        Multipliers of the per-field rates of typing errors and missing values (each rate
        capped at 0.9).
    move_rate : float in [0, 1), default 0.3
        Probability that a person has an earlier address.
    twin_rate : float in [0, 1), default 0.03
        Probability that a family with two children or more has twins.
    random_state : None, int or numpy.random.Generator, default None
    as_frame : bool, default True
        Return the records as a pandas DataFrame (needs pandas); otherwise as a dict of
        object arrays (``None`` for a missing value).

    Returns
    -------
    Bunch with
        frame : pandas.DataFrame of shape (n_records, 7), or dict of ndarray
            ``unique_id`` (0..n_records-1, the records in random order) and the fields
            ``first_name``, ``surname``, ``dob`` (``YYYY-MM-DD``), ``city``, ``postcode``,
            ``email``; missing values are None.
        target : ndarray of int of shape (n_records,)
            The person of each record.
        household : ndarray of int of shape (n_records,)
            The household of each record's person.
        DESCR : str
            Description of the record set.

    References
    ----------
    P. Christen. Data Matching. Springer 2012, ch. 12 (generating synthetic data with
    corruptions; the FEBRL generator). R. C. Steorts. Entity resolution with empirically
    motivated priors. Bayesian Analysis 10(4), 2015 (records as distorted copies of latent
    people).

    Examples
    --------
    >>> from sksubsample.datasets import make_person_records
    >>> data = make_person_records(1000, random_state=0)
    >>> data.frame.shape
    (1000, 7)
    >>> bool((data.target[:, None] == data.target).sum() > 1000)
    True
    """
    n_records = check_int(n_records, "n_records", low=2)
    if size_law not in ("zipf", "geometric"):
        raise ValueError(f"size_law must be 'zipf' or 'geometric', got {size_law!r}")
    for name, value, strict in (("size_exponent", size_exponent, True),
                                ("mean_size", mean_size, False)):
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise TypeError(f"{name} must be a real number, got {type(value).__name__}")
        if not (np.isfinite(value) and (value > 1.0 if strict else value >= 1.0)):
            bound = "> 1" if strict else ">= 1"
            raise ValueError(f"{name} must be a finite number {bound}, got {value!r}")
    max_entity_size = check_int(max_entity_size, "max_entity_size", low=1, high=10**6)
    for name, value in (("typo_scale", typo_scale), ("missing_scale", missing_scale)):
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise TypeError(f"{name} must be a real number >= 0, got {type(value).__name__}")
        if not (0.0 <= value < np.inf):
            raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
    move_rate = _check_rate(move_rate, "move_rate")
    twin_rate = _check_rate(twin_rate, "twin_rate")
    as_frame = check_flag(as_frame, "as_frame")
    rng = as_generator(random_state)

    people = _people(rng, n_records, size_law, float(size_exponent), float(mean_size),
                     max_entity_size, twin_rate, move_rate)
    frame, target, household = _records(rng, people, n_records, float(typo_scale),
                                        float(missing_scale))
    descr = (f"{n_records} synthetic person records of {np.unique(target).size} people in "
             f"{np.unique(household).size} households (size law {size_law}).")
    if as_frame:
        try:
            import pandas as pd
        except ImportError as exc:  # pragma: no cover - pandas ships with the test extras
            raise ImportError("as_frame=True needs pandas; pass as_frame=False for a dict of "
                              "arrays") from exc
        frame = pd.DataFrame(frame)
    return Bunch(frame=frame, target=target, household=household, DESCR=descr)


def _people(rng, n_records, size_law, exponent, mean, largest, twin_rate, move_rate):
    """The population: attributes of each person, their household and record count."""
    # Enough people for the records (the mean of a capped law is below its nominal one).
    sizes = _entity_sizes(rng, max(16, 4 * n_records), size_law, exponent, mean, largest)
    n_people = int(np.searchsorted(np.cumsum(sizes), n_records) + 1)
    sizes = sizes[:n_people]
    # Pools whose sizes grow slowly with the population, as real name inventories do.
    n_first = 300 + int(2 * np.sqrt(n_people))
    n_surnames = 800 + int(0.05 * n_people)
    n_cities = 80 + int(np.sqrt(n_people))
    first_pool = _pseudo_words(rng, n_first, (1, 2), _FIRST_ENDS, 8)
    surname_pool = _pseudo_words(rng, n_surnames, (1, 2), _SURNAME_ENDS, 10)
    city_pool = _pseudo_words(rng, n_cities, (2, 3), ("", "ton", "by", "field", "ham",
                                                      "bridge", "port", "wick"))
    domain_pool = np.array([w + _DOMAIN_ENDS[rng.integers(len(_DOMAIN_ENDS))]
                            for w in _pseudo_words(rng, 40, (1, 2), ("", "mail", "net"))],
                           dtype=object)
    first_w = _zipf_weights(n_first, 1.1, 10)
    surname_w = _zipf_weights(n_surnames, 1.0, 30)
    city_w = _zipf_weights(n_cities, 1.1, 1)
    domain_w = _zipf_weights(domain_pool.size, 1.3, 0)
    area = np.array(["".join(rng.choice(_POSTCODE_LETTERS, 2)) for _ in range(n_cities)])
    districts = np.maximum(1, np.round(city_w * 600)).astype(np.int64)

    # Households of 1..7 people (a census-like law), in order.
    hh_law = np.array([0.30, 0.33, 0.15, 0.13, 0.06, 0.02, 0.01])
    hh_sizes = rng.choice(np.arange(1, 8), size=n_people, p=hh_law / hh_law.sum())
    hh_sizes = hh_sizes[:int(np.searchsorted(np.cumsum(hh_sizes), n_people) + 1)]
    hh_sizes[-1] -= hh_sizes.sum() - n_people
    hh_of = np.repeat(np.arange(hh_sizes.size), hh_sizes)
    rank = np.arange(n_people) - np.repeat(np.cumsum(hh_sizes) - hh_sizes, hh_sizes)

    def address():
        c = int(rng.choice(n_cities, p=city_w))
        d = int(rng.integers(1, districts[c] + 1))
        unit = "".join(rng.choice(_POSTCODE_LETTERS, 2))
        return city_pool[c], f"{area[c]}{d} {rng.integers(1, 10)}{unit}"

    n_hh = hh_sizes.size
    hh_city = np.empty(n_hh, dtype=object)
    hh_post = np.empty(n_hh, dtype=object)
    for h in range(n_hh):
        hh_city[h], hh_post[h] = address()
    hh_surname = rng.choice(surname_pool, size=n_hh, p=surname_w)
    hh_domain = rng.choice(domain_pool, size=n_hh, p=domain_w)
    hh_year = rng.integers(1940, 2001, size=n_hh)

    first = rng.choice(first_pool, size=n_people, p=first_w)
    # Some children carry a parent's first name (and so share name, surname and address).
    junior = np.flatnonzero((rank >= 2) & (rng.random(n_people) < 0.08))
    first[junior] = first[junior - rank[junior]]
    surname = np.where(rng.random(n_people) < 0.85, hh_surname[hh_of],
                       rng.choice(surname_pool, size=n_people, p=surname_w))
    # Adults (the first two of a household) near the household's year; children later.
    year = hh_year[hh_of] + np.where(rank < 2, rng.integers(-4, 5, size=n_people),
                                     rng.integers(18, 43, size=n_people))
    year = np.minimum(year, 2023)
    month = rng.integers(1, 13, size=n_people)
    day = rng.integers(1, 29, size=n_people)
    # Twins: the first two children of some families share a birth date and surname.
    twins = np.flatnonzero((rank == 3) & (rng.random(n_people) < twin_rate))
    year[twins], month[twins], day[twins] = year[twins - 1], month[twins - 1], day[twins - 1]
    surname[twins] = surname[twins - 1]
    dob = np.array([f"{y:04d}-{m:02d}-{d:02d}" for y, m, d in zip(year, month, day,
                                                                    strict=True)],
                   dtype=object)
    domain = np.where(rng.random(n_people) < 0.6, hh_domain[hh_of],
                      rng.choice(domain_pool, size=n_people, p=domain_w))
    suffix = np.where(rng.random(n_people) < 0.4, rng.integers(1, 100, size=n_people), -1)
    style = rng.integers(3, size=n_people)
    email = np.array([_email(f, s, d, k, x) for f, s, d, k, x in
                      zip(first, surname, domain, style, suffix, strict=True)], dtype=object)
    # Some households share one address (the family's), a classic false link.
    shared = (rng.random(n_hh) < 0.25)[hh_of] & (hh_sizes[hh_of] > 1)
    family = np.array([f"{s}family@{d}" for s, d in zip(hh_surname, hh_domain, strict=True)],
                      dtype=object)
    email[shared] = family[hh_of[shared]]
    email[rng.random(n_people) < 0.25] = None
    moved = rng.random(n_people) < move_rate
    old_city = np.empty(n_people, dtype=object)
    old_post = np.empty(n_people, dtype=object)
    for p in np.flatnonzero(moved):
        city, post = address()
        if rng.random() < 0.5:  # a move within the city: another postcode
            c = int(np.flatnonzero(city_pool == hh_city[hh_of[p]])[0])
            city = city_pool[c]
            d = int(rng.integers(1, districts[c] + 1))
            post = f"{area[c]}{d} {rng.integers(1, 10)}{''.join(rng.choice(_POSTCODE_LETTERS, 2))}"
        old_city[p], old_post[p] = city, post
    old_email = np.array([_email(f, s, domain_pool[rng.integers(domain_pool.size)],
                                 rng.integers(3), rng.integers(1, 100))
                          for f, s in zip(first, surname, strict=True)], dtype=object)
    return dict(sizes=sizes, household=hh_of, first_name=first, surname=surname, dob=dob,
                city=hh_city[hh_of], postcode=hh_post[hh_of], email=email, moved=moved,
                old_city=old_city, old_postcode=old_post, old_email=old_email)


def _email(first, surname, domain, style, suffix):
    user = (f"{first}.{surname}", f"{first[0]}{surname}", f"{first}{surname[:3]}")[style]
    return f"{user}{suffix if suffix >= 0 else ''}@{domain}"


def _records(rng, people, n_records, typo_scale, missing_scale):
    sizes = people["sizes"].copy()
    sizes[-1] -= sizes.sum() - n_records
    person = np.repeat(np.arange(sizes.size), sizes)
    values = {f: people[f][person].copy() for f in FIELDS}
    # An earlier address (and then maybe an earlier email) in some records of movers.
    old = people["moved"][person] & (rng.random(n_records) < 0.5)
    values["city"][old] = people["old_city"][person[old]]
    values["postcode"][old] = people["old_postcode"][person[old]]
    new_mail = old & (rng.random(n_records) < 0.5) & (values["email"] != None)  # noqa: E711
    values["email"][new_mail] = people["old_email"][person[new_mail]]
    # A short form of the first name (its first three or four letters) in some records.
    short = np.flatnonzero(rng.random(n_records) < 0.06)
    for r in short:
        name = values["first_name"][r]
        values["first_name"][r] = name[:3 + int(rng.integers(2))]
    # First name and surname swapped in some records.
    swap = rng.random(n_records) < 0.02
    values["first_name"][swap], values["surname"][swap] = (values["surname"][swap],
                                                           values["first_name"][swap])
    for f in FIELDS:
        column = values[f]
        typo = np.flatnonzero(rng.random(n_records) < min(0.9, _TYPO[f] * typo_scale))
        for r in typo:
            if column[r] is None:
                continue
            if f == "dob":
                column[r] = _dob_error(rng, column[r])
            elif f == "postcode":
                typed = _typo(rng, column[r].replace(" ", ""), _POSTCODE_CHARS)
                column[r] = typed[:-3] + " " + typed[-3:]
            elif f == "email":
                user, _, host = column[r].partition("@")
                column[r] = _typo(rng, user) + "@" + host
            else:
                column[r] = _typo(rng, column[r])
        column[rng.random(n_records) < min(0.9, _MISSING[f] * missing_scale)] = None
    order = rng.permutation(n_records)
    frame = {"unique_id": np.arange(n_records)}
    frame.update({f: values[f][order] for f in FIELDS})
    return frame, person[order], people["household"][person[order]]
