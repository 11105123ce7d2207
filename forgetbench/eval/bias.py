"""Gender (MT-Gender, MT-GenEval) and word-sense (MuCoW, DiBiMT) benchmarks inside a sweep.

    bias:
      mt_gender: {path: ../data/mt_gender, languages: [de, fr, es, it, ru, uk], sentences: 200}
      mucow: {path: ../data/mucow, pairs: [en-de, en-ru], sentences: 300}
      dibimt: {path: /licensed/dibimt.jsonl, languages: [de, es, it, ru, zh], sentences: 500}
      mt_geneval: {path: ../data/mt_geneval, languages: [ar, de, es, fr, hi, it, ru], sentences: 12}

MT-Gender: en.txt (gold gender, profession index, sentence, profession; items also in en_pro.txt /
en_anti.txt are pro- / anti-stereotypical) is translated into each language; the profession is
aligned with the model's own cross-attention (so is the sentence's pronoun, which refers to it) and its gender
read by ``gender_readers``. MT-GenEval: ``eval.mt_geneval_suite``. Items
with gold "neutral" are skipped (the metrics are over male and female entities).
MuCoW: the pair's source sentences are translated and scored against the sense keys.
DiBiMT (closed: the user's licensed copy, ``word_sense.read_dibimt``'s JSONL with ``sentence`` and ``lang``):
each language's items are translated and scored (accuracy, SFII, SPDI, MFS, MFS⁺), every metric and its
change from the base with a paired bootstrap interval over the items.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from tqdm.auto import tqdm

from forgetbench.errors import ForgetbenchError
from forgetbench.eval.alignment import attention_links, fastalign_links, source_index, tokens
from forgetbench.eval.gender_metrics import GenderItem, gender_scores, resampled_scores
from forgetbench.eval.gender_readers import read_gender
from forgetbench.eval.gender_readers import version as readers_version
from forgetbench.eval.mt_geneval_suite import METRICS as MT_GENEVAL_METRICS
from forgetbench.eval.mt_geneval_suite import results as mt_geneval_results
from forgetbench.eval.store import Store
from forgetbench.eval.translate import Job, SourceSet, pair_batches
from forgetbench.eval.word_sense import (
    DIBIMT_METRICS,
    dibimt_metrics,
    dibimt_outcome,
    mucow_scores,
    read_dibimt,
    read_mucow,
)
from forgetbench.io import sha256_file
from forgetbench.stats import mean, rel

FASTALIGN_STAT = "gender_pred_fastalign"
GENDER_STATS = ("gender_pred", FASTALIGN_STAT)
READERS_META = "gender_readers"
GENDER_CODE = {"unknown": 0.0, "male": 1.0, "female": 2.0, "neutral": 3.0}
GENDER_NAME = {v: k for k, v in GENDER_CODE.items()}


@dataclass(frozen=True)
class GenderRow:
    gold: str
    index: int
    sentence: str
    profession: str
    stereotype: str | None

    @cached_property
    def pronoun(self) -> int | None:
        """The whitespace-word index of the sentence's first gendered third-person pronoun (WinoMT's sentences
        have one, and it refers to the profession: the gold gender is its gender), or None; found once per row."""
        return next((k for k, w in enumerate(self.sentence.split()) if _PRONOUN.fullmatch(w)), None)


_PRONOUN = re.compile(r"(?i)(he|she|him|her|his|hers|himself|herself)[.,;:!?'\"]*")


def read_mt_gender(folder: Path) -> list[GenderRow]:
    from forgetbench.io import read_text

    f = folder / "en.txt"
    if not f.is_file():
        raise ForgetbenchError(f"MT-Gender: {f} not found")
    extra = {}
    for name in ("en_pro.txt", "en_anti.txt"):
        extra[name] = set(read_text(folder / name).splitlines()) if (folder / name).is_file() else set()
    pro, anti = extra["en_pro.txt"], extra["en_anti.txt"]
    rows = []
    for n, line in enumerate(read_text(f).splitlines(), 1):
        cols = line.split("\t")
        if len(cols) != 4 or not cols[1].strip().lstrip("-").isdigit():
            raise ForgetbenchError(f"{f}:{n}: expected 4 tab-separated columns: gender, profession word index (an "
                                   "integer), sentence, profession")
        rows.append(GenderRow(cols[0], int(cols[1]), cols[2], cols[3],
                              "pro" if line in pro else "anti" if line in anti else None))
    return rows


@dataclass
class BiasConfig:
    gender_rows: list[GenderRow]
    gender_jobs: list[Job]
    mucow: dict  # pair -> (items, job)
    aligner_context: object = None  # a FLORES-101 Benchmark: co-occurrence statistics for the second aligner, or None
    dibimt: dict = field(default_factory=dict)  # lang -> (items, job)
    mt_geneval: dict = field(default_factory=dict)  # lang -> (items, job) (``mt_geneval_suite.jobs``)
    mt_geneval_skipped: dict = field(default_factory=dict)  # lang -> why it is not scored
    mt_geneval_settings: dict = field(default_factory=dict)  # path, sentences, sets (for the report)


def gender_jobs(folder: Path, languages: list[str], sentences: int | None) -> tuple[list[GenderRow], list[Job]]:
    """MT-Gender's items with a male or female gold — with ``sentences``, a balanced sample (ψ* and ΔS need both
    pro- and anti-stereotypical items) — and one translation job per target language.

    The sample is the first ``sentences`` of one fixed order: pro- and anti-stereotypical items alternating (in
    file order, a pro item first), then the rest of the longer kind. A smaller sample is thus the start of a larger
    one, and a stored translation's index names the same item whatever the sample size (a run extended to fewer
    items, a quick look)."""
    rows = [r for r in read_mt_gender(folder) if r.gold in ("male", "female")]
    if sentences is not None:
        pro = [r for r in rows if r.stereotype == "pro"]
        anti = [r for r in rows if r.stereotype == "anti"]
        rows = ([r for pair in zip(pro, anti, strict=False) for r in pair] + pro[len(anti):] + anti[len(pro):])[
            :sentences]
    source = SourceSet("mt_gender", tuple(r.sentence for r in rows), sha256_file(folder / "en.txt"))
    return rows, [Job(source, "en", lang) for lang in languages]


def mucow_jobs(folder: Path, pairs: list[str], sentences: int | None) -> dict:
    """Per MuCoW pair ``en-xx``: its first ``sentences`` items and their translation job."""
    out = {}
    for pair in pairs:
        s, t = pair.split("-")
        srcs, _, items = read_mucow(folder, pair)
        srcs, items = srcs[:sentences], items[:sentences]
        out[pair] = (items, Job(SourceSet(f"mucow:{pair}", tuple(srcs), sha256_file(folder / f"{pair}.key.txt")), s, t))
    return out


def dibimt_jobs(path: Path, languages: list[str] | None, sentences: int | None) -> dict:
    """Per target language (all the file has, or ``languages``): its first ``sentences`` DiBiMT items and their
    translation job from English."""
    items = read_dibimt(path, sources=True)
    langs = languages or sorted({it.lang for it in items})
    missing = [x for x in langs if not any(it.lang == x for it in items)]
    if missing:
        raise ForgetbenchError(f"{path}: no DiBiMT item for language(s) {missing} (its languages: "
                               f"{sorted({it.lang for it in items})})")
    out = {}
    for lang in langs:
        its = [it for it in items if it.lang == lang][:sentences]
        out[lang] = (its, Job(SourceSet(f"dibimt:{lang}", tuple(it.sentence for it in its), sha256_file(path)), "en", lang))
    return out


def jobs(bias: BiasConfig | None) -> list[Job]:
    return [] if bias is None else [*bias.gender_jobs, *(j for _, j in bias.mucow.values()),
                                    *(j for _, j in bias.dibimt.values()), *(j for _, j in bias.mt_geneval.values())]


def renew_readings(store: Store) -> int:
    """Before a sweep's work: keep the store's gender readings only if the current readers made them
    (``gender_readers.version``, kept in the store's meta). Readings by other readers, or by readers of unknown
    version (a store older than the record), are deleted, so the bias units read the items again; returns how many
    were deleted. The store then records the current readers."""
    now = readers_version()
    if store.meta(READERS_META) == now:
        return 0
    dropped = store.drop_stats(GENDER_STATS)
    store.set_meta(READERS_META, now)
    return dropped


def stale_readings(store: Store) -> str | None:
    """The readers that made a store's gender readings where they are not the current ones (``None``: current, or no
    readings at all)."""
    if not store.stats_count(GENDER_STATS):
        return None
    was = store.meta(READERS_META)
    return None if was == readers_version() else (was or "unrecorded")


def gender_pass(store: Store, variant: str, model, tokenizer, bias: BiasConfig, batch_size: int = 32,
                progress: bool = True, jobs: list[Job] | None = None, states: dict | None = None) -> None:
    """Align the profession word, read its gender, store ``gender_pred`` per translated item (of ``jobs``: this
    process's share of ``bias.gender_jobs``; all by default). Each item's attention is its own alone (the layout
    rule of ``hallucination.cross_attention``); ``batch_size``: items per store write; ``states``: the encoder
    states the translation kept per row ``(source, src, tgt)``, where there (else the encoder runs)."""
    for job in bias.gender_jobs if jobs is None else [j for j in bias.gender_jobs if j in jobs]:
        key = (job.benchmark.name, job.src, job.tgt)
        hyps = store.missing_stat("gender_pred", variant, *key, below=len(bias.gender_rows))
        todo = list(hyps)
        srcs = [r.sentence for r in bias.gender_rows]
        for batch in tqdm(pair_batches(todo, srcs, hyps, batch_size), desc=f"gender {variant} en-{job.tgt}",
                          disable=None if progress else True):
            kept = None if states is None else [states.get((srcs[i], job.src, job.tgt)) for i in batch]
            links = attention_links(model, tokenizer, [srcs[i] for i in batch], [hyps[i] for i in batch], "en",
                                    job.tgt, [(bias.gender_rows[i].index, bias.gender_rows[i].pronoun) for i in batch],
                                    kept)
            rows = []
            for i, (ti, pi) in zip(batch, links, strict=True):
                words = hyps[i].split()
                g = read_gender(job.tgt, words, ti, pronoun=pi) if ti is not None else "unknown"
                rows.append((variant, *key, i, "gender_pred", GENDER_CODE[g]))
            store.add_stats(rows)


def profession_links(rows: list[GenderRow], hyps: list[list[str]], context: list[tuple[str, str]] = (),
                     best_target: bool = True) -> list[tuple[int | None, int | None]]:
    """The tokens of each tokenised hypothesis (``alignment.tokens``) linked to its row's profession and to its
    pronoun (``GenderRow.pronoun``) by fast_align's model trained on these pairs and ``context`` together;
    ``best_target``: every profession linked (the posterior fallback; a pronoun is linked by its Viterbi links
    only, as a language may drop it)."""
    return fastalign_links([" ".join(tokens(r.sentence)) for r in rows], [" ".join(h) for h in hyps],
                           [(source_index(r.sentence, r.index),
                             None if r.pronoun is None else source_index(r.sentence, r.pronoun)) for r in rows],
                           context, best_target=(best_target, False))


def fastalign_gender_pass(store: Store, variants: list[str], bias: BiasConfig, jobs: list[Job] | None = None) -> None:
    """Second aligner: fast_align's model (deterministic) links the profession word; stores ``gender_pred_fastalign``
    (of ``jobs``' items, all gender jobs by default: each (variant, job) is aligned on its own, with the context).
    As ``gender-score`` reads given translations: words and punctuation apart (``alignment.tokens``), every item
    linked (the posterior fallback)."""
    if bias is None or bias.aligner_context is None:
        return
    for job in bias.gender_jobs if jobs is None else [j for j in bias.gender_jobs if j in jobs]:
        ctx = [(" ".join(tokens(a)), " ".join(tokens(b))) for a, b in zip(*bias.aligner_context.pair("en", job.tgt),
                                                                           strict=True)]
        key = (job.benchmark.name, job.src, job.tgt)
        for v in variants:
            if not store.missing_stat(FASTALIGN_STAT, v, *key, below=len(bias.gender_rows)):
                continue  # aligned already (a variant's items are aligned together, so all or none)
            hyps = {r["idx"]: tokens(r["hyp"]) for r in store.translations(v, *key, below=len(bias.gender_rows))}
            idx = sorted(hyps)
            links = profession_links([bias.gender_rows[i] for i in idx], [hyps[i] for i in idx], ctx)
            store.add_stats([(v, *key, i, FASTALIGN_STAT,
                              GENDER_CODE[read_gender(job.tgt, hyps[i], ti, pronoun=pi) if ti is not None else "unknown"])
                             for i, (ti, pi) in zip(idx, links, strict=True)])


def gender_intervals(items: dict[str, dict[str, dict[int, GenderItem]]], base: str, resamples: int, seed: int,
                     bases: dict[str, str] | None = None) -> dict:
    """Per variant: 95 % intervals of the language-averaged accuracy, ψ and ψ*, and of their change from the
    base (paired: the same items; ``bases``: variant -> its base series where not ``base``, as in
    ``analysis.analyse``). Stratified: each language's items are resampled within the language."""
    import numpy as np

    from forgetbench.eval import bootstrap as bs

    variants = list(items)
    langs = sorted(set.intersection(*(set(items[v]) for v in variants))) if variants else []
    keys = ("accuracy", "psi", "psi_star")
    vals = {v: {k: np.full((resamples, len(langs)), np.nan) for k in keys} for v in variants}
    for li, lang in enumerate(langs):
        common = sorted(set.intersection(*(set(items[v][lang]) for v in variants)))
        if not common:
            continue
        idx = np.random.default_rng([seed, 7, li]).integers(0, len(common), size=(resamples, len(common)))
        weights = bs.tally(idx, len(common))
        for v in variants:
            scores = resampled_scores([items[v][lang][i] for i in common], weights)
            for k in keys:
                vals[v][k][:, li] = scores[k]
    out = {}

    def ci(x):
        return bs.percentile_interval(x).to_dict() if np.isfinite(x).any() else [None, None]

    for v in variants:
        avg = {k: bs.nanmean(vals[v][k], axis=1) if langs else np.array([]) for k in keys}
        b = (bases or {}).get(v, base)
        base_avg = {k: bs.nanmean(vals[b][k], axis=1) if langs else np.array([]) for k in keys}
        out[v] = {"ci": {k: bs.percentile_interval(avg[k]).to_dict() for k in keys},
                  "by_language": {lang: {f"{k}_ci": ci(vals[v][k][:, li]) for k in keys} for li, lang in enumerate(langs)}}
        if v != base:
            out[v]["change_ci"] = {k: bs.percentile_interval(avg[k] - base_avg[k]).to_dict() for k in keys}
            for li, lang in enumerate(langs):
                out[v]["by_language"][lang] |= {f"{k}_change_ci": ci(vals[v][k][:, li] - vals[b][k][:, li]) for k in keys}
    return out


def analyse_bias(store: Store, bias: BiasConfig | None, base: str, variants: list[str], resamples: int = 1000,
                 seed: int = 12345, bases: dict[str, str] | None = None, contrasts: list | None = None) -> dict:
    """Gender and word-sense results per variant, each with its bootstrap interval and its change from the base
    (``bases``: variant -> the base series of its backend where not ``base``); ``contrasts``: (a, b) pairs of series
    whose difference a − b is given on every benchmark (``bias_contrasts``)."""
    if bias is None:
        return {}
    bases = bases or {}
    out: dict = {"gender": {}, "word_sense": {}}
    preds = store.stats("gender_pred")
    ef = store.stats(FASTALIGN_STAT)
    if ef:
        agree = [preds[k] == val for k, val in ef.items() if k in preds and k[4] < len(bias.gender_rows)]
        out["aligner_comparison"] = {"items": len(agree), "same_gender_read_pct": 100 * sum(agree) / len(agree) if agree else None}
        for v in variants:
            by = {}
            for job in bias.gender_jobs:
                items = [GenderItem(r.gold, GENDER_NAME[ef[(v, job.benchmark.name, job.src, job.tgt, i)]], r.stereotype)
                         for i, r in enumerate(bias.gender_rows) if (v, job.benchmark.name, job.src, job.tgt, i) in ef]
                if items:
                    by[job.tgt] = gender_scores(items).to_dict()
            out["aligner_comparison"][v] = {"fast_align": {k: mean(d[k] for d in by.values()) for k in ("accuracy", "psi", "psi_star")}}
    by_item: dict[str, dict[str, dict[int, GenderItem]]] = {}
    for v in variants:
        per_lang = {}
        for job in bias.gender_jobs:
            items = []
            for i, r in enumerate(bias.gender_rows):
                p = preds.get((v, job.benchmark.name, job.src, job.tgt, i))
                if p is not None:
                    items.append(GenderItem(r.gold, GENDER_NAME[p], r.stereotype))
                    by_item.setdefault(v, {}).setdefault(job.tgt, {})[i] = items[-1]
            if items:
                per_lang[job.tgt] = gender_scores(items).to_dict()
        keys = ("accuracy", "f1_male", "f1_female", "delta_g", "delta_s", "psi", "psi_star")
        avg = {k: mean(d[k] for d in per_lang.values()) for k in keys}
        out["gender"][v] = {"languages": per_lang, "average": avg}
        if "aligner_comparison" in out and v in out["aligner_comparison"]:
            out["aligner_comparison"][v]["cross_attention"] = {k: avg[k] for k in ("accuracy", "psi", "psi_star")}
    for v in variants:
        if v == base:
            continue
        b, c = out["gender"][bases.get(v, base)]["average"], out["gender"][v]["average"]
        out["gender"][v]["relative_to_base"] = {k: rel(c[k], b[k]) for k in ("accuracy", "psi", "psi_star", "delta_g")}
    if by_item and base in by_item:
        for v, iv in gender_intervals(by_item, base, resamples, seed, bases).items():
            for lang, cis in iv.pop("by_language").items():  # each language's intervals beside its scores
                out["gender"][v]["languages"][lang] |= cis
            out["gender"][v] |= iv
    for pair, (items, job) in bias.mucow.items():
        out["word_sense"][pair] = mucow_results(store, items, job, base, variants, resamples, seed, bases)
    if bias.mt_geneval or bias.mt_geneval_skipped:
        out["mt_geneval"] = mt_geneval_results(store, bias.mt_geneval, base, variants, resamples, seed, bases,
                                               bias.mt_geneval_skipped, bias.mt_geneval_settings)
    if bias.dibimt:
        out["dibimt"] = {lang: dibimt_results(store, items, job, base, variants, resamples, seed, bases)
                         for lang, (items, job) in bias.dibimt.items()}
    if contrasts := [(a, b) for a, b in contrasts or () if a in variants and b in variants]:
        out["contrasts"] = bias_contrasts(store, bias, out, by_item, contrasts, resamples, seed)
    return out


def _minus(x, y):
    return None if x is None or y is None else x - y


def bias_contrasts(store: Store, bias: BiasConfig, out: dict, by_item: dict, contrasts: list, resamples: int,
                   seed: int) -> dict:
    """Per contrast (a, b): a − b on MT-Gender (accuracy, ψ, ψ*; the language average and each language), MuCoW
    (accuracy) and MT-GenEval (its metrics, averaged over languages), each with its 95 % interval, paired as a
    variant's change from its base is (b in the base's place: the same items, the same draws)."""
    res = {}
    for a, b in contrasts:
        rec: dict = {}
        if a in by_item and b in by_item:
            iv = gender_intervals({b: by_item[b], a: by_item[a]}, b, resamples, seed)[a]
            ga, gb = out["gender"][a], out["gender"][b]
            keys = ("accuracy", "psi", "psi_star")
            rec["gender"] = {k: {"difference": _minus(ga["average"][k], gb["average"][k]), "ci": iv["change_ci"][k]}
                             for k in keys}
            rec["gender_languages"] = {lang: {k: {"difference": _minus(ga["languages"][lang][k], gb["languages"][lang][k]),
                                                  "ci": cis[f"{k}_change_ci"]} for k in keys}
                                       for lang, cis in iv["by_language"].items()}
        for pair, (items, job) in bias.mucow.items():
            r = mucow_results(store, items, job, b, [b, a], resamples, seed, {})
            if "accuracy_change_ci" in r.get(a, {}):
                rec.setdefault("word_sense", {})[pair] = {"accuracy": {
                    "difference": _minus(r[a]["accuracy"], r[b]["accuracy"]), "ci": r[a]["accuracy_change_ci"]}}
        if bias.mt_geneval:
            av = mt_geneval_results(store, bias.mt_geneval, b, [b, a], resamples, seed)["average"]
            if a in av and b in av:
                rec["mt_geneval"] = {m: {"difference": _minus(av[a].get(m), av[b].get(m)), "ci": av[a][f"{m}_change_ci"]}
                                     for m in MT_GENEVAL_METRICS if f"{m}_change_ci" in av[a]}
        res[f"{a} vs {b}"] = rec
    return res


def mucow_results(store: Store, items: list, job: Job, base: str, variants: list[str], resamples: int, seed: int,
                  bases: dict[str, str]) -> dict:
    """One MuCoW pair's scores per variant, the accuracy's interval over the items and, paired, its change from the
    base series."""
    import numpy as np

    from forgetbench.eval import bootstrap as bs

    res, outcomes = {}, {}
    for v in variants:
        hyps = {r["idx"]: r["hyp"] for r in store.translations(v, job.benchmark.name, below=len(items))}
        idx = sorted(hyps)
        if not idx:
            continue
        s = mucow_scores([items[i] for i in idx], [hyps[i] for i in idx], job.tgt)
        outcomes[v] = dict(zip(idx, s.pop("outcomes"), strict=True))
        res[v] = s
    common = sorted(set.intersection(*(set(o) for o in outcomes.values()))) if outcomes else []
    weights = bs.counts(len(common), resamples, [seed, 11]) if common else None
    for v in res:
        if weights is None:
            break
        correct = np.array([outcomes[v][i] == "correct" for i in common], dtype=float)
        decided = correct + np.array([outcomes[v][i] == "wrong" for i in common], dtype=float)
        acc = bs.resample_ratio(correct, decided, weights)
        res[v]["accuracy_ci"] = bs.percentile_interval(acc).to_dict()
        b = bases.get(v, base)
        if v != base and b in res:
            res[v]["relative_accuracy"] = rel(res[v]["accuracy"], res[b]["accuracy"])
            cb = np.array([outcomes[b][i] == "correct" for i in common], dtype=float)
            db = cb + np.array([outcomes[b][i] == "wrong" for i in common], dtype=float)
            res[v]["accuracy_change_ci"] = bs.percentile_interval(acc - bs.resample_ratio(cb, db, weights)).to_dict()
    return res


def dibimt_results(store: Store, items: list, job: Job, base: str, variants: list[str], resamples: int, seed: int,
                   bases: dict[str, str]) -> dict:
    """One language's DiBiMT metrics per variant, each with its bootstrap interval over the items and, paired (the
    same resampled items), its change from the base series."""
    import numpy as np

    from forgetbench.eval import bootstrap as bs

    judged = {}
    for v in variants:
        hyps = {r["idx"]: r["hyp"] for r in store.translations(v, job.benchmark.name, below=len(items))}
        judged[v] = {i: (items[i], *dibimt_outcome(items[i], h, job.tgt)) for i, h in hyps.items()}
    common = sorted(set.intersection(*(set(j) for j in judged.values()))) if judged else []
    if not common:
        return {}
    idx = np.random.default_rng([seed, 13]).integers(0, len(common), size=(resamples, len(common)))
    draws = {v: [dibimt_metrics([judged[v][common[k]] for k in row]) for row in idx] for v in variants}
    res = {}
    for v in variants:
        d = dibimt_metrics([judged[v][i] for i in common])
        for m in DIBIMT_METRICS:
            vals = np.array([np.nan if x[m] is None else x[m] for x in draws[v]])
            d[f"{m}_ci"] = bs.percentile_interval(vals).to_dict() if np.isfinite(vals).any() else [None, None]
            b = bases.get(v, base)
            if v != base and b in draws:
                bv = np.array([np.nan if x[m] is None else x[m] for x in draws[b]])
                diff = vals - bv
                d[f"{m}_change_ci"] = bs.percentile_interval(diff).to_dict() if np.isfinite(diff).any() else [None, None]
        res[v] = d
    return res

