"""TPF and AUP (leaderboards/aup.py) against numbers worked by hand, the spec's worked check, and the
official outputs.

aup_official.json holds what d3LLM's own ``get_aup`` and ``weight_function`` returned
(hao-ai-lab/d3LLM@e5bfcaccb775ee75759c24ccc9a28218b8372b34, AUP_leaderboard/aup_utils.py), run once
outside this repository with the defaults (alpha 3, offset 5) on every published curve of
AUP_leaderboard/data_llada.yaml, data_dream.yaml and data_dream_coder.yaml (77 curves, 126 points;
y_max per task as AUP_leaderboard/main.py computes it: the best accuracy of every method, EAGLE-3
included), and on nine hand-made probe curves for the branches no published curve reaches (a dropped
middle point, tied TPFs, the failed assertion, recorded as aup null). No third-party code is in the repo.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from dare.leaderboards.aup import ALPHA, OFFSET, AupUndefined, aup, tokens_per_forward, weight

OFFICIAL = json.loads((Path(__file__).parent / "aup_official.json").read_text())


def test_the_fixture_names_its_source_and_covers_every_published_curve():
    source = OFFICIAL["source"]
    assert (source["repo"], source["commit"], source["file"]) == (
        "hao-ai-lab/d3LLM", "e5bfcaccb775ee75759c24ccc9a28218b8372b34", "AUP_leaderboard/aup_utils.py")
    assert source["functions"] == ["get_aup", "weight_function"]
    assert source["defaults"] == {"alpha": ALPHA, "y_min_offset": OFFSET}
    assert len(OFFICIAL["published"]) == 77 and sum(len(c["rho"]) for c in OFFICIAL["published"]) == 126
    assert {c["file"] for c in OFFICIAL["published"]} == set(source["data_files"])


@pytest.mark.parametrize("curve", OFFICIAL["published"], ids=lambda c: f"{c['file'][16:]}:{c['task']}:{c['method']}")
def test_every_published_curve_gets_the_official_aup(curve):
    assert aup(curve["rho"], curve["y"], curve["y_max"]) == pytest.approx(curve["aup"], rel=1e-12, abs=1e-12)


@pytest.mark.parametrize("probe", OFFICIAL["probes"], ids=lambda p: p["name"])
def test_every_probe_curve_matches_the_official_value_or_its_assertion(probe):
    if probe["aup"] is None:  # the official asserts; DARE raises its typed error on the same curves
        assert probe["error"].startswith("AssertionError: Accuracy degradation is too large")
        with pytest.raises(AupUndefined, match="more than 5 points below"):
            aup(probe["rho"], probe["y"], probe["y_max"])
    else:
        assert aup(probe["rho"], probe["y"], probe["y_max"]) == pytest.approx(probe["aup"], rel=1e-12)


def test_the_weight_function_matches_the_official_one():
    for entry in OFFICIAL["weights"]:
        assert weight(entry["y"], entry["y_max"], entry["alpha"]) == pytest.approx(entry["w"], rel=1e-12)


def test_the_spec_s_worked_check_on_gsm8k_cot():
    # data_llada.yaml, GSM8K-CoT, y_max 74.98 (D2F). W(74.02) = exp(-3 (1 - 74.02/74.98)) = 0.962318,
    # W(73.09) = exp(-3 (1 - 73.09/74.98)) = 0.927168: d3LLM-LLaDA = 1.0 x 74.02
    # + 0.5 (9.11 - 1.0)(73.09 x 0.927168 + 74.02 x 0.962318) = 74.02 + 4.055 x 138.9975 = 637.655.
    assert aup([1.0, 9.11], [74.02, 73.09], 74.98) == pytest.approx(637.65, abs=0.01)
    # W(74.79) = 0.992427, W(74.68) = 0.988069: 74.79 + 0.885 (73.7889 + 74.2240) = 205.781.
    assert aup([1.0, 2.77], [74.79, 74.68], 74.98) == pytest.approx(205.78, abs=0.01)
    # W(74.0) = 0.961548, W(72.63) = 0.910260: 74.0 + 2.07 (66.1122 + 71.1546) = 358.142.
    assert aup([1.0, 5.14], [74.0, 72.63], 74.98) == pytest.approx(358.14, abs=0.01)
    assert aup([1.0], [74.1], 74.98) == 74.1  # Qwen, one point at TPF 1: its accuracy


def test_hand_worked_curves():
    # One point: the unweighted rectangle 2.5 x 60 = 150.
    assert aup([2.5], [60.0], 90.0) == 150.0
    # Both points at y_max, so W = 1: 1 x 80 + 0.5 (3 - 1)(80 + 80) = 80 + 160 = 240.
    assert aup([1.0, 3.0], [80.0, 80.0], 80.0) == 240.0
    # Unsorted input is sorted by TPF first: (1, 80), (3, 80), (5, 80) gives 80 + 160 + 160 = 400.
    assert aup([5.0, 1.0, 3.0], [80.0, 80.0, 80.0], 80.0) == 400.0
    # A middle point 10 below y1 = 80 is dropped (kept: y >= 75); W(78) = exp(-3 x 0.025) = 0.927743:
    # 80 + 0.5 (3 - 1)(78 x 0.927743 + 80) = 80 + 72.3640 + 80 = 232.3640.
    assert aup([1.0, 2.0, 3.0], [80.0, 70.0, 78.0], 80.0) == pytest.approx(232.3640, abs=1e-4)


def test_the_quality_weight_is_applied_to_every_trapezoid():
    # W(76) at y_max 80 = exp(-3 x 0.05) = 0.860708; 80 + 0.5 (3 - 1)(76 x 0.860708 + 80) = 225.4138.
    # Without W it would be 80 + 76 + 80 = 236.
    assert aup([1.0, 3.0], [80.0, 76.0], 80.0) == pytest.approx(225.4138, abs=1e-4)


def test_the_first_rectangle_is_not_weighted():
    # 2 x 76 = 152 unweighted, then 0.5 (4 - 2)(76 x 0.860708 x 2) = 130.8276: 282.8276.
    # Weighting the first rectangle too would give 130.8276 + 130.8276 = 261.6552.
    assert aup([2.0, 4.0], [76.0, 76.0], 80.0) == pytest.approx(282.8276, abs=1e-4)


def test_a_curve_whose_last_point_falls_more_than_5_points_is_undefined_not_a_crash():
    with pytest.raises(AupUndefined, match=r"70.00%.*more than 5 points below.*80.00%"):
        aup([1.0, 5.0], [80.0, 70.0], 80.0)
    assert aup([1.0, 5.0], [80.0, 75.0], 80.0) > 0  # exactly 5 below is still defined
    # Tied TPFs keep their input order (a stable sort on TPF alone, as the official): the last is 74 here.
    with pytest.raises(AupUndefined):
        aup([1.0, 3.0, 3.0], [80.0, 76.0, 74.0], 80.0)


def test_malformed_curves_are_value_errors():
    for rho, y in (([], []), ([1.0], [1.0, 2.0]), ([0.0, 1.0], [5.0, 5.0]), ([math.nan], [5.0])):
        with pytest.raises(ValueError):
            aup(rho, y, 80.0)
    with pytest.raises(AupUndefined, match="y_max"):  # every run at 0%: W divides by zero
        aup([1.0, 2.0], [0.0, 0.0], 0.0)
    assert aup([2.0], [0.0], 0.0) == 0.0  # one point needs no W


def test_tokens_per_forward_counts_the_canvas_over_dare_s_nfe():
    # 10 generations on a 64-token canvas in 160 forwards: 640 / 160 = 4 tokens per forward.
    assert tokens_per_forward(10, 64, 160) == 4.0
    assert tokens_per_forward(10, 64, 640) == 1.0  # one token per step
    assert tokens_per_forward(10, 64, 0) is None and tokens_per_forward(0, 64, 5) is None
