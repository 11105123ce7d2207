"""CTranslate2 for M2M-100, SMaLL-100 and NLLB-200: a conversion that keeps every language code at its id, and a
translator with the torch loop's interface (``models.generation.translate``).

Conversion rules:

1. The architecture must be ``M2M100ForConditionalGeneration`` (M2M-100, SMaLL-100, NLLB-200 share it); anything
   else is refused before any work (``check_architecture``).
2. The vocabulary is read **by id** (``vocabulary``): token ``i`` of the converted model is
   ``tokenizer.convert_ids_to_tokens(i)`` for every id the tokenizer knows, then ``madeupwordK`` up to the
   model's ``vocab_size``. CTranslate2's own converter sorts ``get_vocab()``, which on transformers 5 omits the
   100 ``__xx__`` codes: its vocabulary comes out 100 short, and padding it names the codes ``madeupwordN``
   so ``__de__`` silently becomes ``<unk>``. Here every code (``__de__`` or NLLB's ``deu_Latn``) is asserted at its
   id and every token unique.
3. Weights go through CTranslate2's own M2M-100 layer mapping (``M2M100Loader``: pre-norm, sinusoidal
   positions without the offset, fused QKV) with ``quantization`` = the compute type (int8 weights are stored
   as int8 with one scale per row). The folder is written atomically with ``forgetbench-ct2.json`` (source
   weights hash, quantization, CTranslate2 version): ``cached_conversion`` reuses a folder only when all three
   match. The source model is deep-copied first: CTranslate2's int8 ``optimize`` quantises the torch tensors
   it was handed *in place* (measured: converting the shipped teacher to int8 changed its embedding and
   every FFN weight, and the torch model's translations turned to garbage).

Translation (``Ct2Translator.translate``): sources tokenised exactly as the torch path (``encode_sources``:
``__src__ … </s>`` or, SMaLL-100, ``__tgt__ … </s>``); M2M-100 gets ``__tgt__`` (NLLB ``deu_Latn``) as target
prefix (the forced BOS), SMaLL-100 none; greedy (beam 1) unless asked; ``max_decoding_length`` = ``max_new_tokens`` (the prefix
counts, as the forced BOS counts in the torch loop), ``min_decoding_length`` 0 (an empty hypothesis is allowed,
as in the torch loop); hypotheses decoded with the same tokenizer call, special tokens skipped.

Restricted output vocabulary (``restricted``; ``Ct2Translator(use_vmap=True)``): a folder of links to a converted
model's files plus CTranslate2's ``vmap.txt`` whose empty-key line lists the tokens every step may choose (the
runtime adds ``<unk>``, ``<s>``, ``</s>`` and the target prefix); the output projection is then computed over those
rows only. Used by ``benchmarks/batch1_speed.py --vmap-frequent`` to measure what a smaller output layer can buy.
"""

from __future__ import annotations

import copy
import json
from collections import Counter
from pathlib import Path

import torch

from forgetbench.errors import ForgetbenchError
from forgetbench.io import atomic_directory
from forgetbench.models.generation import by_pair, encode_sources, is_small100
from forgetbench.models.tokenizers import language_tokens as language_codes  # ``__xx__`` / ``xxx_Xxxx`` -> id

COMPUTE_TYPES = {"int8": "int8", "int8_float16": "int8_float16", "int8_float32": "int8_float32", "bf16": "bfloat16",
                 "bfloat16": "bfloat16", "fp16": "float16", "float16": "float16", "fp32": "float32",
                 "float32": "float32"}
MARKER = "forgetbench-ct2.json"
ARCHITECTURE = "M2M100ForConditionalGeneration"


def require(setting: str = "backend: ctranslate2"):
    """The ``ctranslate2`` module, or one line naming the setting and the alternative."""
    try:
        import ctranslate2
    except ImportError:
        raise ForgetbenchError(f"{setting} needs the ctranslate2 package, which is not installed: "
                               "pip install ctranslate2==4.8.5, or set backend: torch") from None
    return ctranslate2


def available() -> bool:
    try:
        require()
    except ForgetbenchError:
        return False
    return True


def compute_type(name: str, device: str = "cpu", setting: str = "backend.compute_type") -> str:
    """CTranslate2's name for ``name`` (int8, int8_float16, bf16, fp32, …), refused where ``device`` lacks it."""
    if name not in COMPUTE_TYPES:
        raise ForgetbenchError(f"{setting}: unknown compute type {name!r}; choose one of "
                               f"{', '.join(sorted(set(COMPUTE_TYPES)))}")
    ct2 = require()
    ct = COMPUTE_TYPES[name]
    if device == "cuda" and ct2.get_cuda_device_count() == 0:
        raise ForgetbenchError(f"{setting.rsplit('.', 1)[0]}.device: cuda, but CTranslate2 sees no CUDA device; "
                               "use device: cpu")
    supported = ct2.get_supported_compute_types(device)
    if ct not in supported:
        raise ForgetbenchError(f"{setting}: {name} is not supported on {device} here (supported: "
                               f"{', '.join(sorted(supported))})")
    return ct


def check_architecture(model, setting: str = "backend: ctranslate2") -> None:
    arch = type(model).__name__
    if arch != ARCHITECTURE:
        raise ForgetbenchError(f"{setting}: converts {ARCHITECTURE} (M2M-100, SMaLL-100, NLLB-200) only, not {arch}; "
                               "set backend: torch for this model")


def vocabulary(tokenizer, vocab_size: int) -> list[str]:
    """The converted model's tokens in id order (rule 2); raises if a language code is not at its id."""
    n = len(tokenizer)
    if n > vocab_size:
        raise ForgetbenchError(f"tokenizer has {n} tokens but the model's vocab_size is {vocab_size}")
    tokens = [str(t) for t in tokenizer.convert_ids_to_tokens(list(range(n)))]
    tokens += [f"madeupword{k}" for k in range(vocab_size - n)]
    codes = language_codes(tokenizer)
    if not codes:
        raise ForgetbenchError("the tokenizer has no language codes (__xx__ or xxx_Xxxx); not an M2M-100 or NLLB "
                               "tokenizer")
    wrong = [(c, i, tokens[i] if i < len(tokens) else None) for c, i in codes.items()
             if i >= len(tokens) or tokens[i] != c]
    if wrong:
        c, i, got = wrong[0]
        raise ForgetbenchError(f"language code {c} has id {i} but the vocabulary holds {got!r} there "
                               f"({len(wrong)} codes misplaced); load the tokenizer with forgetbench.models.tokenizers")
    dup = next((t for t, n in Counter(tokens).items() if n > 1), None)
    if dup is not None:
        raise ForgetbenchError(f"token {dup!r} appears twice in the vocabulary; CTranslate2 maps tokens by string")
    return tokens


def convert(model, tokenizer, out_dir: str | Path, quantization: str = "int8", source_sha256: str = "") -> Path:
    """Write the CTranslate2 model of ``model`` (in memory, fp32) to ``out_dir`` atomically; returns it."""
    ct2 = require()
    check_architecture(model)
    from ctranslate2.converters.transformers import M2M100Loader

    tokens = vocabulary(tokenizer, model.config.vocab_size)

    class _ById(M2M100Loader):  # rule 2: the vocabulary by id, not from get_vocab()
        def get_vocabulary(self, model, tokenizer):
            return tokens

    with torch.no_grad():  # a copy: CTranslate2's int8 optimize rounds the tensors it was given in place
        spec = _ById()(copy.deepcopy(model).float(), tokenizer)
    spec.validate()
    spec.optimize(quantization=quantization)
    out = Path(out_dir)
    with atomic_directory(out, replace=True) as tmp:
        spec.save(str(tmp))
        (tmp / MARKER).write_text(json.dumps({"source_sha256": source_sha256, "quantization": quantization,
                                              "ctranslate2": ct2.__version__, "vocab_size": len(tokens),
                                              "small100": is_small100(tokenizer)}, indent=1))
    return out


def cached_conversion(model_loader, out_dir: str | Path, quantization: str, source_sha256: str) -> Path:
    """``out_dir`` if it holds this source's conversion at this quantization (same CTranslate2), else convert
    ``model_loader()`` (→ model, tokenizer) there. The loader is called only when a conversion is needed."""
    ct2 = require()
    out = Path(out_dir)
    try:
        m = json.loads((out / MARKER).read_text())
        if (m.get("source_sha256"), m.get("quantization"), m.get("ctranslate2")) == (source_sha256, quantization,
                                                                                        ct2.__version__):
            return out
    except (OSError, ValueError):
        pass
    model, tok = model_loader()
    return convert(model, tok, out, quantization, source_sha256)


def restricted(folder: str | Path, out_dir: str | Path, tokens: list[str]) -> Path:
    """``out_dir``: the converted model in ``folder`` (its files linked, not copied) with a ``vmap.txt`` that restricts
    every decoding step to ``tokens``; translate with ``use_vmap=True``. Tokens must be in the model's vocabulary
    (CTranslate2 maps an unknown one to ``<unk>`` silently)."""
    folder, out = Path(folder), Path(out_dir)
    vocab = next((folder / n for n in ("shared_vocabulary.json", "target_vocabulary.json") if (folder / n).is_file()),
                 None)
    if vocab is None:
        raise ForgetbenchError(f"restricted vocabulary: {folder} holds no converted model (no shared_vocabulary.json); "
                               "convert it with models.ct2.convert")
    known = set(json.loads(vocab.read_text(encoding="utf-8")))
    bad = [t for t in tokens if t not in known or any(c.isspace() for c in t)]
    if bad or not tokens:
        raise ForgetbenchError(f"restricted vocabulary: {len(bad)} of {len(tokens)} tokens are not in {vocab} or hold "
                               f"whitespace (first: {bad[0]!r})" if bad else "restricted vocabulary: no tokens given")
    with atomic_directory(out, replace=True) as tmp:
        for f in folder.iterdir():
            if f.is_file() and f.name != "vmap.txt":
                (tmp / f.name).symlink_to(f.resolve())
        (tmp / "vmap.txt").write_text("\t" + " ".join(tokens) + "\n", encoding="utf-8")
    return out


def disk_bytes(folder: str | Path) -> int:
    return sum(p.stat().st_size for p in Path(folder).iterdir() if p.is_file() and p.name != MARKER)


class Ct2Translator:
    """A converted model with ``translate(texts, src, tgt, num_beams, max_new_tokens)`` and ``translate_rows(rows,
    num_beams, max_new_tokens)`` like the torch path."""

    name = "ctranslate2"

    def __init__(self, folder: str | Path, tokenizer, device: str = "cpu", compute_type: str = "int8",
                 threads: int = 1, use_vmap: bool = False):
        ct2 = require()
        if use_vmap and not (Path(folder) / "vmap.txt").is_file():
            raise ForgetbenchError(f"use_vmap: {folder} has no vmap.txt; make one with models.ct2.restricted")
        self.use_vmap = use_vmap
        self.folder, self.tokenizer, self.device, self.compute_type = Path(folder), tokenizer, device, compute_type
        kind, _, index = device.partition(":")  # "cuda:N": GPU N (under a launcher, the process's own GPU)
        self.translator = ct2.Translator(str(folder), device=kind, device_index=int(index or 0),
                                         compute_type=compute_type, inter_threads=1, intra_threads=threads)
        # the tokenizer's id <-> token maps once (its per-token Python calls were ~4 % of a CTranslate2 batch):
        # the same strings as convert_ids_to_tokens / convert_tokens_to_ids (unknown tokens -> <unk>)
        self.tokens = [str(t) for t in tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))]
        self.ids = {t: i for i, t in enumerate(self.tokens)}

    def source_tokens(self, texts: list[str], src_lang: str, tgt_lang: str, max_length: int = 256) -> list[list[str]]:
        ids = encode_sources(self.tokenizer, texts, src_lang, tgt_lang, max_length, return_tensors=None,
                             padding=False)["input_ids"]
        return [[self.tokens[i] for i in x] for x in ids]

    def translate(self, texts: list[str], src_lang: str, tgt_lang: str, num_beams: int = 1,
                  max_new_tokens: int = 128, max_length: int = 256) -> list[str]:
        return self.translate_rows([(x, src_lang, tgt_lang) for x in texts], num_beams, max_new_tokens, max_length)

    def translate_rows(self, rows: list[tuple[str, str, str]], num_beams: int = 1, max_new_tokens: int = 128,
                       max_length: int = 256) -> list[str]:
        """Rows ``(text, src, tgt)`` of one or several pairs in one ``translate_batch`` (a target prefix per row)."""
        if not rows:
            return []
        tok, source = self.tokenizer, [None] * len(rows)
        for (s, t), idx in by_pair(rows).items():
            for i, x in zip(idx, self.source_tokens([rows[i][0] for i in idx], s, t, max_length), strict=True):
                source[i] = x
        prefix = None if is_small100(tok) else [[tok.get_lang_token(t)] for _, _, t in rows]
        res = self.translator.translate_batch(source, prefix, beam_size=num_beams, max_decoding_length=max_new_tokens,
                                              min_decoding_length=0, max_input_length=0,
                                              use_vmap=self.use_vmap)
        # decoded as the torch path decodes
        unk = tok.unk_token_id
        return [t.strip() for t in tok.batch_decode([[self.ids.get(x, unk) for x in r.hypotheses[0]] for r in res],
                                                    skip_special_tokens=True)]
