"""The MT report's sections, each described once — title, note, what it shows — and rendered by both
``report.md`` and ``report.html`` (``render_markdown``, ``render_html``).

A section is a title, an optional note (both formats) or HTML note (markup: formulas), and blocks: a table
(a key of ``tables.tables``), a figure (HTML only), a sub-heading, a JSON block, or HTML-only content (example
sentences, the per-language cards). ``sections(summary, table_map)`` lists the sections a summary has, in report order: a reviewer's — the variants,
the Findings, the who-pays figures, then the detailed tables; the per-pair tables last, folded in HTML; a contents
list at the top of both formats.
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass, field

from forgetbench.eval.summary import Summary

BOTH, HTML_ONLY = ("md", "html"), ("html",)
MOST_AFFECTED = 5  # pairs per variant in the cross-method table


@dataclass(frozen=True)
class Block:
    kind: str  # table | figure | heading | json | raw
    key: str = ""  # table or figure key; heading text; raw HTML
    formats: tuple = BOTH
    css: str = ""  # table class (HTML)


@dataclass(frozen=True)
class Section:
    title: str
    blocks: list[Block] = field(default_factory=list)
    note: str = ""  # a paragraph under the title, in both formats (plain text)
    html_note: str = ""  # a paragraph in HTML only (trusted markup written here, never model text)
    formats: tuple = BOTH
    folded: bool = False  # HTML: the blocks inside <details>, opened by a click (long per-pair tables)


DEPLOY_NOTE = ("Deployable form: CTranslate2 int8 (per-row int8 weights, int8 GEMMs with dynamic activation scales) for "
               "dense and pruned models; CTranslate2 stores a pruned model's zeros densely, so pruning saves no disk or "
               "time in this form (the sparse artefact's size is in the variants table: no fast backend executes it). A "
               "fake-quantised PTQ variant's form is its int8 artefact (static scales), which no runtime here executes: "
               "its size is given, its speed is not (the torch emulation is no deployment speed; its decode cost against "
               "the base's torch loop is measured by benchmarks/backends.py). Speed-ups: each variant timed in rounds "
               "interleaved with the base on the same sentences, the geometric mean of base/variant seconds with its "
               "95 % bootstrap interval over rounds; an interval covering 1 is no measurable difference. A model that "
               "writes shorter outputs is faster per sentence, not per token. int8 speed depends on the CPU's "
               "AVX-512/VNNI/AMX (flags in the last column).")
PARITY_NOTE = ("The same base model translated by two backends, on the same sentences: a difference here is the "
               "backend's (numerics, int8 compute), not forgetting. Every variant is compared with the base of its own "
               "backend (column <i>compared with</i>). Intervals: paired bootstrap per pair; the mean, stratified.")
GROUPS_NOTE = ("Groups as the SMaLL-100 study's table: source tier 2 target tier (VL2H = a Very-Low-resource source "
               "into a High-resource target; H, M, L, VL = High, Medium, Low, Very-Low; tiers from the training "
               "counts, docs/METHOD.md §2.2); <i>low</i> = pairs whose tier is Very-Low or Low. Contrasts: mean "
               "corpus-score difference over the group's pairs, stratified paired bootstrap (§3.6).")
SIGNALS_NOTE = ("Exact KL(teacher ‖ student) and the student's CE on its training probe (held-out pairs), when its "
                "layers were just copied and at the end of training.")
FAMILY_NOTE = ("Variants made from one template, one per value; averages over the kept pairs with their stratified "
               "paired bootstrap intervals. Head-to-head: contrasts: [[a, b]] in the config.")
ATTENTION_NOTE = ("On-target example losers and winners: each model's cross-attention, teacher-forced on its own output, "
                  "averaged over decoder layers ({layers}) and all heads, as λ reads it (rows: output pieces; columns: "
                  "source pieces; each row sums to 1).")
GENDER_NOTE = ("ψ = (F1<sub>m</sub> − F1<sub>f</sub>)/(F1<sub>m</sub> + F1<sub>f</sub>); ψ* = |ψ<sub>anti</sub> − "
               "ψ<sub>pro</sub>|; ΔG = F1<sub>m</sub> − F1<sub>f</sub>; ΔS = accuracy pro − anti; profession aligned "
               "by the model's cross-attention (docs/METHOD.md §2.7).")
DELTA_NOTE = ("Δ = chrF of the variant − chrF of the base per sentence of the kept pairs; losers Δ < −δ, winners Δ > +δ "
              "(docs/METHOD.md §2.4).")
OFF_TARGET_NOTE = ("A hypothesis identified as another language than the target (fastText lid.176, CLD2 where it has no "
                   "label); sentences whose reference is not identified as its language are skipped "
                   "(docs/METHOD.md §2.5).")
LAMBDA_NOTE = ("λ = var<sub>variant</sub> / var<sub>base</sub>, var the spread of each output piece's cross-attention "
               "around its mean source position (averaged over layers and heads, teacher-forced on the model's own "
               "output); λ > 1 on the losers reads as more hallucination. On-target sentences only "
               "(docs/METHOD.md §2.6).")
MUCOW_NOTE = ("accuracy = correct / (correct + wrong) over the items whose translation contains a listed sense; miss "
              "rate = items containing neither (docs/METHOD.md §2.8).")


SATURATED = 0.9  # a miss rate at or above it leaves accuracy resting on a few items


def mucow_note(summary: Summary) -> str:
    """The MuCoW note, with the reason beside a saturated miss rate: the rows whose outputs contain none of the
    listed senses for most items, and on how many items their accuracy rests."""
    ws = summary.bias.word_sense if summary.bias else {}
    full = [(pair, v, d) for pair, res in ws.items() for v, d in res.items() if d.get("miss_rate", 0) >= SATURATED]
    if not full:
        return MUCOW_NOTE
    judged = ", ".join(f"{v} {pair}: {round(d['n'] * (1 - d['miss_rate']))} of {d['n']}" for pair, v, d in full[:6])
    return (MUCOW_NOTE + f" Miss rate ≥ {SATURATED} in {len(full)} row(s): their translations contain none of the "
            f"listed sense words for nearly every item — the model does not produce these words at all (a weak or "
            f"broken model, or a sample too small), not a sense error; their accuracy rests on the items judged "
            f"({judged}{', …' if len(full) > 6 else ''}) and says little.")


def mt_geneval_note(summary: Summary) -> str:
    mg = summary.bias.mt_geneval
    skipped = "; ".join(f"{x}: {why}" for x, why in mg.skipped.items())
    return ("A translation is correct when it has no word of the other gender's reference that the right one lacks "
            "(the paper's rule: lower-cased, punctuation to spaces). Counterfactual: each English sentence in its "
            "feminine and masculine form; gap = masculine − feminine; combined: both of a pair correct. Contextual: "
            "the two sentences translated as one input, the second's translation judged; 'unsplit' translations (no "
            "sentence break where one is due) are left out. "
            f"{mg.settings.get('sentences') or 'All'} items per set and language. Intervals: bootstrap over the "
            "pairs and items, changes paired with the base." + (f" Not scored: {skipped}." if skipped else ""))


def sections(summary: Summary, table_map: dict, examples_html, languages_html, aligners_html) -> list[Section]:
    """The report's sections in order. ``examples_html(v)``, ``languages_html()`` and ``aligners_html()`` give
    the HTML-only content built from model text (escaped there)."""
    base = summary.base
    out = [Section("Size and score per variant", [Block("table", "variants")]),
           Section("Findings: the study's claims tested at 95 %", [Block("table", "findings", css="findings")])]
    glance = [Block("figure", "scatter", HTML_ONLY), *(Block("figure", f"tiers_{v}", HTML_ONLY) for v in summary.tiers)]
    if "mt_geneval" in table_map:
        glance.append(Block("figure", "mt_geneval", HTML_ONLY))
    out.append(Section("Who pays at a glance: resource, tier and gender", glance, formats=HTML_ONLY, note=(
        "Relative difference per pair against the pair's training resource; per pair tier; MT-GenEval's feminine and "
        "masculine accuracy per language (where measured). The tables below give every number and its interval.")))
    if "deploy" in table_map:
        out.append(Section("Deployment: size and speed of each variant's deployable form", [Block("table", "deploy")],
                           note=DEPLOY_NOTE))
    out += [Section(f"Backend parity: {k[7:]} vs {base} (the same model; a difference is the backend's)",
                    [Block("table", k)], html_note=PARITY_NOTE) for k in table_map if k.startswith("parity_")]
    out += [Section(f"Per pair group ({k[7:]} tiers): scores and head-to-head contrasts", [Block("table", k)],
                    html_note=GROUPS_NOTE) for k in table_map if k.startswith("groups_")]
    if "signals" in table_map:
        out.append(Section("Distillation signal per pair group (the students' training probe)",
                           [Block("table", "signals")], html_note=SIGNALS_NOTE))
    for name, F in summary.families.items():
        kind = "ladder" if F.numeric else "comparison"
        out.append(Section(f"{name}: the {F.axis} {kind} ({len(F.pairs)} pairs: {', '.join(F.pairs)})",
                           [Block("figure", f"family_{name}", HTML_ONLY), Block("table", f"family_{name}")],
                           note=(F.knee or {}).get("statement", "") if F.numeric else FAMILY_NOTE))
    for view in summary.tiers:
        out.append(Section(f"Relative difference by pair tier ({view} tiers)", [
            Block("heading", "tier", HTML_ONLY), Block("table", f"tier_{view}"),
            *[b for axis in ("src_tier", "tgt_tier") for b in (Block("heading", axis.replace("_", " "), HTML_ONLY),
                                                              Block("table", f"{axis}_{view}", HTML_ONLY))]]))
    if "most_affected" in table_map:
        out.append(Section("Most affected pairs across methods", [Block("table", "most_affected")], note=(
            f"Each variant's {MOST_AFFECTED} kept pairs of lowest relative spBLEU (rank in brackets); pairs most "
            "affected under both pruning and quantisation come first (the study's Table 5.11).")))
    out += [Section("ΔchrF losers and winners", [Block("table", "delta"), Block("figure", "delta_hist", HTML_ONLY)],
                    note=DELTA_NOTE),
            Section("Off-target translations", [Block("table", "off_target")], note=OFF_TARGET_NOTE),
            Section("Cross-attention λ", [Block("table", "hallucination")], html_note=LAMBDA_NOTE)]
    for key, M in summary.movement.items():
        out.append(Section(f"Losers and winners of {M.a} under {M.b}", [
            Block("table", f"movement_{key}"), Block("heading", f"Sentences moving from loser ({M.a}) to winner "
                                                                f"({M.b})"), Block("table", f"moves_{key}")]))
    for v in summary.attention_maps:
        out.append(Section(f"Cross-attention maps — {v}", [Block("figure", f"attention_{v}"),
                                                            Block("table", f"attention_{v}", css="ex")],
                           note=ATTENTION_NOTE.format(layers=summary.attention_maps[v].get("layers", "all")),
                           formats=HTML_ONLY))
    if "gender" in table_map:
        blocks = [Block("table", "gender"), Block("table", "gender_languages")]
        if "aligners" in table_map:
            blocks += [Block("heading", "Aligners compared (cross-attention vs fast_align)"),
                       Block("raw", aligners_html(), HTML_ONLY), Block("table", "aligners")]
        out.append(Section("Gender bias (MT-Gender)", blocks, html_note=GENDER_NOTE))
    if "mt_geneval" in table_map:
        out.append(Section("Gender accuracy on human references (MT-GenEval)", [
            Block("table", "mt_geneval"), Block("table", "mt_geneval_languages")],
            note=mt_geneval_note(summary)))
    if "bias_contrasts" in table_map:
        out.append(Section("Bias benchmarks, series against series", [Block("table", "bias_contrasts")], note=(
            "Each configured contrast a vs b: a − b on every bias benchmark, paired (the same items and draws); ψ and "
            "ψ* per language too. Positive ψ / ψ*: a more biased; positive accuracy: a more accurate.")))
    if "word_sense" in table_map:
        out.append(Section("Word sense (MuCoW)", [Block("table", "word_sense")], note=mucow_note(summary)))
    if "dibimt" in table_map:
        out.append(Section("Word sense (DiBiMT)", [Block("table", "dibimt")], note=(
            "SFII: error rate averaged over sense-frequency indices; SPDI: over polysemy degrees; MFS / MFS+: share of "
            "errors choosing a more frequent / the most frequent sense. Lower is less biased. Intervals: bootstrap "
            "over the items, changes paired with the base.")))
    out.append(Section("Scores per pair", [Block("table", "pair_scores")], folded=True, note=(
        f"Corpus spBLEU and chrF of every pair and series, and its empty outputs; averages, Findings and the "
        f"analyses use the kept pairs (base spBLEU ≥ analysis.bleu_filter = {summary.thresholds.bleu_filter}).")))
    out += [Section(f"Pairs, most losing first — {v}", [Block("table", f"pairs_{v}"), Block("raw", examples_html(v))],
                    formats=HTML_ONLY, folded=True) for v in summary.comparisons]
    out += [Section("Per language", [Block("raw", languages_html())], formats=HTML_ONLY),
            Section("Language identification coverage", [Block("table", "lid")], folded=True),
            Section("Signatures", [Block("json", json.dumps(summary.signatures, indent=1, ensure_ascii=False))])]
    return out


def _md_table(headers, rows) -> str:
    return "\n".join(["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
                     + ["| " + " | ".join(str(c).replace("|", "\\|") for c in r) + " |" for r in rows])


def _shown(secs: list[Section], fmt: str):
    """Each section shown in ``fmt``, with its blocks shown there."""
    for s in secs:
        if fmt in s.formats:
            yield s, [b for b in s.blocks if fmt in b.formats]


def render_markdown(secs: list[Section], table_map: dict) -> list[str]:
    """The sections' lines: ``## title``, the note, each block followed by a blank line."""
    shown = list(_shown(secs, "md"))
    parts: list[str] = ["Contents: " + " · ".join(s.title for s, _ in shown), ""]
    for s, blocks in shown:
        parts.append(f"## {s.title}")
        if s.note:
            parts += [s.note, ""]
        for b in blocks:
            if b.kind == "table":
                parts += [_md_table(*table_map[b.key]), ""]
            elif b.kind == "heading":
                parts.append(f"### {b.key}")
            elif b.kind == "json":
                parts += ["```", b.key, "```", ""]
    return parts


def render_html(secs: list[Section], table_map: dict, figs: dict[str, str], table, findings_table) -> list[str]:
    """The sections' HTML: ``<h2>``, notes, tables (``table(headers, rows, css)``), figures, sub-headings."""
    e = lambda x: html.escape(x, quote=False)  # noqa: E731 - text content; the alt attribute quotes in full
    shown = list(_shown(secs, "html"))
    out: list[str] = ["<nav><b>Contents</b><ol>" + "".join(f'<li><a href="#s{i}">{e(s.title)}</a></li>'
                                                           for i, (s, _) in enumerate(shown, 1)) + "</ol></nav>"]
    for i, (s, blocks) in enumerate(shown, 1):
        out.append(f'<h2 id="s{i}">{e(s.title)}</h2>')
        if s.note:
            out.append(f"<p>{e(s.note)}</p>")
        if s.html_note:
            out.append(f"<p>{s.html_note}</p>")
        if s.folded:
            out.append("<details><summary>show</summary>")
        for b in blocks:
            if b.kind == "table":
                out.append(findings_table(table_map[b.key]) if b.css == "findings" else table(*table_map[b.key], b.css))
            elif b.kind == "figure" and b.key in figs:
                out.append(f'<img alt="{html.escape(b.key.replace("_", " "))}" src="data:image/png;base64,{figs[b.key]}">')
            elif b.kind == "heading":
                out.append(f"<h3>{e(b.key)}</h3>")
            elif b.kind == "json":
                out.append(f"<pre>{e(b.key)}</pre>")
            elif b.kind == "raw":
                out.append(b.key)
        if s.folded:
            out.append("</details>")
    return out
