"""Translation backends side by side, one process, interleaved repeats, the same sentences:

    python -m benchmarks.backends [MODEL_DIR] [--pairs en-de,de-en,en-sw,sw-en] [--sentences 64] [--repeats 3]

Paths (greedy, the same max_new_tokens; length-sorted batches of --batch-size where batched):

- ``naive``: Hugging Face ``generate``, one sentence at a time;
- ``hf_batched``: ``generate`` on the sweep's length-sorted batches;
- ``sweep_torch``: the sweep's runner (``eval.translate.run_variant``: greedy loop, store writes, sentence chrF;
  timed from the call, its store opened before as a sweep opens it once a run);
- ``ct2_fp32`` / ``ct2_int8``: raw CTranslate2 ``translate_batch`` (tokenise, translate with ``max_batch_size``,
  detokenise), the model converted by ``models.ct2``;
- ``sweep_ct2_int8``: the sweep's runner with the ``ctranslate2`` backend (int8);
- ``sweep_torch_unit``: the sweep's torch runner on every pair in one call — the unit ``sweep.schedule``
  makes of these jobs (asserted), so batches are filled across the pairs and kept full as rows end
  (``generation.greedy_stream``), as in a sweep; timed once a repeat, before a different pair each time,
  its ratios with a paired bootstrap over the repeats (the per-pair paths' seconds summed per repeat);
- ``ptq_torch``: the sweep's runner on the model fake-quantised by ``configs/recipes/ptq-int8.yaml`` (compressed
  once, its calibration timed apart), for the PTQ decode ratio against ``sweep_torch``; ``ptq_torch:R`` the same
  for each other recipe R of ``--ptq-recipes`` (e.g. ptq-int8-tensor,ptq-int8-token,ptq-int8-smoothquant).

Each repeat runs every path on each pair, the paths in an order rotated per (repeat, pair); sentences/s is total
sentences over total seconds. Printed: per path seconds and sentences/s, the ratios the acceptance names with a
95 % paired bootstrap interval (the (repeat, pair) units resampled, ratio of summed seconds: run-to-run noise of
a few per cent is visible, not mistaken for a difference), and the hypotheses identical to the sweep's torch loop. Threads and load average and the CPU (model, AVX-512/VNNI/AMX flags) come with them.
"""

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from benchmarks.common import environment
from forgetbench.compress.pipeline import compress_dir, load_compressed, load_model_dir
from forgetbench.compress.recipe import load_recipe
from forgetbench.eval import bootstrap as bs
from forgetbench.eval.backends import TorchTranslator
from forgetbench.eval.benchmarks import open_benchmark
from forgetbench.eval.store import Store
from forgetbench.eval.translate import Job, length_batches, run_variant
from forgetbench.models import ct2
from forgetbench.models.generation import translate
from forgetbench.sweep.schedule import job_groups


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model", nargs="?", default="artifacts/teacher")
    ap.add_argument("--flores", default="data/flores101")
    ap.add_argument("--pairs", default="en-de,de-en,en-sw,sw-en")
    ap.add_argument("--sentences", type=int, default=64)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--skip", default="", help="comma-separated paths not to run (e.g. naive)")
    ap.add_argument("--ptq-recipes", default="", help="comma-separated PTQ recipes timed beside ptq-int8")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    model, tok = load_model_dir(a.model)
    bench = open_benchmark("flores101", "flores101", a.flores)
    jobs = [Job(bench, *p.split("-"), a.sentences) for p in a.pairs.split(",")]
    lines = {(j.src, j.tgt): j.lines()[0] for j in jobs}
    n = sum(len(s) for s in lines.values())
    work = Path(tempfile.mkdtemp(prefix="fb-backends-"))
    folders = {q: ct2.convert(model, tok, work / f"ct2-{q}", q) for q in ("float32", "int8")}
    translators = {q: ct2.Ct2Translator(folders[q], tok, "cpu", q, a.threads) for q in folders}
    ptq_models, calibration_s = {}, {}
    for r in ["ptq-int8", *filter(None, a.ptq_recipes.split(","))]:
        key = "ptq_torch" if r == "ptq-int8" else f"ptq_torch:{r}"
        if key in a.skip.split(","):
            continue
        t0 = time.perf_counter()
        compress_dir(a.model, load_recipe(r), work / r, progress=False)
        calibration_s[r] = round(time.perf_counter() - t0, 2)
        ptq_models[key] = load_compressed(work / r)[:2]
    hyps: dict[str, dict] = {}
    # every path translates one pair per call: the timed units are (repeat, pair), interleaved across the paths

    def naive(s, t, srcs):
        return {(s, t, i): translate(model, tok, [x], s, t, 1, a.max_new_tokens, greedy_loop=False)[0]
                for i, x in enumerate(srcs)}

    def hf_batched(s, t, srcs):
        out = {}
        for b in length_batches(list(range(len(srcs))), srcs, a.batch_size):
            for i, h in zip(b, translate(model, tok, [srcs[i] for i in b], s, t, 1, a.max_new_tokens,
                                         greedy_loop=False), strict=True):
                out[(s, t, i)] = h
        return out

    def raw(q):
        tr = translators[q]

        def go(s, t, srcs):
            res = tr.translator.translate_batch(tr.source_tokens(srcs, s, t), [[f"__{t}__"]] * len(srcs),
                                                max_batch_size=a.batch_size, beam_size=1, min_decoding_length=0,
                                                max_decoding_length=a.max_new_tokens, max_input_length=0)
            return {(s, t, i): tok.decode(tok.convert_tokens_to_ids(r.hypotheses[0]), skip_special_tokens=True).strip()
                    for i, r in enumerate(res)}
        return go

    def run_store(translator, js):  # the sweep's runner; a sweep opens its store once a run: not timed
        with tempfile.TemporaryDirectory() as d:
            store = Store(f"{d}/s.sqlite")
            t0 = time.perf_counter()
            run_variant(store, "v", translator, js, a.batch_size, 1, a.max_new_tokens, progress=False)
            secs = time.perf_counter() - t0
            out = {(r["src"], r["tgt"], r["idx"]): r["hyp"] for r in store.translations("v")}
            store.close()
        return out, secs

    def sweep(translator):  # one pair a call
        return lambda s, t, srcs: run_store(translator, [next(j for j in jobs if (j.src, j.tgt) == (s, t))])

    def sweep_unit(translator):  # every pair at once: the unit the sweep's schedule makes of these jobs
        return lambda: run_store(translator, jobs)

    def timed(fn):  # a path whose whole call is its work
        def go(s, t, srcs):
            t0 = time.perf_counter()
            out = fn(s, t, srcs)
            return out, time.perf_counter() - t0
        return go

    paths = {"naive": timed(naive), "hf_batched": timed(hf_batched), "sweep_torch": sweep(TorchTranslator(model, tok)),
             "ct2_fp32": timed(raw("float32")), "ct2_int8": timed(raw("int8")), "sweep_ct2_int8": sweep(translators["int8"]),
             **{k: sweep(TorchTranslator(m, t)) for k, (m, t) in ptq_models.items()}}
    for k in filter(None, a.skip.split(",")):
        paths.pop(k, None)
    names = list(paths)
    whole = {"sweep_torch_unit": sweep_unit(TorchTranslator(model, tok))} if "sweep_torch" in paths else {}
    assert not whole or len(job_groups(jobs, a.batch_size)) == 1  # the sweep translates these jobs as one unit
    unit_secs = {k: [] for k in names}  # per path: seconds of each (repeat, pair), in the same unit order
    repeat_secs = {k: [] for k in whole}  # per whole-unit path: seconds of each repeat
    load0 = environment()["loadavg"]
    for r in range(a.repeats):
        for u, ((s, t), srcs) in enumerate(lines.items()):
            if u == r % len(lines):  # the whole-unit path once a repeat, before a different pair each time
                for k, go in whole.items():
                    out, secs = go()
                    hyps.setdefault(k, {}).update(out)
                    repeat_secs[k].append(secs)
            order = names[(r + u) % len(names):] + names[: (r + u) % len(names)]
            for k in order:
                out, secs = paths[k](s, t, srcs)
                hyps.setdefault(k, {}).update(out)
                unit_secs[k].append(secs)
    secs = {k: sum(v) for k, v in (unit_secs | repeat_secs).items()}
    rate = {k: n * a.repeats / secs[k] for k in secs}
    ref = hyps.get("sweep_torch") or hyps[names[0]]
    weights = bs.counts(len(lines) * a.repeats, 2000, 7)  # paired bootstrap over the (repeat, pair) units

    def rounded(value, ci):  # a ratio and its interval as printed
        return [round(value, 3), [round(ci.low, 3), round(ci.high, 3)]]

    def ratio(x, y):  # rate of x over rate of y = seconds of y over seconds of x, with its 95 % interval
        if x not in rate or y not in rate:
            return None
        ci = bs.percentile_interval(bs.resample_ratio(np.array(unit_secs[y]), np.array(unit_secs[x]), weights))
        return rounded(secs[y] / secs[x], ci)

    def time_ratio(x, y):  # seconds of x over seconds of y
        return ratio(y, x)

    def unit_ratio(x, y):  # a whole-unit path x over a per-pair path y: paired bootstrap over the repeats
        if x not in rate or y not in rate:
            return None
        per_repeat = np.array(unit_secs[y]).reshape(a.repeats, len(lines)).sum(1)
        ci = bs.percentile_interval(bs.resample_ratio(per_repeat, np.array(repeat_secs[x]), bs.counts(a.repeats, 2000, 7)))
        return rounded(secs[y] / secs[x], ci)
    print(json.dumps({
        "sentences": n, "pairs": a.pairs, "repeats": a.repeats, "batch_size": a.batch_size,
        "max_new_tokens": a.max_new_tokens,
        "seconds": {k: round(v, 2) for k, v in secs.items()}, "sentences_per_s": {k: round(v, 2) for k, v in rate.items()},
        "ratios [value, 95 % paired bootstrap interval over (repeat, pair)]": {
                   "sweep_ct2_int8 / naive (>= 15)": ratio("sweep_ct2_int8", "naive"),
                   "sweep_ct2_int8 / ct2_int8 raw (>= 0.95)": ratio("sweep_ct2_int8", "ct2_int8"),
                   "sweep_torch / naive (>= 10)": ratio("sweep_torch", "naive"),
                   "ct2_int8 raw / naive (the ceiling of the first: the host's, not the sweep's)":
                       ratio("ct2_int8", "naive"),
                   "sweep_torch / hf_batched": ratio("sweep_torch", "hf_batched"),
                   "ct2_fp32 / sweep_torch": ratio("ct2_fp32", "sweep_torch"),
                   "ct2_int8 / sweep_torch": ratio("ct2_int8", "sweep_torch"),
                   "ptq decode time / base (<= 1.3)": time_ratio("ptq_torch", "sweep_torch")},
        "ratios of the whole unit [value, 95 % paired bootstrap interval over repeats]": {
                   "sweep_torch_unit / naive (>= 10)": unit_ratio("sweep_torch_unit", "naive"),
                   "sweep_torch_unit / sweep_torch": unit_ratio("sweep_torch_unit", "sweep_torch")},
        "ptq decode time / base, per recipe": {k: time_ratio(k, "sweep_torch") for k in ptq_models},
        "compress_seconds (load, calibrate, quantise, write; once)": calibration_s,
        "identical_to_sweep_torch": {k: sum(hyps[k][x] == ref[x] for x in ref) for k in hyps},
        "ctranslate2": __import__("ctranslate2").__version__, "disk_bytes": {q: ct2.disk_bytes(f) for q, f in folders.items()},
        "loadavg_start": load0, "environment": environment()}, indent=2))


if __name__ == "__main__":
    main()
