"""Per-sentence statistics stored beside the translations: language identity and cross-attention variance."""

from __future__ import annotations

from tqdm.auto import tqdm

from forgetbench.eval import lid
from forgetbench.eval.hallucination import cross_attention_variance
from forgetbench.eval.store import Store
from forgetbench.eval.translate import Job, pair_batches

REF = "__ref__"  # pseudo-variant holding statistics of the references


def lid_pass(store: Store, variants: list[str], jobs: list[Job]) -> None:
    """``on_target`` = 1/0 per hypothesis (and per reference under ``__ref__``); NULL when undefined."""
    for job in jobs:
        cov = lid.coverage(job.tgt)
        _, refs = job.lines()
        key = (job.benchmark.name, job.src, job.tgt)
        done = store.stats_done("on_target", REF, *key)  # references are not translations: no missing_stat
        todo = [i for i in range(len(refs)) if i not in done]
        if todo:
            pred = lid.identify([refs[i] for i in todo], cov.identifier)
            store.add_stats([(REF, *key, i, "on_target", None if cov.identifier == "undefined" else float(lid.matches(p, job.tgt)))
                             for i, p in zip(todo, pred, strict=True)])
        for v in variants:
            rows = store.missing_stat("on_target", v, *key, below=job.limit)
            todo = list(rows)
            if todo:
                pred = lid.identify([rows[i] for i in todo], cov.identifier)
                store.add_stats([(v, *key, i, "on_target", None if cov.identifier == "undefined" else float(lid.matches(p, job.tgt)))
                                 for i, p in zip(todo, pred, strict=True)])


def xattn_pass(store: Store, variant: str, model, tokenizer, jobs: list[Job], batch_size: int = 32,
               progress: bool = True, states: dict | None = None) -> None:
    """``xattn_var`` per translated sentence of one variant (teacher-forced on its own output, each sentence alone:
    the layout rule of ``hallucination.cross_attention``); ``batch_size``: sentences per store write; ``states``: the
    encoder states its translation kept per row ``(source, src, tgt)``, where there (else the encoder runs)."""
    plan = []
    for job in jobs:
        key = (job.benchmark.name, job.src, job.tgt)
        rows = store.missing_stat("xattn_var", variant, *key, below=job.limit)
        todo = list(rows)
        if todo:
            plan.append((job, key, rows, todo))
    bar = tqdm(total=sum(len(p[3]) for p in plan), desc=f"cross-attention {variant}", unit="sent",
               disable=None if progress else True)
    for job, key, rows, todo in plan:
        srcs, _ = job.lines()
        for batch in pair_batches(todo, srcs, rows, batch_size):
            kept = None if states is None else [states.get((srcs[i], job.src, job.tgt)) for i in batch]
            var = cross_attention_variance(model, tokenizer, [srcs[i] for i in batch], [rows[i] for i in batch],
                                           job.src, job.tgt, states=kept)
            store.add_stats([(variant, *key, i, "xattn_var", v) for i, v in zip(batch, var, strict=True)])
            bar.update(len(batch))
    bar.close()
