"""Rerun time after each learner feature's interaction (issue 19), against the page's own rerun.

The learner features share the pages' caches and fragments, so a rerun after using one should
cost what a rerun of that page costs anyway. For each feature this opens its page by the deep
link a teacher would share, in Streamlit's AppTest, then times full reruns (wall clock): first
the page's plain control (`baseline`), then the feature's own control, each value visited in
turn and round again, so the first round builds results and figures (`cold`) and later rounds
find them cached (`warm`). AppTest reruns the whole script, so these are upper bounds for the
fragment reruns a browser makes. Prints JSON: p50/p95/max in milliseconds.

    .venv/bin/python bench/bench_learner.py [--rounds 3] [--features quiz compare]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.timing import only_what_viewers_ask_for, summary  # noqa: E402

SENTENCE = "The animal didn't cross the street because it was too tired"


def set_to(kind: str, key: str) -> Callable[[AppTest, object], object]:
    return lambda at, value: getattr(at, kind)(key=key).set_value(value)


def predict(qid: str) -> Callable[[AppTest, object], object]:
    """Choose option `value` of question `qid` and lock it in (the rerun timed is the lock's)."""

    def act(at: AppTest, value: object) -> object:
        radios = [w for w in at.radio if (w.key or "").startswith(f"quiz.{qid}.choice")]
        if radios:
            radios[0].set_value(value).run()
            return at.button(key=f"quiz.{qid}.lock").click()
        return at.button(key=f"quiz.{qid}.again").click()  # locked: predict again

    return act


# feature: (page, link, (name, action, values) for the page's plain control, then the feature's)
FEATURES = {
    "real_head_in_editor": (
        "pages/sdpa_steps.py",
        {"source": "bert", "text": SENTENCE, "layer": "4", "head": "2"},
        ("temperature", set_to("slider", "scaled_dot_product.tau"), [0.5, 1.0, 2.0]),
        ("causal", set_to("toggle", "scaled_dot_product.causal"), [True, False]),
    ),
    "token_ablation_encoder": (
        "pages/probe_model.py",
        {},
        ("head", set_to("select_slider", "probe.head"), [1, 4, 8, 12]),
        ("ablated_token", set_to("selectbox", "probe.ablate"), [2, 5, 9, 13]),
    ),
    "head_ablation_encoder": (
        "pages/probe_model.py",
        {"mode": "head"},
        ("head", set_to("select_slider", "probe.head"), [1, 4, 8, 12]),
        ("cut_head", set_to("selectbox", "probe.cut_head"), [1, 4, 8, 12]),
    ),
    "next_token_ablation_decoder": (
        "pages/decoder_llm.py",
        {"whatif": "1"},
        ("head", set_to("select_slider", "decoder.head"), [1, 3, 5, 9]),
        ("what_token", set_to("selectbox", "decoder.what_token"), [1, 2, 3, 4]),
    ),
    "rollout": (
        "pages/probe_model.py",
        {},
        ("head", set_to("select_slider", "probe.head"), [1, 4, 8, 12]),
        ("rollout_token", set_to("selectbox", "probe.token"), [1, 5, 9, 13]),
    ),
    "compare_two_views": (
        "pages/multi_head.py",
        {"cmp": "1"},
        ("seed", set_to("number_input", "multi_head.seed"), [1, 2, 3]),
        ("head_b", set_to("selectbox", "multi_head.cmp_b"), [2, 3, 4, 1]),
    ),
    "predict_then_reveal": (
        "pages/sdpa_steps.py",
        {"quiz": "sdpa.winner"},
        ("temperature", set_to("slider", "scaled_dot_product.tau"), [0.5, 1.0, 2.0]),
        ("lock_in_or_again", predict("sdpa.winner"), [0, 0, 1, 1]),
    ),
    "joint_query_key_map": (
        "pages/probe_model.py",
        {},
        ("rollout_token", set_to("selectbox", "probe.token"), [1, 5, 9, 13]),
        ("head", set_to("select_slider", "probe.head"), [2, 6, 10, 11]),
    ),
}


def timed_reruns(at: AppTest, action, values: list, rounds: int) -> dict:
    cold, warm = [], []
    for round_ in range(rounds):
        for value in values:
            widget = action(at, value)
            started = time.perf_counter()
            widget.run()
            (cold if round_ == 0 else warm).append((time.perf_counter() - started) * 1000)
            if at.exception:
                sys.exit(f"the page raised: {[e.value for e in at.exception]}")
    return {"cold": summary(cold), **({"warm": summary(warm)} if warm else {})}


def measure(page: str, link: dict, controls: tuple, rounds: int) -> dict:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300).run()
    for name, value in link.items():
        at.query_params[name] = value
    started = time.perf_counter()
    at.switch_page(page).run()
    first_ms = (time.perf_counter() - started) * 1000
    if at.exception or at.error:
        sys.exit(f"{page} failed: {[e.value for e in [*at.exception, *at.error]]}")
    report = {"page": page, "link": link, "first_run_ms": round(first_ms, 1)}
    for role, (name, action, values) in zip(("baseline", "feature"), controls, strict=True):
        report[role] = {"control": name, **timed_reruns(at, action, values, rounds)}
    return report


def main() -> None:
    only_what_viewers_ask_for()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--features", nargs="*", help="features to time (default: all)")
    args = parser.parse_args()
    chosen = args.features or list(FEATURES)
    results = {}
    for feature in chosen:
        page, link, *controls = FEATURES[feature]
        results[feature] = measure(page, link, tuple(controls), args.rounds)
        print(feature, json.dumps(results[feature]), file=sys.stderr)
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
