"""A run's summary as one typed value: the analysis (``eval.analysis.Analysis``, docs/METHOD.md §2.2–2.6, §3.6),
the bias benchmarks (``BiasSummary``, §2.7–2.8), the study's claims tested (``Finding``, §2.11) and the run's
records. ``sweep.summarise`` makes it, the report reads it, and ``summary.json`` is its ``to_dict()``.

The variants compared with a base (``Summary.comparisons``) are found once, from ``bases``: the base translated by
another backend is the parity check, not a comparison. The records other passes wrote (``speed``,
``distillation_signals``, ``attention_maps``, ``calibrations``, ``run``) are carried as those passes store them
(``eval.speed``, ``distill.signals``, ``eval.attention_maps``, ``compress.calibration``, ``sweep.run``).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from functools import cached_property
from typing import ClassVar

from forgetbench.eval.analysis import Analysis, plain

GENDER_AVERAGES = ("accuracy", "f1_male", "f1_female", "delta_g", "delta_s", "psi", "psi_star")


@dataclass
class GenderResult:
    """One series on MT-Gender: per target language its scores (``eval.gender_metrics``), their average over the
    languages, and for a compared series its change from its base; intervals stratified by language."""

    languages: dict[str, dict]  # target language -> n, accuracy, F1 per gender, ΔG, ΔS, ψ, ψ*
    average: dict[str, float | None]  # GENDER_AVERAGES over the languages
    relative_to_base: dict[str, float | None] | None = None  # accuracy, psi, psi_star, delta_g: relative change (%)
    ci: dict[str, list] | None = None  # accuracy, psi, psi_star -> 95 % interval of the average
    change_ci: dict[str, list] | None = None  # the same, of the change from the base (paired items)

    def to_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}


@dataclass
class AlignerComparison:
    """The profession aligned by the model's cross-attention against fast_align, on the same items."""

    items: int
    same_gender_read_pct: float | None
    by_variant: dict[str, dict[str, dict[str, float | None]]]  # variant -> aligner -> accuracy, psi, psi_star

    def to_dict(self) -> dict:
        return {"items": self.items, "same_gender_read_pct": self.same_gender_read_pct, **self.by_variant}

    @classmethod
    def from_record(cls, d: dict) -> AlignerComparison:
        return cls(d["items"], d["same_gender_read_pct"],
                   {k: v for k, v in d.items() if k not in ("items", "same_gender_read_pct")})


@dataclass
class MTGenEvalResult:
    """MT-GenEval (``eval.mt_geneval_suite``): per language and series the accuracies (%), the gap and their
    intervals and changes from the base; their average over the languages every series has; what was skipped."""

    languages: dict[str, dict[str, dict]]  # language -> series -> feminine, masculine, combined, gap, contextual, *_ci
    average: dict[str, dict]  # series -> the same over languages (each equally weighted), with intervals
    skipped: dict[str, str]  # language -> why it is not scored
    settings: dict  # path, sentences, sets


@dataclass
class BiasSummary:
    """The bias benchmarks of a run (``eval.bias.analyse_bias``)."""

    gender: dict[str, GenderResult] = field(default_factory=dict)
    word_sense: dict[str, dict[str, dict]] = field(default_factory=dict)  # MuCoW pair -> series -> scores, intervals
    aligner_comparison: AlignerComparison | None = None
    dibimt: dict[str, dict[str, dict]] | None = None  # language -> series -> DiBiMT metrics with intervals
    gender_readers: str | None = None  # the readers' version the items were read with
    mt_geneval: MTGenEvalResult | None = None
    contrasts: dict[str, dict] | None = None  # "a vs b" -> benchmark -> metric -> difference a − b and its interval

    def to_dict(self) -> dict:
        return {f.name: plain(getattr(self, f.name)) for f in fields(self)
                if f.name in ("gender", "word_sense") or getattr(self, f.name) is not None}

    @classmethod
    def from_record(cls, d: dict) -> BiasSummary | None:
        """From ``analyse_bias``'s record; None where the run has no bias benchmark."""
        if not d:
            return None
        ac = d.get("aligner_comparison")
        return cls({v: GenderResult(**g) for v, g in d.get("gender", {}).items()}, d.get("word_sense", {}),
                   AlignerComparison.from_record(ac) if ac else None, d.get("dibimt"), d.get("gender_readers"),
                   MTGenEvalResult(**d["mt_geneval"]) if d.get("mt_geneval") else None, d.get("contrasts"))


@dataclass
class Finding:
    """One claim of the study tested on one variant (``eval.findings``)."""

    claim: str
    variant: str
    outcome: str  # supported | contradicted | inconclusive
    numbers: str  # the statistic and its interval, as text


@dataclass
class Summary(Analysis):
    """The analysis, the bias benchmarks, the findings and the run's settings and records."""

    optional: ClassVar[tuple[str, ...]] = (*Analysis.optional, "attention_maps", "calibrations")

    bias: BiasSummary | None = None
    name: str = ""
    model: str = ""
    model_source: dict | str | None = None
    quick_look: int | None = None  # --sentences N: a quick look at N sentences per pair
    speed: dict[str, dict] = field(default_factory=dict)  # series -> its timing record (eval.speed)
    distillation_signals: dict[str, dict] = field(default_factory=dict)  # student -> first/last probe (distill)
    backend: str = "torch"
    backends: dict[str, str] = field(default_factory=dict)  # series -> the backend that translated it
    variant_models: dict[str, str] = field(default_factory=dict)  # variant -> its model folder
    tier_views: dict[str, dict | None] = field(default_factory=dict)  # view -> its tiers (None: the thesis table)
    run: dict = field(default_factory=dict)  # threads, generation, environment, processes, stages, seconds …
    attention_maps: dict[str, dict] = field(default_factory=dict)  # variant -> example maps (eval.attention_maps)
    calibrations: dict[str, dict] = field(default_factory=dict)  # data-aware variant -> its calibration choice
    findings: list[Finding] = field(default_factory=list)

    @classmethod
    def of(cls, analysis: Analysis, **rest) -> Summary:
        """The analysis with the rest of a run's summary."""
        return cls(**{f.name: getattr(analysis, f.name) for f in fields(analysis)}, **rest)

    @cached_property
    def comparisons(self) -> list[str]:
        """The variants compared with a base, in order (the base translated by another backend is not one)."""
        return list(self.bases)

    @property
    def kept_pairs(self) -> list:
        """The pairs the base-spBLEU filter kept (every average, finding and figure reads these)."""
        return [p for p in self.pairs if p.kept]

    def size_of(self, variant: str) -> dict:
        """A variant's size record (``sweep.run.model_sizes``); {} where it has none."""
        return next((r.size for r in self.variant_table if r.variant == variant), {})

    def base_of(self, variant: str) -> str:
        """The base series a variant is compared with (its backend's)."""
        return self.bases.get(variant, self.base)

    def to_dict(self) -> dict:
        d = super().to_dict()
        d["bias"] = d["bias"] or {}  # a run without bias benchmarks: {} in its place
        return d
