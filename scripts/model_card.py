"""Write the shipped teacher's model card from its training record and a `forgetbench eval` run.

    forgetbench eval configs/teacher-card.yaml --out runs/teacher-card
    python scripts/model_card.py artifacts/teacher runs/teacher-card
"""

import json
import math
import statistics
import sys
from pathlib import Path

from safetensors import safe_open

from forgetbench.eval.languages import language


def _machine(record: dict) -> str:
    """The CPU the training record names (``environment``, written by train-mt), or that it names none."""
    cpu = (record.get("environment") or {}).get("cpu") or {}
    if not cpu:
        return "CPU not recorded"
    return f"{cpu.get('cores', '?')}-core {cpu.get('model', 'CPU')}, flags {', '.join(cpu.get('flags', [])) or 'none listed'}"


ALIGNMENT_SENTENCES = 400  # FLORES-101 devtest sentences per language for the embedding-alignment measure


def embedding_alignment_section(m: Path, langs: list[str], graphmerge: dict | None) -> list[str]:
    """The card's embedding-alignment table (``eval.embedding_alignment``: mean cosine of the embeddings of subwords
    linked in held-out English–x pairs, per language and per script pair) and, for a GraphMerge model, its graph."""
    from forgetbench.eval.embedding_alignment import alignment_scores
    from forgetbench.models.load import load

    flores = Path(__file__).resolve().parents[1] / "data" / "flores101"
    eng = (flores / "eng.devtest").read_text(encoding="utf-8").splitlines()[:ALIGNMENT_SENTENCES]
    bitext = {}
    for c in langs:
        f = flores / language(c).flores_file
        if f.is_file():
            bitext[c] = list(zip(eng, f.read_text(encoding="utf-8").splitlines()[:ALIGNMENT_SENTENCES], strict=True))
    model, tok, _ = load(m, with_signature=False)
    A = alignment_scores(model, tok, bitext)
    ci = lambda r: f"{r['mean_cosine']:.3f} [{r['ci95'][0]:.3f}, {r['ci95'][1]:.3f}]" if r["pairs"] else "–"  # noqa: E731
    out = ["", "## Cross-lingual embedding alignment", "",
           f"Mean cosine of the input embeddings of subword pairs linked in FLORES-101 devtest English–x pairs (the first "
           f"{ALIGNMENT_SENTENCES}; IBM Model 2 both ways, intersected; identical subwords and special tokens left out), "
           "with 95 % bootstrap intervals over the pairs (docs/METHOD.md §5b).", "",
           "| language | script pair | linked subword pairs | mean cosine [95 % CI] |", "|---|---|---:|---|"]
    out += [f"| {language(c).name} | {r['script_pair']} | {r['pairs']:,} | {ci(r)} |" for c, r in A["languages"].items()]
    out += ["", "| script pair | linked subword pairs | mean cosine [95 % CI] |", "|---|---:|---|"]
    out += [f"| {k} | {r['pairs']:,} | {ci(r)} |" for k, r in A["script_pairs"].items()]
    if graphmerge:
        g, st = graphmerge["graph"], graphmerge["settings"]
        out += ["", "## GraphMerge embeddings", "",
                f"{st['hops']} hop(s), {st['mode']}, aligner {st['aligner']} ({st['symmetrisation']}), links counted at "
                f"least {st['min_count']} times, α {st['alpha']}, up to {st['pairs_per_language']:,} pairs per language: "
                f"a graph of {g['vocabulary']:,} subwords with {g['cross_edges']:,} cross-word edges (density "
                f"{g['density']:.2e}), built in {g['seconds']} s; graph SHA-256 `{g['sha256']}`. The exported table is "
                "the final re-parameterised one: inference is a plain M2M-100's."]
    return out


def main(model_dir: str, card_run: str) -> None:
    m, r = Path(model_dir), Path(card_run)
    t = json.loads((m / "training.json").read_text())
    S = json.loads((r / "report" / "summary.json").read_text())
    logs = {}
    for line in (m / "train_log.jsonl").read_text().splitlines():
        rec = json.loads(line)
        logs[rec["step"]] = rec  # a resumed run rewrites the steps after its checkpoint: keep the last
    cfg = t["config"]
    epochs = "within the first epoch" if t["epochs"] == 0 else f"{t['epochs']} full epoch(s)"
    langs = cfg["data"]["languages"]
    counts = t["corpus"]["train"]
    own = S["tier_views"].get("training") or {}
    pairs = {(p["src"], p["tgt"]): p for p in S["pairs"]}
    with safe_open(str(m / "model.safetensors"), framework="pt") as f:
        n_params = sum(math.prod(f.get_slice(k).get_shape()) for k in f.keys())
    lines = [
        "# forgetbench teacher (M2M-100 architecture, trained from scratch on this project's CPU)", "",
        "A small multilingual MT model with M2M-100's architecture, SentencePiece vocabulary format and language "
        "tokens, so `M2M100ForConditionalGeneration` / `M2M100Tokenizer` load it like a real M2M-100. It exists so that "
        "forgetbench's default run analyses a real model with a real resource skew; it is not a production translator.", "",
        "## Reproduce", "", "```bash", "forgetbench train-mt configs/teacher.yaml --out runs/teacher   # resumable",
        "python scripts/ship_teacher.py runs/teacher artifacts/teacher", "forgetbench eval configs/teacher-card.yaml --out runs/teacher-card",
        "python scripts/model_card.py artifacts/teacher runs/teacher-card", "```", "",
        "Training is deterministic given the seed (batch order from a seeded permutation, dropout re-seeded every step; "
        "resuming from a checkpoint gives bit-identical weights, tested).", "",
        "## Model", "",
        f"- architecture: M2M100ForConditionalGeneration, d_model {cfg['model']['d_model']}, "
        f"{cfg['model']['encoder_layers']} encoder / {cfg['model']['decoder_layers']} decoder layers, "
        f"{cfg['model']['heads']} heads, FFN {cfg['model']['ffn']}"
        + (f", {n_params:,} stored parameters (tied embedding counted once)" if n_params else ""),
        f"- vocabulary: own SentencePiece BPE, {cfg['spm']['vocab_size']} pieces (+ 4 specials, 100 language codes, 8 "
        f"made-up words); SPM SHA-256 `{t['spm_sha256']}`",
        "- weights: fp16 safetensors (trained in fp32 with bf16 autocast); forgetbench loads them in fp32",
        f"- training: {t['steps']} steps ({epochs}), "
        f"{t['tokens']:,} tokens, {t['train_seconds'] / 60:.1f} min wall time on {t['threads']} CPU thread "
        f"({_machine(t)}), stopped by {t['stopped_by']}",
        f"- optimiser: AdamW (0.9, 0.98), lr {cfg['train']['lr']} inverse-sqrt after {cfg['train']['warmup']} warm-up steps, "
        f"label smoothing {cfg['train']['label_smoothing']}, dropout {cfg['model']['dropout']}, ≤ {cfg['train']['max_tokens']} "
        "padded tokens per batch, both directions of every pair, natural (unbalanced) language distribution", "",
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
              "## Training curve (dev chrF on 16 held-out training-distribution sentences)", "",
              "| step | loss | " + " | ".join(cfg["train"]["dev_directions"]) + " |", "|---:|---:|" + "---:|" * len(cfg["train"]["dev_directions"])]
    for step in sorted(logs):
        rec = logs[step]
        if "dev_chrf" in rec:
            lines.append(f"| {step} | {rec['loss']:.3f} | " + " | ".join(str(rec["dev_chrf"].get(d, "–"))
                                                                    for d in cfg["train"]["dev_directions"]) + " |")
    lines += embedding_alignment_section(m, langs, t.get("graphmerge"))
    lines += ["", "## Licence and intended use", "",
              "Research only: the WMT test sets carry no explicit licence (research use) and Tatoeba data is CC BY-NC-SA 4.0. "
              "The model reproduces the resource skew of its data on purpose; do not use it to translate anything that matters."]
    (m / "README.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"wrote {m / 'README.md'}")


if __name__ == "__main__":
    main(*sys.argv[1:3])
