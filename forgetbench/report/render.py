"""The report rendered: Markdown and self-contained HTML (figures, examples, languages, aligners, hardware, times,
findings), from the summary and its tables."""

from __future__ import annotations

import html

from forgetbench.eval.summary import Summary
from forgetbench.report.numbers import num
from forgetbench.report.sections import render_html, render_markdown, sections
from forgetbench.report.tables import html_table


def _sections(summary: Summary, table_map: dict) -> list:
    comps = summary.comparisons
    return sections(summary, table_map, lambda v: _examples_html(summary, v), lambda: _languages_html(summary, comps),
                    lambda: _aligners_html(summary))


def overview_notes(summary: Summary) -> list[str]:
    """What the first paragraph must say before any table: empty outputs per series, and a filter that kept no
    pair (with the numbers and the key to change)."""
    notes, pairs = [], summary.pairs
    if summary.quick_look:
        notes.append(f"A quick look (--sentences {summary.quick_look}): at most {summary.quick_look} sentences per pair, "
                     "bias benchmark and speed timing; intervals this wide say little. Run without --sentences (a "
                     "new --out) for the study's numbers.")
    n = sum(p.n for p in pairs)
    empty = {v: sum(p.empty_outputs.get(v, 0) for p in pairs) for v in summary.variants}
    if any(empty.values()):
        worst = {v: max(pairs, key=lambda p, v=v: p.empty_outputs.get(v, 0)) for v in empty if empty[v]}
        notes.append("Empty outputs: " + "; ".join(
            f"{v} {empty[v]} of {n} (most in {worst[v].src}-{worst[v].tgt}: "
            f"{worst[v].empty_outputs[v]} of {worst[v].n})" for v in worst)
            + " — scored as empty strings; per pair in the pairs tables' empty columns.")
    if pairs and not summary.kept_pairs:
        top = max(p.scores[summary.base]["spBLEU"] for p in pairs)
        notes.append(f"No pair passed the filter: every pair's base spBLEU is below analysis.bleu_filter = "
                     f"{summary.thresholds.bleu_filter} (the highest is {top:.2f}), so averages, Findings and figures "
                     "are empty; the pairs tables list every pair's scores. Lower analysis.bleu_filter in the config "
                     "(0 keeps every pair) and run the command again: the stored translations are reused.")
    return notes


def markdown(summary: Summary, table_map: dict) -> str:
    th = summary.thresholds
    parts = [f"# forgetbench report: {summary.name}", "",
             f"Base `{summary.base}`; {len(summary.kept_pairs)} of {len(summary.pairs)} pairs kept "
             f"(base spBLEU ≥ {th.bleu_filter}); ΔchrF threshold ±{th.delta}.",
             *(f"\n**{x}**" for x in overview_notes(summary)), ""]
    return "\n".join(parts + render_markdown(_sections(summary, table_map), table_map))


CSS = """body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;color:#222}
table{border-collapse:collapse;margin:.6em 0;font-size:13px}td,th{border:1px solid #ccc;padding:3px 7px;text-align:right}
td:first-child,th:first-child{text-align:left}th{background:#f3f3f3}h2{margin-top:1.6em;border-bottom:1px solid #ddd}
.ex td,.ex th,.findings td,.findings th{text-align:left;max-width:420px;overflow-wrap:anywhere;vertical-align:top}
.ex td:nth-child(-n+2),.ex th:nth-child(-n+2){white-space:nowrap;overflow-wrap:normal}
.supported{color:#060}.contradicted{color:#a00}.inconclusive{color:#666}code,pre{background:#f6f6f6;font-size:12px}pre{padding:.6em;overflow-x:auto}
img{max-width:100%}.lang{display:inline-block;vertical-align:top;margin:0 1.2em 1em 0}"""


def html_report(summary: Summary, table_map: dict, figs: dict[str, str]) -> str:
    e, th = html.escape, summary.thresholds
    head = [f"<!doctype html><html><head><meta charset='utf-8'><title>forgetbench: {e(summary.name)}</title>",
            f"<style>{CSS}</style></head><body>", f"<h1>Who pays for compression? — {e(summary.name)}</h1>",
            f"<p>Base <b>{e(summary.base)}</b> vs {', '.join(e(v) for v in summary.comparisons)}. "
            f"{len(summary.kept_pairs)} of {len(summary.pairs)} pairs kept (base spBLEU ≥ "
            f"{th.bleu_filter}); ΔchrF losers &lt; −{th.delta}, winners &gt; "
            f"+{th.delta}; {_times(summary.run)}; {summary.run['threads']} thread(s); "
            f"{e(_hardware(summary.run))}; intervals: paired "
            f"bootstrap, {th.resamples} resamples, seed {th.seed}; "
            "▼/▲ = significantly worse/better (Benjamini–Hochberg, q = "
            f"{th.fdr}).</p>", *(f"<p><b>{e(x)}</b></p>" for x in overview_notes(summary))]
    return "\n".join(head + render_html(_sections(summary, table_map), table_map, figs, html_table, _findings_table) + ["</body></html>"])


def _examples_html(summary: Summary, v: str) -> str:
    """The most losing and winning sentences of a variant, model text escaped."""
    out = []
    for subset in ("losers", "winners"):
        rows = [[x.pair, num(x.delta_chrF), x.source, x.reference, x.base, x.compressed]
                for x in summary.examples[v][subset]]
        out += [f"<h3>Example {subset} — {html.escape(v)}</h3>",
                html_table(["pair", "ΔchrF", "source", "reference", summary.base_of(v), v], rows, "ex")]
    return "\n".join(out)


def _languages_html(summary: Summary, comps: list[str]) -> str:
    """One card per language: its pairs as source and as target, per variant."""
    e, out = html.escape, []
    for L in summary.languages:
        rows = []
        for role in ("as_source", "as_target"):
            r = getattr(L, role)
            rows.append([role.replace("_", " "), r.pairs, num(r.base_spBLEU)]
                        + [f"{num(r.by_variant[v]['rel_spBLEU'])} / {num(r.by_variant[v]['losers_pct'], pct=True)}" for v in comps])
        out += [f"<div class='lang'><h3>{e(L.name)} ({e(L.lang)})</h3><p>tier {e(L.tier)}, bitext "
                f"{L.bitext_m} M, LID: {e(L.identifier)}</p>",
                html_table(["role", "pairs", "base spBLEU"] + [f"{v}: rel. % / losers" for v in comps], rows), "</div>"]
    return "\n".join(out)


def _aligners_html(summary: Summary) -> str:
    ac = summary.bias.aligner_comparison
    return f"<p>Same gender read by both aligners for {num(ac.same_gender_read_pct, pct=True)} of {ac.items} items.</p>"


def _hardware(run: dict) -> str:
    """Where the series ran (``models.hardware.describe`` per variant), beside the environment line: one entry per
    distinct placement, the variants after it where they differ."""
    hw = run.get("hardware") or {}
    if not hw:
        return "cpu float32"
    seen: dict[str, list[str]] = {}
    for v, d in hw.items():
        where = ", ".join(d.get("devices") or [d.get("device", "cpu")])
        gpus = sorted(set(d.get("gpus") or []))
        text = f"{where} {d.get('dtype', 'float32')}" + (f" ({', '.join(gpus)}, driver {d.get('driver')}, CUDA "
                                                        f"{d.get('cuda')})" if gpus else "")
        if d.get("direct_step"):
            text += f"; greedy step through forward: {d['direct_step']}"
        seen.setdefault(text, []).append(v)
    if len(seen) == 1:
        return next(iter(seen))
    return "; ".join(f"{t} [{', '.join(vs)}]" for t, vs in seen.items())


def _times(run: dict) -> str:
    """The run's wall time per stage and for the whole command."""
    stages = run.get("stages") or {}
    parts = ", ".join(f"{k} {v:.0f} s" for k, v in stages.items() if v is not None)
    total = run.get("command_seconds") or run.get("seconds")
    return f"total {num(total, 0)} s" + (f" ({parts})" if parts else "")


def _findings_table(t) -> str:
    headers, rows = t
    h = "".join(f"<th>{html.escape(x)}</th>" for x in headers)
    b = "".join(f"<tr><td>{html.escape(r[0])}</td><td>{html.escape(r[1])}</td><td class='{html.escape(r[2])}'>"
                f"{html.escape(r[2])}</td><td>{html.escape(r[3])}</td></tr>" for r in rows)
    return f'<table class="findings"><thead><tr>{h}</tr></thead><tbody>{b}</tbody></table>'
