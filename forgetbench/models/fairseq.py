"""Convert original fairseq M2M-100 / SMaLL-100 checkpoints to Hugging Face folders, without fairseq.

    forgetbench convert-fairseq model.pt --dict dict.txt --spm spm.model --out DIR

- Unpickling uses ``torch.load(weights_only=True)`` with an explicit allow-list:
  ``argparse.Namespace`` (fairseq ≤ 0.10 ``args``) and, when omegaconf is installed, the omegaconf
  container classes of newer ``cfg`` checkpoints. Anything else is refused with a clear error.
- Keys: ``encoder.*``/``decoder.*`` → ``model.encoder.*``/``model.decoder.*``;
  ``decoder.output_projection.weight`` → ``lm_head.weight``; ``model.shared`` = the encoder token
  embedding (tied); ``version`` and ``_float_tensor`` buffers dropped.
- The 12B checkpoints are pipeline-parallel: ``model.partitions.{p}.{m}.<param>``. Walking
  partitions and their modules in order gives fairseq's sequential module list:
  encoder embedding, the encoder layers, the encoder final LayerNorm, decoder embedding, the
  decoder layers, the decoder output layer (final LayerNorm + ``output_projection``).
  **Decision:** this layout is fairseq's ``PipelineParallelTransformerModel`` as documented in its
  source; it is tested on synthetic checkpoints, not on the real 12B files (not obtainable here).
- The dictionary (``dict.txt``: ``token count`` lines after fairseq's 4 specials) becomes
  ``vocab.json`` without the ``__xx__`` language tokens, which ``M2M100Tokenizer`` appends itself;
  their positions are checked against the tokenizer's.
"""

from __future__ import annotations

import argparse
import json
import pickle
import re
import shutil
from pathlib import Path

import torch

from forgetbench.errors import ForgetbenchError
from forgetbench.io import atomic_directory, read_text
from forgetbench.models.tokenizers import SMALL100_MARKER
from forgetbench.models.vocabulary import M2M_SPECIALS, N_LANG_TOKENS, N_MADEUP


def allowed_globals() -> list:
    allowed: list = [argparse.Namespace]
    try:  # fairseq >= 0.10 saves an omegaconf ``cfg``
        import typing

        from omegaconf import base, dictconfig, listconfig, nodes

        allowed += [dictconfig.DictConfig, listconfig.ListConfig, base.ContainerMetadata, base.Metadata,
                    nodes.AnyNode, typing.Any]
    except ImportError:
        pass
    return allowed


def read_checkpoint(path: str | Path) -> tuple[dict[str, torch.Tensor], dict]:
    path = Path(path)
    if not path.is_file():
        raise ForgetbenchError(f"{path}: checkpoint not found")
    try:
        with torch.serialization.safe_globals(allowed_globals()):
            ckpt = torch.load(path, map_location="cpu", weights_only=True)
    except EOFError:
        raise ForgetbenchError(f"{path}: empty or truncated checkpoint (ran out of data while reading it)") from None
    except (pickle.UnpicklingError, RuntimeError, AttributeError, ValueError) as e:
        m = re.search(r"GLOBAL ([\w.]+)", str(e)) or re.search(r"global '?([\w.]+)", str(e))
        what = m.group(1) if m else str(e).splitlines()[0]
        raise ForgetbenchError(f"{path}: refused to unpickle {what}: not on the allow-list "
                               "(argparse.Namespace, omegaconf containers); the file may not be a fairseq checkpoint "
                               "or may be unsafe") from None
    if not isinstance(ckpt, dict) or not isinstance(ckpt.get("model"), dict) or not ckpt["model"]:
        raise ForgetbenchError(f"{path}: not a fairseq checkpoint (no 'model' state dict with weights)")
    args = ckpt.get("args")
    if args is None and ckpt.get("cfg") is not None:
        cfg = ckpt["cfg"]
        args = cfg["model"] if "model" in cfg else cfg
    if args is None:
        raise ForgetbenchError(f"{path}: no 'args' or 'cfg' with the model hyper-parameters")
    args = vars(args) if isinstance(args, argparse.Namespace) else dict(args)
    return ckpt["model"], args


_ENC_EMB, _ENC_LN, _DEC_EMB, _DEC_OUT = "enc_emb", "enc_ln", "dec_emb", "dec_out"


def unpartition(sd: dict[str, torch.Tensor], n_enc: int, n_dec: int) -> dict[str, torch.Tensor]:
    """``model.partitions.{p}.{m}.*`` → flat fairseq ``encoder.*``/``decoder.*`` keys."""
    rx = re.compile(r"^model\.partitions\.(\d+)\.(\d+)\.(.+)$")
    modules: dict[tuple[int, int], dict[str, torch.Tensor]] = {}
    for k, v in sd.items():
        m = rx.match(k)
        if not m:
            raise ForgetbenchError(f"partitioned checkpoint has an unexpected key {k!r}")
        modules.setdefault((int(m.group(1)), int(m.group(2))), {})[m.group(3)] = v
    order = sorted(modules)
    roles = [_ENC_EMB, *[("enc", i) for i in range(n_enc)], _ENC_LN, _DEC_EMB, *[("dec", i) for i in range(n_dec)], _DEC_OUT]
    if len(order) != len(roles):
        raise ForgetbenchError(f"partitioned checkpoint has {len(order)} modules; {n_enc} encoder + {n_dec} decoder "
                               f"layers need {len(roles)}")
    out = {}
    for key, role in zip(order, roles, strict=True):
        for name, v in modules[key].items():
            if role == _ENC_EMB:
                out[f"encoder.{name}"] = v
            elif role == _ENC_LN:
                out[f"encoder.{name}"] = v
            elif role == _DEC_EMB:
                out[f"decoder.{name}"] = v
            elif role == _DEC_OUT:
                out[f"decoder.{name}"] = v
            else:
                side, i = role
                out[f"{'encoder' if side == 'enc' else 'decoder'}.layers.{i}.{name}"] = v
    return out


def hf_state_dict(sd: dict[str, torch.Tensor], n_enc: int, n_dec: int) -> dict[str, torch.Tensor]:
    if any(k.startswith("model.partitions.") for k in sd):
        sd = unpartition(sd, n_enc, n_dec)
    out = {}
    for k, v in sd.items():
        if k.endswith((".version", "_float_tensor")) or k in ("encoder.version", "decoder.version"):
            continue
        if k == "decoder.output_projection.weight":
            out["lm_head.weight"] = v
        else:
            out[f"model.{k}"] = v
    if "model.encoder.embed_tokens.weight" not in out:
        raise ForgetbenchError("checkpoint has no encoder.embed_tokens.weight")
    out["model.shared.weight"] = out["model.encoder.embed_tokens.weight"]
    return out


def hf_config(args: dict, vocab_size: int):
    from transformers import M2M100Config

    def g(*names, default=None):
        for n in names:
            if n in args and args[n] is not None:
                return args[n]
        return default

    d = g("encoder_embed_dim", default=1024)
    return M2M100Config(
        vocab_size=vocab_size, d_model=d, encoder_layers=g("encoder_layers", default=12),
        decoder_layers=g("decoder_layers", default=12), encoder_attention_heads=g("encoder_attention_heads", default=16),
        decoder_attention_heads=g("decoder_attention_heads", default=16),
        encoder_ffn_dim=g("encoder_ffn_embed_dim", default=4 * d), decoder_ffn_dim=g("decoder_ffn_embed_dim", default=4 * d),
        activation_function=g("activation_fn", default="relu"), max_position_embeddings=g("max_source_positions", default=1024),
        scale_embedding=not g("no_scale_embedding", default=False), dropout=g("dropout", default=0.1),
        attention_dropout=g("attention_dropout", default=0.1), activation_dropout=g("activation_dropout", default=0.0),
        encoder_layerdrop=g("encoder_layerdrop", default=0.0), decoder_layerdrop=g("decoder_layerdrop", default=0.0),
        pad_token_id=1, bos_token_id=0, eos_token_id=2, decoder_start_token_id=2,
        tie_word_embeddings=bool(g("share_all_embeddings", "share_decoder_input_output_embed", default=True)),
    )


def vocab_from_dict(dict_file: str | Path) -> dict[str, int]:
    from transformers.models.m2m_100.tokenization_m2m_100 import FAIRSEQ_LANGUAGE_CODES

    p = Path(dict_file)
    if not p.is_file():
        raise ForgetbenchError(f"{p}: dictionary not found")
    vocab = {t: i for i, t in enumerate(M2M_SPECIALS)}
    langs = {f"__{c}__": i for i, c in enumerate(FAIRSEQ_LANGUAGE_CODES["m2m100"])}
    seen_langs = {}
    for n, line in enumerate(read_text(p).splitlines(), 1):
        if not line.strip():
            continue
        tok = line.rsplit(" ", 1)[0] if " " in line else line
        if tok in langs:
            seen_langs[tok] = len(M2M_SPECIALS) + n - 1
            continue
        if tok.startswith("madeupword"):
            continue
        if tok in vocab:
            raise ForgetbenchError(f"{p}:{n}: duplicate token {tok!r}")
        vocab[tok] = len(vocab)
    for tok, fid in seen_langs.items():
        if fid != len(vocab) + langs[tok]:
            raise ForgetbenchError(f"{p}: language token {tok} has id {fid}, M2M100Tokenizer expects "
                                   f"{len(vocab) + langs[tok]}: the dictionary's language order differs")
    return vocab


def convert(ckpt: str | Path, dict_file: str | Path, spm_file: str | Path, out_dir: str | Path, small100: bool = False):
    from transformers import M2M100ForConditionalGeneration

    from forgetbench.models.tokenizers import load_tokenizer

    sd, args = read_checkpoint(ckpt)
    n_enc, n_dec = int(args.get("encoder_layers", 12)), int(args.get("decoder_layers", 12))
    hsd = hf_state_dict(sd, n_enc, n_dec)
    if "model.shared.weight" not in hsd:
        raise ForgetbenchError(f"{ckpt}: no token embedding (encoder.embed_tokens.weight) in the checkpoint")
    rows = hsd["model.shared.weight"].shape[0]
    vocab = vocab_from_dict(dict_file)
    if len(vocab) + N_LANG_TOKENS + N_MADEUP != rows:
        raise ForgetbenchError(f"dictionary gives {len(vocab)} tokens + {N_LANG_TOKENS} languages + {N_MADEUP} made-up "
                               f"words = {len(vocab) + N_LANG_TOKENS + N_MADEUP}, but the embedding has {rows} rows")
    if not Path(spm_file).is_file():
        raise ForgetbenchError(f"{spm_file}: SentencePiece model not found")
    config = hf_config(args, rows)
    if small100:
        setattr(config, SMALL100_MARKER, True)
    model = M2M100ForConditionalGeneration(config)
    missing, unexpected = model.load_state_dict(hsd, strict=False)
    missing = [k for k in missing if not k.endswith("embed_positions.weights") and k != "lm_head.weight"
               and not k.endswith("embed_tokens.weight")]
    if missing or unexpected:
        raise ForgetbenchError(f"{ckpt}: keys do not match M2M-100 (missing {missing[:4]}, unexpected {unexpected[:4]})")
    model.tie_weights()
    with atomic_directory(out_dir) as tmp:
        model.save_pretrained(tmp)
        (tmp / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
        shutil.copyfile(spm_file, tmp / "sentencepiece.bpe.model")
        load_tokenizer(tmp, small100=small100).save_pretrained(tmp)
    return model
