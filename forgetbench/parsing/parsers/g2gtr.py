"""G2GTr: the transition-based graph-to-graph Transformer parser (docs/METHOD.md §4), sized for this CPU.

Arc-standard with SWAP (``parsing.structures.transition``). At every step the sentence encoder is **re-run**
with the configuration's partial graph as input. By default the paper's **SentTr + G2GTr** (Mohammadshahi &
Henderson, §3.2, §4.2–4.3): the encoder reads the sentence (token features + sinusoidal positions), every layer
attends with the **unlabelled** relation ids of the partial graph (k = 3: none, to the head, to a dependent; keys
and values), and each attached word's **dependency label embedding is added to its input** (§3.2: "label
embeddings added to the input token embeddings of the dependent word"). Settings (``G2GConfig``):

- ``graph``: ``unlabelled`` (the paper), ``labelled`` (2|L| + 1 ids, the form shipped before) or ``none`` — the
  **no-graph baseline**, the paper's SentTr: the same parser whose encoder never sees the parser state;
- ``roles``: a role embedding per position (s0, s1, rest of the stack, b0, rest of the buffer, reduced) added to
  the input — part of the paper's StateTr, off by default;
- ``label_input``: the dependent's label embedding (on by default);
- ``relation_by_direction``: the Relation classifier conditioned on the arc's direction (eq. 5, "| a^t": one
  label distribution for LEFT, one for RIGHT; on by default).

A parser saved before these settings existed loads as it was trained (labelled ids, roles, no label input, one
label distribution). Two classifiers read the encoder states of the top stack items and the first buffer item
(a learned vector stands in for a missing item):

- Exist: MLP over [h(s0); h(s1); h(b0)] → SHIFT / LEFT / RIGHT / SWAP;
- Relation: MLP over [h(s0); h(s1)] → the label of a LEFT or RIGHT arc.

Training: teacher forcing on the lazy oracle's configurations (computed from the gold trees of
the batch; ``sampled_configurations`` of each sentence drawn uniformly per batch, all with 0),
cross-entropy on the transition plus on the label for arc transitions. Decoding: greedy, batched over sentences, invalid transitions masked
(single root guaranteed by ``Configuration.valid``); a sentence still unfinished after
``2n + n²`` steps (never seen) falls back to SHIFT/LEFT/RIGHT only, so decoding always ends.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from forgetbench.parsing.layers.graph_attention import ENCODER_LAYER_UNIT, GraphEncoder
from forgetbench.parsing.layers.modules import (
    MLP,
    TOKEN_UNITS,
    TokenFeatureConfig,
    token_embeddings,
    token_features,
)
from forgetbench.parsing.structures.relations import n_relation_ids, relation_ids
from forgetbench.parsing.structures.transition import LEFT, RIGHT, SWAP, Configuration, oracle

PAD_ROLE, S0, S1, STACK, B0, BUFFER, REDUCED = range(7)
N_ROLES = 7


@dataclass
class G2GConfig(TokenFeatureConfig):
    d_model: int = 128
    layers: int = 2
    heads: int = 4
    ffn: int = 256
    mlp: int = 200
    attention: str = "g2g"
    value_relations: bool = True
    relation_norm: bool = True
    dropout: float = 0.33
    attention_dropout: float = 0.1
    lazy_oracle: bool = True
    sampled_configurations: int = 8  # per sentence and batch in training (0: all); every encoder run costs O(L²)
    graph: str = "unlabelled"  # unlabelled (the paper, k = 3) | labelled | none (the no-graph SentTr baseline)
    roles: bool = False  # role embeddings of the parser state (part of the paper's StateTr)
    label_input: bool = True  # the dependent's label embedding added to its input (the paper, §3.2)
    relation_by_direction: bool = True  # the label classifier conditioned on LEFT / RIGHT (eq. 5)

    @classmethod
    def stored(cls, d: dict) -> dict:
        """A parser saved before the paper's settings existed (it has ``lazy_oracle`` but no ``roles``): the form it
        was trained in."""
        old = {"graph": "labelled", "roles": True, "label_input": False, "relation_by_direction": False}
        return super().stored((old | d) if "lazy_oracle" in d and "roles" not in d else d)


class G2GTransitionParser(nn.Module):
    forgetbench_units = TOKEN_UNITS + [
        {"unit": "input_projection", "module": "proj"},
        ENCODER_LAYER_UNIT,
        {"unit": "classifiers", "module": "classifier"},
    ]
    forgetbench_residual_blocks = ["encoder.layers.*"]

    def __init__(self, cfg: G2GConfig):
        super().__init__()
        self.cfg = cfg
        if cfg.graph not in ("unlabelled", "labelled", "none"):
            raise ValueError(f"G2GTr graph must be unlabelled, labelled or none, got {cfg.graph!r}")
        extra = {}
        if cfg.roles:
            extra["role"] = nn.Embedding(N_ROLES, cfg.d_model, padding_idx=PAD_ROLE)
        if cfg.label_input:
            extra["label"] = nn.Embedding(cfg.n_rels + 1, cfg.d_model, padding_idx=0)  # 0: not attached yet
        self.embed, self.char_lstm = token_embeddings(cfg, **extra)
        self.proj = nn.Linear(cfg.feature_dim, cfg.d_model)
        n_ids = 0 if cfg.graph == "none" else n_relation_ids(cfg.graph == "labelled", cfg.n_rels)
        self.encoder = GraphEncoder(cfg.d_model, cfg.layers, cfg.heads, cfg.ffn, n_ids, cfg.attention,
                                    cfg.value_relations, cfg.relation_norm and n_ids > 0, cfg.attention_dropout)
        self.absent = nn.Parameter(torch.zeros(cfg.d_model))
        d = cfg.d_model
        n_out = cfg.n_rels * (2 if cfg.relation_by_direction else 1)
        self.classifier = nn.ModuleDict({"exist": nn.Sequential(MLP(3 * d, cfg.mlp, cfg.dropout), nn.Linear(cfg.mlp, 4)),
                                         "relation": nn.Sequential(MLP(2 * d, cfg.mlp, cfg.dropout),
                                                                   nn.Linear(cfg.mlp, n_out))})
        self.drop = nn.Dropout(cfg.dropout)

    def sentence_features(self, words, chars, tags):
        """Static token features of each sentence [B, L, d_model], computed once and reused by every step."""
        return self.proj(self.drop(token_features(self.embed, self.char_lstm, words, chars, tags)))

    def step(self, x0, state: dict):
        """x0 [N, L, D] (each configuration's sentence features) and ``config_tensors``' state (roles [N, L], heads
        and labels [N, L], items [N, 3]: s0, s1, b0 positions, -1 = absent) → (transition scores [N, 4], label scores
        [N, R], or [N, 2, R] by direction: LEFT, RIGHT)."""
        roles, items, cfg = state["roles"], state["items"], self.cfg
        x = x0
        if cfg.roles:
            x = x + self.embed["role"](roles)
        if cfg.label_input:
            x = x + self.embed["label"]((state["rels"] + 1).clamp(min=0))
        relations = None if cfg.graph == "none" else relation_ids(state["heads"], state["rels"] if cfg.graph == "labelled"
                                                                  else None)
        h = self.encoder(x, roles != PAD_ROLE, relations)
        at = h.gather(1, items.clamp(min=0).unsqueeze(-1).expand(-1, -1, h.shape[-1]))  # [N, 3, D]
        at = torch.where((items >= 0).unsqueeze(-1), at, self.absent)
        at = self.drop(at)
        labels = self.classifier["relation"](at[:, :2].flatten(1))
        if cfg.relation_by_direction:
            labels = labels.view(len(labels), 2, cfg.n_rels)
        return self.classifier["exist"](at.flatten(1)), labels

    def forward(self, words, chars, tags):
        """The start configuration of each sentence (for calibration and shape checks): its step scores."""
        x0 = self.sentence_features(words, chars, tags)
        cs = [Configuration.start(int(n) - 1) for n in (words != 0).sum(-1)]
        return self.step(x0, config_tensors(cs, words.shape[1], words.device))


def label_of(labels: torch.Tensor, transitions: torch.Tensor) -> torch.Tensor:
    """The label scores [N, R] for each configuration's arc direction (``labels`` [N, 2, R] by direction, or
    [N, R] already); a non-arc transition reads LEFT's (its label is never scored)."""
    if labels.dim() == 2:
        return labels
    return labels[torch.arange(len(labels), device=labels.device), (transitions == RIGHT).long()]


def config_tensors(cs: list[Configuration], L: int, device: torch.device | str | None = None) -> dict:
    """{roles [N, L], heads [N, L], rels [N, L] (the partial graph; -1 = not attached), items [N, 3]: s0, s1, b0}
    of configurations (built on the host from the transition system's lists, then moved to ``device``)."""
    N = len(cs)
    roles = torch.zeros(N, L, dtype=torch.long)
    heads = torch.full((N, L), -1, dtype=torch.long)
    rels = torch.full((N, L), -1, dtype=torch.long)
    items = torch.full((N, 3), -1, dtype=torch.long)
    for k, c in enumerate(cs):
        roles[k, : c.n + 1] = REDUCED
        heads[k, : c.n + 1] = torch.tensor(c.heads)
        rels[k, : c.n + 1] = torch.tensor(c.rels)
        s, b = c.stack, c.buffer
        if s:
            roles[k, s] = STACK
            roles[k, s[-1]], items[k, 0] = S0, s[-1]
        if len(s) >= 2:
            roles[k, s[-2]], items[k, 1] = S1, s[-2]
        if b:
            roles[k, b] = BUFFER
            roles[k, b[0]], items[k, 2] = B0, b[0]
    out = {"roles": roles, "heads": heads, "rels": rels, "items": items}
    return {k: v.to(device) for k, v in out.items()} if device is not None else out


def oracle_examples(heads: torch.Tensor, rels: torch.Tensor, lazy: bool = True):
    """Teacher-forcing examples of a batch of gold trees (``batchify``'s heads/rels, -100 at root and padding):
    (sentence index [N], configurations, gold transitions [N], gold labels [N], -100 where not an arc)."""
    sent, cs, ts, ls = [], [], [], []
    for b in range(heads.shape[0]):
        n = int((heads[b] != -100).sum())
        h, r = heads[b, 1 : n + 1].tolist(), rels[b, 1 : n + 1].tolist()
        c = Configuration.start(n)
        for t, rel in oracle(h, r, lazy=lazy):
            sent.append(b)
            cs.append(Configuration(c.n, list(c.stack), list(c.buffer), list(c.heads), list(c.rels)))
            ts.append(t)
            ls.append(rel if t in (LEFT, RIGHT) and rel >= 0 else -100)
            c.apply(t, rel)
    return torch.tensor(sent), cs, torch.tensor(ts), torch.tensor(ls)


def transition_loss(model: G2GTransitionParser, b: dict, words: torch.Tensor) -> torch.Tensor:
    """Teacher-forced loss of a batch: CE(transition) + CE(label | arc transition), means over configurations."""
    sent, cs, ts, ls = oracle_examples(b["heads"], b["rels"], model.cfg.lazy_oracle)
    k = model.cfg.sampled_configurations
    if k:  # a uniform sample of each sentence's configurations (torch's seeded RNG): an unbiased loss estimate
        keep = torch.cat([idx[torch.randperm(len(idx))[:k]] for idx in
                          (torch.nonzero(sent == j).flatten() for j in range(int(sent.max()) + 1)) if len(idx)])
        sent, cs, ts, ls = sent[keep], [cs[i] for i in keep.tolist()], ts[keep], ls[keep]
    sent, ts, ls = sent.to(words.device), ts.to(words.device), ls.to(words.device)  # sampled on the host
    x0 = model.sentence_features(words, b["chars"], b["tags"])[sent]
    t_scores, l_scores = model.step(x0, config_tensors(cs, words.shape[1], words.device))
    loss = nn.functional.cross_entropy(t_scores, ts)
    if (ls != -100).any():
        loss = loss + nn.functional.cross_entropy(label_of(l_scores, ts), ls, ignore_index=-100)
    return loss


@torch.no_grad()
def parse_batch(model: G2GTransitionParser, b: dict) -> tuple[list[Configuration], int]:
    """Greedy parses of a batch; returns the final configurations and the number of encoder steps run."""
    model.eval()
    words = b["words"]
    L = words.shape[1]
    x0_all = model.sentence_features(words, b["chars"], b["tags"])
    cs = [Configuration.start(int(n) - 1) for n in (words != 0).sum(-1)]
    cap = [2 * c.n + c.n * c.n for c in cs]
    steps = 0
    active = [k for k, c in enumerate(cs) if not c.terminal]
    while active:
        t_scores, l_scores = model.step(x0_all[active], config_tensors([cs[k] for k in active], L, words.device))
        t_scores, l_scores = t_scores.cpu(), l_scores.cpu()  # the transition system runs on the host
        steps += 1
        for j, k in enumerate(active):
            c = cs[k]
            valid = torch.tensor([c.valid(t) and not (t == SWAP and steps > cap[k]) for t in range(4)])
            t = int(t_scores[j].masked_fill(~valid, float("-inf")).argmax())
            lab = l_scores[j] if l_scores.dim() == 2 else l_scores[j, int(t == RIGHT)]
            c.apply(t, int(lab.argmax()) if t in (LEFT, RIGHT) else -1)
        active = [k for k in active if not cs[k].terminal]
    return cs, steps
