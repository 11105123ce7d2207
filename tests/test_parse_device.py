"""The parsers on a GPU without one (``tests/device_harness.py``): every architecture trains, selects and parses
with its networks on ``cuda:0`` (batches moved there, MST and transitions decoded on the host), and — the harness
computing on the CPU — gives bit for bit the weights, dev scores and trees of the same run on the CPU."""

import json

import pytest
import torch
from safetensors.torch import load_file

from forgetbench.errors import ForgetbenchError
from forgetbench.parsing.evaluate import evaluate_parser
from forgetbench.parsing.train import train

from .device_harness import module_to_cuda, on_cuda
from .test_graph_parsers import TINY, TINY_TR
from .test_parser import _toy_treebank

# recurrent layers whose weights say cuda ask torch for cuDNN, which a CPU build lacks: said once, not a failure
pytestmark = pytest.mark.filterwarnings("ignore:PyTorch was compiled without cuDNN")


@pytest.fixture
def pretend_gpu(monkeypatch):
    """``cuda`` resolves to ``cuda:0`` (one GPU seen) and ``Module.to(cuda…)`` moves the weights onto the harness's
    pretended GPU (recurrent layers re-read their moved weights)."""
    from forgetbench.models import hardware

    monkeypatch.setattr(hardware, "cuda_count", lambda: 1)
    real_to = torch.nn.Module.to

    def to(self, *args, **kwargs):
        target = kwargs.get("device", args[0] if args else None)
        if target is not None and str(target).startswith("cuda"):
            module_to_cuda(self)
            for m in self.modules():
                if isinstance(m, torch.nn.RNNBase):
                    m._init_flat_weights()
            return self
        return real_to(self, *args, **kwargs)

    monkeypatch.setattr(torch.nn.Module, "to", to)
    with on_cuda():
        yield


def _weights(folder):
    return load_file(str(folder / "model.safetensors"))


def _same_run(a, b):
    ra, rb = (json.loads((f / "training.json").read_text()) for f in (a, b))
    assert ra["history"] == [{k: v for k, v in h.items() if k not in ("elapsed_s", "parser_tokens_per_s")} | {
        k: h2[k] for k in ("elapsed_s", "parser_tokens_per_s") if k in h2} for h, h2 in zip(rb["history"], ra["history"],
                                                                                            strict=True)]
    wa, wb = _weights(a), _weights(b)
    assert wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)
    return ra, rb


@pytest.mark.parametrize("arch", ["biaffine", "syntr", "g2gtr"])
def test_a_parser_trained_on_the_gpu_is_the_one_trained_on_the_cpu(arch, tmp_path, request):
    tr = _toy_treebank(tmp_path / "train.conllu", 40, 0)
    dv = _toy_treebank(tmp_path / "dev.conllu", 10, 1)
    sizes = TINY | {"lstm_hidden": 16} if arch == "biaffine" else TINY_TR
    if arch == "g2gtr":
        sizes = {k: v for k, v in TINY_TR.items() if k not in ("arc_mlp", "rel_mlp")} | {"mlp": 32}
    kw = dict(arch=arch, minutes=60, max_epochs=2, max_tokens=60, progress=False, **sizes)
    cpu = train(tr, dv, tmp_path / "cpu", **kw)
    request.getfixturevalue("pretend_gpu")
    gpu = train(tr, dv, tmp_path / "gpu", device="cuda", **kw)
    assert (cpu["device"], gpu["device"]) == ("cpu", "cuda:0")
    assert gpu["dev"] == cpu["dev"]
    _same_run(tmp_path / "gpu", tmp_path / "cpu")
    on_gpu = evaluate_parser(tmp_path / "cpu", dv, device="cuda")
    assert on_gpu["las"] == cpu["dev"]["las"]


def test_predicted_tags_and_a_refiner_train_on_the_gpu_as_on_the_cpu(tmp_path, request):
    """The taggers (jackknifed and final), an RNGTr refiner over a biaffine initial parser on k-fold graphs."""
    tr = _toy_treebank(tmp_path / "train.conllu", 40, 0)
    dv = _toy_treebank(tmp_path / "dev.conllu", 10, 1)
    common = dict(minutes=60, max_epochs=1, max_tokens=60, progress=False)
    train(tr, dv, tmp_path / "biaffine", **common, **TINY, lstm_hidden=16)
    runs = {}
    for where in ("cpu", "cuda"):
        if where == "cuda":
            request.getfixturevalue("pretend_gpu")
        runs[where] = train(tr, dv, tmp_path / f"rngtr-{where}", arch="rngtr", initial=tmp_path / "biaffine",
                            refiner_graphs="kfold", folds=2, fold_minutes=1, tags="predicted", tagger_minutes=1,
                            tagger_epochs=1, jackknife=2, device=where, **common, **TINY_TR)
    assert runs["cuda"]["device"] == "cuda:0" and runs["cuda"]["dev"] == runs["cpu"]["dev"]
    assert runs["cuda"]["kfold"]["train_graph_las"] == runs["cpu"]["kfold"]["train_graph_las"]
    _same_run(tmp_path / "rngtr-cuda", tmp_path / "rngtr-cpu")
    ta, tb = _weights(tmp_path / "rngtr-cuda" / "tagger"), _weights(tmp_path / "rngtr-cpu" / "tagger")
    assert all(torch.equal(ta[k], tb[k]) for k in ta)


def test_a_gpu_this_machine_does_not_have_is_refused_in_one_line(tmp_path):
    tr = _toy_treebank(tmp_path / "train.conllu", 10, 0)
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    with pytest.raises(ForgetbenchError, match="--device: cuda but torch sees no CUDA GPU"):
        train(tr, None, tmp_path / "m", device="cuda", progress=False)
    with pytest.raises(ForgetbenchError, match="unknown device 'gpu'"):
        train(tr, None, tmp_path / "m", device="gpu", progress=False)
    assert not (tmp_path / "m").exists()


def test_parsers_compressed_on_the_gpu_are_the_ones_compressed_on_the_cpu(tmp_path, request):
    """``parse compress --device cuda``: calibration batches moved to the network's device, the recipes' hooks on
    it, sizes from its weights; on the harness every LAS, interval, size and relation class is the CPU run's.
    Pruning recipes (magnitude, and Wanda's activation statistics collected on the device): int8's fake
    quantisation runs with torch functions disabled, which the harness cannot pretend through (the GPU check's
    parse step runs it on a real GPU)."""
    from forgetbench.parsing.compress_eval import run

    tr = _toy_treebank(tmp_path / "train.conllu", 40, 0)
    dv = _toy_treebank(tmp_path / "dev.conllu", 10, 1)
    common = dict(minutes=60, max_epochs=1, max_tokens=60, progress=False)
    train(tr, dv, tmp_path / "biaffine", **common, **TINY, lstm_hidden=16)
    train(tr, dv, tmp_path / "rngtr", arch="rngtr", initial=tmp_path / "biaffine", **common, **TINY_TR)
    models, tests = [str(tmp_path / "biaffine"), str(tmp_path / "rngtr")], [str(dv)] * 2
    recipes = ["prune-30", "wanda-45-uniform"]
    cpu = run(models, tests, [str(dv)] * 2, recipes, resamples=50)
    request.getfixturevalue("pretend_gpu")
    gpu = run(models, tests, [str(dv)] * 2, recipes, resamples=50, device="cuda")
    assert (cpu["device"], gpu["device"]) == ("cpu", "cuda:0")

    def results(s):
        out = []
        for tb in s["treebanks"]:
            out.append({k: v for k, v in tb["base"].items() if k != "sent_per_s"})
            for name, v in tb["variants"].items():
                out.append((name, {k: x for k, x in v.items() if k != "sent_per_s"}))
        return out, s["contrasts"]

    assert results(gpu) == results(cpu)
    assert cpu["treebanks"][1]["variants"]["wanda-45-uniform"]["sizes"]["sparse_bytes"] > 0
