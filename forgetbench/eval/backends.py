"""Translation backends of a sweep: ``torch`` (the greedy loop of ``models.generation``) and ``ctranslate2``.

    backend: ctranslate2                                   # or torch (the default)
    backend: {name: ctranslate2, compute_type: int8, device: cpu}

Rules:

1. A variant whose recipe fake-quantises (a ``quantize`` step) is translated by ``torch`` whatever the setting:
   its activation sites exist only in the torch model. Dense and pruned variants use the setting.
2. A comparison never mixes backends: the base is translated once per backend its variants use. Its series
   under the setting's backend keeps the base's name; under another backend it is stored as
   ``<base>@<backend>`` (``series_name``), and every variant is compared with the base series of its own backend.
   Under any setting other than ``torch`` the base is translated by torch too: the backend-parity check
   (per pair, the base's scores by each backend, with paired intervals) shows drift that is not forgetting.
3. ``ctranslate2`` converts each model once per source-weights hash and compute type (``models.ct2``); the
   cross-attention and gender-alignment passes stay on the torch model (teacher-forced on the stored text).
4. A variant routed by target language (a data-aware prune step with ``calibration: {choice: target}`` and no
   language: one model per target language) is translated by ``RoutedTranslator``: each row by the torch model
   of its target language, one model at a time. It is translated by ``torch`` whatever the setting (rule 1's
   reason: its models exist only as the sweep's torch folders).
"""

from __future__ import annotations

from dataclasses import dataclass

from forgetbench.configs import known_keys
from forgetbench.errors import ForgetbenchError
from forgetbench.models import ct2
from forgetbench.models.generation import greedy_rows_supported, stream_rows, translate, translate_rows

BACKENDS = ("torch", "ctranslate2")
DEVICES = ("cpu", "cuda")


@dataclass(frozen=True)
class BackendConfig:
    name: str = "torch"
    compute_type: str = "int8"  # ctranslate2 only: int8, int8_float16, bf16, fp32 (CTranslate2 names accepted too)
    device: str = "cpu"

    def describe(self) -> str:
        return self.name if self.name == "torch" else f"{self.name} {self.compute_type} ({self.device})"


def parse_backend(spec, where: str = "backend") -> BackendConfig:
    """The ``backend`` setting, validated (CTranslate2 importable, compute type supported on the device)."""
    if spec is None:
        return BackendConfig()
    if isinstance(spec, str):
        spec = {"name": spec}
    if not isinstance(spec, dict):
        raise ForgetbenchError(f"{where}: give torch, ctranslate2 or {{name: ctranslate2, compute_type: int8, "
                               f"device: cpu}}; got {spec!r}")
    known_keys(spec, {"name", "compute_type", "device"}, where)
    b = BackendConfig(**{k: str(v) for k, v in spec.items()})
    if b.name not in BACKENDS:
        raise ForgetbenchError(f"{where}: unknown backend {b.name!r}; choose torch or ctranslate2")
    if b.device not in DEVICES:
        raise ForgetbenchError(f"{where}.device: {b.device!r}; choose cpu or cuda")
    if b.name == "ctranslate2":
        ct2.require(f"{where}: ctranslate2")
        b = BackendConfig(b.name, ct2.compute_type(b.compute_type, b.device, f"{where}.compute_type"), b.device)
    return b


def fake_quantised(recipe) -> bool:
    return recipe is not None and any(s.kind == "quantize" for s in recipe.steps)


def variant_backend(recipe, backend: BackendConfig) -> str:
    """Rule 1: the backend that translates a variant with this recipe (bitsandbytes' kernels are torch's too)."""
    loaded = recipe is not None and getattr(recipe, "load_quantisation", None) is not None
    routed = recipe is not None and getattr(recipe, "routed_by_target", False)
    return "torch" if fake_quantised(recipe) or loaded or routed else backend.name


def series_name(variant: str, backend: str, primary: str) -> str:
    """Rule 2: the store name of a variant's translations by ``backend`` when the sweep's setting is ``primary``."""
    return variant if backend == primary else f"{variant}@{backend}"


class TorchTranslator:
    """The torch greedy loop with the backend interface: ``translate(texts, src, tgt, num_beams, max_new_tokens)`` for
    one pair, ``translate_rows(rows, num_beams, max_new_tokens)`` for rows ``(text, src, tgt)`` of several, and
    ``stream_rows`` for rows yielded as they end."""

    name = "torch"

    def __init__(self, model, tokenizer):
        self.model, self.tokenizer = model, tokenizer
        self.states: dict | None = None  # a dict: keep each row's encoder states (models.generation.translate_rows)
        self.keep = None  # with states: the rows (text, src, tgt) whose states are wanted (None: all)

    def translate(self, texts: list[str], src_lang: str, tgt_lang: str, num_beams: int = 1,
                  max_new_tokens: int = 128) -> list[str]:
        return translate(self.model, self.tokenizer, texts, src_lang, tgt_lang, num_beams, max_new_tokens)

    def translate_rows(self, rows: list[tuple[str, str, str]], num_beams: int = 1,
                       max_new_tokens: int = 128) -> list[str]:
        return translate_rows(self.model, self.tokenizer, rows, num_beams, max_new_tokens, states=self.states,
                              keep=self.keep)

    def stream_rows(self, rows: list[tuple[str, str, str]], num_beams: int, max_new_tokens: int, width: int):
        """``(index, hypothesis)`` of every row as it ends, the batch kept full (``generation.stream_rows``, nominal
        batches of ``width`` in the given order); None where the greedy loop cannot run (then ``translate_rows``)."""
        if not greedy_rows_supported(self.model, num_beams):
            return None
        return stream_rows(self.model, self.tokenizer, rows, max_new_tokens, width=width, states=self.states,
                           keep=self.keep)


class RoutedTranslator:
    """Rule 4: the backend interface over one torch translator per target language, ``member(tgt)`` giving the
    translator of ``tgt`` (which may load that model and release the previous one: rows are taken a target language
    at a time, in the order their languages first appear)."""

    name = "torch"

    def __init__(self, member):
        self.member = member

    def translate(self, texts: list[str], src_lang: str, tgt_lang: str, num_beams: int = 1,
                  max_new_tokens: int = 128) -> list[str]:
        return self.member(tgt_lang).translate(texts, src_lang, tgt_lang, num_beams, max_new_tokens)

    @staticmethod
    def _by_target(rows):
        groups: dict[str, list[int]] = {}
        for k, r in enumerate(rows):
            groups.setdefault(r[2], []).append(k)
        return groups

    def translate_rows(self, rows: list[tuple[str, str, str]], num_beams: int = 1,
                       max_new_tokens: int = 128) -> list[str]:
        out: list[str] = [""] * len(rows)
        for tgt, ks in self._by_target(rows).items():
            for k, h in zip(ks, self.member(tgt).translate_rows([rows[k] for k in ks], num_beams, max_new_tokens),
                            strict=True):
                out[k] = h
        return out

    def stream_rows(self, rows: list[tuple[str, str, str]], num_beams: int, max_new_tokens: int, width: int):
        """``(index, hypothesis)`` of every row, a target language at a time (each member's stream where it has one,
        else its batches of ``width``)."""
        for tgt, ks in self._by_target(rows).items():
            sub, tr = [rows[k] for k in ks], self.member(tgt)
            stream = tr.stream_rows(sub, num_beams, max_new_tokens, width)
            if stream is None:
                stream = ((b + j, h) for b in range(0, len(sub), width)
                          for j, h in enumerate(tr.translate_rows(sub[b : b + width], num_beams, max_new_tokens)))
            for j, h in stream:
                yield ks[j], h
