"""Cross-attention maps of example sentences, base beside compressed (the study's Figures 5.6–5.8).

    attention_maps: {sentences: 2, layers: all}     # a sweep config's block; layers: all | last | [0, 2]

Rules:

1. The examples of a compared variant are its on-target losers and winners (``analysis.on_target_items``: both
   hypotheses identified as the target language, or the language not covered) among the sentences the analysis
   reads (``analysis.sentences_analysed``: kept pairs, two-script languages excluded): the ``sentences`` most
   losing (lowest ΔchrF below −delta) and most winning (highest above +delta), ties by pair and index.
2. Each map is α of ``eval.hallucination.cross_attention``: teacher-forced on that model's own hypothesis,
   averaged over the chosen decoder layers and all heads (all layers: what λ reads), padding removed, rows
   renormalised; its axes are the model's own SentencePiece pieces (source; its output). Base and compressed
   maps of one sentence share the source axis; their output axes are each model's output.
3. Maps are stored once per variant (``attention:<variant>`` in the store: a rerun reuses them) with 4 decimals.
"""

from __future__ import annotations

from dataclasses import dataclass

from forgetbench.errors import ForgetbenchError
from forgetbench.eval.hallucination import cross_attention
from forgetbench.stats import delta_class


@dataclass(frozen=True)
class MapsConfig:
    sentences: int = 2  # losers and winners per variant
    layers: object = "all"  # "all" | "last" | [layer indices]

    def __post_init__(self):
        if isinstance(self.sentences, bool) or not isinstance(self.sentences, int) or self.sentences < 1:
            raise ForgetbenchError(f"attention_maps.sentences must be a positive integer, got {self.sentences!r}")
        ok = self.layers in ("all", "last") or (isinstance(self.layers, list) and self.layers
                                                 and all(isinstance(i, int) and not isinstance(i, bool) and i >= 0
                                                         for i in self.layers))
        if not ok:
            raise ForgetbenchError(f"attention_maps.layers must be all, last or a list of decoder layer numbers, got "
                                   f"{self.layers!r}")


def pick_examples(deltas: list[tuple[tuple, int, float]], on_target: dict, base: str, variant: str, delta: float,
                  n: int) -> dict[str, list[tuple[tuple, int, float]]]:
    """Rule 1 over ``deltas`` = [(job key, index, ΔchrF)] of the analysed sentences; ``on_target``: the store's
    on_target statistics."""
    def on(key, i):
        hb, hc = on_target.get((base, *key, i)), on_target.get((variant, *key, i))
        return not ((hb is not None and hb < 1) or (hc is not None and hc < 1))

    kept = [(k, i, d) for k, i, d in deltas if on(k, i)]
    losers = sorted((x for x in kept if delta_class(x[2], delta) == "loser"), key=lambda x: (x[2], x[0], x[1]))[:n]
    winners = sorted((x for x in kept if delta_class(x[2], delta) == "winner"), key=lambda x: (-x[2], x[0], x[1]))[:n]
    return {"losers": losers, "winners": winners}


def attention_map(model, tokenizer, source: str, hypothesis: str, src: str, tgt: str, layers="all") -> dict:
    """Rule 2: one sentence's map with its axes."""
    alpha, s_ids, t_ids = cross_attention(model, tokenizer, [source], [hypothesis], src, tgt, layers=layers)[0]
    return {"source": tokenizer.convert_ids_to_tokens(s_ids), "output": tokenizer.convert_ids_to_tokens(t_ids),
            "alpha": [[round(float(x), 4) for x in row] for row in alpha]}
