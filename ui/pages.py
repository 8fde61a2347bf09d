"""The app's pages, listed once: app.py's menu, the "Why attention?" page's links, the server's
warm-up, the benchmarks and the tests all read `PAGES`.

A page has one id, its `url_path` with "-" written "_" (`scaled-dot-product` ->
`scaled_dot_product`): its package `ui/<id>/`, its `PageState(<id>)`, its tests
`tests/test_page_<id>.py` and `tests/e2e/test_<id>.py`, its benchmark `bench/bench_page_<id>.py`.
The `url_path` is the page's address in a link (`/scaled-dot-product?causal=1`): it never changes
once published, and never equals a file's stem, so that a deep link reaches the router and not a
bare page file (Streamlit's legacy `pages/` lookup matches file stems). Adding a page: README.md,
"Adding a page".
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class PageRecord:
    """One page: where it lives, how the menu names it, and the line that invites a reader in.

    `label` is how the "Why attention?" page links to it (the title when empty); `default` marks
    the page the app opens on; `quiz` is the prefix of its predict-then-reveal questions' ids in
    a teacher's link (`?quiz=sdpa.winner`), older than the page ids and kept for those links.
    """

    path: str
    title: str
    icon: str
    url_path: str
    section: str
    help: str
    label: str = ""
    default: bool = False
    quiz: str = ""

    @property
    def link_label(self) -> str:
        return self.label or self.title

    @property
    def id(self) -> str:
        """The page's one name in the code: its URL path with "-" written "_"."""
        return self.url_path.replace("-", "_")

    @property
    def package(self) -> str:
        """The page's own package of views: `ui.<id>`."""
        return f"ui.{self.id}"


PAGES: tuple[PageRecord, ...] = (
    PageRecord(
        "pages/why_attention.py",
        "Why attention?",
        ":material/lightbulb:",
        "why",
        "Start",
        "Why a token should look at every other token, and what that costs.",
        default=True,
    ),
    PageRecord(
        "pages/sdpa_steps.py",
        "Scaled dot-product attention",
        ":material/calculate:",
        "scaled-dot-product",
        "The mechanism",
        "Type Q, K and V and watch every step of the formula.",
        label="Scaled dot-product attention, step by step",
        quiz="sdpa",
    ),
    PageRecord(
        "pages/masking_lab.py",
        "Masking lab",
        ":material/visibility_off:",
        "masking",
        "The mechanism",
        "Causal, padding, sliding-window and custom masks, and why −∞.",
        label="The masking lab",
        quiz="mask",
    ),
    PageRecord(
        "pages/multi_head.py",
        "Multi-head attention",
        ":material/view_column:",
        "multi-head",
        "The mechanism",
        "Projections, the split into heads, concatenation and W_O.",
        label="Multi-head attention, head by head",
        quiz="mha",
    ),
    PageRecord(
        "pages/watch_attention_learn.py",
        "Watch attention learn",
        ":material/model_training:",
        "learning",
        "The mechanism",
        "Train a small attention-only model here and watch an induction head form.",
        quiz="learning",
    ),
    PageRecord(
        "pages/positional_encoding.py",
        "Positional encoding",
        ":material/waves:",
        "positional",
        "The mechanism",
        "Why attention ignores order, and sinusoids, RoPE and ALiBi.",
        quiz="pe",
    ),
    PageRecord(
        "pages/real_model.py",
        "A real pretrained model",
        ":material/smart_toy:",
        "pretrained",
        "In practice",
        "Every layer and head of MiniLM, computed by this app's own code.",
        quiz="bert",
    ),
    PageRecord(
        "pages/probe_model.py",
        "Probe a real model",
        ":material/science:",
        "probe",
        "In practice",
        "Attention rollout, queries and keys in one map, and what-if token ablation.",
    ),
    PageRecord(
        "pages/decoder_llm.py",
        "A decoder LLM",
        ":material/forum:",
        "decoder",
        "In practice",
        "A small chat model's causal attention, KV cache and next token, computed here.",
    ),
    PageRecord(
        "pages/what_heads_do.py",
        "What heads do",
        ":material/psychology:",
        "heads",
        "In practice",
        "The logit lens, who writes the answer, induction heads found by probes, and why "
        "attention is not explanation.",
        quiz="heads",
    ),
    PageRecord(
        "pages/why_a_head_attends.py",
        "Why a head attends there",
        ":material/manage_search:",
        "attends",
        "In practice",
        "Every score split into the parts that made it: which earlier head, MLP or embedding "
        "made a key attractive, and which RoPE frequencies.",
        quiz="attends",
    ),
    PageRecord(
        "pages/carries_the_answer.py",
        "What carries the answer",
        ":material/swap_horiz:",
        "patching",
        "In practice",
        "Activation patching: put one activation of a clean run into a corrupted one, and see "
        "which layers, tokens and heads carry the answer.",
        quiz="patching",
    ),
    PageRecord(
        "pages/long_context.py",
        "Long context and the KV cache",
        ":material/straighten:",
        "long-context",
        "In practice",
        "What a sliding window costs, what attention sinks give back, and the KV cache's bytes.",
    ),
    PageRecord(
        "pages/attention_cost.py",
        "The cost of attention",
        ":material/timer:",
        "cost",
        "In practice",
        "n² in time and memory, measured here, and the flash-attention idea.",
    ),
)


def sections() -> dict[str, list[PageRecord]]:
    """The pages by section, in the order they are listed (the menu's headings)."""
    grouped: dict[str, list[PageRecord]] = {}
    for record in PAGES:
        grouped.setdefault(record.section, []).append(record)
    return grouped


def page_modules(records: Sequence[PageRecord] | None = None) -> list[str]:
    """The modules of the pages' own packages (`ui.<id>.*`), for the server's warm-up."""
    names = []
    for record in PAGES if records is None else records:
        package = importlib.import_module(record.package)
        names.append(package.__name__)
        names += [f"{package.__name__}.{module.name}"
                  for module in pkgutil.iter_modules(package.__path__)]  # fmt: skip
    return names
