"""Sweep configs: model + variants (recipes) + benchmarks/pairs/limits + metrics + analysis + bias.

    name: demo
    model: ../artifacts/teacher            # paths resolve against this file's folder (resolve_path)
    variants: {base: null, prune-30: prune-30, ptq-int8: ptq-int8}
    # a template makes one variant per value (ladder-10 … ladder-90): {ladder: {recipe: prune, sparsity: [0.1, …]}}
    # a variant may be another model (a distilled student), compressed or not:
    #   {student: {model: ../artifacts/student-kd}, student-p30: {model: ../artifacts/student-kd, recipe: prune-30}}
    contrasts: [[student, base]]           # head-to-head per pair group (VL2VL … H2H), paired bootstrap
    movement: [[prune-30, prune-45]]       # how a's losers and winners fare under b (sentence by sentence)
    attention_maps: {sentences: 2, layers: all}   # example cross-attention maps, base beside compressed
    speed: {sentences: 20}                 # batch-1 decoding speed of every variant (omit: not measured)
    backend: ctranslate2                   # torch (default) | ctranslate2 | {name, compute_type, device}
    processes: 2                           # worker processes, each with `threads` threads (2 × 1 on 2 cores)
    hardware: {device: cpu, dtype: float32}   # models.hardware: device, dtype, device_map, max_memory, offload_folder
    benchmarks: [{name: flores101, kind: flores101, path: ../data/flores101}]
    languages: [de, fr, hi, sw]
    pairs: english-centric                 # english-centric | all | [en-de, de-en, ...]
    sentences: 100                         # per pair (first N lines)
    generation: {num_beams: 1, max_new_tokens: 128, batch_size: 64}   # batch_size: auto (64 CPU, 512 CUDA, halved on OOM)
    metrics: {spm: null, spm_official: false}   # null: the model's own sentencepiece.bpe.model
    analysis: {bleu_filter: 12, delta: 0.5, exclude_two_script: true}
    tiers: {training: {counts: ../artifacts/teacher/training.json, thresholds: [1000, 10000, 30000]}}
    #   {nllb: {table: nllb-200}}: NLLB-200's high/low labels (an NLLB model's sweep has it as nllb-200 by itself)
    bias:
      mt_gender: {path: ../data/mt_gender, languages: [de, fr], sentences: 40, aligner_context: ../data/flores101}
      mucow: {path: ../data/mucow, pairs: [en-de], sentences: 80}
      dibimt: {path: /licensed/dibimt.jsonl, languages: [de], sentences: 500}   # your DiBiMT copy (closed)

Everything is validated before any work starts.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from dataclasses import dataclass, field
from pathlib import Path

from forgetbench.compress.bnb import check_available, check_placement
from forgetbench.compress.recipe import Recipe, load_recipe
from forgetbench.configs import dataclass_from, expect, is_type, known_keys, load_yaml_mapping, mapping
from forgetbench.errors import ForgetbenchError
from forgetbench.eval.analysis import Thresholds, TierView
from forgetbench.eval.attention_maps import MapsConfig
from forgetbench.eval.backends import BackendConfig, parse_backend, series_name, variant_backend
from forgetbench.eval.benchmarks import Benchmark, open_benchmark
from forgetbench.eval.bias import BiasConfig, dibimt_jobs, gender_jobs, mucow_jobs
from forgetbench.eval.bias import jobs as bias_jobs
from forgetbench.eval.gender_readers import COVERED
from forgetbench.eval.languages import language, tiers_from_counts
from forgetbench.eval.nllb_tiers import nllb_tiers
from forgetbench.eval.translate import Job
from forgetbench.io import training_counts
from forgetbench.models.hardware import Hardware, parse_hardware, place, with_overrides
from forgetbench.models.hub import resolve_model
from forgetbench.models.nllb_codes import NAME_OF, is_nllb_code
from forgetbench.models.tokenizers import is_nllb_folder
from forgetbench.outputs import confined_name

TOP_KEYS = {"name", "model", "variants", "benchmarks", "languages", "pairs", "sentences", "generation", "metrics",
            "analysis", "tiers", "threads", "base", "bias", "contrasts", "speed", "backend", "processes", "hardware",
            "attention_maps", "movement"}


@dataclass
class SweepConfig:
    name: str
    model: Path
    variants: dict[str, Recipe | None]
    base: str
    jobs: list[Job]
    generation: GenerationConfig
    spm: Path
    spm_official: bool
    thresholds: Thresholds
    tier_views: list[TierView]
    threads: int
    source: Path
    raw: dict = field(default_factory=dict)
    bias: BiasConfig | None = None
    variant_models: dict[str, Path] = field(default_factory=dict)  # variant -> the model folder it starts from
    contrasts: list[tuple[str, str]] = field(default_factory=list)
    speed_sentences: int = 0  # batch-1 speed on this many sentences per variant; 0 = not measured
    backend: BackendConfig = field(default_factory=BackendConfig)
    processes: int = 1  # worker processes (each with ``threads`` threads); the pairs are split between them
    hardware: Hardware = field(default_factory=Hardware)  # where every model of the sweep runs (models.hardware)
    hardware_flags: dict = field(default_factory=dict)  # the command line's overrides of the hardware block
    families: dict = field(default_factory=dict)  # template name -> Family (variants generated from one template)
    attention_maps: MapsConfig | None = None  # example cross-attention maps (eval.attention_maps); None: not drawn
    movement: list[tuple[str, str]] = field(default_factory=list)  # (a, b): losers/winners of a moving in b
    model_source: dict = field(default_factory=dict)  # models.hub.ModelSource.record(): folder, hub id, revision
    speed_rounds: int = 5  # interleaved timings of each variant against the base (eval.speed rule 2)
    quick_look: int | None = None  # --sentences N: at most N sentences wherever the config translates some
    extend: bool = False  # --extend: a rerun may change the work keys (sweep.run.WORK_KEYS) of its run folder

    def model_of(self, variant: str) -> Path:
        return self.variant_models.get(variant, self.model)

    def routed(self, variant: str) -> list[str]:
        """The target languages of a variant routed by target language (``eval.backends`` rule 4): one model per
        language any of the sweep's pairs (bias jobs included) translates into; [] for any other variant."""
        r = self.variants.get(variant)
        return self._targets if r is not None and r.routed_by_target else []

    @functools.cached_property
    def _targets(self) -> list[str]:
        return sorted({j.tgt for j in [*self.jobs, *bias_jobs(self.bias)]})

    def backend_of(self, variant: str) -> str:
        return variant_backend(self.variants[variant], self.backend)

    def series(self, variant: str) -> list[tuple[str, str]]:
        """(store name, backend) of every translation series of ``variant`` (``eval.backends`` rule 2)."""
        if variant != self.base:
            return [(variant, self.backend_of(variant))]
        used = dict.fromkeys([self.backend_of(variant), *map(self.backend_of, self.variants), "torch"])
        return [(series_name(variant, b, self.backend.name), b) for b in used]

    @property
    def series_names(self) -> list[str]:
        return [s for v in self.variants for s, _ in self.series(v)]

    @property
    def parity_series(self) -> list[str]:
        """The base translated by backends other than the setting's (torch always, for the parity check)."""
        return [s for s, _ in self.series(self.base)[1:]]

    @property
    def compared_series(self) -> set[str]:
        """The series a comparison reads (every variant but the base, and the base series each is compared with):
        the ones the cross-attention λ pass needs. A base translated only for the parity check is not among them."""
        comps = [v for v in self.variants if v != self.base]
        return set(comps) | {self.base_of(v) for v in comps}

    def base_of(self, series: str) -> str:
        """The base series a series is compared with: the base translated by the same backend."""
        if series in self.variants:
            return series_name(self.base, self.backend_of(series), self.backend.name)
        return self.base  # the base under a second backend: compared with the base (backend parity)


def _err(src, msg):
    raise ForgetbenchError(f"{src}: {msg}")


def resolve_path(base: Path, p) -> Path:
    """The one path resolver of sweep configs: relative paths resolve against the config file's folder."""
    p = Path(str(p))
    return p if p.is_absolute() else (base / p).resolve()


def _pairs(spec, langs: list[str], src) -> list[tuple[str, str]]:
    if spec in (None, "english-centric"):
        return [p for x in langs if x != "en" for p in (("en", x), (x, "en"))]
    if spec == "all":
        ls = sorted(set(langs) | {"en"})
        return [(a, b) for a in ls for b in ls if a != b]
    if isinstance(spec, list):
        out = []
        for s in spec:
            parts = str(s).split("-")
            if len(parts) != 2:
                _err(src, f"pair {s!r} is not of the form src-tgt (M2M-100 codes, e.g. en-de)")
            out.append((parts[0], parts[1]))
        return out
    _err(src, f"pairs must be english-centric, all, or a list; got {spec!r}")


def training_tiers(counts_file: Path, thresholds: list[int]) -> dict[str, str]:
    """Tiers from the project's own training-pair counts: < t0 Very-Low, < t1 Low, < t2 Medium, else High."""
    counts = training_counts(counts_file)
    if not counts:
        raise ForgetbenchError(f"{counts_file}: no corpus.train counts")
    return tiers_from_counts(counts, thresholds)


@dataclass(frozen=True)
class GenerationConfig:
    """``generation:`` decoding settings (greedy by default)."""

    num_beams: int = 1
    max_new_tokens: int = 128
    batch_size: int = 64


@dataclass(frozen=True)
class MetricsConfig:
    """``metrics:`` the SentencePiece model of spBLEU (null: the model's own) and whether it is FLORES-101's."""

    spm: str | None = None
    spm_official: bool = False


def load_sweep(path: str | Path, hardware: dict | None = None, sentences: int | None = None) -> SweepConfig:
    """The sweep config in ``path``, every key, type, path and benchmark file checked before any work, one
    section at a time (each reader names its section in its errors). ``hardware``: settings overriding the
    config's ``hardware`` block (the CLI flags), checked against this machine too; ``sentences``: the quick look
    (``--sentences N``), at most N sentences per pair, per bias benchmark and for the speed timings."""
    src = Path(path)
    raw = load_yaml_mapping(src, "sweep config")
    known_keys(raw, TOP_KEYS, str(src))
    if sentences is not None:
        raw = quick_look(raw, sentences)
    base_dir = src.parent.resolve()
    if "model" not in raw:
        _err(src, "'model' (a model folder or a hub id) is required")
    source = resolve_model(expect(raw["model"], str, f"{src}: model"), f"{src}: model", base_dir)
    model = source.folder
    variants, variant_models, base, families = _variants(raw, base_dir, src)
    contrasts = _contrasts(raw, variants, src)
    speed_n, speed_rounds = _speed(raw, src)
    jobs = _jobs(raw, base_dir, src)
    spm, spm_official = _metrics(raw, base_dir, src, model)
    th = _thresholds(raw, src)
    views = _tier_views(raw, base_dir, src, model)
    threads, processes = _positive(raw, "threads", src), _positive(raw, "processes", src)
    name = str(raw.get("name") or src.stem)
    confined_name(name, "name", str(src))  # it names the default run folder
    bias = load_bias(raw.get("bias"), base_dir, src, model)
    backend = parse_backend(raw.get("backend"), f"{src}: backend")
    _check_backend(backend, variants, variant_models, model, src)
    hw = with_overrides(parse_hardware(raw.get("hardware"), f"{src}: hardware", base_dir), None, **(hardware or {}))
    placement = place(hw, f"{src}: hardware")  # the machine's answer now, before any work
    gen = _generation(raw, src, placement.device)
    for v, r in variants.items():
        if r is not None and r.load_quantisation is not None:
            check_available(f"{src}: variants.{v} ({r.name})", placement.cuda)
            check_placement(f"{src}: variants.{v} ({r.name})", placement)
    cfg = SweepConfig(name, model, variants, base, jobs, gen, spm, spm_official, th, views, threads, src, raw, bias,
                      variant_models, contrasts, speed_n, backend, processes, hw, dict(hardware or {}), families,
                      _attention_maps(raw, src), _pairs_of_variants(raw, "movement", variants, src), source.record(),
                      speed_rounds, sentences)
    _check_routed(cfg)
    return cfg


def quick_look(raw: dict, n: int) -> dict:
    """The config with at most ``n`` sentences wherever it translates a number of them (``sentences``, each bias
    benchmark's, ``speed``'s); ``SweepConfig.quick_look`` and the run's ``config.yaml`` record it."""
    raw = dict(raw) | {"sentences": min(n, raw.get("sentences") or n)}
    if isinstance(raw.get("bias"), dict):
        raw["bias"] = {k: (dict(b) | {"sentences": min(n, b.get("sentences") or n)} if isinstance(b, dict) else b)
                       for k, b in raw["bias"].items()}
    if isinstance(raw.get("speed"), dict):
        raw["speed"] = dict(raw["speed"]) | {"sentences": min(n, raw["speed"].get("sentences") or n)}
    return raw


def _check_routed(cfg: SweepConfig) -> None:
    """Before any work: a variant routed by target language has its calibration rows for every target language of
    the sweep (``calibration.choose`` on each language's calibration, the model's training languages applied)."""
    from forgetbench.compress.calibration import choose, read_calibration_tsv, trained_languages

    for v in cfg.variants:
        if not cfg.routed(v):
            continue
        trained = trained_languages(cfg.model_of(v))
        for cal in [s.calibration for s in cfg.variants[v].steps if s.calibration is not None and s.calibration.routed]:
            rows = read_calibration_tsv(cal.data)
            for lang in cfg.routed(v):
                try:
                    choose(rows, dataclasses.replace(cal, language=lang), trained)
                except ForgetbenchError as e:
                    _err(cfg.source, f"variants.{v} (routed by target language, the model for {lang}): {e}")


def _variants(raw: dict, base_dir: Path, src) -> tuple[dict[str, Recipe | None], dict[str, Path], str, dict]:
    """``variants:`` name -> recipe (null: the base), {model, recipe} for another model, or a template
    {recipe: STEP, option: [values], ...} for a family of variants; the base's name; the families."""
    variants_raw = raw.get("variants") or {"base": None}
    if not isinstance(variants_raw, dict):
        _err(src, "variants must be a mapping name -> recipe (null for the uncompressed base)")
    variants: dict[str, Recipe | None] = {}
    variant_models: dict[str, Path] = {}
    families: dict[str, Family] = {}
    for name, r in variants_raw.items():
        if not str(name).replace("-", "").replace("_", "").isalnum():
            _err(src, f"variant name {name!r}: use letters, digits, - and _")
        expect(r, (str, type(None), dict), f"{src}: variants.{name}")
        if isinstance(r, dict) and "model" not in r and r.get("recipe") in TEMPLATE_STEPS:
            members, family = expand_template(str(name), r, base_dir, src)
            clash = sorted(set(members) & (set(variants) | set(variants_raw)))
            if clash:
                _err(src, f"variants.{name}: generated variant(s) {clash} clash with other variant names")
            variants |= members
            families[str(name)] = family
            continue
        if isinstance(r, dict):
            if set(r) - {"model", "recipe"} or not r:
                _err(src, f"variants.{name}: a mapping has 'recipe' (a recipe name or file) and/or 'model' (a model "
                          f"folder); got {sorted(r)}")
            if "model" in r:
                variant_models[str(name)] = resolve_model(expect(r["model"], str, f"{src}: variants.{name}.model"),
                                                          f"{src}: variants.{name}.model", base_dir).folder
            r = expect(r.get("recipe"), (str, type(None)), f"{src}: variants.{name}.recipe")
        try:
            beside = resolve_path(base_dir, r) if r is not None and Path(str(r)).suffix else None
            variants[str(name)] = None if r is None else load_recipe(  # a file beside the config, else a shipped one
                str(beside) if beside is not None and beside.is_file() else str(r))
        except ForgetbenchError as e:
            msg = str(e)
            raise ForgetbenchError(msg if msg.startswith(str(src)) else f"{src}: variants.{name}: {msg}") from None
    base = raw.get("base") or next((n for n, r in variants.items() if r is None and n not in variant_models), None)
    if base not in variants or variants[base] is not None:
        _err(src, "one variant must be the uncompressed base (recipe null)")
    return variants, variant_models, base, families


TEMPLATE_STEPS = ("prune", "quantize")


@dataclass(frozen=True)
class Family:
    """Variants generated from one template: ``{name: {recipe: prune, sparsity: [0.1, 0.2], scope: layer}}`` gives
    ``name-10``, ``name-20``; the one list-valued option is the family's axis (numeric: a ladder, drawn as a line;
    names: a comparison, drawn as bars)."""

    name: str
    axis: str
    members: dict  # variant -> its axis value

    @property
    def numeric(self) -> bool:
        return all(is_type(v, (int, float)) for v in self.members.values())

    def to_dict(self) -> dict:
        return {"axis": self.axis, "members": self.members, "numeric": self.numeric}


def _axis(spec: dict) -> tuple[str, tuple]:
    lists = [k for k, v in spec.items() if isinstance(v, list)]
    return (lists[0], tuple(spec[lists[0]])) if len(lists) == 1 else ("", ())


def member_name(family: str, value) -> str:
    """``ladder`` + 0.3 → ``ladder-30`` (a fraction in percent), + "attn-ffn" → ``ladder-attn-ffn``."""
    if is_type(value, (int, float)):
        pct = value * 100 if 0 < value < 1 else value
        return f"{family}-{pct:g}".replace(".", "_")
    return f"{family}-{value}"


def expand_template(name: str, spec: dict, base_dir: Path, src) -> tuple[dict[str, Recipe], Family]:
    """A template's variants and their ``Family``: one recipe of one ``recipe`` step per value of its list option,
    the other options as given; each recipe validated as a recipe file is."""
    from forgetbench.compress.recipe import parse_recipe

    kind = spec["recipe"]
    opts = {k: v for k, v in spec.items() if k != "recipe"}
    axis, values = _axis(spec)
    if not axis or not values:
        _err(src, f"variants.{name}: a template needs exactly one option with a list of values (e.g. sparsity: "
                  f"[0.1, 0.2]); got {sorted(opts)}")
    if len(set(map(str, values))) != len(values):
        _err(src, f"variants.{name}.{axis}: repeated values {values}")
    out = {}
    for value in values:
        vname = member_name(name, value)
        step = {kind: opts | {axis: value}}
        out[vname] = parse_recipe({"name": vname, "description": f"{name}: {axis} {value}", "steps": [step]},
                                  f"{src}: variants.{name} ({axis} {value})", base_dir)
    return out, Family(name, axis, dict(zip(out, values, strict=True)))


def _attention_maps(raw: dict, src) -> MapsConfig | None:
    """``attention_maps: {sentences: 2, layers: all}``: example maps per variant (absent: none drawn)."""
    if "attention_maps" not in raw:
        return None
    return dataclass_from(MapsConfig, raw["attention_maps"] or {}, f"{src}: attention_maps")


def _pairs_of_variants(raw: dict, key: str, variants: dict, src) -> list[tuple[str, str]]:
    out = []
    for c in expect(raw.get(key) or [], list, f"{src}: {key}"):
        if not isinstance(c, list) or len(c) != 2 or not all(x in variants for x in c) or c[0] == c[1]:
            _err(src, f"{key}: {c!r} is not a pair of two different variant names ({', '.join(variants)})")
        out.append((str(c[0]), str(c[1])))
    return out


def _contrasts(raw: dict, variants: dict, src) -> list[tuple[str, str]]:
    return _pairs_of_variants(raw, "contrasts", variants, src)


def _speed(raw: dict, src) -> tuple[int, int]:
    """``speed: {sentences: n, rounds: r}``: n sentences per variant (20 when the block is empty; 0 without the
    block), timed in r interleaved rounds against the base (default 5; ``eval.speed`` rule 2)."""
    speed = mapping(raw.get("speed"), f"{src}: speed")
    known_keys(speed, {"sentences", "rounds"}, f"{src}: speed")
    speed_n, rounds = speed.get("sentences", 20 if speed else 0), speed.get("rounds", 5)
    if not is_type(speed_n, int) or speed_n < (1 if speed else 0):
        _err(src, f"speed.sentences must be a positive integer, got {speed_n!r}")
    if not is_type(rounds, int) or rounds < 2:
        _err(src, f"speed.rounds must be an integer of at least 2 (an interval needs repeats), got {rounds!r}")
    return speed_n, rounds


def _project_name(code: str, where: str) -> str:
    """A language as sweeps and reports name it: a project name (``de``), or the NLLB-200 code of one of the 101
    FLORES-101 languages (``deu_Latn`` → ``de``); an NLLB code beyond them is refused in one line."""
    if is_nllb_code(code):
        if code not in NAME_OF:
            raise ForgetbenchError(f"{where}: {code} is an NLLB-200 language outside the 101 FLORES-101 languages that "
                                   f"sweeps and reports cover (tiers, scripts, language identification); name one of "
                                   f"those (de or deu_Latn …)")
        return NAME_OF[code]
    language(code, where)
    return code


def _jobs(raw: dict, base_dir: Path, src) -> list[Job]:
    """``languages``, ``pairs``, ``sentences`` and ``benchmarks``: one job per benchmark and pair, files checked."""
    langs = [_project_name(str(x), f"{src}: languages") for x in expect(raw.get("languages") or [], list,
                                                                      f"{src}: languages")]
    pairs = _pairs(raw.get("pairs"), langs, src)
    if not pairs:
        _err(src, "no language pairs: give 'languages' and/or 'pairs'")
    pairs = [(_project_name(s, f"{src}: pairs ({s}-{t})"), _project_name(t, f"{src}: pairs ({s}-{t})"))
             for s, t in pairs]
    limit = raw.get("sentences")
    if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 1):
        _err(src, f"sentences must be a positive integer, got {limit!r}")
    benches: list[Benchmark] = []
    for b in expect(raw.get("benchmarks") or [], list, f"{src}: benchmarks"):
        if not isinstance(b, dict) or not {"name", "kind", "path"} <= set(b):
            _err(src, "each benchmark needs name, kind and path")
        known_keys(b, {"name", "kind", "path", "split", "config"}, f"{src}: benchmark {b['name']}",
                   " (split and config for kind dataset)")
        confined_name(str(b["name"]), "benchmark name", str(src))
        path = str(b["path"]) if str(b["path"]).startswith("hub:") else resolve_path(base_dir, b["path"])
        benches.append(open_benchmark(b["name"], b["kind"], path, b.get("split"), b.get("config")))
    if not benches:
        _err(src, "no benchmarks")
    jobs = []
    for bench in benches:
        for s, t in pairs:
            bench.pair(s, t)  # validates files and line counts now
            jobs.append(Job(bench, s, t, limit))
    return jobs


AUTO_BATCH = {"cpu": 64, "cuda": 512}  # batch_size: auto starts here; out of memory, it halves (eval.translate)


def _generation(raw: dict, src, device: str) -> GenerationConfig:
    """``generation:``; ``batch_size: auto`` is ``AUTO_BATCH`` of the device the sweep runs on."""
    values = mapping(raw.get("generation"), f"{src}: generation")
    if values.get("batch_size") == "auto":
        values = values | {"batch_size": AUTO_BATCH["cuda" if device.startswith("cuda") else "cpu"]}
    for k in ("num_beams", "max_new_tokens", "batch_size"):
        v = values.get(k, getattr(GenerationConfig, k))
        if not is_type(v, int) or v < 1:
            _err(src, f"generation.{k} must be a positive integer{' or auto' if k == 'batch_size' else ''}, got {v!r}")
    return dataclass_from(GenerationConfig, values, f"{src}: generation")


def _metrics(raw: dict, base_dir: Path, src, model: Path) -> tuple[Path, bool]:
    m = dataclass_from(MetricsConfig, raw.get("metrics"), f"{src}: metrics")
    spm = resolve_path(base_dir, m.spm) if m.spm else model / "sentencepiece.bpe.model"
    if not spm.is_file():
        _err(src, f"SentencePiece model for spBLEU {spm} not found (metrics.spm)")
    return spm, bool(m.spm_official)


def _thresholds(raw: dict, src) -> Thresholds:
    th = dataclass_from(Thresholds, raw.get("analysis"), f"{src}: analysis")
    if not isinstance(th.bleu_filter, (int, float)) or th.bleu_filter < 0:
        _err(src, f"analysis.bleu_filter must be a number >= 0, got {th.bleu_filter!r}")
    if not isinstance(th.delta, (int, float)) or th.delta < 0:
        _err(src, f"analysis.delta must be a number >= 0, got {th.delta!r}")
    return th


def _tier_views(raw: dict, base_dir: Path, src, model: Path | None = None) -> list[TierView]:
    """The thesis tiers, then every ``tiers:`` view: ``{counts: training.json, thresholds: [...]}`` (tiers from a
    training run's pair counts) or ``{table: nllb-200}`` (NLLB-200's high/low labels, ``eval.nllb_tiers``), which
    an NLLB model's sweep gets by itself as the view ``nllb-200``."""
    views = [TierView("thesis")]
    tables = {"nllb-200": nllb_tiers}
    for vname, spec in mapping(raw.get("tiers"), f"{src}: tiers").items():
        confined_name(str(vname), "tier view name", f"{src}: tiers")  # it names report files
        spec = mapping(spec, f"{src}: tiers.{vname}")
        if "table" in spec:
            if set(spec) != {"table"} or spec["table"] not in tables:
                _err(src, f"tiers.{vname}: a shipped table is named alone, one of {sorted(tables)}; got {spec!r}")
            views.append(TierView(str(vname), tables[spec["table"]]()))
            continue
        if "counts" not in spec:
            _err(src, f"tiers.{vname} needs 'counts' (a training.json with corpus.train pair counts) or 'table' "
                      f"(one of {sorted(tables)})")
        counts = resolve_path(base_dir, expect(spec["counts"], str, f"{src}: tiers.{vname}.counts"))
        if not counts.is_file():
            _err(src, f"tiers.{vname}.counts: {counts} not found")
        thresholds = expect(spec.get("thresholds", [1000, 10000, 30000]), list, f"{src}: tiers.{vname}.thresholds")
        if len(thresholds) != 3 or not all(is_type(t, int) for t in thresholds) or thresholds != sorted(thresholds):
            _err(src, f"tiers.{vname}.thresholds must be 3 increasing integers (Very-Low/Low/Medium/High bounds), "
                      f"got {thresholds!r}")
        views.append(TierView(str(vname), training_tiers(counts, thresholds)))
    if model is not None and is_nllb_folder(model) and not any(v.name == "nllb-200" for v in views):
        views.append(TierView("nllb-200", nllb_tiers()))
    return views


def _positive(raw: dict, key: str, src) -> int:
    value = raw.get(key, 1)
    if not is_type(value, int) or value < 1:
        _err(src, f"{key} must be a positive integer, got {value!r}")
    return value


def _check_backend(backend: BackendConfig, variants: dict, variant_models: dict, model: Path, src) -> None:
    if backend.name == "ctranslate2":
        for v, r in variants.items():
            m = variant_models.get(v, model)
            mtype = json.loads((m / "config.json").read_text(encoding="utf-8")).get("model_type")
            if variant_backend(r, backend) == "ctranslate2" and mtype != "m2m_100":
                _err(src, f"backend: ctranslate2 converts M2M-100 / SMaLL-100 (model_type m2m_100), not {mtype!r} "
                          f"(variant {v}, {m}); set backend: torch")


def load_bias(spec: dict | None, base_dir: Path, src: Path | str = "<config>", model=None) -> BiasConfig | None:
    """The ``bias`` block: MT-Gender (balanced pro/anti sample), MuCoW, DiBiMT and MT-GenEval jobs; paths through
    ``resolve_path``; ``model``: the sweep's model folder (MT-GenEval's languages it was not trained on skipped)."""
    spec = mapping(spec, f"{src}: bias")
    if not spec:
        return None
    known_keys(spec, {"mt_gender", "mucow", "dibimt", "mt_geneval"}, f"{src}: bias")
    allowed = {"mt_gender": {"path", "languages", "sentences", "aligner_context", "eflomal_context"},
               "mucow": {"path", "pairs", "sentences"}, "dibimt": {"path", "languages", "sentences"},
               "mt_geneval": {"path", "languages", "sentences", "sets"}}
    for block, keys in allowed.items():
        if block in spec:
            b = mapping(spec[block], f"{src}: bias.{block}")
            if "path" not in b:
                raise ForgetbenchError(f"{src}: bias.{block} needs 'path' (the benchmark folder)")
            known_keys(b, keys, f"{src}: bias.{block}")
            for k, kind in (("path", str), ("languages", list), ("pairs", list), ("aligner_context", str),
                            ("eflomal_context", str), ("sets", list)):
                if k in b:
                    expect(b[k], kind, f"{src}: bias.{block}.{k}")
            if "sentences" in b and (not is_type(b["sentences"], int) or b["sentences"] < 1):
                raise ForgetbenchError(f"{src}: bias.{block}.sentences must be a positive integer, got {b['sentences']!r}")
    rows, gjobs, mucow, ctx, dibimt = [], [], {}, None, {}
    if "mt_gender" in spec:
        g = spec["mt_gender"]
        langs = g.get("languages", list(COVERED))
        bad = [x for x in langs if x not in COVERED]
        if bad:
            raise ForgetbenchError(f"{src}: bias.mt_gender.languages: no gender reader for {bad}; covered: "
                                   f"{', '.join(COVERED)}")
        rows, gjobs = gender_jobs(resolve_path(base_dir, g["path"]), langs, g.get("sentences"))
        context = g.get("aligner_context") or g.get("eflomal_context")  # eflomal_context: the key before fast_align
        if context:
            ctx = open_benchmark("aligner-context", "flores101", resolve_path(base_dir, context))
    if "mucow" in spec:
        m = spec["mucow"]
        pairs = m.get("pairs", ["en-de", "en-ru"])
        for pair in pairs:
            if not isinstance(pair, str) or len(pair.split("-")) != 2:
                raise ForgetbenchError(f"{src}: bias.mucow.pairs: {pair!r} is not of the form en-xx")
        mucow = mucow_jobs(resolve_path(base_dir, m["path"]), pairs, m.get("sentences"))
    if "dibimt" in spec:
        d = spec["dibimt"]
        path = resolve_path(base_dir, d["path"])
        if not path.is_file():
            raise ForgetbenchError(f"{src}: bias.dibimt.path: {path} not found (DiBiMT is closed: your licensed copy as "
                                   "JSONL, docs/METHOD.md §2.8)")
        for lang in d.get("languages") or []:
            language(lang, f"{src}: bias.dibimt.languages")
        dibimt = dibimt_jobs(path, d.get("languages"), d.get("sentences"))
    cfg = BiasConfig(rows, gjobs, mucow, ctx, dibimt)
    if "mt_geneval" in spec:
        _mt_geneval(cfg, spec["mt_geneval"], base_dir, src, model)
    return cfg


def _mt_geneval(cfg: BiasConfig, g: dict, base_dir: Path, src, model) -> None:
    """``bias.mt_geneval`` (``mt_geneval_suite.configure``), the model's training languages applied."""
    from forgetbench.compress.calibration import trained_languages
    from forgetbench.eval.mt_geneval_suite import configure

    trained = trained_languages(model) if model is not None else None
    cfg.mt_geneval, cfg.mt_geneval_skipped, cfg.mt_geneval_settings = configure(
        g, resolve_path(base_dir, g["path"]), trained, f"{Path(str(model)).name}/training.json", f"{src}: bias.mt_geneval")
