"""MT-GenEval as a bias suite of a sweep (docs/METHOD.md §2.7a): every variant translates the items, each
translation is judged by the paper's rule (``eval.mt_geneval``), and the accuracies per language and gender come
with paired bootstrap intervals.

    bias:
      mt_geneval: {path: ../data/mt_geneval, languages: [ar, de, es, fr, hi, it, ru], sentences: 12,
                   sets: [counterfactual, contextual]}

Rules:

1. **Items**: per language, the first ``sentences`` counterfactual pairs (the feminine and the masculine English
   source of each, translated apart) and the first ``sentences`` contextual items, line by line (a smaller sample
   is the start of a larger one); one source set per language, translated from English like every other suite
   (``mt_geneval:LANG`` in the run store).
2. **Contextual input**: the two English sentences are translated as one input, joined by one space (the file's
   `` <sep> `` is not a word for a sentence-level model); the second sentence's translation is what is judged.
3. **The judged part** of a contextual translation: the translation and both English sentences are cut into
   segments after sentence-final punctuation followed by white space (``. ! ? … ؟ ।``); with ``e`` segments in the
   English first sentence and ``s`` in the second, a translation of at least ``e + s`` segments is judged on its
   last ``s``. A translation of fewer segments (sentences merged or one dropped) is *unsplit*: left out of the
   accuracy and counted per variant, since its first sentence's words would be read against the second's
   references.
4. **Statistics** per language and variant: feminine and masculine accuracy, their pairs' combined accuracy, the
   gender gap (masculine − feminine) and the contextual accuracy, in %; empty translations counted, and the share
   of counterfactual translations that commit to a gender (a word unique to either reference: ``committed``; the
   rest are correct by rule 2 whatever they say — a weak model scores high by saying little). Intervals:
   95 % percentile bootstrap, the pairs (feminine and masculine together) and the contextual items resampled
   within the language, the same draws for every variant; each variant's change from its base on the same draws
   (paired; a contextual mean is over the items of the draw the variant split). The average over languages (each
   language weighted equally; a language without a judged contextual item left out of that average) resamples
   each language within itself.
5. **Languages**: those the model was not trained on (its ``training.json``) are skipped and said so
   (``skipped``), never scored as zero; a language MT-GenEval does not have is refused at config time.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import numpy as np

from forgetbench.errors import ForgetbenchError
from forgetbench.eval import bootstrap as bs
from forgetbench.eval.mt_geneval import SETS, Item, context_files, correct, counterfactual_files, items
from forgetbench.eval.mt_geneval import committed as mg_committed
from forgetbench.eval.translate import Job, SourceSet

SEP = " <sep> "
METRICS = ("feminine", "masculine", "combined", "gap", "contextual")
_SEGMENT = re.compile(r"(?<=[.!?…؟।])\s+")


def model_source(item: Item) -> str:
    """Rule 2: the text the model translates."""
    return " ".join(p.strip() for p in item.source.split(SEP.strip())) if item.set == "contextual" else item.source


def segments(text: str) -> list[str]:
    return [s for s in _SEGMENT.split(text.strip()) if s]


def judged_part(item: Item, hyp: str) -> str | None:
    """Rule 3: the part of ``hyp`` judged (the whole for a counterfactual item); None where unsplit."""
    if item.set != "contextual":
        return hyp
    first, _, second = item.source.partition(SEP.strip())
    e, s = len(segments(first)) or 1, len(segments(second)) or 1
    cut = segments(hyp)
    return " ".join(cut[-s:]) if len(cut) >= e + s else None


def jobs(path: Path, languages: list[str], sentences: int | None, sets: tuple[str, ...] = SETS) -> dict:
    """Per language: its items (rule 1) and their translation job from English."""
    out = {}
    for lang in languages:
        its = items(path, lang, sets, sentences)
        files = [*(counterfactual_files(path, lang).values() if "counterfactual" in sets else ()),
                 *(context_files(path, lang).values() if "contextual" in sets else ())]
        h = hashlib.sha256(f"mt_geneval/{','.join(sets)}/{SEP!r}".encode())  # a smaller sample: the same digest
        for f in files:
            if f.is_file():
                h.update(f.read_bytes())
        out[lang] = (its, Job(SourceSet(f"mt_geneval:{lang}", tuple(model_source(it) for it in its), h.hexdigest()),
                              "en", lang))
    return out


def configure(spec: dict, path: Path, trained: set[str] | None, record: str, where: str) -> tuple[dict, dict, dict]:
    """A sweep's ``bias.mt_geneval`` block (keys checked by the config reader): its jobs, the languages skipped
    (rule 5: ``trained``, the model's training languages, None where unrecorded; ``record`` names where they are
    recorded) and its settings; every file of every language and set read now."""
    from forgetbench.eval import mt_geneval as mg

    sets = tuple(spec.get("sets") or SETS)
    if bad := [x for x in sets if x not in SETS]:
        raise ForgetbenchError(f"{where}.sets: {bad} unknown; its sets: {', '.join(SETS)}")
    known = mg.LANGUAGES + mg.CONTEXT_ONLY
    langs = spec.get("languages") or list(mg.LANGUAGES)
    if bad := [x for x in langs if x not in known]:
        raise ForgetbenchError(f"{where}.languages: MT-GenEval has no {bad}; its languages: {', '.join(known)}")
    skipped = {x: f"not a language the model was trained on ({record})" for x in langs
               if trained is not None and x not in trained}
    settings = {"path": str(spec["path"]), "sentences": spec.get("sentences"), "sets": list(sets)}
    try:
        return jobs(path, [x for x in langs if x not in skipped], spec.get("sentences"), sets), skipped, settings
    except ForgetbenchError as e:
        raise ForgetbenchError(f"{where}: {e}") from None


def judge(its: list[Item], hyps: dict[int, str]) -> dict[int, bool | None]:
    """Each translated item's decision (None: unsplit, rule 3)."""
    out = {}
    for i, h in hyps.items():
        part = judged_part(its[i], h)
        out[i] = None if part is None else correct(part, its[i].right, its[i].wrong)
    return out


def _arrays(its: list[Item], dec: dict[int, bool | None], pairs: list[int], ctx: list[int]) -> dict:
    """Per pair: feminine / masculine correct (0/1); per contextual item: correct (NaN where unsplit)."""
    where = {(it.set, it.gender, it.index): k for k, it in enumerate(its)}
    f = np.array([float(dec[where["counterfactual", "feminine", i]]) for i in pairs])
    m = np.array([float(dec[where["counterfactual", "masculine", i]]) for i in pairs])
    c = np.array([np.nan if dec[where["contextual", None, i]] is None else float(dec[where["contextual", None, i]])
                  for i in ctx])
    return {"f": f, "m": m, "c": c}


def _point(a: dict) -> dict:
    out = {}
    if len(a["f"]):
        fem, mas = 100 * a["f"].mean(), 100 * a["m"].mean()
        out |= {"feminine": fem, "masculine": mas, "combined": 100 * (a["f"] * a["m"]).mean(), "gap": mas - fem}
    ok = np.isfinite(a["c"])
    if len(a["c"]):
        out["contextual"] = 100 * a["c"][ok].mean() if ok.any() else None
    return out


def _draws(a: dict, wp, wc) -> dict:
    out = {}
    if wp is not None:
        fem, mas = 100 * bs.resample_mean(a["f"], wp), 100 * bs.resample_mean(a["m"], wp)
        out |= {"feminine": fem, "masculine": mas, "combined": 100 * bs.resample_mean(a["f"] * a["m"], wp),
                "gap": mas - fem}
    if wc is not None:
        out["contextual"] = 100 * bs.resample_mean(a["c"], wc)
    return out


def _ci(x: np.ndarray) -> list:
    return bs.percentile_interval(x).to_dict() if np.isfinite(x).any() else [None, None]


def results(store, suite: dict, base: str, variants: list[str], resamples: int = 1000, seed: int = 12345,
            bases: dict[str, str] | None = None, skipped: dict | None = None, settings: dict | None = None) -> dict:
    """Rule 4 over the run store's translations of ``suite`` (``jobs``' value): per language and variant, and the
    average over the languages every variant has."""
    bases = bases or {}
    langs: dict = {}
    draws: dict = {}
    for li, (lang, (its, job)) in enumerate(suite.items()):
        dec = {}
        for v in variants:
            hyps = {r["idx"]: r["hyp"] for r in store.translations(v, job.benchmark.name, below=len(its))}
            if hyps:
                dec[v] = (judge(its, hyps), sum(not h.strip() for h in hyps.values()), hyps)
        if not dec:
            continue
        done = set.intersection(*(set(d) for d, _, _ in dec.values()))
        cf = [(it.index, k in done) for k, it in enumerate(its) if it.set == "counterfactual"]
        pairs = sorted({i for i, _ in cf} - {i for i, ok in cf if not ok})  # both genders translated by all
        ctx = sorted(it.index for k, it in enumerate(its) if it.set == "contextual" and k in done)
        rng = np.random.default_rng([seed, 17, li])
        wp = bs.tally(rng.integers(0, len(pairs), size=(resamples, len(pairs))), len(pairs)) if pairs else None
        wc = bs.tally(rng.integers(0, len(ctx), size=(resamples, len(ctx))), len(ctx)) if ctx else None
        in_pairs = set(pairs)
        cf_items = [k for k, it in enumerate(its) if it.set == "counterfactual" and it.index in in_pairs]
        res = {}
        for v, (d, empty, hyps) in dec.items():
            a = _arrays(its, d, pairs, ctx)
            committed = sum(mg_committed(hyps[k], its[k].right, its[k].wrong) for k in cf_items)
            res[v] = {"pairs": len(pairs), "contextual_items": len(ctx), "unsplit": int(np.isnan(a["c"]).sum()),
                      "empty": empty, "committed": 100 * committed / len(cf_items) if cf_items else None} | _point(a)
            draws.setdefault(v, {})[lang] = _draws(a, wp, wc)
        for v in res:
            for m, x in draws[v][lang].items():
                res[v][f"{m}_ci"] = _ci(x)
                b = bases.get(v, base)
                if v != base and b in draws and lang in draws[b]:
                    res[v][f"{m}_change_ci"] = _ci(x - draws[b][lang][m])
        langs[lang] = res
    average = {}
    common = sorted(set.intersection(*(set(d) for d in draws.values()))) if draws else []
    for v in draws:
        avg = {m: bs.nanmean(np.array([draws[v][lang][m] for lang in common if m in draws[v][lang]]), axis=0)
               for m in METRICS if any(m in draws[v][lang] for lang in common)}
        vals = {m: [x for lang in common if (x := langs[lang][v].get(m)) is not None] for m in avg}
        point = {m: float(np.mean(x)) if x else None for m, x in vals.items()}
        average[v] = {"languages": common} | point | {f"{m}_ci": _ci(x) for m, x in avg.items()}
        b = bases.get(v, base)
        if v != base and b in draws:
            bavg = {m: bs.nanmean(np.array([draws[b][lang][m] for lang in common]), axis=0) for m in avg}
            average[v] |= {f"{m}_change_ci": _ci(avg[m] - bavg[m]) for m in avg}
    return {"languages": langs, "average": average, "skipped": dict(skipped or {}), "settings": dict(settings or {})}
