"""Tables of the benchmark results, generated from ``benchmarks/results/*.json``.

Every generator takes keyword options as strings (as written in a page) and returns a
:class:`Table`; a missing file or key shows as "–" rather than failing, so results written by
a newer or older version of a benchmark script still render. Pure Python (no Sphinx import):
``results_directive`` turns tables into document nodes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import NamedTuple

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results"
DASH = "–"


class Table(NamedTuple):
    title: str
    header: list
    rows: list


def load(name, results=None):
    """The JSON results ``name`` (without ``.json``), or ``{}`` when the file is missing."""
    path = Path(results or RESULTS) / f"{name}.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}


def get(data, *keys):
    """``data[k1][k2]...`` with integer keys for lists; ``None`` when any step is missing."""
    for key in keys:
        try:
            data = data[key]
        except (KeyError, IndexError, TypeError):
            return None
    return data


def fmt(value, spec=""):
    """``format(value, spec)``, "–" for a missing value, ``str`` when the spec does not fit."""
    if value is None:
        return DASH
    try:
        return format(value, spec)
    except (TypeError, ValueError):
        return str(value)


def value(name, path, spec="", results=None):
    """One formatted value: ``path`` is dot-separated keys (digits index lists)."""
    keys = [int(k) if k.isdigit() else k for k in path.split(".")]
    return fmt(get(load(name, results), *keys), spec)


def _span(values, spec):
    """``lo–hi`` of the values present (one value when they agree)."""
    values = [v for v in values if v is not None]
    if not values:
        return DASH
    lo, hi = fmt(min(values), spec), fmt(max(values), spec)
    return lo if lo == hi else f"{lo}–{hi}"


# ----------------------------------------------------------------------------- racing


def racing_errors(experiment="fig1_D10_pairwise", delta="0.1", results=None):
    """Proportion of rewards evaluated / best-arm errors, one row per (σ, distribution)."""
    rows = [r for r in get(load("racing_synthetic", results), experiment) or []
            if r.get("delta") is not None and abs(r["delta"] - float(delta)) < 1e-12]
    algorithms = list(dict.fromkeys(r.get("algorithm") for r in rows))
    cells = {}
    for r in rows:
        cells[(r.get("noise"), r.get("distribution"))] = cells.get(
            (r.get("noise"), r.get("distribution")), {})
        cells[(r.get("noise"), r.get("distribution"))][r.get("algorithm")] = (
            f"{fmt(r.get('proportion_evaluated'), '.4f')} / "
            f"{fmt(r.get('errors'))}/{fmt(r.get('n_runs'))}")
    first = rows[0] if rows else {}
    title = (f"D = {fmt(first.get('n_arms'))}, N = {fmt(first.get('n_population'), ',')}, "
             f"{fmt(first.get('variance'))} variance, δ = {delta}; cells: proportion of rewards "
             "evaluated / best-arm errors out of runs")
    return Table(title, ["σ", "distribution", *algorithms],
                 [[fmt(noise, ".0e"), fmt(dist), *(by.get(a, DASH) for a in algorithms)]
                  for (noise, dist), by in cells.items()])


def racing_speedup(results=None):
    """Wall-time against evaluation-count speed-up of racing over exact sampling
    (``benchmarks/racing_wall_time.py``)."""
    data = load("racing_wall_time", results)
    settings = data.get("settings") or {}
    rows = get(data, "speedups") or []
    title = (f"D = {fmt(settings.get('n_states'))}, N = {fmt(settings.get('n_factors'), ',')}, "
             f"{fmt(settings.get('n_draws'))} draws per problem interleaved with exact draws "
             f"({fmt(settings.get('timing'))})")
    header = ["problem", "evaluated", "evaluation speed-up", "wall speed-up", "ratio",
              "ratio with nothing outside the callable", "exact ms", "racing ms",
              "ns/evaluation in the callable, exact / racing",
              "racing outside the callable, ms/draw"]
    table = []
    for r in rows:
        inside = r.get("callable_ns_per_evaluation") or {}
        table.append([fmt(r.get("problem")), fmt(r.get("proportion_evaluated"), ".4f"),
                      fmt(r.get("evaluation_speedup"), ".1f"), fmt(r.get("wall_speedup"), ".2f"),
                      fmt(r.get("wall_over_evaluation"), ".2f"),
                      fmt(r.get("wall_over_evaluation_ceiling"), ".2f"),
                      fmt(r.get("exact_ms"), ".3f"), fmt(r.get("racing_ms"), ".3f"),
                      f"{fmt(inside.get('exact'), '.1f')} / {fmt(inside.get('racing'), '.1f')}"
                      if inside else DASH,
                      fmt(r.get("racing_outside_callable_ms"), ".3f")])
    return Table(title, header, table)


def racing_guard(results=None):
    """Error at δ with and without the guard, and what each reads, on adversarial problems
    (``benchmarks/racing_guard.py``)."""
    data = load("racing_guard", results)
    settings = data.get("settings") or {}
    title = (f"D = {fmt(settings.get('n_states'))}, N = {fmt(settings.get('n_factors'), ',')}, "
             f"δ = {fmt(settings.get('delta'))}, {fmt(settings.get('n_draws'))} draws per "
             "problem and setting, each against the exact draw of the same seed")
    labels = ("guard off", "guard on", "default (auto)")
    header = ["problem", "detectable from a sample"]
    for label in labels:
        header += [f"{label}: error (95 % upper)", f"{label}: evaluated"]
    header += ["p(favoured) exact"]
    rows = []
    for r in get(data, "adversarial") or []:
        row = [fmt(r.get("problem")), "yes" if r.get("detectable") else "no"]
        for label in labels:
            c = get(r, "settings", label) or {}
            row += [f"{fmt(c.get('coupled_error'), '.3f')} "
                    f"({fmt(c.get('coupled_error_upper95'), '.3f')})",
                    fmt(c.get("proportion_evaluated"), ".4f")]
        row.append(fmt(r.get("exact_p_favoured"), ".3f"))
        rows.append(row)
    return Table(title, header, rows)


def racing_guard_paper(results=None):
    """Factors read with and without the guard on the paper's §5.1 problems."""
    rows = []
    for r in get(load("racing_guard", results), "paper") or []:
        on, off = r.get("guard on") or {}, r.get("guard off") or {}
        rows.append([fmt(r.get("distribution")), fmt(r.get("noise"), ".0e"),
                     fmt(off.get("proportion_evaluated"), ".4f"),
                     fmt(on.get("proportion_evaluated"), ".4f"), fmt(r.get("read_ratio"), ".3f"),
                     f"{fmt(off.get('coupled_error'), '.3f')} / "
                     f"{fmt(on.get('coupled_error'), '.3f')}"])
    return Table("§5.1 problems (D = 10, N = 1e5, δ = 0.05, method='racing')",
                 ["factors", "σ", "evaluated without guard", "with guard", "ratio",
                  "error without / with"], rows)


def racing_guard_arch(results=None):
    """ARCH order selection: terms read and CPU time with and without the guard."""
    rows = []
    for r in get(load("racing_guard", results), "arch") or []:
        rows.append([fmt(r.get("setting")), fmt(r.get("fraction_data_touched"), ".4f"),
                     f"{fmt(r.get('n_guarded'))} / {fmt(r.get('n_raced'))}",
                     fmt(r.get("cpu_seconds"), ".2f"), fmt(r.get("ns_per_evaluation"), ".0f")])
    return Table("ARCHOrderSelector(method='racing'), orders 0-5, simulated ARCH(2), N = 5 000, "
                 "one chain", ["setting", "fraction of terms read", "races guarded / raced",
                               "CPU s", "ns per term"], rows)


def racing_auto(results=None):
    """The default against racing and exact sampling (``benchmarks/racing_auto.py``)."""
    data = load("racing_auto", results)
    settings = data.get("settings") or {}
    rows = []
    for r in get(data, "rows") or []:
        cpu, ev = r.get("cpu_ms") or {}, r.get("proportion_evaluated") or {}
        rows.append([fmt(r.get("problem")), fmt(cpu.get("exact"), ".2f"),
                     fmt(cpu.get("racing"), ".2f"), fmt(cpu.get("auto"), ".2f"),
                     fmt(r.get("auto_over_exact"), ".2f"), fmt(r.get("auto_over_racing"), ".2f"),
                     f"{fmt(ev.get('racing'), '.4f')} / {fmt(ev.get('auto'), '.4f')}",
                     fmt(r.get("auto_raced"), ".2f")])
    return Table(f"δ = {fmt(settings.get('delta'))}; CPU ms per draw (per fit for estimators), "
                 f"{fmt(settings.get('timing'))}",
                 ["problem", "exact", "racing", "default (auto)", "auto / exact",
                  "auto / racing", "evaluated racing / auto", "share raced by auto"], rows)


def arch_series(results=None):
    """Per series: orders, the reference posterior mode, TV exact vs racing, race errors."""
    rows = []
    for s in get(load("arch_experiments", results), "series") or []:
        post, orders = s.get("reference_posterior") or [], s.get("orders") or []
        mode = orders[post.index(max(post))] if post and len(post) == len(orders) else None
        err = s.get("racing_errors") or {}
        rows.append([fmt(s.get("name")), fmt(s.get("n"), ","),
                     f"{fmt(get(orders, 0))}–{fmt(get(orders, -1))}", fmt(mode),
                     fmt(max(post) if post else None, ".3f"),
                     fmt(s.get("reference_tv_exact_racing"), ".2g"),
                     f"{fmt(err.get('gibbs_errors'))}/{fmt(err.get('n_trials'))}",
                     f"{fmt(err.get('mh_errors'))}/"
                     f"{fmt(err.get('mh_tests', err.get('n_trials')))}"])
    return Table("ARCH order selection: racing Gibbs and racing MH against exact sampling",
                 ["series", "N", "orders", "posterior mode", "its probability",
                  "TV(exact, racing)", "racing Gibbs errors", "racing MH errors"], rows)


def _pm(values, errors, k, spec):
    """``value ± error`` of entry ``k`` of two lists ("–" where missing)."""
    v, e = get(values, k), get(errors, k)
    if v is None:
        return DASH
    return fmt(v, spec) if e is None else f"{fmt(v, spec)} ± {fmt(e, spec)}"


def arch_correctness(results=None):
    """ARCH(2) correctness run: log evidences and p(q | r) of exact and racing against IS."""
    data = get(load("arch_experiments", results), "correctness") or {}
    ref = data.get("reference") or {}
    methods = data.get("methods") or {}
    ex, ra = methods.get("exact") or {}, methods.get("racing") or {}
    rows = []
    for k, q in enumerate(data.get("orders") or []):
        rows.append([fmt(q), _pm(ref.get("relative"), ref.get("pooled_se"), k, ".2f"),
                     _pm(ex.get("log_evidence"), ex.get("log_evidence_se"), k, ".2f"),
                     _pm(ra.get("log_evidence"), ra.get("log_evidence_se"), k, ".2f"),
                     fmt(get(ref, "posterior", k), ".4f"),
                     _pm(ex.get("order_posterior"), ex.get("order_posterior_se"), k, ".4f"),
                     _pm(ra.get("order_posterior"), ra.get("order_posterior_se"), k, ".4f")])
    title = (f"{fmt(data.get('name'))}: default ARCHOrderSelector, fit in "
             f"{fmt(ex.get('fit_seconds'), '.0f')} s (exact) and "
             f"{fmt(ra.get('fit_seconds'), '.0f')} s (racing); TV to IS "
             f"{fmt(ex.get('tv_to_reference'), '.4f')} (exact), "
             f"{fmt(ra.get('tv_to_reference'), '.4f')} (racing)")
    return Table(title, ["q", "IS log evidence", "exact", "racing", "IS p(q|r)", "exact p(q|r)",
                         "racing p(q|r)"], rows)


def arch_speed(results=None):
    """Fig. 2 speed: time per sweep and min-ESS of the order indicators per second."""
    rows = []
    for s in get(load("arch_experiments", results), "series") or []:
        ex, ra = get(s, "methods", "exact") or {}, get(s, "methods", "racing") or {}
        rows.append([fmt(s.get("name")), fmt(s.get("n_terms"), ","),
                     fmt(ex.get("ms_per_sweep"), ".3f"), fmt(ra.get("ms_per_sweep"), ".3f"),
                     fmt(get(s, "speedup", "per_sweep"), ".1f"),
                     fmt(ex.get("min_ess_per_second"), ".1f"),
                     fmt(ra.get("min_ess_per_second"), ".1f"),
                     fmt(get(s, "speedup", "min_ess_per_second"), ".1f"),
                     fmt(ra.get("fraction_data_touched"), ".3f")])
    return Table("Exact against racing Carlin–Chib at fixed π̃, segments interleaved",
                 ["series", "terms N", "exact ms/sweep", "racing ms/sweep", "speed-up / sweep",
                  "exact min-ESS/s", "racing min-ESS/s", "speed-up min-ESS/s",
                  "racing data touched"], rows)


def arch_agreement(results=None):
    """Racing against exact: TV with its Monte Carlo null, TV to IS, race errors, CV."""
    rows = []
    for s in get(load("arch_experiments", results), "series") or []:
        tv = s.get("tv_exact_racing") or {}
        err = s.get("racing_errors") or {}
        rv = s.get("reward_variance") or {}
        rows.append([fmt(s.get("name")), fmt(tv.get("tv"), ".4f"),
                     f"{fmt(tv.get('tv_null_mean'), '.4f')} / {fmt(tv.get('tv_null_q95'), '.4f')}",
                     fmt(tv.get("tv_p_value"), ".2f"),
                     fmt(get(s, "methods", "exact", "tv_to_reference"), ".4f"),
                     fmt(get(s, "methods", "racing", "tv_to_reference"), ".4f"),
                     f"{fmt(err.get('gibbs_errors'))}/{fmt(err.get('n_trials'))}",
                     f"{fmt(err.get('mh_errors'))}/{fmt(err.get('mh_tests'))}",
                     fmt(rv.get("pairwise_median_reduction"), ".2g")])
    return Table("Racing against exact sampling: agreement, race errors, control variates",
                 ["series", "TV(exact, racing)", "TV under MC error alone: mean / 95 %",
                  "p-value", "TV(exact, IS)", "TV(racing, IS)", "racing Gibbs errors",
                  "racing MH errors", "reward variance ÷ (pairwise, median)"], rows)


def arch_nasdaq(results=None):
    """NASDAQ repetitions: mean p(q | r) per variant with the spread across repetitions."""
    data = get(load("arch_experiments", results), "nasdaq_investigation") or {}
    variants = data.get("variants") or {}
    orders = [6, 8, 10, 12, 14, 16]
    rows = []
    for key, v in variants.items():
        visits = [r.get("visit_frequency") for r in v.get("repeats") or []]
        visit12 = [get(x, 3) for x in visits if get(x, 3) is not None]
        rows.append([fmt(key), *(_pm(v.get("mean"), v.get("se_of_mean"), k, ".3f")
                                 for k in range(2, 6)),
                     fmt(get(v, "sd_across_repeats", 3), ".3f"),
                     fmt(get(v, "mean_reported_se", 3), ".3f"),
                     _span(visit12, ".3f"), fmt(v.get("tv_of_means_to_exact"), ".3f")])
    title = (f"NASDAQ daily, {fmt(data.get('n_repeats'))} independent fits per variant "
             f"({fmt(data.get('n_draws'))} draws × 4 chains); p(q | r) as mean ± standard error "
             "of the mean over the fits")
    return Table(title, ["variant", *(f"q = {q}" for q in orders[2:]), "sd of p(12) across fits",
                         "mean reported se of p(12)", "visits of q = 12",
                         "TV(mean, exact mean)"], rows)


def coref_febrl(results=None):
    """B³ precision / recall / F1 and cost of every method on the FEBRL data sets."""
    rows = []
    for name, data in (get(load("coref_experiments", results), "febrl") or {}).items():
        for method, r in (data.get("methods") or {}).items():
            b3 = r.get("b3") or []
            rows.append([f"{name} ({fmt(data.get('n_records'), ',')} records)", method,
                         *(fmt(get(b3, k), ".3f") for k in range(3)),
                         fmt(r.get("n_evaluations"), ","), fmt(r.get("seconds"), ".1f")])
    return Table("Entity resolution on FEBRL: mention-averaged B³",
                 ["data", "method", "precision", "recall", "F1", "factor evaluations",
                  "seconds"], rows)


def coref_febrl_saving(results=None):
    """What racing saves on FEBRL: races run, evaluations saved, wall-time ratio."""
    rows = []
    for name, data in (get(load("coref_experiments", results), "febrl") or {}).items():
        saving = data.get("racing_saves") or {}
        exact = get(data, "methods", "CorefGibbs exact", "n_evaluations")
        rows.append([f"{name} ({fmt(data.get('n_records'), ',')} records)",
                     fmt(data.get("max_entity_size")), fmt(data.get("stored_pairs"), ","),
                     fmt(saving.get("updates"), ","), fmt(saving.get("races"), ","),
                     fmt(exact, ","), fmt(saving.get("evaluations_saved"), ","),
                     fmt(saving.get("same_partition")), fmt(saving.get("wall_ratio"), ".2f")])
    return Table("Racing on FEBRL: updates decided by a race, and the savings",
                 ["data", "largest entity", "stored pairs", "updates", "races",
                  "exact evaluations", "evaluations saved", "same partition",
                  "exact / racing seconds"], rows)


def coref_synthetic(section="synthetic", results=None):
    """Heavy-tailed synthetic coreference, one row per seed: exact / racing speed-ups in wall
    time and in factor evaluations, overall and over the second half of the sweeps."""
    data = get(load("coref_experiments", results), section) or {}
    rows = []
    for r in get(data, "summary", "per_seed") or []:
        rows.append([fmt(r.get("seed")), fmt(r.get("exact_seconds"), ".1f"),
                     fmt(r.get("racing_seconds"), ".1f"), fmt(r.get("wall_speedup"), ".2f"),
                     fmt(r.get("wall_speedup_late"), ".2f"),
                     fmt(r.get("evaluation_speedup"), ".1f"),
                     fmt(r.get("evaluation_speedup_late"), ".1f"),
                     fmt(r.get("exact_f1"), ".4f"), fmt(r.get("racing_f1"), ".4f"),
                     fmt(r.get("max_f1_gap_per_sweep"), ".4f"), fmt(r.get("arms_at_end")),
                     fmt(r.get("largest_cluster"), ",")])
    title = (f"N = {fmt(data.get('n_mentions'), ',')} mentions of "
             f"{fmt(data.get('n_entities'))} entities (largest {fmt(data.get('largest'), ',')}),"
             f" d = {fmt(data.get('dim'))}, {fmt(data.get('n_sweeps'))} sweeps; speed-ups are "
             "exact / racing, \"late\" over the second half of the sweeps")
    return Table(title, ["seed", "exact s", "racing s", "wall speed-up", "late wall speed-up",
                         "evaluation speed-up", "late evaluation speed-up", "exact F1",
                         "racing F1", "largest F1 gap in a sweep", "arms at the end",
                         "largest cluster"], rows)


def coref_errors(results=None):
    """Race errors: the audited fit and the hard problem, against delta."""
    data = get(load("coref_experiments", results), "errors") or {}
    rows = []
    fit = data.get("audited_fit")
    if fit:
        rows.append([f"audited annealing fit, N = {fmt(fit.get('n_mentions'), ',')}",
                     fmt(fit.get("first_batch")), fmt(fit.get("delta")),
                     fmt(fit.get("races"), ","), fmt(fit.get("errors"), ","),
                     fmt(fit.get("error_rate"), ".4f"), DASH])
    for r in data.get("hard_problem") or []:
        rows.append(["hard problem (close sums, factor sd 1)", fmt(r.get("first_batch")),
                     fmt(r.get("delta")), fmt(r.get("n_races"), ","), fmt(r.get("errors"), ","),
                     fmt(r.get("error_rate"), ".4f"), fmt(r.get("tv"), ".4f")])
    return Table("Races that picked another cluster than the exact draw under the same Gumbel "
                 "perturbations (Prop. 3: at most δ)",
                 ["problem", "m¹", "δ", "races", "errors", "error rate",
                  "TV(racing, exact) of the update"], rows)


# ----------------------------------------------------------------------------- minibatch MH

_GMM_LABELS = {"minibatch_barker": "minibatch Barker", "austerity": "Austerity",
               "mhsublhd": "MHSubLhd", "exact_mh": "exact MH"}


def gmm_methods(section="methods", results=None):
    """One row per acceptance test of the Gaussian-mixture benchmark (``methods`` or
    ``small_step``)."""
    data = load("gmm_minibatch_mh", results)
    rows = []
    for name, r in (get(data, section) or {}).items():
        first = r.get("first_n_exact") or {}
        rows.append([
            _GMM_LABELS.get(name, name), fmt(r.get("n_iterations"), ","),
            fmt(r.get("mean_minibatch"), ",.1f"), fmt(r.get("median_minibatch"), ",.0f"),
            fmt(r.get("max_minibatch"), ",.0f"), fmt(r.get("fraction_full_data"), ".1%"),
            fmt(r.get("acceptance_rate"), ".3f"), fmt(r.get("poisson_loglik_eq23"), ".1f"),
            f"{fmt(r.get('chi_square'), '.1f')} ({fmt(r.get('chi_square_dof'))})",
            f"{fmt(first.get('poisson_loglik_eq23'), '.1f')} / "
            f"{fmt(first.get('chi_square'), '.1f')}" if first else DASH,
            fmt(r.get("seconds"), ".1f")])
    variance = get(data, section, "minibatch_barker", "proposal_variance")
    return Table(f"N = {fmt(get(data, 'n_data'), ',')}, T = {fmt(get(data, 'temperature'), 'g')},"
                 f" proposal variance {fmt(variance, 'g')}",
                 ["method", "iterations", "mean minibatch", "median", "max",
                  "steps using all N", "acceptance", "Eq. 23", "χ² (dof)",
                  "Eq. 23 / χ² on the first draws", "seconds"], rows)


def gmm_t1(results=None):
    """T = 1 with and without control variates."""
    data = load("gmm_minibatch_mh", results)
    cv = get(data, "t1_control_variates") or {}
    no_cv = get(data, "t1_without_control_variates") or {}

    def pair(values):
        return DASH if values is None else "(" + ", ".join(fmt(v, ".5f") for v in values) + ")"

    rows = [] if not (cv or no_cv) else [
        ["with control variates", fmt(cv.get("n_iterations"), ","),
         fmt(cv.get("mean_minibatch"), ",.0f"), fmt(cv.get("mean_minibatch_fraction_of_n"), ".2g"),
         fmt(cv.get("acceptance_rate"), ".3f"), pair(cv.get("posterior_mean")),
         pair(cv.get("posterior_sd"))],
        ["without control variates (same step size)", fmt(no_cv.get("n_iterations"), ","),
         fmt(no_cv.get("mean_minibatch"), ",.0f"),
         fmt(no_cv.get("mean_minibatch_fraction_of_n"), ".2g"), DASH, DASH, DASH]]
    return Table(f"T = 1, N = {fmt(get(data, 'n_data'), ',')}",
                 ["", "steps", "mean minibatch", "fraction of N", "acceptance",
                  "posterior mean", "posterior sd"], rows)


# ----------------------------------------------------------------------------- logistic

SAMPLER_LABELS = {
    "ours_default": "ours: default (bounded Barker + CV + Hamiltonian)",
    "ours_mb_barker_langevin": "ours: minibatch Barker + CV + Langevin",
    "ours_mb_barker_rw": "ours: minibatch Barker + CV + random walk",
    "ours_exact_mh_langevin": "ours: exact MH (Metropolis, Langevin)",
    "nuts_f32": "NumPyro NUTS float32",
    "nuts_f64": "NumPyro NUTS float64",
    "sgld_cv": "BlackJAX SGLD-CV at the MAP (batch 100)",
}


#: 1-minute load average at or below which a timed run counts as quiet.
QUIET_LOAD = 1.1


def _quiet(run):
    loads = [get(run, key, 0) for key in ("load_before", "load_after")]
    return all(load is not None and load <= QUIET_LOAD for load in loads)


def logistic_peers(n="100000", results=None):
    """One row per sampler of ``logistic_peers_N{n}.json``: the last run, and the range of
    min-ESS/s over the quiet runs (over every run when none was quiet)."""
    data = load(f"logistic_peers_N{n}", results)
    rows = []
    for r in get(data, "results") or []:
        runs = r.get("runs") or []
        shown = [x for x in runs if _quiet(x)] or runs
        # What a long run approaches: ours at the per-iteration cost of two fits'
        # difference, SGLD-CV without its compilation.
        excluded = r.get("min_ess_per_s_long_run", r.get("min_ess_per_s_excl_compile"))
        rows.append([
            SAMPLER_LABELS.get(r.get("sampler"), fmt(r.get("sampler"))),
            fmt(r.get("n_iter"), ","), fmt(r.get("min_ess_per_s"), ".1f"),
            _span([x.get("min_ess_per_s") for x in shown], ".1f") if shown else DASH,
            fmt(excluded, ".1f"), fmt(r.get("min_ess"), ".0f"),
            fmt(r.get("max_rhat"), ".3f"), fmt(r.get("worst_mean_error_sd"), ".3f"),
            " / ".join(fmt(r.get(f"sd_ratio_{k}"), ".3f") for k in ("min", "median", "max")),
            fmt(r.get("us_per_iter"), ",.0f"), fmt(r.get("iter_over_minibatch_loglik"), ".1f"),
            fmt(r.get("mean_batch"), ",.0f"), fmt(r.get("fraction_of_data"), ".3%")])
    return Table(f"N = {fmt(get(data, 'n'), ',')}, d = {fmt(get(data, 'd'))} + intercept, "
                 f"prior N(0, {fmt(get(data, 'prior_scale'), 'g')}²); reference: "
                 f"{fmt(get(data, 'reference'))}",
                 ["sampler", "iterations", "min-ESS/s", "min-ESS/s, quiet runs",
                  "min-ESS/s, long run", "min ESS", "max R-hat", "worst |mean err| / sd",
                  "sd ratio min / median / max", "µs / iter", "iter / mb-loglik",
                  "mean decision batch", "data / step"], rows)


def logistic_real_data(results=None):
    """Mean decision minibatch per data set, temperature and test, and the paper's MNIST row."""
    data = load("logistic_real_data", results)
    records = get(data, "results") or []
    tests = list(dict.fromkeys(r.get("test") for r in records))
    cells = {}
    for r in records:
        key = (f"{fmt(r.get('data'))} (N = {fmt(r.get('n'), ',')})",
               fmt(r.get("temperature"), "g"))
        cells.setdefault(key, {})[r.get("test")] = fmt(r.get("mean_batch"), ",.1f")
    rows = [[label, t, *(by.get(test, DASH) for test in tests)]
            for (label, t), by in cells.items()]
    paper = get(data, "paper_mnist_mean_minibatch") or {}
    if paper:
        rows.append(["paper, MNIST 1 vs 7 (N = 12,007)", "1000",
                     *(fmt(paper.get(test), ",") for test in tests)])
    return Table("Mean decision minibatch", ["data", "T", *tests], rows)


#: A smaller request may cost at most this much more than a larger one (logistic_grid.py).
GRID_CLIFF = 1.1


def _grid_cliffs(cells, key="seconds_median"):
    """Pairs (smaller, larger) of one tree, N, d and layout where the smaller request (no more
    draws, no more warm-up) took more than :data:`GRID_CLIFF` times the larger's (median wall
    or CPU seconds of the rounds: ``key``)."""
    groups = {}
    for c in cells:
        groups.setdefault((c.get("tree"), c.get("n"), c.get("d"), c.get("layout")), []).append(c)
    found = []
    for group in groups.values():
        for smaller in group:
            for larger in group:
                if smaller is larger or None in (smaller.get(key), larger.get(key)):
                    continue
                if not ((smaller.get("draws") or 0) <= (larger.get("draws") or 0)
                        and smaller.get("warmup", 500) <= larger.get("warmup", 500)):
                    continue
                if smaller[key] > GRID_CLIFF * larger[key]:
                    found.append((smaller, larger))
    return found


def logistic_grid(experiment="logistic_grid", results=None):
    """One row per cell of ``benchmarks/logistic_grid.py``: fit time (and the baseline's),
    min ESS, min-ESS/s, the chain alone, the plan and the rows it predicted and read."""
    cells = list((get(load(experiment, results), "cells") or {}).values())
    ours = [c for c in cells if c.get("tree") == "this tree"]
    def request(c):
        return c.get("n"), c.get("d"), c.get("layout"), c.get("draws"), c.get("warmup", 500)

    baseline = {request(c): c for c in cells if c.get("tree") == "baseline"}
    rows = []
    for c in sorted(ours, key=lambda c: (c.get("layout") or "", c.get("n") or 0,
                                         c.get("d") or 0, c.get("warmup") or 0,
                                         c.get("draws") or 0)):
        plan = c.get("plan") or {}
        other = baseline.get(request(c), {})
        ratio = (c["cpu_seconds"] / other["cpu_seconds"]
                 if other.get("cpu_seconds") and c.get("cpu_seconds") else None)
        rows.append([
            fmt(c.get("layout")), fmt(c.get("n"), ","), fmt(c.get("d")),
            fmt(c.get("warmup", 500), ","), fmt(c.get("draws"), ","),
            fmt(c.get("seconds_median"), ".2f"),
            " ".join(fmt(r, ".2f") for r in c.get("seconds_runs") or []),
            fmt(c.get("cpu_seconds_median"), ".2f"),
            f"{fmt(other.get('seconds'), '.2f')} / {fmt(other.get('cpu_seconds'), '.2f')}",
            fmt(ratio, ".2f"),
            fmt(c.get("min_ess"), ",.0f"), fmt(c.get("min_ess_per_second"), ",.1f"),
            fmt(c.get("more_seconds"), ".2f"), fmt(c.get("chain_draws_per_second"), ",.0f"),
            f"{fmt(plan.get('order'))} / {fmt(plan.get('n_exact_rows'))}",
            f"{fmt(plan.get('rows_per_step'), ',.0f')} / {fmt(c.get('rows_per_step'), ',.0f')}",
            f"{fmt(plan.get('warmup_rows_per_step'), ',.0f')} / "
            f"{fmt(c.get('warmup_terms_per_step'), ',.0f')}"])
    wall, cpu = _grid_cliffs(ours), _grid_cliffs(ours, "cpu_seconds_median")
    title = (f"{len(ours)} cells; pairs where a smaller request took more than {GRID_CLIFF}x "
             f"a larger one: {len(wall)} in wall time, {len(cpu)} in CPU time" if ours else "")
    return Table(title, ["layout", "N", "d", "warm-up / chain", "draws / chain",
                         "fit s (median)", "fit s (rounds)", "fit CPU s (median)",
                         "baseline fit s / CPU s", "CPU ratio to baseline",
                         "min ESS", "min-ESS/s", "chain s (sample_more)", "chain draws/s",
                         "order / exact rows", "rows/step planned / read",
                         "warm-up rows planned / read"], rows)


# ----------------------------------------------------------------------------- A* / PM-A*


def tree_timing(results=None):
    """Time per selection and per insert + remove of the truncated-Gumbel tree."""
    data = load("gumbel_tree_timing", results)
    rows = [[fmt(r.get("m"), ","), fmt(r.get("select_us_min"), ".1f"),
             fmt(r.get("select_us_median"), ".1f"), fmt(r.get("insert_remove_us_min"), ".1f"),
             fmt(r.get("insert_remove_us_median"), ".1f"), fmt(r.get("height"))]
            for r in get(data, "rows") or []]
    return Table(f"blocks of {fmt(get(data, 'block'), ',')} operations, repeated "
                 f"{fmt(get(data, 'repeats'))} times; ratio m = 10⁶ / m = 10³: "
                 f"{fmt(get(data, 'ratio_1e6_over_1e3_min'), '.2f')} (min), "
                 f"{fmt(get(data, 'ratio_1e6_over_1e3_median'), '.2f')} (median)",
                 ["m", "select µs (min)", "select µs (median)", "insert+remove µs (min)",
                  "insert+remove µs (median)", "height"], rows)


def astar_mixture(results=None):
    """KS distance to the exact CDF against the number of rounds."""
    data = get(load("astar_experiments", results), "mixture") or {}
    budgets = data.get("budgets") or []
    rows = []
    for name, ks in (data.get("ks") or {}).items():
        values = ks if isinstance(ks, list) else [ks] * len(budgets)
        evals = get(data, "evaluations_per_draw", name)
        rows.append([name, *(fmt(v, ".3f") for v in values),
                     _span(evals if isinstance(evals, list) else [evals], ".1f")])
    return Table(f"{fmt(data.get('n_samples'), ',')} draws; 1 % critical value "
                 f"{fmt(data.get('ks_critical_1pct'), '.3f')} (A* uses a valid bound: its row "
                 "does not depend on T)",
                 ["rounds T", *(fmt(b) for b in budgets), "evaluations / draw"], rows)


def astar_counter(results=None):
    """Rounds spent on the spike, best Gumbel value and cost on the counter-example."""
    data = get(load("astar_experiments", results), "counter") or {}
    rows = [[name, f"{fmt(r.get('rounds_on_spike_mean'), '.1f')} "
                   f"({fmt(r.get('rounds_on_spike_fraction'), '.1%')})",
             fmt(r.get("rounds_on_final_region_mean"), ".1f"),
             f"{fmt(r.get('final_best_gumbel_mean'), '.2f')} ± "
             f"{fmt(r.get('final_best_gumbel_se'), '.2f')}",
             fmt(r.get("n_evaluations_per_run"), ",.0f"), fmt(r.get("draw_mean"), ".2f")]
            for name, r in (data.get("algorithms") or {}).items()]
    return Table(f"{fmt(data.get('runs'))} runs × {fmt(data.get('rounds'))} rounds; rounds on "
                 "spike regions A* / PM-A*: "
                 f"{fmt(data.get('ratio_spike_rounds_astar_over_pm'), '.1f')}×",
                 ["", "rounds on spike regions", "rounds on the final region",
                  "best Gumbel value (mean ± se)", "evaluations / run", "mean draw"], rows)


def astar_clutter(results=None):
    """Best Gumbel value at an equal budget, per dimension and method."""
    data = get(load("astar_experiments", results), "clutter") or {}
    dims = data.get("dims") or {}
    methods = list(dict.fromkeys(k for d in dims.values() for k, v in d.items()
                                 if isinstance(v, dict)))
    rows = [[d, fmt(r.get("evaluation_budget_per_run"), ","),
             *(f"{fmt(get(r, m, 'final_best_gumbel_mean'), '.1f')} ± "
               f"{fmt(get(r, m, 'final_best_gumbel_se'), '.1f')}" for m in methods)]
            for d, r in dims.items()]
    return Table(f"n = {fmt(data.get('n'))} points, {fmt(data.get('runs'))} runs; best Gumbel "
                 "value found, mean ± se", ["d", "rows / run", *methods], rows)


def astar_logistic(results=None):
    """Bayesian logistic regression on breast cancer: draws against an MH reference."""
    data = get(load("astar_experiments", results), "logistic") or {}
    rows = []
    for name, r in (data.get("algorithms") or {}).items():
        extra = r.get("bound_likelihood_terms_per_draw")
        rows.append([name, f"{fmt(r.get('mean_loglik'), '.2f')} ± "
                           f"{fmt(r.get('mean_loglik_se'), '.2f')}",
                     fmt(r.get("max_abs_z"), ".2f"), fmt(r.get("evaluations_per_draw"), ",.0f"),
                     DASH if extra is None else fmt(extra, ".3g")])
    ref = data.get("mh_reference") or {}
    return Table(f"n = {fmt(data.get('n'))}, {fmt(data.get('runs'))} draws per method; reference "
                 f"mean log-likelihood {fmt(ref.get('mean_loglik'), '.2f')} "
                 f"({fmt(ref.get('steps'), ',')} MH steps)",
                 ["", "mean log-lik of draws", "max |z| over coordinates", "rows / draw",
                  "likelihood terms in bounds / draw"], rows)


def astar_estimator(results=None):
    """``sample_exact`` (A*, PM-A*) against the MH default: speed, cost, agreement."""
    rows = []
    for case in get(load("astar_logistic", results), "cases") or []:
        for method in ("astar", "pm-astar", "mh"):
            r = case.get(method) or {}
            lag1 = r.get("lag1")
            rows.append([
                f"{case.get('data')} (N = {case.get('n_samples')})", fmt(case.get("n_params")),
                {"astar": "A*", "pm-astar": "PM-A*", "mh": "MH default"}[method],
                fmt(r.get("draws_per_s"), ".1f"), fmt(r.get("evaluations_per_draw"), ".3g"),
                fmt(r.get("evaluations_per_effective_draw"), ".3g"),
                fmt(r.get("ks_min_p_vs_nuts"), ".3f"), fmt(r.get("ks_min_p_vs_mh"), ".3f"),
                DASH if lag1 is None else fmt(max(abs(v) for v in lag1), ".3f"),
                fmt(r.get("lag1_se"), ".3f")])
    return Table("Exact draws of BayesianLogisticRegressionMH.sample_exact (2 jobs) and the MH "
                 "default (4 chains of 1000 draws after 500 warm-up steps)",
                 ["data", "d", "method", "draws / s", "data terms / draw",
                  "data terms / effective draw", "min KS p vs NUTS", "min KS p vs MH",
                  "max |lag-1|", "its s.e. (1/√n)"], rows)


# ----------------------------------------------------------------------------- Barker correction


def barker_correction_shipped(results=None):
    """The shipped correction tables: L∞ error recomputed from their masses, cells with mass,
    and the variance error (computed from the package data, not from a results file)."""
    import numpy as np

    from sksubsample.algorithms import BarkerCorrection
    from sksubsample.algorithms.mh._correction import SHIPPED_SIGMAS

    rows = []
    for sigma in SHIPPED_SIGMAS:
        c = BarkerCorrection(sigma)
        centres = 0.5 * (c.grid[1:] + c.grid[:-1])
        widths = np.diff(c.grid)
        variance = float(np.sum(c.masses * (centres**2 + widths**2 / 12)))
        rows.append([f"{sigma:.1f}", fmt(c.cdf_error, ".2e"),
                     f"{np.count_nonzero(c.masses)} of {c.masses.size}",
                     fmt(abs(variance - (np.pi**2 / 3 - sigma**2)), ".1e")])
    return Table("Shipped tables (method minimax, defaults), recomputed at build time",
                 ["σ", "L∞ CDF error", "cells with mass", "|Var(X_corr) − (π²/3 − σ²)|"], rows)


def coref_auto(results=None):
    """``method="auto"`` against ``"exact"`` and ``"racing"``: CPU time and B³ F1."""
    rows = []
    for name, data in (get(load("coref_experiments", results), "auto") or {}).items():
        label = (f"{name}: N = {fmt(data.get('n_mentions'), ',')}, d = {fmt(data.get('dim'))},"
                 f" largest entity {fmt(data.get('largest'), ',')}")
        for method, r in (data.get("methods") or {}).items():
            rows.append([label, method, fmt(r.get("cpu_seconds"), ".1f"),
                         fmt(r.get("cpu_over_exact"), ".2f"), fmt(r.get("f1"), ".4f"),
                         f"{fmt(r.get('n_races'), ',')} of {fmt(r.get('n_updates'), ',')}",
                         fmt(r.get("n_guarded"), ",")])
    return Table("The default method=\"auto\" beside \"exact\" and \"racing\" (20 sweeps, CPU "
                 "time of the fastest of the alternating fits)",
                 ["problem", "method", "CPU s", "CPU / exact", "B³ F1", "updates raced",
                  "eliminations postponed by the guard"], rows)


def coref_scale(results=None):
    """Sparse blocked potentials from 10⁴ to 10⁶ records: CPU time and B³ F1 of the fit, of
    the previous sweep and of Splink's clustering of the same pairs."""
    data = load("coref_scale", results)
    rows = []
    for r in data.get("scaling") or []:
        before = r.get("before") or {}
        splink = r.get("splink") or {}
        rows.append([fmt(r.get("n_records"), ","), fmt(r.get("pairs_per_record"), ".1f"),
                     fmt(r.get("largest_entity"), ","),
                     fmt(get(r, "gibbs", "cpu_seconds"), ".1f"),
                     fmt(get(r, "gibbs", "b3", 2), ".4f"),
                     fmt(before.get("cpu_seconds"), ".1f"), fmt(get(before, "b3", 2), ".4f"),
                     fmt(splink.get("cpu_seconds"), ".1f"), fmt(get(splink, "b3", 2), ".4f")])
    febrl = data.get("febrl4")
    if febrl:
        rows.append([f"FEBRL 4: {fmt(febrl.get('n_records'), ',')}",
                     fmt(2 * febrl.get("stored_pairs", 0) / max(febrl.get("n_records", 1), 1),
                         ".1f"), DASH,
                     fmt(get(febrl, "gibbs", "cpu_seconds"), ".1f"),
                     fmt(get(febrl, "gibbs", "b3", 2), ".4f"),
                     fmt(get(febrl, "before", "cpu_seconds"), ".1f"),
                     fmt(get(febrl, "before", "b3", 2), ".4f"),
                     fmt(get(febrl, "splink", "cpu_seconds"), ".1f"),
                     fmt(get(febrl, "splink", "b3", 2), ".4f")])
    title = (f"{fmt(get(data, 'settings', 'n_sweeps'))} annealing sweeps of "
             "CorefGibbsClusterer(metric=\"precomputed\"); Splink "
             f"{fmt(get(data, 'settings', 'splink'))}: connected components at match "
             "probability 0.5 (DuckDB, its CPU time over all its threads)")
    return Table(title, ["records", "stored pairs per record", "largest entity",
                         "Gibbs CPU s", "Gibbs B³ F1", "previous sweep CPU s",
                         "previous sweep B³ F1", "Splink CPU s", "Splink B³ F1"], rows)


#: The targets of ``benchmarks/small_data.py`` by the name its rows give them.
SMALL_DATA_TARGETS = {"ess_rate": "min-ESS/s", "whole_fit": "whole fit",
                      "no_warning": "warnings", "means": "means", "sds": "sds"}


def _small_data_targets(row):
    """"all met", or the targets a data set misses (a target not measured is not listed)."""
    targets = row.get("targets") or {}
    missed = [label for key, label in SMALL_DATA_TARGETS.items() if targets.get(key) is False]
    return "missed: " + ", ".join(missed) if missed else ("all met" if targets else DASH)


def _seeds(values, spec):
    """Per-seed values in brackets after a median, when there are several."""
    values = values or []
    return f" [{_span(values, spec)}]" if len(values) > 1 else ""


def _sd_range(record):
    return f"{fmt(record.get('sd_ratio_min'), '.3f')}–{fmt(record.get('sd_ratio_max'), '.3f')}"


def small_data(section="main", experiment="small_data", results=None):
    """The default against NumPyro NUTS on small data (``benchmarks/small_data.py``): one row per
    data set of ``{experiment}.json``, medians over seeds; ``section="details"``: plans, NUTS's
    own numbers and the references."""
    data = load(experiment, results)
    rows = []
    for r in get(data, "results") or []:
        ours = r.get("ours") or {}
        nuts = get(r, "nuts", "vectorized") or {}
        ref = r.get("reference") or {}
        label = [fmt(r.get("data")), f"{fmt(r.get('n'), ',')} × {fmt(r.get('d'))}"]
        if section == "details":
            plans = [json.loads(p) for p in ours.get("plans") or []]
            plan = "; ".join(f"order {fmt(p.get('order'))}, {fmt(p.get('n_exact_rows'))} exact, "
                             f"{fmt(p.get('rows_per_step'), ',.0f')} rows/step" for p in plans)
            rows.append([*label, plan or DASH, fmt(ours.get("fraction_data_touched"), ".3f"),
                         fmt(ours.get("min_ess_tail"), ",.0f"), fmt(ours.get("max_rhat"), ".3f"),
                         fmt(nuts.get("compile_seconds"), ".1f"),
                         fmt(nuts.get("sampling_seconds"), ".1f"),
                         fmt(nuts.get("mean_leapfrog_steps"), ".1f"),
                         fmt(nuts.get("max_rhat"), ".3f"), fmt(nuts.get("max_abs_z"), ".2f"),
                         _sd_range(nuts),
                         f"{fmt(get(ref, 'settings', 'n_draws'), ',')} draws/chain, "
                         f"{fmt(ref.get('seconds'), ',.0f')} s, min ESS "
                         f"{fmt(ref.get('min_ess_bulk'), ',.0f')}"
                         if ref.get("settings") else fmt(ref.get("method"))])
            continue
        warned = ours.get("warning_seeds")
        rows.append([*label, f"{fmt(ours.get('fit_seconds'), '.2f')} "
                     f"({fmt(ours.get('first_fit_seconds'), '.2f')})",
                     fmt(ours.get("min_ess_bulk"), ",.0f"),
                     f"{fmt(nuts.get('seconds'), '.1f')} "
                     f"({fmt(nuts.get('compile_seconds'), '.1f')})",
                     fmt(nuts.get("min_ess_bulk"), ",.0f"),
                     f"{fmt(ours.get('min_ess_per_s'), ',.0f')} / "
                     f"{fmt(nuts.get('min_ess_per_s'), ',.0f')}",
                     fmt(r.get("ess_rate_ratio"), ".2f")
                     + _seeds(r.get("ess_rate_ratio_by_seed"), ".2f"),
                     fmt(r.get("whole_fit_ratio"), ".2f")
                     + _seeds(r.get("whole_fit_ratio_by_seed"), ".2f"),
                     DASH if warned is None else (", ".join(map(str, warned)) or "none"),
                     fmt(ours.get("max_abs_z"), ".2f"),
                     _sd_range(ours),
                     _small_data_targets(r)])
    seeds = ", ".join(map(str, get(data, "seeds") or [])) or DASH
    if section == "details":
        return Table(f"Details (seeds {seeds}): the default's plans, NUTS's own numbers (medians), "
                     "the references",
                     ["data", "N × d", "ours: plan", "ours: data touched / (N × steps)",
                      "ours: min tail ESS", "ours: max R-hat", "NUTS: compile s",
                      "NUTS: s without compile", "NUTS: leapfrog steps / iteration",
                      "NUTS: max R-hat", "NUTS: max |z|", "NUTS: sd ratio", "reference"], rows)
    return Table(f"Medians over seeds {seeds}; 4 chains each (NUTS: 500 warm-up + 1,000 draws; "
                 "ours: its defaults); "
                 "ratios: ours / NUTS of the medians [range of the per-seed ratios]",
                 ["data", "N × d", "ours: fit s after cache (fresh process)", "ours: min ESS",
                  "NUTS: whole s (compile s)", "NUTS: min ESS",
                  "min-ESS/s, ours / NUTS without compile", "min-ESS/s ratio",
                  "whole-fit ratio", "ConvergenceWarning on seeds", "max |z| of means",
                  "sd ratio", "targets"], rows)


def _rates(rates):
    """The move rates of the address blocks, one per block (a single rate in older results)."""
    if isinstance(rates, list):
        return " / ".join(fmt(x, ".3f") for x in rates) or DASH
    return fmt(rates, ".3f")


def er_splink(results=None):
    """Records → Splink → posterior clusters: B³ F1, calibration and wall times of the records
    model beside Splink's clustering at its best threshold and the pairwise CRF."""
    data = load("er_splink", results) or load("er_splink_quick", results)
    rows = []
    for name, r in (data.get("results") or {}).items():
        splink = (r.get("splink_train_seconds") or 0.0) + (r.get("splink_predict_seconds")
                                                          or 0.0)
        rows.append([name, fmt(r.get("n_records"), ","),
                     fmt(get(r, "records_model", "f1"), ".4f"),
                     f"{fmt(r.get('splink_best_f1'), '.4f')} "
                     f"(at {fmt(r.get('splink_best_threshold'))})",
                     fmt(get(r, "pairwise_crf", "f1"), ".4f"),
                     fmt(get(r, "records_model", "recall"), ".4f"),
                     fmt(r.get("ece_records_model"), ".4f"), fmt(r.get("ece_splink"), ".4f"),
                     fmt(r.get("fit_seconds"), ".1f"), fmt(r.get("fit_seconds_threads"), ".1f"),
                     fmt(splink, ".1f"), fmt(r.get("fit_over_splink"), ".2f"),
                     fmt(r.get("adapter_seconds"), ".1f"), _rates(r.get("move_rate"))])
    return Table("CorefGibbsClusterer(metric=\"precomputed\", n_draws=200, random_state=0)"
                 ".fit(pairwise_log_potentials(predictions, ids=ids, linker=linker))",
                 ["record set", "records", "B³ F1 records model", "B³ F1 Splink CC (best)",
                  "B³ F1 pairwise CRF", "recall records model", "ECE records model",
                  "ECE Splink", "fit s", "fit s, --threads", "Splink train + predict s",
                  "fit / Splink",
                  "adapter s", "move rate ρ (per block)"], rows)


def er_splink_1m(section="stages", results=None):
    """The 10⁶-record pipeline: each stage's wall time and memory (``section="stages"``), or
    B³ precision, recall and F1 of the records model and of Splink's connected components
    at each threshold (``"quality"``)."""
    data = load("er_splink_1m", results)
    if section == "quality":
        ours = get(data, "records_model") or {}
        rows = [] if not data else [["records model (labels_)",
                                     *(fmt(ours.get(k), ".4f")
                                       for k in ("precision", "recall", "f1")),
                                     fmt(ours.get("n_clusters"), ",")]]
        for r in (get(data, "splink_cc") or {}).values():
            rows.append([f"Splink CC ≥ {fmt(r.get('threshold'))}",
                         *(fmt(r.get(k), ".4f") for k in ("precision", "recall", "f1")),
                         fmt(r.get("n_clusters"), ",")])
        return Table(f"B³ against the generator's entities, "
                     f"{fmt(get(data, 'n_records'), ',')} records",
                     ["clustering", "precision", "recall", "F1", "clusters"], rows)
    rows = [[name, fmt(r.get("seconds"), ".1f"), fmt(r.get("peak_gib"), ".2f"),
             fmt(r.get("rss_gib"), ".2f")]
            for name, r in (get(data, "stages") or {}).items()]
    return Table(f"{fmt(get(data, 'n_records'), ',')} records, one thread (DuckDB's too); "
                 f"whole pipeline {fmt(get(data, 'pipeline_seconds'), ',.0f')} s, Splink's "
                 f"(training, prediction, clustering at its best threshold) "
                 f"{fmt(get(data, 'splink_pipeline_seconds'), ',.0f')} s: ratio "
                 f"{fmt(get(data, 'pipeline_over_splink'), '.2f')}",
                 ["stage", "seconds", "peak resident GiB so far", "resident GiB after"], rows)


# ----------------------------------------------------------------------------- large data


def _agreement(record, key):
    """Worst |z| of the means and the sd-ratio range of one comparison of a fit."""
    a = record.get(key)
    if not a:
        return [DASH, DASH]
    return [fmt(a.get("max_z_mean"), ".2f"),
            f"{fmt(a.get('sd_ratio_min'), '.3f')}–{fmt(a.get('sd_ratio_max'), '.3f')}"]


def _reads(data):
    """``" (fastest of k: ...)"`` when the run timed several reads of the file."""
    reads = get(data, "raw_reads_seconds")
    if not reads:
        return ""
    return f" (fastest of {len(reads)}: {', '.join(fmt(r, '.2f') for r in reads)} s)"


def out_of_core(n="10000000", results=None):
    """One row per input of ``out_of_core_N{n}.json``: set-up, step time (wall and, where the
    run measured it, CPU), anonymous memory, min-ESS/s and agreement with the in-memory fit and
    with the Laplace approximation."""
    data = load(f"out_of_core_N{n}", results)
    rows = []
    for kind, r in (get(data, "fits") or {}).items():
        step, cpu = r.get("seconds_per_step"), r.get("cpu_seconds_per_step")
        rows.append([kind, fmt(r.get("setup_seconds"), ".1f"),
                     fmt(r.get("setup_over_read"), ".1f"),
                     fmt(None if step is None else 1e6 * step, ".0f"),
                     fmt(None if cpu is None else 1e6 * cpu, ".0f"),
                     fmt(r.get("step_time_ratio_to_memory"), ".2f"),
                     fmt(r.get("setup_over_memmap"), ".2f"), fmt(r.get("step_over_memmap"), ".2f"),
                     fmt(r.get("peak_anon_mb"), ",.0f"), fmt(r.get("fit_anon_mb"), ",.0f"),
                     fmt(r.get("fit_anon_fraction_of_data"), ".1%"),
                     fmt(r.get("min_ess_per_second"), ".1f"),
                     *_agreement(r, "vs_memory"), *_agreement(r, "vs_laplace")])
    return Table(f"N = {fmt(get(data, 'n_rows'), ',')} rows × {fmt(get(data, 'n_features'))} "
                 f"float32 ({fmt(get(data, 'data_mb'), ',.0f')} MB); one read of the file: "
                 f"{fmt(get(data, 'raw_read_seconds'), '.2f')} s{_reads(data)}",
                 ["input", "set-up s", "set-up / read", "µs / step", "CPU µs / step",
                  "step / in-memory", "set-up / memory map", "step / memory map",
                  "peak anon MB", "fit's anon MB", "fit's anon / data", "min-ESS/s",
                  "max |z| means vs in-memory", "sd ratio vs in-memory",
                  "max |z| means vs Laplace", "sd ratio vs Laplace"], rows)


#: Generators by the name a page uses.
TABLES = {f.__name__: f for f in (
    racing_errors, racing_speedup, racing_guard, racing_guard_paper, racing_guard_arch,
    racing_auto, arch_series, arch_correctness, arch_speed, arch_agreement,
    arch_nasdaq, coref_febrl, coref_febrl_saving, coref_synthetic, coref_errors, coref_auto,
    coref_scale, gmm_methods, gmm_t1, logistic_peers, logistic_real_data, logistic_grid,
    small_data, tree_timing, astar_mixture, astar_counter, astar_clutter, astar_logistic,
    astar_estimator, barker_correction_shipped, out_of_core, er_splink, er_splink_1m)}
