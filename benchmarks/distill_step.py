"""Cost of a distillation step: CE only vs KD from the teacher cache vs online KD, side by side in one run.

    python -m benchmarks.distill_step [--teacher artifacts/teacher] [--batches 6] [--rounds 3] [--threads 1] [--sentences 40]

The student is the default config's (4 encoder / 1 decoder layers copied from the teacher, SMaLL-100 format);
batches are FLORES-101 devtest sentences of the 28 English-centric directions, length-bucketed to the
default 4096 tokens as in training. The cache is built for those batches with ``distill.cache.build_cache``
(top-k 8 + 8 tail samples) and read back through ``TeacherCache``, so a cached step includes the lookup.
The three step kinds are interleaved in every round (same batches, same load); the medians, their ratios,
the cache's size on disk per million target tokens, and the environment are printed as JSON.
"""

import argparse
import hashlib
import json
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from benchmarks.common import environment
from forgetbench.distill.cache import TeacherCache, build_cache, cache_keys
from forgetbench.distill.config import KDCfg
from forgetbench.distill.data import encode_batch, encoder_of
from forgetbench.distill.loop import content, content_mask
from forgetbench.distill.loss import kd_cached, kd_online, label_smoothed_ce
from forgetbench.distill.student import build_student
from forgetbench.eval.languages import language
from forgetbench.models.load import load

LANGS = ["de", "ru", "cs", "fr", "es", "fi", "it", "uk", "he", "ar", "hi", "et", "ta", "sw"]


class Rows:
    """The minimal data source ``build_cache`` reads: rows (src, tgt, src ids, tgt ids), each its own example."""

    def __init__(self, rows, lang_id):
        self.rows, self.lang_id = rows, lang_id
        self.unique_keys = np.arange(len(rows))
        self.uid = np.arange(len(rows))
        self.src_len = np.array([len(r[2]) + 2 for r in rows])
        self.tgt_len = np.array([len(r[3]) + 2 for r in rows])

    def sample_sha256(self):
        return hashlib.sha256(json.dumps([r[2:] for r in self.rows]).encode()).hexdigest()

    def collate(self, idx):
        rows = [self.rows[int(i)] for i in idx]
        b = encode_batch(rows, self.lang_id, True) | encode_batch(rows, self.lang_id, False, "teacher_")
        b["uid"] = torch.as_tensor(np.asarray(idx))
        return b


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--teacher", default="artifacts/teacher")
    ap.add_argument("--flores", default="data/flores101")
    ap.add_argument("--batches", type=int, default=6)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--sentences", type=int, default=40, help="FLORES sentences per language (the cache's rows)")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    teacher, tok, _ = load(a.teacher, with_signature=False)
    enc = encoder_of(tok)
    lines = {c: Path(a.flores, language(c).flores_file).read_text(encoding="utf-8").splitlines()
             for c in ["en", *LANGS]}
    rows = []
    for i in range(a.sentences):
        for x in LANGS:
            s, t = ("en", x) if i % 2 == 0 else (x, "en")
            rows.append((s, t, enc(lines[s][i])[:126], enc(lines[t][i])[:126]))
    lang_id = {c: tok.get_lang_id(c) for c in ["en", *LANGS]}
    data = Rows(rows, lang_id)
    order = np.argsort(np.maximum(data.src_len, data.tgt_len), kind="stable")
    batches, cur = [], []
    for i in order:  # the training loop's bucketing: padded source + target tokens <= 4096
        m = max(data.src_len[[*cur, i]].max(), data.tgt_len[[*cur, i]].max())
        if cur and (len(cur) + 1) * m * 2 > 4096:
            batches.append(np.array(cur))
            cur = []
        cur.append(i)
    batches = [batches[j] for j in np.linspace(0, len(batches) - 1, a.batches).round().astype(int)]
    k = KDCfg()
    with tempfile.TemporaryDirectory() as tmp:
        keys = cache_keys("bench", "bench", k.temperature, k.top_k, k.tail_samples, teacher.config.vocab_size)
        man = build_cache(Path(tmp), keys, data, teacher, 1, 8192, progress=False, log=lambda *_: None)
        cache = TeacherCache(Path(tmp), man)
    student = build_student(teacher, 4, 1, "first", "small100").train()
    opt = torch.optim.AdamW(student.parameters(), lr=1e-5, betas=(0.9, 0.98), eps=1e-6)

    def step(b, kind):
        t0 = time.perf_counter()
        logits = student(input_ids=b["input_ids"], attention_mask=b["attention_mask"],
                         decoder_input_ids=b["decoder_input_ids"]).logits
        loss = label_smoothed_ce(logits, b["labels"], 0.1).sum() / (b["labels"] != -100).sum()
        if kind != "ce":
            C = int(b["content_len"].max())
            mask = content_mask(b["content_len"], C)
            if kind == "cache":
                kd, _ = kd_cached(content(logits, 0, C), cache.lookup(b["uid"], C))
            else:
                with torch.no_grad():
                    t = teacher(input_ids=b["teacher_input_ids"], attention_mask=b["teacher_attention_mask"],
                                decoder_input_ids=b["teacher_decoder_input_ids"]).logits
                kd, _ = kd_online(content(logits, 0, C), content(t, 1, C))
            loss = loss + (kd * mask).sum() / mask.sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return time.perf_counter() - t0

    collated = [data.collate(ix) for ix in batches]
    step(collated[0], "online")  # warm-up
    times = {"ce": [], "cache": [], "online": []}
    for _ in range(a.rounds):
        for b in collated:
            for kind in times:
                times[kind].append(step(b, kind))
    med = {kind: statistics.median(v) for kind, v in times.items()}
    print(json.dumps({
        "batches": len(collated), "rounds": a.rounds, "examples_per_batch": [len(ix) for ix in batches],
        "median_step_s": {kind: round(v, 4) for kind, v in med.items()},
        "cache_step_over_ce": round(med["cache"] / med["ce"], 3),
        "online_step_over_ce": round(med["online"] / med["ce"], 3),
        "cache": {"top_k": k.top_k, "tail_samples": k.tail_samples, "positions": man["positions"], "bytes": man["bytes"],
                  "mib_per_million_target_tokens": round(man["bytes_per_million_positions"] / 2**20, 1),
                  "build_seconds": man["seconds"]},
        "threads": a.threads, "environment": environment()}, indent=1))


if __name__ == "__main__":
    main()
