"""A non-MT module (embeddings + BiLSTM + MLP + biaffine) declaring its units, like our parsers will."""

import torch
from torch import nn


class Biaffine(nn.Module):
    def __init__(self, d: int):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(d + 1, d) * 0.1)

    def forward(self, dep, head):
        dep = torch.cat([dep, torch.ones_like(dep[..., :1])], -1)
        return torch.matmul(torch.matmul(dep, self.weight), head.transpose(-1, -2))


class ToyParser(nn.Module):
    forgetbench_units = [
        {"unit": "embeddings", "module": "embed"},
        {"unit": "encoder", "module": "lstm"},
        {"unit": "mlp", "module": "mlp", "groups": {"dep": ["dep.*"], "head": ["head.*"]}},
        {"unit": "biaffine", "module": "arc"},
    ]
    forgetbench_residual_blocks: list = []

    def __init__(self, vocab=60, d=16):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.lstm = nn.LSTM(d, d, batch_first=True, bidirectional=True)
        self.mlp = nn.ModuleDict({"dep": nn.Linear(2 * d, 24), "head": nn.Linear(2 * d, 24), "norm": nn.LayerNorm(24)})
        self.arc = Biaffine(24)

    def forward(self, words):
        h, _ = self.lstm(self.embed(words))
        dep = self.mlp["norm"](torch.relu(self.mlp["dep"](h)))
        head = torch.relu(self.mlp["head"](h))
        return self.arc(dep, head)
