import argparse
import fractions
import json

import pytest
import torch
from transformers import AutoModelForSeq2SeqLM

from forgetbench.cli import main
from forgetbench.errors import ForgetbenchError
from forgetbench.models.fairseq import read_checkpoint


def _args(cfg):
    return argparse.Namespace(arch="transformer_wmt_en_de_big", encoder_embed_dim=cfg.d_model, encoder_layers=cfg.encoder_layers,
                              decoder_layers=cfg.decoder_layers, encoder_attention_heads=cfg.encoder_attention_heads,
                              decoder_attention_heads=cfg.decoder_attention_heads, encoder_ffn_embed_dim=cfg.encoder_ffn_dim,
                              decoder_ffn_embed_dim=cfg.decoder_ffn_dim, activation_fn="relu",
                              max_source_positions=cfg.max_position_embeddings, share_all_embeddings=True, dropout=0.0,
                              attention_dropout=0.0)


def _fairseq_sd(model):
    sd = {}
    for k, v in model.state_dict().items():
        if k == "model.shared.weight" or k.endswith("embed_positions.weights"):
            continue
        sd["decoder.output_projection.weight" if k == "lm_head.weight" else k[len("model."):]] = v.clone()
    sd["encoder.version"] = torch.tensor([3.0])
    sd["decoder.version"] = torch.tensor([3.0])
    return sd


def _partitioned(sd, n_enc, n_dec):
    mods = [{"embed_tokens.weight": sd["encoder.embed_tokens.weight"]}]
    for side, n in (("encoder", n_enc),):
        for i in range(n):
            mods.append({k[len(f"{side}.layers.{i}."):]: v for k, v in sd.items() if k.startswith(f"{side}.layers.{i}.")})
    mods.append({"layer_norm.weight": sd["encoder.layer_norm.weight"], "layer_norm.bias": sd["encoder.layer_norm.bias"]})
    mods.append({"embed_tokens.weight": sd["decoder.embed_tokens.weight"]})
    for i in range(n_dec):
        mods.append({k[len(f"decoder.layers.{i}."):]: v for k, v in sd.items() if k.startswith(f"decoder.layers.{i}.")})
    mods.append({"layer_norm.weight": sd["decoder.layer_norm.weight"], "layer_norm.bias": sd["decoder.layer_norm.bias"],
                 "output_projection.weight": sd["decoder.output_projection.weight"]})
    split = len(mods) // 2  # two pipeline partitions
    out = {}
    for j, m in enumerate(mods):
        p, idx = (0, j) if j < split else (1, j - split)
        out |= {f"model.partitions.{p}.{idx}.{k}": v for k, v in m.items()}
    return out


def _dict_txt(tiny_dir, path):
    from transformers.models.m2m_100.tokenization_m2m_100 import FAIRSEQ_LANGUAGE_CODES

    vocab = json.loads((tiny_dir / "vocab.json").read_text())
    toks = [t for t, i in sorted(vocab.items(), key=lambda x: x[1]) if i >= 4]
    toks += [f"__{c}__" for c in FAIRSEQ_LANGUAGE_CODES["m2m100"]] + [f"madeupword{i:04d}" for i in range(8)]
    path.write_text("".join(f"{t} 1\n" for t in toks), encoding="utf-8")
    return path


@pytest.mark.parametrize("partitioned", [False, True])
def test_converted_model_has_identical_logits(tiny, tiny_dir, tmp_path, batch, partitioned):
    model, _ = tiny
    sd = _fairseq_sd(model)
    if partitioned:
        sd = _partitioned(sd, model.config.encoder_layers, model.config.decoder_layers)
    ckpt = tmp_path / "checkpoint.pt"
    torch.save({"args": _args(model.config), "model": sd, "extra_state": {"epoch": 3}}, ckpt)
    out = tmp_path / "a" / "b" / "hf"  # missing parents are created (mkdir -p)
    assert main(["convert-fairseq", str(ckpt), "--dict", str(_dict_txt(tiny_dir, tmp_path / "dict.txt")),
                 "--spm", str(tiny_dir / "sentencepiece.bpe.model"), "--out", str(out)]) == 0
    conv = AutoModelForSeq2SeqLM.from_pretrained(str(out), attn_implementation="eager").eval()
    with torch.no_grad():
        assert torch.equal(conv(**batch).logits, model(**batch).logits)
    assert json.loads((out / "vocab.json").read_text()) == json.loads((tiny_dir / "vocab.json").read_text())


def test_non_allow_listed_pickle_global_is_refused(tiny, tmp_path, capsys):
    model, _ = tiny
    ckpt = tmp_path / "evil.pt"
    torch.save({"args": _args(model.config), "model": _fairseq_sd(model), "x": fractions.Fraction(1, 3)}, ckpt)
    with pytest.raises(ForgetbenchError, match="refused to unpickle fractions.Fraction"):
        read_checkpoint(ckpt)
    assert main(["convert-fairseq", str(ckpt), "--dict", "d", "--spm", "s", "--out", str(tmp_path / "o")]) == 2
    assert "not on the allow-list" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_dictionary_size_mismatch_is_explained(tiny, tiny_dir, tmp_path):
    model, _ = tiny
    ckpt = tmp_path / "c.pt"
    torch.save({"args": _args(model.config), "model": _fairseq_sd(model)}, ckpt)
    d = tmp_path / "dict.txt"
    d.write_text("a 1\nb 1\n")
    with pytest.raises(ForgetbenchError, match="embedding has"):
        from forgetbench.models.fairseq import convert

        convert(ckpt, d, tiny_dir / "sentencepiece.bpe.model", tmp_path / "o")
