"""The acceptance-ceiling table, computed from the code at build time.

``{acceptance-ceiling-table}`` (no arguments, no content) renders one row per
member of `specaccept.AcceptanceRule`, plus the ceiling itself, with columns
rule id | lossless | proved in | acceptance probability | one value per example.
Every value is `specaccept.acceptance_probability` evaluated on the example
while the page is built; the ceiling row is ``1 - total_variation`` of
`specaccept.acceptance_closed_forms`. No number of the table is typed by hand.

`RULE_FACTS` is the single source of what the site says about each rule:
whether it is lossless, the proof pages that prove it, and which closed form its
acceptance probability is. At every build (``builder-inited``) a warning of type
``specaccept.ceiling`` is emitted, which ``-W`` turns into a failure, if a member of
the enum has no entry or an entry names no member, and if `acceptance_probability`
disagrees with the closed form an entry names, so a new rule, or a rule whose
probability changes, cannot leave the table silently stale.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

import mlx.core as mx
from docutils import nodes
from sphinx import addnodes
from sphinx.application import Sphinx
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective

from specaccept import (
    AcceptanceRule,
    ClosedForms,
    acceptance_closed_forms,
    acceptance_probability,
    verify_blockwise,
)

logger = logging.getLogger(__name__)

Form = Callable[[mx.array, mx.array, ClosedForms], mx.array]


def _sum_min(p: mx.array, q: mx.array, forms: ClosedForms) -> mx.array:
    return forms.sum_min


def _sum_prod(p: mx.array, q: mx.array, forms: ClosedForms) -> mx.array:
    return forms.sum_prod


def _q_at_argmax_p(p: mx.array, q: mx.array, forms: ClosedForms) -> mx.array:
    return q[mx.argmax(p)]


@dataclass(frozen=True)
class RuleFacts:
    """What the site states about one rule."""

    lossless: str
    """The verdict, in words."""
    proofs: tuple[tuple[str, str], ...]
    """(docname, label) of each proof page that proves the verdict."""
    formula: str
    """The acceptance probability, LaTeX."""
    closed_form: Form
    """The same probability from `acceptance_closed_forms`, checked against the code."""
    lossless_on_tempered_p: bool
    """Whether the verdict holds for a p that is not one-hot (every example here)."""


RULE_FACTS: dict[AcceptanceRule, RuleFacts] = {
    AcceptanceRule.GREEDY_ARGMAX: RuleFacts(
        lossless="only for a greedy target (one-hot p); on a tempered p it is "
        "argmax-against-argmax, which is biased",
        proofs=(("proofs/sampler_match", "lemma 2"), ("proofs/argmax_bias", "lemma 4")),
        formula=r"q(\arg\max p)",
        closed_form=_q_at_argmax_p,
        lossless_on_tempered_p=False,
    ),
    AcceptanceRule.SAMPLER_MATCH: RuleFacts(
        lossless="yes",
        proofs=(("proofs/sampler_match", "lemma 2"),),
        formula=r"\sum_x p(x)\,q(x)",
        closed_form=_sum_prod,
        lossless_on_tempered_p=True,
    ),
    AcceptanceRule.STOCHASTIC: RuleFacts(
        lossless="yes, and it attains the ceiling",
        proofs=(("proofs/single_position", "lemma 1"), ("proofs/ceiling", "lemma 3")),
        formula=r"\sum_x \min(p(x), q(x))",
        closed_form=_sum_min,
        lossless_on_tempered_p=True,
    ),
    AcceptanceRule.SAMPLER_MATCH_NO_PROPOSAL_DISTRIBUTION: RuleFacts(
        lossless="yes (sampler-match; it never reads q)",
        proofs=(("proofs/sampler_match", "lemma 2"), ("proofs/greedy_drafter", "lemma 5")),
        formula=r"\sum_x p(x)\,q(x)",
        closed_form=_sum_prod,
        lossless_on_tempered_p=True,
    ),
    AcceptanceRule.BLOCK: RuleFacts(
        lossless="yes; one draft is the stochastic rule, and over a round it keeps at "
        "least as many drafts",
        proofs=(("proofs/block_verification", "lemma 9"),),
        formula=r"\sum_x \min(p(x), q(x)) \text{ (one draft)}",
        closed_form=_sum_min,
        lossless_on_tempered_p=True,
    ),
}
"""Per rule: lossless or not, proved where, and its acceptance probability."""

CEILING_PROOFS = (("proofs/ceiling", "lemma 3"),)


@dataclass(frozen=True)
class Example:
    """A (p, q) pair the table evaluates every rule on."""

    label: str
    p: tuple[float, ...]
    q: tuple[float, ...]
    source: str


EXAMPLES = (
    Example(
        "dyadic", (0.5, 0.25, 0.25), (0.25, 0.5, 0.25),
        "a worked example float32 holds exactly, so its values are exact",
    ),
    Example(
        "PR #902, 2 tokens", (0.3, 0.7), (0.95, 0.05),
        "the PR's p(a) = 0.3, q(a) = 0.95 on a 2-token vocabulary; token a is then not the "
        "target's argmax",
    ),
    Example(
        "lemma 4, 4 tokens", (0.3, 0.25, 0.25, 0.2), (0.95, 0.05, 0.0, 0.0),
        "the same p(a) and q(a) with a the target's argmax, as the PR's argument needs; "
        "lemma 4's pair",
    ),
)


def rule_facts_problems() -> list[str]:
    """Why RULE_FACTS does not cover the enum exactly or disagrees with the code; empty: ok."""
    problems = [
        f"AcceptanceRule.{r.name} ({r.value!r}) has no entry in RULE_FACTS: say whether it "
        "is lossless, where that is proved, and its acceptance probability"
        for r in AcceptanceRule if r not in RULE_FACTS
    ]
    problems += [
        f"RULE_FACTS has an entry for {r!r}, which is not an AcceptanceRule"
        for r in RULE_FACTS if not isinstance(r, AcceptanceRule)
    ]
    for example in EXAMPLES:
        p, q = mx.array(example.p), mx.array(example.q)
        forms = acceptance_closed_forms(p, q)
        for rule, facts in RULE_FACTS.items():
            if not isinstance(rule, AcceptanceRule):
                continue
            got = acceptance_probability(rule, p, q).item()
            expected = facts.closed_form(p, q, forms).item()
            if got != expected:
                problems.append(
                    f"acceptance_probability({rule.value}) is {got} on the {example.label!r} "
                    f"example, but RULE_FACTS says {facts.formula} = {expected}: update "
                    "RULE_FACTS together with the rule"
                )
    return problems


def _number(value: float) -> str:
    return f"{value:.6g}"


def _paragraph(*children: nodes.Node) -> nodes.paragraph:
    paragraph = nodes.paragraph()
    paragraph.extend(children)
    return paragraph


class AcceptanceCeilingTable(SphinxDirective):
    """Render the examples and the table."""

    has_content = False
    required_arguments = 0
    optional_arguments = 0

    def _doc_link(self, docname: str, label: str) -> addnodes.pending_xref:
        xref = addnodes.pending_xref(
            "", refdomain="std", reftype="doc", reftarget=f"/{docname}",
            refexplicit=True, refwarn=True, refdoc=self.env.docname,
        )
        xref += nodes.inline(label, label, classes=["xref", "std", "std-doc"])
        return cast(addnodes.pending_xref, xref)

    def _links(self, proofs: tuple[tuple[str, str], ...]) -> nodes.paragraph:
        paragraph = nodes.paragraph()
        for index, (docname, label) in enumerate(proofs):
            if index:
                paragraph += nodes.Text(", ")
            paragraph += self._doc_link(docname, label)
        return paragraph

    def _examples(self) -> nodes.bullet_list:
        items = nodes.bullet_list()
        for example in EXAMPLES:
            p = ", ".join(_number(v) for v in example.p)
            q = ", ".join(_number(v) for v in example.q)
            items += nodes.list_item(
                "",
                _paragraph(
                    nodes.strong(text=example.label), nodes.Text(": "),
                    nodes.math(text=f"p = ({p}),\\ q = ({q})"),
                    nodes.Text(f"; {example.source}."),
                ),
            )
        return items

    def _table(self) -> nodes.table:
        headers = ["rule id", "lossless", "proved in", "acceptance probability"]
        headers += [example.label for example in EXAMPLES]
        widths = [18, 22, 12, 16] + [10] * len(EXAMPLES)
        table = nodes.table(classes=["acceptance-ceiling"])
        group = nodes.tgroup(cols=len(headers))
        table += group
        for width in widths:
            group += nodes.colspec(colwidth=width)
        head = nodes.thead()
        group += head
        head += nodes.row("", *[nodes.entry("", _paragraph(nodes.Text(h))) for h in headers])
        body = nodes.tbody()
        group += body

        pairs = [(mx.array(e.p), mx.array(e.q)) for e in EXAMPLES]
        ceilings = [
            1.0 - cast(float, acceptance_closed_forms(p, q).total_variation.item())
            for p, q in pairs
        ]
        for rule in AcceptanceRule:
            facts = RULE_FACTS.get(rule)
            if facts is None:  # reported by _check, which fails the build under -W
                continue
            cells: list[nodes.Node] = [
                _paragraph(nodes.literal(text=rule.value)),
                _paragraph(nodes.Text(facts.lossless)),
                self._links(facts.proofs),
                _paragraph(nodes.math(text=facts.formula)),
            ]
            for (p, q), ceiling in zip(pairs, ceilings, strict=True):
                value = cast(float, acceptance_probability(rule, p, q).item())
                text = _number(value)
                if not facts.lossless_on_tempered_p:
                    text += " (biased here)"
                if value > ceiling:
                    text += ", above the ceiling"
                cells.append(_paragraph(nodes.Text(text)))
            body += nodes.row("", *[nodes.entry("", cell) for cell in cells])
        ceiling_cells: list[nodes.Node] = [
            _paragraph(nodes.emphasis(text="the ceiling: any lossless rule")),
            _paragraph(nodes.Text("the most a lossless rule can accept")),
            self._links(CEILING_PROOFS),
            _paragraph(nodes.math(text=r"1 - \mathrm{TV}(p, q) = \sum_x \min(p(x), q(x))")),
        ]
        ceiling_cells += [_paragraph(nodes.Text(_number(c))) for c in ceilings]
        body += nodes.row("", *[nodes.entry("", cell) for cell in ceiling_cells])
        return table

    def run(self) -> list[nodes.Node]:
        return [self._examples(), self._table()]


@dataclass(frozen=True)
class BlockExample:
    """A context-free pair on which a round of k drafts is computed both ways."""

    label: str
    p: tuple[float, ...]
    q: tuple[float, ...]
    k: int
    source: str


BLOCK_EXAMPLES = (
    BlockExample("dyadic", (0.25, 0.75), (0.5, 0.5), 2,
                 "the example of the verify_blockwise page; float32 holds every value"),
    BlockExample("Sun et al.", (1 / 3, 2 / 3), (2 / 3, 1 / 3), 2,
                 "the paper's motivating example, where 10/9 and 11/9 are exact"),
    BlockExample("dyadic, k = 4", (0.25, 0.75), (0.5, 0.5), 4, "the first pair, four drafts"),
)


def mean_kept_jointly(p: mx.array, q: mx.array, k: int) -> float:
    """E[tau] of block verification: every draft sequence x (probability q(x)) weighted by
    the mean of the library's `accepted_length_law` for it."""
    vocab = p.shape[0]
    drafts = mx.array(list(itertools.product(range(vocab), repeat=k)), dtype=mx.int32)
    n = drafts.shape[0]
    target = mx.broadcast_to(p, (n, k + 1, vocab))
    draft = mx.broadcast_to(q, (n, k, vocab))
    uniforms = mx.zeros((n, k + 1, 2))

    def law(tp: mx.array, dp: mx.array, ids: mx.array, u: mx.array) -> mx.array:
        return verify_blockwise(tp, dp, ids, u).accepted_length_law

    laws = mx.vmap(law)(target, draft, drafts, uniforms)
    weights = mx.prod(q[drafts], axis=-1)
    lengths = mx.arange(k + 1, dtype=mx.float32)
    return cast(float, (weights * (laws * lengths).sum(axis=-1)).sum().item())


def mean_kept_token_by_token(p: mx.array, q: mx.array, k: int) -> float:
    """E[a] of the stochastic rule on a context-free pair: sum over i of alpha^i."""
    alpha = cast(float, acceptance_probability(AcceptanceRule.STOCHASTIC, p, q).item())
    return sum(alpha**i for i in range(1, k + 1))


class BlockVerificationExample(SphinxDirective):
    """Per-position ceiling against block-level optimality, computed from the code."""

    has_content = False
    required_arguments = 0
    optional_arguments = 0

    def run(self) -> list[nodes.Node]:
        headers = ["example", "p", "q", "k", "ceiling per position", "stochastic E[kept]",
                   "block E[kept]", "block / stochastic"]
        table = nodes.table(classes=["block-verification-example"])
        group = nodes.tgroup(cols=len(headers))
        table += group
        for width in (14, 14, 14, 4, 12, 12, 12, 10):
            group += nodes.colspec(colwidth=width)
        head = nodes.thead()
        group += head
        head += nodes.row("", *[nodes.entry("", _paragraph(nodes.Text(h))) for h in headers])
        body = nodes.tbody()
        group += body
        items = nodes.bullet_list()
        for example in BLOCK_EXAMPLES:
            p, q = mx.array(example.p), mx.array(example.q)
            ceiling = cast(float, acceptance_closed_forms(p, q).sum_min.item())
            token = mean_kept_token_by_token(p, q, example.k)
            block = mean_kept_jointly(p, q, example.k)
            cells = [example.label, ", ".join(_number(v) for v in example.p),
                     ", ".join(_number(v) for v in example.q), str(example.k),
                     _number(ceiling), _number(token), _number(block), _number(block / token)]
            body += nodes.row("", *[nodes.entry("", _paragraph(nodes.Text(c))) for c in cells])
            items += nodes.list_item("", _paragraph(
                nodes.strong(text=example.label), nodes.Text(f": {example.source}.")))
        return [items, table]


def block_example_problems() -> list[str]:
    """Where the worked example would contradict lemma 9 (never fewer kept drafts)."""
    problems = []
    for example in BLOCK_EXAMPLES:
        p, q = mx.array(example.p), mx.array(example.q)
        token = mean_kept_token_by_token(p, q, example.k)
        block = mean_kept_jointly(p, q, example.k)
        if block < token - 1e-6:
            problems.append(f"block verification keeps {block} < stochastic {token} drafts on "
                            f"the {example.label!r} example, against lemma 9")
    return problems


def _check(app: Sphinx) -> None:
    for problem in rule_facts_problems() + block_example_problems():
        logger.warning(
            f"docs/_ext/ceiling_table.py: {problem}", type="specaccept", subtype="ceiling"
        )


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_directive("acceptance-ceiling-table", AcceptanceCeilingTable)
    app.add_directive("block-verification-example", BlockVerificationExample)
    app.connect("builder-inited", _check)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
