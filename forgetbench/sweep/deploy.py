"""Each variant's deployable form, its size and its batch-1 and batched speed (``deployment_pass``), timed on a
quiet machine by rank 0 after the model passes; the base's row pooled over every timing of it."""

from __future__ import annotations

import statistics
from pathlib import Path

from forgetbench.eval.backends import TorchTranslator, fake_quantised
from forgetbench.eval.speed import batch1_speed, batched_speed, interleaved
from forgetbench.eval.store import Store
from forgetbench.models import ct2
from forgetbench.models.hardware import Placement
from forgetbench.sweep.config import SweepConfig
from forgetbench.sweep.variants import ct2_folder, load_variant


def _deployable(cfg: SweepConfig, run_dir: Path, name: str, placement: Placement | None, have_ct2: bool,
                known: dict):
    """A variant's deployable form: (translator, tokenizer, form, bytes on disk)."""
    on_cpu = placement is None or not placement.cuda  # CTranslate2 int8 is the CPU deployment form
    model, tok = load_variant(cfg, run_dir, name, None if on_cpu else placement, cfg.jobs[0].tgt)
    if on_cpu and have_ct2 and type(model).__name__ == ct2.ARCHITECTURE:
        folder = ct2.cached_conversion(lambda m=model, t=tok: (m, t), ct2_folder(cfg, run_dir, name, "int8"), "int8",
                                       known[name]["model_sha256"])
        return ct2.Ct2Translator(folder, tok, "cpu", "int8", cfg.threads), tok, "ctranslate2 int8", ct2.disk_bytes(folder)
    form = "torch fp32" if placement is None or placement.hardware.is_default else \
        f"torch {placement.hardware.dtype} ({placement.device})"
    return TorchTranslator(model, tok), tok, form, known[name].get("sizes", {}).get("dense_bytes")


def deployment_pass(cfg: SweepConfig, run_dir: Path, store: Store, placement: Placement | None = None) -> None:
    """Per variant, once (``speed:<variant>`` in the store): its deployable form — CTranslate2 int8 where
    CTranslate2 is installed, else torch fp32 — its size on disk (CTranslate2 stores a pruned model's zeros
    densely; the sparse artefact's size is the variants table's) and its batch-1 and batched speed on the first
    pair's first sentences: ``speed.rounds`` timings each, every other variant's interleaved with the base's
    (``eval.speed`` rule 2: the speed-up with its interval), the base's alone only where no variant is timed
    (else one alone, for its record: its row pools every timing of it). A fake-quantised variant's form is
    its int8 artefact (static scales), which no runtime here executes: its size only (timing the torch emulation
    would set an emulation's speed beside deployment speeds; ``benchmarks/backends.py`` measures its decode cost
    against the base's torch loop)."""
    have_ct2, gen, known = ct2.available(), cfg.generation, store.variants()
    job, n, rounds, bs, new = cfg.jobs[0], cfg.speed_sentences, cfg.speed_rounds, gen.batch_size, gen.max_new_tokens
    base = None  # the base's deployable form, loaded once
    base_timed = not fake_quantised(cfg.variants.get(cfg.base))  # else no variant has a base to be timed beside
    beside = base_timed and any(v != cfg.base and not fake_quantised(r) for v, r in cfg.variants.items())

    def one(tr, tok):
        return batch1_speed(tr, tok, job, n, new)

    def batched(tr):
        return batched_speed(tr, job, max(n, bs), bs, new)

    for name in cfg.variants:
        if store.meta(f"speed:{name}") is not None:
            continue
        if fake_quantised(cfg.variants[name]):  # its real int8 artefact, which no runtime here executes: not timed
            store.set_meta(f"speed:{name}", {"form": "int8 artefact, static scales (no runtime here)",
                                             "disk_bytes": known[name].get("sizes", {}).get("int8_bytes")})
            continue
        tr, tok, form, size = _deployable(cfg, run_dir, name, placement, have_ct2, known)
        runs: dict[str, list[dict]] = {"one": [], "batched": []}  # this variant's timings, whole records

        def own(kind, t=tr, k=tok, runs=runs):
            runs[kind].append(one(t, k) if kind == "one" else batched(t))
            return runs[kind][-1]["seconds"]

        extra, extra_b = {}, {}
        if name == cfg.base:  # its rounds alone; one where variants are timed beside it (pooled with theirs)
            alone = 1 if beside else rounds
            times = [own("one") for _ in range(alone)]
            times_b = [own("batched") for _ in range(alone)]
            extra, extra_b = {"rounds": alone, "round_seconds": times}, {"round_seconds": times_b}
        elif base_timed:
            if base is None:
                base = _deployable(cfg, run_dir, cfg.base, placement, have_ct2, known)[:2]
            b_tr, b_tok = base
            vs = interleaved(lambda t=b_tr, k=b_tok: one(t, k)["seconds"], lambda: own("one"), rounds)
            vs_b = interleaved(lambda t=b_tr: batched(t)["seconds"], lambda: own("batched"), rounds)
            times, times_b, extra, extra_b = vs["seconds"], vs_b["seconds"], {"vs_base": vs}, {"vs_base": vs_b}
        else:
            times, times_b = [own("one")], [own("batched")]
        first, first_b = runs["one"][0], runs["batched"][0]
        med, med_b = statistics.median(times), statistics.median(times_b)
        rec = {"form": form, "disk_bytes": size, **first, **extra, "batched": first_b | extra_b}
        if med:  # the variant's own speed: the median over its timings
            rec |= {"sentences_per_s": round(first["sentences"] / med, 3), "tokens_per_s": round(first["tokens"] / med, 1)}
        if med_b:
            rec["batched"]["sentences_per_s"] = round(first_b["sentences"] / med_b, 3)
        store.set_meta(f"speed:{name}", rec)
        tr = None  # the variant's translator released before the next is loaded
    pool_base_timings(cfg, store)


def pool_base_timings(cfg: SweepConfig, store: Store) -> None:
    """The base's row from every timing of it — its own rounds and those interleaved with each variant — so its
    speed is measured over the same moments as the variants' (their rows: their interleaved rounds' medians)."""
    rec = store.meta(f"speed:{cfg.base}")
    if not rec or not rec.get("round_seconds"):
        return
    others = [r for v in cfg.variants if v != cfg.base and (r := store.meta(f"speed:{v}")) and r.get("vs_base")]
    one = list(rec["round_seconds"]) + [x for r in others for x in r["vs_base"]["base_seconds"]]
    many = list(rec["batched"].get("round_seconds", [])) + [x for r in others for x in r["batched"]["vs_base"]["base_seconds"]]
    med, med_b = statistics.median(one), statistics.median(many) if many else None
    rec |= {"timings": len(one), "sentences_per_s": round(rec["sentences"] / med, 3)}
    if rec.get("tokens") is not None:
        rec["tokens_per_s"] = round(rec["tokens"] / med, 1)
    if med_b:
        rec["batched"] |= {"sentences_per_s": round(rec["batched"]["sentences"] / med_b, 3), "timings": len(many)}
    store.set_meta(f"speed:{cfg.base}", rec)
