"""Write the shipped teacher's model card from its training record and a `forgetbench eval` run (greedy), and,
given, a second run of the same sentences under M2M-100's beam-5 decoding.

    forgetbench eval configs/teacher-card.yaml --out runs/teacher-card
    forgetbench eval configs/teacher-card-beam5.yaml --out runs/teacher-card-beam5   # optional
    python scripts/model_card.py artifacts/teacher runs/teacher-card [runs/teacher-card-beam5]
"""

import io
import json
import math
import statistics
import sys
from pathlib import Path

from safetensors import safe_open

from forgetbench.eval.languages import language
from forgetbench.io import atomic_write_bytes, atomic_write_text


def _machine(record: dict) -> str:
    """The CPU the training record names (``environment``, written by train-mt), or that it names none."""
    cpu = (record.get("environment") or {}).get("cpu") or {}
    if not cpu:
        return "CPU not recorded"
    return f"{cpu.get('cores', '?')}-core {cpu.get('model', 'CPU')}, flags {', '.join(cpu.get('flags', [])) or 'none listed'}"


def _where(t: dict) -> str:
    devices = {(s.get("arithmetic") or {}).get("device", "cpu").split(":")[0] for s in t.get("segments", [t])}
    return "on a CPU and then a lent GPU" if devices == {"cpu", "cuda"} else ("on a GPU" if devices == {"cuda"} else
                                                                             "on this project's CPU")


def _train_commands(t: dict) -> list[str]:
    """The commands that made the weights: one train-mt run, or its segments each warm-started from the last."""
    segs = t.get("segments")
    if not segs:
        return ["forgetbench train-mt configs/teacher.yaml --out runs/teacher   # resumable",
                "python scripts/ship_teacher.py runs/teacher artifacts/teacher"]
    out, runs = [], []
    for i, s in enumerate(segs):
        run = f"runs/{s['run']}"
        cfg = Path(s["config"]).name if s["config"] else "teacher.yaml"
        warm = f" --warm-start {runs[-1]}/model" if runs else ""
        out.append(f"forgetbench train-mt configs/{cfg} --out {run}{warm}   # segment {i + 1}")
        runs.append(run)
    return out + [f"python scripts/ship_teacher.py {' '.join(runs)} artifacts/teacher"]


def _training_lines(t: dict, epochs: str) -> list[str]:
    segs = t.get("segments")
    if not segs:
        return [f"- training: {t['steps']} steps ({epochs}), {t['tokens']:,} tokens, {t['train_seconds'] / 60:.1f} min wall "
                f"time on {t['threads']} CPU thread ({_machine(t)}), stopped by {t['stopped_by']}"]
    tot = t["total"]
    out = [f"- training: {tot['steps']:,} steps in {len(segs)} segments, {tot['tokens']:,} tokens = {tot['epochs_seen']} "
           f"epochs of the corpus ({tot['epoch_tokens']:,} tokens per epoch), {tot['train_seconds'] / 3600:.2f} h wall time "
           "in all; each segment warm-started from the one before (weights kept, optimiser and schedule restarted):", "",
           "| segment | config | steps | tokens | wall time | where | arithmetic | tokens/step | peak lr | stopped by |",
           "|---:|---|---:|---:|---:|---|---|---:|---:|---|"]
    for i, s in enumerate(segs):
        a = s.get("arithmetic") or {}
        where = f"{s.get('cpu') or 'CPU'}, {s.get('threads')} thread" if a.get("device", "cpu") == "cpu" else \
            f"{', '.join(s.get('gpus') or [a['device']])} (host {s.get('cpu')})"
        out.append(f"| {i + 1} | {Path(s['config']).name} | {s['steps']:,} | {s['tokens']:,} | {s['train_seconds'] / 60:.1f} min | "
                   f"{where} | {a.get('autocast', '?')} | ≤ {s['max_tokens']:,} | {s['lr']} | {s['stopped_by']} |")
    return out + [""]


def curve_section(m: Path, t: dict, logs: dict, directions: list[str]) -> list[str]:
    """The training curve: dev chrF per direction against the epochs seen (a table and ``training_curve.svg``)."""
    per_epoch = (t.get("total") or {}).get("epoch_tokens")
    rows = [r for _, r in sorted(logs.items()) if "dev_chrf" in r]
    x = [(r.get("tokens_total", r["tokens"]) / per_epoch) if per_epoch else r["step"] for r in rows]
    segs = t.get("segments") or [{"dev_sentences": t["config"]["train"]["dev_sentences"]}]
    n = ", ".join(f"{s['dev_sentences']} in segment {i + 1}" for i, s in enumerate(segs)) if len(segs) > 1 else \
        str(segs[0]["dev_sentences"])
    out = ["## Training curve", "",
           f"Dev chrF of greedy translations of the first held-out training-distribution pairs per direction ({n}), "
           "against the epochs seen.", ""]
    if rows and per_epoch:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        plt.rcParams["svg.fonttype"], plt.rcParams["svg.hashsalt"] = "none", "forgetbench"  # text as text, stable ids
        fig, ax = plt.subplots(figsize=(7, 3.6))
        for d in directions:
            ax.plot(x, [r["dev_chrf"].get(d) for r in rows], marker=".", label=d)
        for s_end in _segment_ends(t, per_epoch)[:-1]:
            ax.axvline(s_end, color="grey", lw=0.6, ls=":")
        ax.set_xlabel("epochs seen (dotted: segment boundaries)")
        ax.set_ylabel("dev chrF")
        ax.legend(ncol=3, fontsize=8)
        ax.grid(alpha=0.3)
        fig.tight_layout()
        svg = io.BytesIO()
        fig.savefig(svg, format="svg", metadata={"Date": None})
        plt.close(fig)
        atomic_write_bytes(m / "training_curve.svg", svg.getvalue())
        out += ["![dev chrF against epochs seen](training_curve.svg)", ""]
    out += ["| segment | step | epochs seen | loss | " + " | ".join(directions) + " |",
            "|---:|---:|---:|---:|" + "---:|" * len(directions)]
    for xi, r in zip(x, rows, strict=True):
        out.append(f"| {r.get('segment', 1)} | {r['step']} | {xi:.2f} | {r['loss']:.3f} | "
                   + " | ".join(str(r["dev_chrf"].get(d, "–")) for d in directions) + " |")
    return out


def _segment_ends(t: dict, per_epoch: int) -> list[float]:
    ends, acc = [], 0
    for s in t.get("segments", []):
        acc += s["tokens"]
        ends.append(acc / per_epoch)
    return ends


ALIGNMENT_SENTENCES = 400  # FLORES-101 devtest sentences per language for the embedding-alignment measure


def embedding_alignment_section(m: Path, langs: list[str], graphmerge: dict | None) -> list[str]:
    """The card's embedding-alignment table (``eval.embedding_alignment``: mean cosine of the embeddings of subwords
    linked in held-out English–x pairs, per language and per script pair) and, for a GraphMerge model, its graph."""
    from forgetbench.eval.embedding_alignment import alignment_scores, independent_aligner
    from forgetbench.models.load import load

    flores = Path(__file__).resolve().parents[1] / "data" / "flores101"
    eng = (flores / "eng.devtest").read_text(encoding="utf-8").splitlines()[:ALIGNMENT_SENTENCES]
    bitext = {}
    for c in langs:
        f = flores / language(c).flores_file
        if f.is_file():
            bitext[c] = list(zip(eng, f.read_text(encoding="utf-8").splitlines()[:ALIGNMENT_SENTENCES], strict=True))
    model, tok, _ = load(m, with_signature=False)
    graph_aligner = (graphmerge or {}).get("graph", {}).get("aligner") or (graphmerge or {}).get("settings", {}).get(
        "aligner")
    aligner = independent_aligner(graph_aligner)
    A = alignment_scores(model, tok, bitext, aligner=aligner)
    ci = lambda r: f"{r['mean_cosine']:.3f} [{r['ci95'][0]:.3f}, {r['ci95'][1]:.3f}]" if r["pairs"] else "–"  # noqa: E731
    how = {"fast_align": "IBM Model 2 both ways, intersected", "eflomal": "eflomal, intersected"}[aligner]
    same = " — the aligner that built its graph: not independent of it" if aligner == graph_aligner else ""
    out = ["", "## Cross-lingual embedding alignment", "",
           f"Mean cosine of the input embeddings of subword pairs linked in FLORES-101 devtest English–x pairs (the first "
           f"{ALIGNMENT_SENTENCES}; {how}{same}; identical subwords and special tokens left out), with 95 % bootstrap "
           "intervals over the pairs, beside the isotropy control (each English subword's mean cosine to 50 random "
           "subwords, averaged: a similarity is read against it) (docs/METHOD.md §5b).", "",
           "| language | script pair | linked subword pairs | mean cosine [95 % CI] | isotropy control |",
           "|---|---|---:|---|---:|"]
    out += [f"| {language(c).name} | {r['script_pair']} | {r['pairs']:,} | {ci(r)} | "
            f"{'–' if r['isotropy'] is None else format(r['isotropy'], '.3f')} |" for c, r in A["languages"].items()]
    out += ["", "| script pair | linked subword pairs | mean cosine [95 % CI] |", "|---|---:|---|"]
    out += [f"| {k} | {r['pairs']:,} | {ci(r)} |" for k, r in A["script_pairs"].items()]
    if graphmerge:
        g, st = graphmerge["graph"], graphmerge["settings"]
        out += ["", "## GraphMerge embeddings", "",
                f"{st['hops']} hop(s), {st['mode']}, aligner {g.get('aligner', st['aligner'])} ({st['symmetrisation']}), "
                f"links counted at least {st['min_count']} times, α {st['alpha']}, "
                + ("the whole bitext" if st.get("pairs_per_language") is None
                   else f"up to {st['pairs_per_language']:,} pairs per language")
                + f", output projection {'tied to the graph table' if st.get('tie', True) else 'the original table (w/o Tie)'}: "
                f"a graph of {g['vocabulary']:,} subwords with {g['cross_edges']:,} cross-word edges (density "
                f"{g['density']:.2e}), built in {g['seconds']} s"
                + (f" (peak memory {g['peak_rss_mb']:,} MB)" if "peak_rss_mb" in g else "")
                + f"; graph SHA-256 `{g['sha256']}`. The exported table is the final re-parameterised one: inference is a "
                "plain M2M-100's."]
    return out


SPBLEU_FLOOR = 5.0  # the card counts the directions at or above this spBLEU-local


def _pair_rows(store, src: str, tgt: str) -> tuple[list[int], list[str]]:
    """The indices and hypotheses of one direction of a card run (its base series), in index order."""
    rows = store.translations("base", "flores101", src, tgt)
    return [r["idx"] for r in rows], [r["hyp"] for r in rows]


def decoding_section(greedy_run: Path, beam_run: Path, spm_path: Path) -> list[str]:
    """Greedy against beam 5 on the same sentences: per thesis tier and over all directions, the mean corpus chrF3 and
    spBLEU-local of each and beam − greedy with its stratified paired bootstrap 95 % interval (each direction's
    sentences resampled within it, the same resamples for both decodings); the directions at or above
    ``SPBLEU_FLOOR`` spBLEU-local under each; the hypotheses' length in characters, beam over greedy (chrF3 weighs
    recall: shorter hypotheses lose); per language, the beam-5 scores."""
    import numpy as np

    from forgetbench.eval import bootstrap as bs
    from forgetbench.eval.analysis import score_stats
    from forgetbench.eval.metrics import CHRF3, SpBLEU
    from forgetbench.eval.store import Store

    Sg = json.loads((greedy_run / "report" / "summary.json").read_text())
    Sb = json.loads((beam_run / "report" / "summary.json").read_text())
    nb = Sb["run"]["generation"]["num_beams"]
    if Sg["signatures"]["models"].get("base") != Sb["signatures"]["models"].get("base") or \
            Sg["run"]["generation"]["num_beams"] != 1:
        raise SystemExit(f"{beam_run}: not the card run's model under another beam, or {greedy_run} is not greedy")
    spb = SpBLEU(spm_path)
    metrics = {"chrF": CHRF3, "spBLEU": spb.bleu}
    stores = [Store(greedy_run / "store.sqlite"), Store(beam_run / "store.sqlite")]
    flores, per_dir, chars = Path(__file__).resolve().parents[1] / "data" / "flores101", {}, {}
    for p in Sb["pairs"]:
        (gi, gh), (bi, bh) = (_pair_rows(st, p["src"], p["tgt"]) for st in stores)
        if gi != bi:
            raise SystemExit(f"{p['src']}-{p['tgt']}: the two runs translated different sentences")
        lines = (flores / language(p["tgt"]).flores_file).read_text(encoding="utf-8").splitlines()
        refs = [lines[i] for i in gi]
        seg_refs = spb.segment(refs)
        g, b = score_stats(spb, gh, refs, seg_refs), score_stats(spb, bh, refs, seg_refs)
        chars[(p["src"], p["tgt"])] = (sum(map(len, gh)), sum(map(len, bh)))
        w = bs.counts(len(gi), bs.RESAMPLES, [bs.SEED, len(per_dir)])
        per_dir[(p["src"], p["tgt"])] = {k: (bs.corpus_score(metrics[k], g[k].sum(0)),
                                             bs.corpus_score(metrics[k], b[k].sum(0)),
                                             bs.scores_from(metrics[k], w @ b[k]) - bs.scores_from(metrics[k], w @ g[k]))
                                         for k in metrics}
    for st in stores:
        st.close()
    foreign = lambda d: d[1] if d[0] == "en" else d[0]  # noqa: E731
    groups = {f"{t} (thesis tier)": [d for d in per_dir if language(foreign(d)).tier == t] for t in ("High", "Medium", "Low")}
    groups["all directions"] = list(per_dir)
    out = ["", f"## Greedy and beam-{nb} decoding", "",
           "Every forgetbench sweep decodes greedily (`num_beams: 1`, as above); the M2M-100 release evaluates with "
           "`fairseq-generate --beam 5`. The same sentences under both (run `" + Sb["name"] + "`: "
           f"`num_beams: {nb}`, transformers' beam search, length penalty 1.0, "
           f"{Sb['run']['seconds'] / 60:.0f} min, {Sb['run']['threads']} thread); means over the group's directions, "
           "beam − greedy with its stratified paired bootstrap 95 % interval "
           f"({bs.RESAMPLES:,} resamples, the same for both decodings).", "",
           f"| directions (language's tier) | n | chrF greedy | chrF beam {nb} | beam − greedy [95 % CI] | spBLEU-local "
           f"greedy | spBLEU-local beam {nb} | beam − greedy [95 % CI] | length beam / greedy |",
           "|---|---:|---:|---:|---|---:|---:|---|---:|"]
    for name, ds in groups.items():
        if not ds:
            continue
        cells = []
        for k in metrics:
            g = float(np.mean([per_dir[d][k][0] for d in ds]))
            b = float(np.mean([per_dir[d][k][1] for d in ds]))
            ci = bs.group_mean([per_dir[d][k][2] for d in ds])
            cells += [f"{g:.2f}", f"{b:.2f}", f"{b - g:+.2f} [{ci.low:+.2f}, {ci.high:+.2f}]"]
        ratio = sum(chars[d][1] for d in ds) / max(1, sum(chars[d][0] for d in ds))
        out.append(f"| {name} | {len(ds)} | " + " | ".join(cells) + f" | {ratio:.3f} |")
    over = [[d for d in per_dir if per_dir[d]["spBLEU"][j] >= SPBLEU_FLOOR] for j in (0, 1)]
    moved = sorted(set(over[1]) ^ set(over[0]))
    out += ["", f"Directions with spBLEU-local ≥ {SPBLEU_FLOOR:g}: {len(over[0])} of {len(per_dir)} greedy, "
            f"{len(over[1])} of {len(per_dir)} with beam {nb}"
            + (" (" + ", ".join(f"{s}-{t} {per_dir[(s, t)]['spBLEU'][0]:.2f} → {per_dir[(s, t)]['spBLEU'][1]:.2f}"
                                for s, t in moved) + ")" if moved else "") + ".", "",
            f"| language | en→X chrF beam {nb} | en→X spBLEU-local beam {nb} | X→en chrF beam {nb} | X→en spBLEU-local "
            f"beam {nb} |",
            "|---|---:|---:|---:|---:|"]
    for c in dict.fromkeys(foreign(d) for d in per_dir):
        a, b = per_dir.get(("en", c)), per_dir.get((c, "en"))
        sc = lambda x, k: f"{x[k][1]:.1f}" if x else "–"  # noqa: E731
        out.append(f"| {language(c).name} | {sc(a, 'chrF')} | {sc(a, 'spBLEU')} | {sc(b, 'chrF')} | {sc(b, 'spBLEU')} |")
    return out


def main(model_dir: str, card_run: str, beam_run: str | None = None) -> None:
    m, r = Path(model_dir), Path(card_run)
    t = json.loads((m / "training.json").read_text())
    S = json.loads((r / "report" / "summary.json").read_text())
    logs = {}
    for line in (m / "train_log.jsonl").read_text().splitlines():
        rec = json.loads(line)
        logs[(rec.get("segment", 1), rec["step"])] = rec  # a resumed run rewrites the steps after its checkpoint: keep the last
    cfg = t["config"]
    epochs = "within the first epoch" if t["epochs"] == 0 else f"{t['epochs']} full epoch(s)"
    langs = cfg["data"]["languages"]
    counts = t["corpus"]["train"]
    own = S["tier_views"].get("training") or {}
    pairs = {(p["src"], p["tgt"]): p for p in S["pairs"]}
    with safe_open(str(m / "model.safetensors"), framework="pt") as f:
        n_params = sum(math.prod(f.get_slice(k).get_shape()) for k in f.keys())
    lines = [
        f"# forgetbench teacher (M2M-100 architecture, trained from scratch {_where(t)})", "",
        "A small multilingual MT model with M2M-100's architecture, SentencePiece vocabulary format and language "
        "tokens, so `M2M100ForConditionalGeneration` / `M2M100Tokenizer` load it like a real M2M-100. It exists so that "
        "forgetbench's default run analyses a real model with a real resource skew; it is not a production translator.", "",
        "## Reproduce", "", "```bash", *_train_commands(t),
        "forgetbench eval configs/teacher-card.yaml --out runs/teacher-card",
        *(["forgetbench eval configs/teacher-card-beam5.yaml --out runs/teacher-card-beam5"] if beam_run else []),
        "python scripts/model_card.py artifacts/teacher runs/teacher-card" + (" runs/teacher-card-beam5" if beam_run else ""),
        "```", "",
        "Training is deterministic given the seed on one device (batch order from a seeded permutation, dropout re-seeded every step; "
        "resuming from a checkpoint gives bit-identical weights, tested).", "",
        "## Model", "",
        f"- architecture: M2M100ForConditionalGeneration, d_model {cfg['model']['d_model']}, "
        f"{cfg['model']['encoder_layers']} encoder / {cfg['model']['decoder_layers']} decoder layers, "
        f"{cfg['model']['heads']} heads, FFN {cfg['model']['ffn']}"
        + (f", {n_params:,} stored parameters (tied embedding counted once)" if n_params else ""),
        f"- vocabulary: own SentencePiece BPE, {cfg['spm']['vocab_size']} pieces (+ 4 specials, 100 language codes, 8 "
        f"made-up words); SPM SHA-256 `{t['spm_sha256']}`",
        "- weights: fp16 safetensors of fp32 master weights (the arithmetic of each segment below); forgetbench loads "
        "them in fp32",
        *_training_lines(t, epochs),
        "- optimiser: AdamW (0.9, 0.98), inverse-sqrt learning rate after warm-up (peak"
        + ("s and batch sizes per segment above" if t.get("segments") else f" {cfg['train']['lr']} after {cfg['train']['warmup']} "
           f"warm-up steps, ≤ {cfg['train']['max_tokens']} padded tokens per batch") + "), "
        f"label smoothing {cfg['train']['label_smoothing']}, dropout {cfg['model']['dropout']}, "
        "both directions of every pair, natural (unbalanced) language distribution: every pair once per epoch, so the "
        "model sees the corpus's resource skew, which is what forgetbench measures", "",
        "## Data", "",
        "WMT news test sets 2008–2021 and Tatoeba test v2021-08-07 (English-centric), training only. Every pair whose "
        "English or foreign side occurs in FLORES-101 devtest, NTREX-128 or TICO-19 (any language) was removed: "
        f"{sum(t['corpus']['dropped_eval_overlap'].values()):,} pairs (NTREX-128 translates newstest2019's English side).", "",
        "| language | code | training pairs | thesis tier | own tier | en→X chrF | en→X spBLEU-local | X→en chrF | X→en spBLEU-local |",
        "|---|---|---:|---|---|---:|---:|---:|---:|"]
    rows = []
    for c in sorted(langs, key=lambda x: -counts[x]):
        a, b = pairs.get(("en", c)), pairs.get((c, "en"))
        sc = lambda p, k: f"{p['scores']['base'][k]:.1f}" if p else "–"  # noqa: E731
        rows.append((c, a, b))
        lines.append(f"| {language(c).name} | {c} | {counts[c]:,} | {language(c).tier} | {own.get(c, '–')} | {sc(a, 'chrF')} | "
                     f"{sc(a, 'spBLEU')} | {sc(b, 'chrF')} | {sc(b, 'spBLEU')} |")
    n_counts = {p["n"] for p in S["pairs"]}
    n_scored = f"the first {n_counts.pop()} of 1012" if len(n_counts) == 1 and 1012 not in n_counts else "all 1012"
    by_tier = {}
    for c, a, b in rows:
        for p in (a, b):
            if p:
                by_tier.setdefault(own.get(c, "?"), []).append(p["scores"]["base"]["chrF"])
    lines += ["", "Mean chrF over both directions by the project's own tier (training pairs: High ≥ 30k, Medium ≥ 10k, "
              "Low ≥ 1k, Very-Low < 1k): " + ", ".join(f"{k} {statistics.fmean(by_tier[k]):.1f} ({len(by_tier[k])} directions)"
                                                       for k in ("High", "Medium", "Low", "Very-Low") if k in by_tier), "",
              f"Scores: FLORES-101 devtest, {n_scored} sentences per direction, greedy decoding, from the run "
              f"`{S['name']}` ({S['run']['seconds'] / 60:.0f} min for {len(S['variants'])} variant(s), {S['run']['threads']} thread, "
              f"{S['run']['processes']} process; base rows are the same computation in `teacher-card` and `thesis-miniature`). "
              f"chrF: `{S['signatures']['chrF']}`; "
              f"spBLEU-local: `{S['signatures']['spBLEU']}` (the project's own SPM, not FLORES-101's: comparable within "
              "forgetbench only). Model SHA-256: `" + str(S["signatures"]["models"].get("base")) + "`.", "",
              *curve_section(m, t, logs, cfg["train"]["dev_directions"])]
    if beam_run:
        lines += decoding_section(r, Path(beam_run), m / "sentencepiece.bpe.model")
    lines += embedding_alignment_section(m, langs, t.get("graphmerge"))
    lines += ["", "## Licence and intended use", "",
              "Research only: the WMT test sets carry no explicit licence (research use) and Tatoeba data is CC BY-NC-SA 4.0. "
              "The model reproduces the resource skew of its data on purpose; do not use it to translate anything that matters."]
    atomic_write_text(m / "README.md", "\n".join(lines) + "\n")
    print(f"wrote {m / 'README.md'}")


if __name__ == "__main__":
    main(*sys.argv[1:4])
