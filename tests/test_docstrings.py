"""Every public name documents exactly the parameters it takes (numpydoc's PR01 and PR02)."""

import inspect

import pytest
from numpydoc.validate import validate

import sksubsample
from sksubsample import algorithms, datasets, diagnostics, metrics

CHECKED = ("PR01", "PR02")


def _public_names():
    """``module.name`` (and ``module.Class.method``) of every public callable of the API."""
    names = []
    for module in (sksubsample, algorithms, datasets, diagnostics, metrics):
        for name in module.__all__:
            obj = getattr(module, name)
            if not callable(obj) or not hasattr(obj, "__qualname__"):
                continue
            qualified = f"{obj.__module__}.{obj.__qualname__}"
            names.append(qualified)
            if inspect.isclass(obj):
                for attr, member in vars(obj).items():
                    if attr.startswith("_") or not callable(member):
                        continue
                    names.append(f"{qualified}.{attr}")
    return sorted(set(names))


def test_public_names_are_found():
    names = _public_names()
    assert "sksubsample.algorithms.bandits._race.race" in names
    assert any(name.endswith("BayesianLogisticRegressionMH.fit") for name in names)


@pytest.mark.parametrize("name", _public_names())
def test_parameters_are_documented(name):
    errors = [f"{code}: {message}" for code, message in validate(name)["errors"]
              if code in CHECKED]
    assert not errors, "\n".join(errors)
