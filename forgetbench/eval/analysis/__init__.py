"""The analyses of "what did compression forget" (docs/METHOD.md §2), from a run store.

One module per section (``core``: the run's data, the pairs and their paired intervals; ``variants``, ``tiers``,
``deltas``, ``off_target``, ``cross_attention``, ``languages``, ``groups``); ``analyse`` here runs them in order, and
every public name is importable from ``forgetbench.eval.analysis`` itself.

One function per section of the report, each returning a typed result that serialises
(``to_dict``) to the keys of ``summary.json``:

- ``pair_results``: corpus chrF3 / spBLEU per pair and variant, relative differences, the
  baseline-spBLEU filter, tiers per view; and the per-sentence ΔchrF of the kept pairs.
- ``variant_table``: size and mean score per variant (thesis table 5.2).
- ``tier_tables``: mean relative difference per pair / source / target tier, per tier view.
- ``delta_summary``: ΔchrF losers (Δ < −delta) and winners (Δ > +delta).
- ``off_target``: off-target rate of base and variant on the losers and overall.
- ``lid_coverage``: which identifier covers each language ("undefined" where none does).
- ``hallucination``: cross-attention λ on losers / winners / all, ratio of subset means.
- ``examples``: the most losing and most winning sentences.
- ``languages``: each language as source and as target.
- ``pair_groups``: every variant's mean scores per (source tier, target tier) group, VL2VL … H2H as the
  SMaLL-100 study's table, and head-to-head contrasts between named variants (a distilled student vs
  its no-KD twin) with stratified intervals.

Every difference carries its paired bootstrap 95 % interval (``eval.bootstrap``): per pair (with a
p-value, Benjamini–Hochberg across the kept pairs for "significantly worse / better"), per tier and
per variant (stratified: each pair's sentences resampled within the pair), and for the ΔchrF shares,
off-target rates and λ (the same per-pair resamples). ``Thresholds.resamples`` / ``seed`` set them.

Every comparison between a compressed variant and the base uses the sentences both have.
Thresholds (configurable; defaults from docs/METHOD.md): baseline-spBLEU pair filter ≥ 12, ΔchrF
losers < −0.5 and winners > +0.5 chrF points, languages with two scripts excluded from the Δ
analysis. Means, relative changes and percentages are ``forgetbench.stats``'.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import ClassVar

from forgetbench.eval.analysis.core import (  # noqa: F401 - re-exported: the analysis's public names
    Difference,
    Key,
    PairResult,
    RelSamples,
    RunData,
    SentenceDelta,
    Thresholds,
    TierView,
    _mean_difference,
    is_two_script_excluded,
    mark_significance,
    pair_results,
    plain,
    score_stats,
    sentences_analysed,
    signatures,
)
from forgetbench.eval.analysis.cross_attention import (  # noqa: F401 - re-exported: the analysis's public names
    LambdaResult,
    hallucination,
    on_target_items,
)
from forgetbench.eval.analysis.deltas import (  # noqa: F401 - re-exported: the analysis's public names
    MOVES,
    DeltaGroups,
    DeltaResult,
    Example,
    Movement,
    delta_groups,
    delta_summary,
    examples,
    movement,
)
from forgetbench.eval.analysis.groups import (  # noqa: F401 - re-exported: the analysis's public names
    BackendParity,
    PairGroup,
    ParityRow,
    backend_parity,
    pair_groups,
)
from forgetbench.eval.analysis.languages import (  # noqa: F401 - re-exported: the analysis's public names
    LanguageResult,
    RoleResult,
    languages,
)
from forgetbench.eval.analysis.off_target import (  # noqa: F401 - re-exported: the analysis's public names
    LidCoverage,
    OffTargetResult,
    Rate,
    RatePair,
    TargetRate,
    lid_coverage,
    off_target,
    off_target_change,
    off_target_rate,
    pair_languages,
)
from forgetbench.eval.analysis.tiers import (  # noqa: F401 - re-exported: the analysis's public names
    TierCell,
    TierContrast,
    tier_contrasts,
    tier_tables,
)
from forgetbench.eval.analysis.variants import (  # noqa: F401 - re-exported: the analysis's public names
    VariantRow,
    group_interval,
    variant_table,
)
from forgetbench.eval.metrics import SpBLEU
from forgetbench.eval.store import Store
from forgetbench.eval.translate import Job


@dataclass
class Analysis:
    optional: ClassVar[tuple[str, ...]] = ("families", "movement")  # in summary.json only where a run has them

    base: str
    variants: list[str]
    thresholds: Thresholds
    signatures: dict
    pairs: list[PairResult] = field(default_factory=list)
    tiers: dict = field(default_factory=dict)
    variant_table: list[VariantRow] = field(default_factory=list)
    delta: dict[str, DeltaResult] = field(default_factory=dict)
    off_target: dict[str, OffTargetResult] = field(default_factory=dict)
    lid_coverage: list[LidCoverage] = field(default_factory=list)
    hallucination: dict[str, dict[str, LambdaResult]] = field(default_factory=dict)
    examples: dict[str, dict[str, list[Example]]] = field(default_factory=dict)
    languages: list[LanguageResult] = field(default_factory=list)
    tier_contrasts: dict[str, dict[str, dict[str, TierContrast]]] = field(default_factory=dict)  # view, variant, metric
    pair_groups: dict[str, dict[str, PairGroup]] = field(default_factory=dict)  # view -> group (VL2VL … H2H, low, all)
    bases: dict = field(default_factory=dict)  # variant -> the base series it is compared with (its backend's)
    backend_parity: dict[str, BackendParity] = field(default_factory=dict)  # other base series -> vs the base
    families: dict = field(default_factory=dict)  # template -> eval.families.FamilyResult (only where a sweep has one)
    movement: dict = field(default_factory=dict)  # "a|b" -> Movement (only where a sweep asks for it)

    def to_dict(self) -> dict:
        return {f.name: plain(getattr(self, f.name)) for f in fields(self)
                if f.name not in self.optional or getattr(self, f.name)}


def analyse(store: Store, jobs: list[Job], base: str, variants: list[str], spbleu: SpBLEU,
            thresholds: Thresholds | None = None, tier_views: list[TierView] | None = None,
            n_examples: int = 5, contrasts: list[tuple[str, str]] | None = None,
            bases: dict[str, str] | None = None, parity: list[str] | None = None, families: dict | None = None,
            movements: list[tuple[str, str]] | None = None) -> Analysis:
    """``parity``: the base translated by other backends (series names in ``variants``), each compared with
    ``base`` in ``backend_parity``; ``bases``: variant -> base series where it is not ``base`` (a variant
    translated by another backend is compared with the base translated by that backend)."""
    run = RunData.load(store, jobs, base, variants, thresholds or Thresholds(), tier_views or [TierView("thesis")])
    run.contrasts = list(contrasts or [])
    run.parity = list(parity or [])
    run.bases = {v: b for v, b in (bases or {}).items() if b != base and v not in run.parity}
    pairs, sentences, samples = pair_results(run, spbleu)
    groups = delta_groups(run, sentences)
    A = Analysis(base, variants, run.thresholds, signatures(run, spbleu), pairs, tier_tables(run, pairs, samples),
                 variant_table(run, pairs, samples), delta_summary(run, groups), off_target(run, groups),
                 lid_coverage(pairs), hallucination(run, groups), examples(run, groups, n_examples),
                 languages(run, pairs, groups))
    A.tier_contrasts = tier_contrasts(run, pairs, samples)
    A.pair_groups = pair_groups(run, pairs)
    A.bases = {v: run.base_of(v) for v in run.comps}
    A.backend_parity = backend_parity(run, pairs)
    A.movement = {f"{a}|{b}": movement(run, sentences, a, b) for a, b in movements or []}
    if families:
        from forgetbench.eval.families import family_results

        A.families = family_results(run, pairs, samples, families)
    return A
