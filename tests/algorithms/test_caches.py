"""The package's caches shared by processes, corrupted or impossible to write: the measured
costs (:mod:`sksubsample.algorithms._calibration`) and numba's compiled code
(:mod:`sksubsample.algorithms._numba`). None of these faults may fail or hang a fit: each test
that runs a fit in another process bounds it with a time limit, so that a hang fails."""

import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

import numpy as np
import pytest

from sksubsample.algorithms import _calibration, _numba
from sksubsample.algorithms.glm import GLMTarget, _costs
from sksubsample.exceptions import CompiledCacheWarning, CostCacheWarning

PACKAGE = Path(_numba.__file__).resolve().parent.parent
#: Seconds a fit in another process may take (a few, unless it hangs).
FIT_TIMEOUT = 300

#: A fit that measures its costs (every step reading all rows would take over a second), run
#: in another process: prints its plan (less the time spent measuring), a digest of its draws
#: and the categories of the cache warnings it raised, as JSON.
FIT_SCRIPT = r"""
import hashlib, json, math, warnings
with warnings.catch_warnings(record=True) as seen:  # the import's warnings too
    warnings.simplefilter("always")
    import numpy as np
    from scipy import special
    from sksubsample import BayesianLogisticRegressionMH
    from sksubsample.exceptions import CacheWarning
    rng = np.random.default_rng(0)
    X = rng.standard_normal((40_000, 3))
    y = (rng.random(40_000) < special.expit(X @ np.array([0.5, -0.3, 0.2]) + 0.3)).astype(int)
    est = BayesianLogisticRegressionMH(n_draws=200, n_warmup=100, n_chains=2,
                                       random_state=4).fit(X, y)
print(json.dumps({
    "plan": repr(est.plan_._replace(probe_seconds=0.0)),
    "measured": est.plan_.measured,
    "draws": hashlib.sha256(est.coef_samples_.tobytes()).hexdigest(),
    "finite": bool(np.isfinite(est.coef_samples_).all()),
    "warnings": [f"{w.category.__name__}: {w.message}" for w in seen
                 if issubclass(w.category, CacheWarning)]}))
"""


def _environment(**changes):
    env = {k: v for k, v in os.environ.items() if k not in
           ("SKSUBSAMPLE_CACHE_DIR", "NUMBA_CACHE_DIR", "XDG_CACHE_HOME")}
    env["SKSUBSAMPLE_MEASURE_COSTS"] = "1"
    env.update({k: v for k, v in changes.items() if v is not None})
    for k in [k for k, v in changes.items() if v is None]:
        env.pop(k, None)
    return env


def start_fit(env, prefix=()):
    """Start :data:`FIT_SCRIPT` in another process (``prefix``: a command to run it under)."""
    # Run from a folder without the package: the one on PYTHONPATH is the one imported.
    return subprocess.Popen([*prefix, sys.executable, "-c", FIT_SCRIPT], env=env,
                            cwd=tempfile.gettempdir(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def finish_fit(process):
    """The JSON the fit printed; a hang past :data:`FIT_TIMEOUT` or a failure fails."""
    try:
        out, err = process.communicate(timeout=FIT_TIMEOUT)
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        pytest.fail(f"the fit did not end within {FIT_TIMEOUT} s")
    assert process.returncode == 0, err[-3000:]
    return json.loads(out.strip().splitlines()[-1])


@pytest.fixture
def store(tmp_path, monkeypatch):
    """A store of measured costs of the test's own, and a temporary folder of its own (the
    fallback folder of the caches)."""
    monkeypatch.setenv(_calibration.CACHE_ENV, str(tmp_path / "costs"))
    monkeypatch.setenv(_calibration.MEASURE_ENV, "1")
    monkeypatch.setattr(_calibration, "_MEMO", {})
    monkeypatch.setattr(_calibration, "_WARNED", set())
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    return tmp_path / "costs" / _calibration.STORE_NAME


# ----------------------------------------------------------------------------- the cost store


def _plan_problem():
    rng = np.random.default_rng(0)
    X = np.column_stack([rng.standard_normal((20_000, 3)), np.ones(20_000)])
    y = np.where(rng.random(20_000) < 0.5, 1.0, -1.0)
    return GLMTarget(X, y, 10.0)


def _costs_of(target):
    return _costs.plan_costs(target, np.zeros(4), n_steps=100_000)


def _corrupt(entry, how):
    if how == "string":
        return "fast"
    if how == "empty":
        return {}
    if how == "list":
        return [1, 2]
    entry = dict(entry)
    if how in ("negative", "nan", "inf", "bool", "str-number"):
        bad = {"negative": -1e-6, "nan": math.nan, "inf": math.inf, "bool": True,
               "str-number": "1e-6"}[how]
        entry["minibatch"] = [bad, *entry["minibatch"][1:]]
    elif how == "negative-scalar":
        entry["full_row"] = -1e-7
    elif how == "short":
        entry["stratum"] = entry["stratum"][:2]
    elif how == "missing":
        del entry["sizes"]
    elif how == "unsorted-sizes":
        entry["sizes"] = entry["sizes"][::-1]
    return entry


CORRUPTIONS = ["string", "empty", "list", "negative", "nan", "inf", "bool", "str-number",
               "negative-scalar", "short", "missing", "unsorted-sizes"]


@pytest.mark.parametrize("how", CORRUPTIONS)
def test_a_corrupt_entry_is_not_used_but_measured_again(store, monkeypatch, how):
    target = _plan_problem()
    first = _costs_of(target)
    assert first.measured and first.probe_seconds > 0.0
    content = json.loads(store.read_text())
    (key,) = [k for k in content["entries"] if "cubic" not in k]
    content["entries"][key] = _corrupt(content["entries"][key], how)
    store.write_text(json.dumps(content))  # NaN and inf as JSON's extension writes them
    monkeypatch.setattr(_calibration, "_MEMO", {})
    with pytest.warns(CostCacheWarning, match="corrupt.*measured again"):
        again = _costs_of(target)
    assert again.probe_seconds > 0.0  # measured, not read
    costs = again.minibatch + again.mapped_minibatch + again.stratum + (again.full_row,)
    assert all(math.isfinite(c) and c >= 0.0 for c in costs)
    # The new measurement took the corrupt entry's place: the next process reads it.
    monkeypatch.setattr(_calibration, "_MEMO", {})
    with warnings.catch_warnings():
        warnings.simplefilter("error", CostCacheWarning)
        third = _costs_of(target)
    assert third.probe_seconds == 0.0 and third._replace(probe_seconds=0.0) == again._replace(
        probe_seconds=0.0)


@pytest.mark.parametrize("content", ["{not json", "[1, 2]", '{"sources": "x"', "\x00\xff"])
def test_a_corrupt_store_file_is_replaced(store, content):
    store.parent.mkdir(parents=True)
    store.write_bytes(content.encode("latin-1"))
    with pytest.warns(CostCacheWarning, match="not used"):
        value, seconds = _calibration.measured("kind", lambda: {"row": 1e-7})
    assert value == {"row": 1e-7} and seconds >= 0.0
    assert json.loads(store.read_text())["entries"]  # valid JSON again, with the entry


def test_a_valid_store_raises_no_warning(store):
    with warnings.catch_warnings():
        warnings.simplefilter("error", CostCacheWarning)
        _calibration.measured("kind", lambda: {"row": 1e-7, "sizes": [1, 4]})
        _calibration._MEMO.clear()
        assert _calibration.measured("kind", lambda: {"row": 2e-7, "sizes": [1, 4]})[1] == 0.0


def test_check_measurement_names_what_is_wrong():
    schema = {"sizes": _calibration.SIZES, "minibatch": _calibration.SERIES,
              "full_row": _calibration.SECONDS}
    good = {"sizes": [1, 4], "minibatch": [1e-7, 3e-7], "full_row": 5e-8}
    assert _calibration.check_measurement(good, schema) is None
    assert "minibatch" in _calibration.check_measurement({**good, "minibatch": [1e-7]}, schema)
    assert "full_row" in _calibration.check_measurement({**good, "full_row": -1.0}, schema)
    assert "sizes" in _calibration.check_measurement({**good, "sizes": [4, 1]}, schema)
    assert "missing" in _calibration.check_measurement({"sizes": [1]}, schema)
    assert _calibration.check_measurement("x") is not None


def test_a_store_written_whole_leaves_no_temporary_file(store):
    for k in range(5):
        _calibration.measured(f"kind-{k}", lambda: {"row": 1e-7})
    assert sorted(p.name for p in store.parent.iterdir()) == [
        "measured-costs.json", "measured-costs.lock"]


def test_without_a_home_the_store_moves_to_a_private_temporary_folder(store, monkeypatch):
    """HOME unset and no entry in the password database: ``Path.home()`` raises."""

    def no_home(*args, **kwargs):
        raise RuntimeError("Could not determine home directory.")

    monkeypatch.delenv(_calibration.CACHE_ENV)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.delenv("HOME", raising=False)
    monkeypatch.setattr(Path, "home", no_home)
    with pytest.warns(CostCacheWarning, match="no home folder"):
        value, _ = _calibration.measured("kind", lambda: {"row": 1e-7})
    folder = Path(tempfile.gettempdir()) / f"sksubsample-{os.getuid()}"
    assert value == {"row": 1e-7} and (folder / _calibration.STORE_NAME).exists()
    assert folder.stat().st_mode & 0o777 == 0o700
    # A fit that measures works too.
    monkeypatch.setattr(_calibration, "_MEMO", {})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert _costs_of(_plan_problem()).measured


def test_a_temporary_folder_of_another_user_is_not_used(store, monkeypatch):
    monkeypatch.setenv(_calibration.CACHE_ENV, str(store.parent / "file" / "sub"))
    (store.parent).mkdir(parents=True)
    (store.parent / "file").write_text("")  # a folder under a file cannot be made
    folder = Path(tempfile.gettempdir()) / f"sksubsample-{os.getuid()}"
    folder.mkdir(mode=0o777)
    folder.chmod(0o777)  # writable by anyone: not this user's own
    with pytest.warns(CostCacheWarning, match="kept for it only"):
        value, _ = _calibration.measured("kind", lambda: {"row": 1e-7})
    assert value == {"row": 1e-7} and not any(folder.iterdir())


def test_a_lock_held_too_long_is_given_up_with_a_warning(store, monkeypatch):
    import fcntl

    store.parent.mkdir(parents=True)
    holder = open(store.with_suffix(".lock"), "a")
    fcntl.flock(holder, fcntl.LOCK_EX)  # another open file: as another process holds it
    monkeypatch.setattr(_calibration, "LOCK_SECONDS", 0.2)
    try:
        with pytest.warns(CostCacheWarning, match="lock"):
            value, _ = _calibration.measured("kind", lambda: {"row": 1e-7})
    finally:
        holder.close()
    assert value == {"row": 1e-7}


LOCK_SCRIPT = r"""
import json, random, sys, time
from sksubsample.algorithms import _calibration as c
out = {}
for k in range(20):
    value, _ = c.measured(f"k{k}", lambda: (time.sleep(random.random() / 50),
                                             {"x": random.random()})[1])
    out[k] = value["x"]
print(json.dumps(out))
"""


def test_two_processes_measure_each_key_once(tmp_path):
    """20 keys asked for by two processes at once: each measured by one, read by the other."""
    env = _environment(SKSUBSAMPLE_CACHE_DIR=str(tmp_path))
    runs = [subprocess.Popen([sys.executable, "-c", LOCK_SCRIPT], env=env,
                             stdout=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [run.communicate(timeout=FIT_TIMEOUT)[0] for run in runs]
    assert all(run.returncode == 0 for run in runs)
    assert json.loads(outs[0]) == json.loads(outs[1])


def test_two_processes_fitting_at_once_plan_and_draw_alike(tmp_path):
    """Two processes fit at once with one empty cache folder, 3 rounds (20 in
    ``benchmarks/cache_two_processes.py``): no error, a valid store, the same plans and draws
    in each round."""
    for round_ in range(3):
        folder = tmp_path / f"round{round_}"
        env = _environment(SKSUBSAMPLE_CACHE_DIR=str(folder))
        first, second = (finish_fit(p) for p in [start_fit(env), start_fit(env)])
        assert first["measured"] and first["finite"]
        assert (first["plan"], first["draws"]) == (second["plan"], second["draws"])
        assert not first["warnings"] and not second["warnings"]
        content = json.loads((folder / _calibration.STORE_NAME).read_text())
        for value in content["entries"].values():
            assert _calibration.check_measurement(value) is None


def test_a_fit_with_negative_stored_costs_ends(tmp_path):
    """Negative costs once made a plan read every row at every step, a fit that never ended:
    the entry is now refused, with a warning."""
    env = _environment(SKSUBSAMPLE_CACHE_DIR=str(tmp_path))
    clean = finish_fit(start_fit(env))
    store = tmp_path / _calibration.STORE_NAME
    content = json.loads(store.read_text())
    for value in content["entries"].values():
        for name, field in value.items():
            if name != "sizes":
                value[name] = ([-abs(s) for s in field] if isinstance(field, list)
                               else -abs(field))
    store.write_text(json.dumps(content))
    fit = finish_fit(start_fit(env))
    assert fit["finite"] and any("CostCacheWarning" in w and "corrupt" in w
                                 for w in fit["warnings"])
    assert clean["measured"] and fit["measured"]


# ----------------------------------------------------------------------------- numba's cache


@pytest.fixture
def package_copy(tmp_path, store):
    """A copy of the package with its cache files (warm: the fit of :data:`FIT_SCRIPT` run
    here first, so that its functions are compiled and cached beside the real sources), in a
    folder whose path a process imports it from."""
    finish_fit(start_fit(_environment(SKSUBSAMPLE_CACHE_DIR=str(tmp_path / "warm"))))
    root = tmp_path / "site"
    shutil.copytree(PACKAGE, root / PACKAGE.name)  # copy2: the sources' stamp still holds
    return root / PACKAGE.name


def test_a_cache_file_cut_short_is_removed_and_compiled_again(package_copy, tmp_path):
    # Every specialization of a small kernel the fit's set-up calls, cut short (which one the
    # fit loads depends on what other tests compiled first; a small one, as the chain's loop
    # would take half a minute to compile again).
    pattern = "algorithms/glm/__pycache__/_pass_kernels.shifted_norms-*.nbc"
    caches = sorted(package_copy.glob(pattern))
    assert caches
    for cache in caches:
        with open(cache, "r+b") as handle:
            handle.truncate(cache.stat().st_size // 3)
    env = _environment(PYTHONPATH=str(package_copy.parent),
                       SKSUBSAMPLE_CACHE_DIR=str(tmp_path / "costs-copy"))
    fit = finish_fit(start_fit(env))
    assert fit["finite"]
    assert any("cut short" in w and "CompiledCacheWarning" in w for w in fit["warnings"]), fit
    cached = sorted(package_copy.glob(pattern))
    assert cached  # the fit's specialization compiled again, and cached again
    for cache in cached:
        with open(cache, "rb") as handle:
            handle.seek(-1, os.SEEK_END)
            assert handle.read(1) == b"."


def test_a_cache_file_that_fails_to_load_is_removed_and_compiled_again(tmp_path):
    """A corrupt file that still ends as a pickle: numba's load fails, the guard removes it."""
    (tmp_path / "module_with_kernel.py").write_text(
        "from sksubsample.algorithms._numba import njit\n\n@njit\ndef add(x):\n"
        "    return x + 1\n")
    script = ("import warnings, module_with_kernel as m\n"
              "with warnings.catch_warnings(record=True) as seen:\n"
              "    warnings.simplefilter('always')\n"
              "    print(m.add(1), [str(w.message) for w in seen])\n")
    env = _environment(PYTHONPATH=str(tmp_path))
    run = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                         text=True, timeout=FIT_TIMEOUT, check=True, cwd=tmp_path)
    assert run.stdout.startswith("2 []")
    (cache,) = tmp_path.glob("__pycache__/module_with_kernel.add-*.nbc")
    cache.write_bytes(b"\x80\x04garbage.")
    run = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                         text=True, timeout=FIT_TIMEOUT, check=True, cwd=tmp_path)
    assert run.stdout.startswith("2 [") and "compiled again" in run.stdout
    assert cache.stat().st_size > 100


def test_corrupt_cache_files_of_the_package_are_found_at_import(tmp_path):
    package = tmp_path / "pkg"
    (package / "__pycache__").mkdir(parents=True)
    (package / "mod.py").write_text("")
    whole, cut, empty = (package / "__pycache__" / f"mod.f-{k}.py311.nbi" for k in range(3))
    whole.write_bytes(b"\x80\x04K\x01.")
    cut.write_bytes(b"\x80\x04K\x01")
    empty.write_bytes(b"")
    with pytest.warns(CompiledCacheWarning, match="2 of numba's cache files"):
        removed = _numba.clear_corrupt_caches(package)
    assert sorted(removed) == sorted([cut, empty]) and whole.exists()


def _without_root_privileges():
    """A command prefix under which root is held to the permission bits (a read-only folder
    is then read-only for it too); () for another user."""
    if os.getuid() != 0:
        return ()
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("root ignores permission bits, and setpriv cannot drop that privilege")
    return (setpriv, "--inh-caps=-all", "--bounding-set=-all", "--")


def _make_read_only(folder):
    for path in [folder, *folder.rglob("*")]:
        if not path.is_symlink():
            path.chmod(path.stat().st_mode & ~0o222)


def _make_writable(folder):
    for path in [folder, *folder.rglob("*")]:
        if not path.is_symlink():
            path.chmod(path.stat().st_mode | 0o200)


def test_a_read_only_package_and_home_import_and_fit(package_copy, tmp_path, monkeypatch):
    """Neither the package's folders nor the home can be written: numba caches in a private
    temporary folder, the costs are stored in another, each with a warning."""
    prefix = _without_root_privileges()
    home, temp = tmp_path / "home", tmp_path / "tmp-ro"
    home.mkdir()
    temp.mkdir()
    # The fallback folder of numba's cache seeded with the copy's cache files, where numba
    # will look for them: compiling every kernel again would take a minute.
    fallback = temp / f"sksubsample-numba-{os.getuid()}"
    fallback.mkdir(mode=0o700)
    monkeypatch.setattr(_numba.numba.config, "CACHE_DIR", str(fallback))
    (in_tree_stamp, in_tree), *others = _numba._cache_locations(package_copy)
    (stamp, folders), = [(s, f) for s, f in others if s.parent == fallback]
    for source, target in zip(in_tree, folders, strict=True):
        if source.is_dir():
            shutil.copytree(source, target, ignore=shutil.ignore_patterns("*.pyc"))
    shutil.copy2(in_tree_stamp, stamp)
    _make_read_only(package_copy.parent)
    _make_read_only(home)
    try:
        env = _environment(PYTHONPATH=str(package_copy.parent), HOME=str(home),
                           TMPDIR=str(temp), SKSUBSAMPLE_CACHE_DIR=None)
        fit = finish_fit(start_fit(env, prefix))
    finally:
        _make_writable(package_copy.parent)
        _make_writable(home)
    assert fit["finite"] and fit["measured"]
    assert any("CompiledCacheWarning" in w and str(fallback) in w for w in fit["warnings"])
    assert any("CostCacheWarning" in w and "cannot be written" in w for w in fit["warnings"])
    assert (temp / f"sksubsample-{os.getuid()}" / _calibration.STORE_NAME).exists()
