"""Translation runner: variants x pairs x sentences into the run store, batched by length, resumable."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
from tqdm.auto import tqdm

from forgetbench.errors import ForgetbenchError
from forgetbench.eval.benchmarks import Benchmark
from forgetbench.eval.metrics import sentence_chrf
from forgetbench.eval.store import Store


@dataclass(frozen=True)
class Job:
    benchmark: Benchmark  # or any object with pair(src, tgt) and sha256(src, tgt), e.g. SourceSet
    src: str
    tgt: str
    limit: int | None = None

    def lines(self) -> tuple[list[str], list[str]]:
        s, r = self.benchmark.pair(self.src, self.tgt)
        return (s, r) if self.limit is None else (s[: self.limit], r[: self.limit])


@dataclass(frozen=True)
class SourceSet:
    """A benchmark of sources only (references are not used); quacks like ``Benchmark`` for the runner."""

    name: str
    sources: tuple[str, ...]
    digest: str

    def pair(self, src, tgt):
        return list(self.sources), list(self.sources)

    def sha256(self, src, tgt):
        return self.digest


def length_batches(indices: list[int], texts, batch_size: int) -> list[list[int]]:
    order = sorted(indices, key=lambda i: (len(texts[i]), i))
    return [order[k : k + batch_size] for k in range(0, len(order), batch_size)]


ATTENTION_ROWS = 16  # sentences per store write of a teacher-forced attention pass


def pair_batches(indices: list[int], srcs: list[str], hyps: dict[int, str], batch_size: int) -> list[list[int]]:
    """The groups a teacher-forced pass over (source, hypothesis) pairs stores together: ``length_batches`` on their
    joint length, at most ``ATTENTION_ROWS`` a group. Each sentence is teacher-forced alone inside its group (the
    layout rule of ``hallucination.cross_attention``), so the groups only set how often the store is written."""
    return length_batches(indices, {i: srcs[i] + hyps[i] for i in indices}, min(batch_size, ATTENTION_ROWS))


def pending(store: Store, variant: str, jobs: list[Job]) -> list[tuple[Job, list[int]]]:
    out = []
    for job in jobs:
        srcs, _ = job.lines()
        done = store.done(variant, job.benchmark.name, job.src, job.tgt)
        todo = [i for i in range(len(srcs)) if i not in done]
        if todo:
            out.append((job, todo))
    return out


def row_batches(sources: list[list[str]], todo: list[list[int]], batch_size: int) -> list[list[tuple[int, int]]]:
    """Batches of (job j, sentence i) over the sentences ``todo[j]`` of jobs with source texts ``sources[j]``, sorted
    by source length (characters; then job, then index): ``length_batches`` of a job's sentences for one job.
    Filling batches across jobs leaves fewer part-filled batches and fewer tails of looping hypotheses than a
    batch per job (the demo's 40-sentence jobs: 26 % less translation time here, every hypothesis the same)."""
    keys = [(len(sources[j][i]), j, i) for j in range(len(todo)) for i in todo[j]]
    order = [(j, i) for _, j, i in sorted(keys)]
    return [order[k : k + batch_size] for k in range(0, len(order), batch_size)]


def run_variant(store: Store, variant: str, translator, jobs: list[Job], batch_size: int = 32,
                num_beams: int = 1, max_new_tokens: int = 128, progress: bool = True,
                halved: Callable[[int], None] | None = None) -> int:
    """Translate every pending sentence of ``jobs`` with one variant's ``translator`` (a backend of
    ``eval.backends``: ``translate_rows(rows, num_beams, max_new_tokens)``, rows ``(text, src, tgt)``), in batches
    filled across the jobs (``row_batches``); returns sentences translated. A translator with ``stream_rows``
    (the torch greedy loop) takes all rows at once, those batches its nominal batches, and keeps its batch full
    as rows end (the same hypotheses); they are stored every ``batch_size`` ended rows, so a killed run loses at
    most the rows still decoding.

    Out of device memory (``torch.OutOfMemoryError``), the batch size is halved and the rows not yet stored are
    translated again from the start (``halved(new_size)`` is told, for the run record); at batch size 1 the error
    is one line."""
    done = [0]
    while True:
        try:
            _translate(store, variant, translator, jobs, batch_size, num_beams, max_new_tokens, progress, done)
            return done[0]
        except torch.OutOfMemoryError:
            if batch_size == 1:
                raise ForgetbenchError(f"translate {variant}: out of device memory at batch size 1; give the model more "
                                       "memory (another device_map, max_memory) or a smaller max_new_tokens") from None
            batch_size //= 2
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
            if halved is not None:
                halved(batch_size)


def _translate(store: Store, variant: str, translator, jobs: list[Job], batch_size: int, num_beams: int,
               max_new_tokens: int, progress: bool, done: list[int]) -> None:
    """``run_variant``'s one attempt at ``batch_size``; ``done[0]`` counts the sentences stored.

    **Layout rule** (docs/METHOD.md §2.9): the nominal batches are those of the jobs' every sentence
    (``row_batches`` over all of them), whatever is stored already; the batches holding a pending sentence are
    decoded whole, in that order, and only their pending rows stored. A resumed run so decodes each sentence in the
    batch a fresh run decodes it in (a killed run decodes again at most the stored rows of its unfinished
    batches)."""
    at = {id(job): j for j, job in enumerate(jobs)}  # pending() gives back these Job objects
    todo = {(at[id(job)], i) for job, pending_rows in pending(store, variant, jobs) for i in pending_rows}
    if not todo:
        return
    lines = [job.lines() for job in jobs]
    bar = tqdm(total=len(todo), desc=f"translate {variant}", unit="sent", disable=None if progress else True)
    batches = row_batches([s for s, _ in lines], [list(range(len(s))) for s, _ in lines], batch_size)
    order = [r for batch in batches if any(r in todo for r in batch) for r in batch]
    rows = [(lines[j][0][i], jobs[j].src, jobs[j].tgt) for j, i in order]
    stream = getattr(translator, "stream_rows", None)
    stream = stream(rows, num_beams, max_new_tokens, batch_size) if stream is not None and rows else None
    if stream is None:
        stream = ((k, h) for b in range(0, len(rows), batch_size)
                  for k, h in enumerate(translator.translate_rows(rows[b : b + batch_size], num_beams,
                                                                  max_new_tokens), start=b))
    n, ended, t0 = 0, [], time.perf_counter()
    try:
        for k, h in stream:
            if order[k] not in todo:
                continue  # stored by an earlier attempt: decoded again only to lay its batch out as a fresh run
            ended.append((k, h))
            if len(ended) == batch_size or n + len(ended) == len(todo):
                dt = (time.perf_counter() - t0) / len(ended)
                store.add_translations([(variant, jobs[j].benchmark.name, jobs[j].src, jobs[j].tgt, i, h,
                                         sentence_chrf(h, lines[j][1][i]), dt) for (j, i), h in ((order[k], h) for k, h in ended)])
                n += len(ended)
                done[0] += len(ended)
                bar.update(len(ended))
                ended, t0 = [], time.perf_counter()
    finally:
        bar.close()
