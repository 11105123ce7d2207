"""Which quantiser pays: a per-site diagnosis of a ``quantize`` step (``forgetbench compress … --diagnose``).

For the model as it was before the step (the reference) and the ranges the step calibrated:

1. **Per site** (every activation site, every weight matrix): the observed range max |x| over the calibration
   tokens, the calibrated range (amax; per channel: its largest and median channel), the int8 step amax / 127, the
   share of values that quantise to zero (exact zeros left out of both counts), and the signal-to-noise ratio
   SNR = 10 · log10(Σ x² / Σ (x − x̂)²) dB. Activation sites are measured where they stand in the *reference*
   model (``ActQuantizer`` mode "measure": x̂ computed, x passed on), so a site's numbers are its own error, not
   the error upstream sites left in its input.
2. **Per site kind** (and all kinds together): the reference and a copy quantised at that kind only are run on the
   same calibration sentences, teacher-forced, each sentence alone; per target token the KL divergence
   KL(p_ref ‖ p_quant) of the next-token distributions and whether their top tokens agree, averaged over tokens.
   A model whose forward returns no ``logits`` (a parser) gets part 1 only.

Both read the calibration sentences: the numbers describe the quantisers on the data that set them.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable

import torch
from torch import nn

from forgetbench.compress.ptq import (
    ACTIVATION_KINDS,
    QuantState,
    attach_state_sites,
    quantize_weights,
    weight_matrices,
)
from forgetbench.compress.quantizer import fake_quant, per_channel_amax
from forgetbench.compress.sites import ActQuantizer


class SiteStats:
    """Running sums of one site: observed max |x|, Σx², Σ(x − x̂)², values, nonzero values, nonzero values → 0."""

    def __init__(self):
        self.observed = 0.0
        self.signal = self.noise = 0.0
        self.values = self.nonzero = self.zeroed = 0

    def add(self, x: torch.Tensor, xq: torch.Tensor) -> None:
        x, xq = x.detach().double(), xq.detach().double()
        if x.numel() == 0:
            return
        nz = x != 0
        self.observed = max(self.observed, float(x.abs().max()))
        self.signal += float((x * x).sum())
        self.noise += float(((x - xq) ** 2).sum())
        self.values += x.numel()
        self.nonzero += int(nz.sum())
        self.zeroed += int((nz & (xq == 0)).sum())

    def to_dict(self) -> dict:
        return {"observed": self.observed, "zero_share": self.zeroed / self.nonzero if self.nonzero else 0.0,
                "snr_db": snr_db(self.signal, self.noise), "values": self.values}


def snr_db(signal: float, noise: float) -> float:
    """10 · log10(signal / noise); +inf where quantisation is exact, -inf for an all-zero signal with noise."""
    if noise == 0:
        return math.inf
    return 10 * math.log10(signal / noise) if signal > 0 else -math.inf


def _range(amax) -> dict:
    if isinstance(amax, torch.Tensor):
        a = amax.float()
        return {"amax": float(a.max()), "amax_median": float(a.median()), "step": float(a.max()) / 127,
                "step_median": float(a.median()) / 127}
    return {"amax": amax, "step": amax / 127} if amax is not None else {"amax": None, "step": None}


@torch.no_grad()
def site_table(reference: nn.Module, state: QuantState, calibrate: Callable[[nn.Module], None]) -> dict[str, dict]:
    """Part 1 of the module docstring: site name -> kind, granularity, ranges, step, zero share, SNR."""
    out: dict[str, dict] = {}
    stats: dict[str, SiteStats] = {}
    kinds = state.config.kinds & set(ACTIVATION_KINDS)
    if kinds:
        model = reference
        st = attach_state_sites(model, state, kinds, mode="measure")

        def measure(q: ActQuantizer, x: torch.Tensor, xq: torch.Tensor) -> None:
            stats.setdefault(q.name, SiteStats()).add(x, xq)

        for q in st.registry.quantizers.values():
            q.measure = measure
        st.registry.measure = measure  # per-token sites made during the pass
        try:
            calibrate(model)
        finally:
            st.remove()
        for name, q in sorted(st.registry.quantizers.items()):
            s = stats.get(name)
            if s is None:
                continue
            out[name] = {"kind": q.kind, "granularity": q.granularity} | _range(q.amax) | s.to_dict()
    if "linear_weight" in state.config.kinds:
        for name, w, _ in weight_matrices(reference, state.config.exclude):
            amax = per_channel_amax(w.detach(), axis=0)
            s = SiteStats()
            s.add(w, fake_quant(w.detach().float(), amax, axis=0))
            out[name] = {"kind": "linear_weight", "granularity": "channel"} | _range(amax) | s.to_dict()
    return out


class _Agreement:
    def __init__(self):
        self.kl = 0.0
        self.agree = self.tokens = 0

    def add(self, ref: torch.Tensor, q: torch.Tensor) -> None:
        lp, lq = torch.log_softmax(ref.double(), -1), torch.log_softmax(q.double(), -1)
        self.kl += float((lp.exp() * (lp - lq)).sum())
        self.agree += int((ref.argmax(-1) == q.argmax(-1)).sum())
        self.tokens += ref.numel() // ref.shape[-1]

    def to_dict(self) -> dict:
        return {"kl": self.kl / self.tokens if self.tokens else None,
                "top1_agreement": self.agree / self.tokens if self.tokens else None, "tokens": self.tokens}


def _quantised_at(reference: nn.Module, state: QuantState, kind: str | None) -> tuple[nn.Module, Callable[[], None]]:
    """A copy of ``reference`` fake-quantised with ``state``'s ranges at one site kind (None: every kind)."""
    model = copy.deepcopy(reference)
    kinds = state.config.kinds if kind is None else {kind}
    if "linear_weight" in kinds:
        quantize_weights(model, state.config.exclude)
    act = kinds & set(ACTIVATION_KINDS)
    st = attach_state_sites(model, state, act, mode="quant") if act else None
    return model, (st.remove if st is not None else (lambda: None))


@torch.no_grad()
def kind_table(reference: nn.Module, state: QuantState, calibrate: Callable[[nn.Module], None]) -> dict[str, dict] | None:
    """Part 2 of the module docstring: site kind (and "all") -> mean KL per token and top-1 agreement; None where
    the model's output has no logits."""
    out: dict[str, dict] = {}
    for kind in [*(k for k in ("linear_input", "linear_weight", "attn_qk", "attn_pv", "residual")
                   if k in state.config.kinds), None]:
        model, remove = _quantised_at(reference, state, kind)
        acc = _Agreement()
        no_logits = False

        def compare(_m, args, kwargs, output, acc=acc):
            nonlocal no_logits
            logits = getattr(output, "logits", None)
            if logits is None:
                no_logits = True
                return
            acc.add(reference(*args, **kwargs).logits, logits)

        h = model.register_forward_hook(compare, with_kwargs=True)
        try:
            calibrate(model)
        finally:
            h.remove()
            remove()
        if no_logits:
            return None
        out[kind or "all"] = acc.to_dict()
    return out


def diagnose(reference: nn.Module, state: QuantState, calibrate: Callable[[nn.Module], None]) -> dict:
    """The whole diagnosis of one ``quantize`` step (module docstring); ``reference`` is not changed."""
    return {"sites": site_table(reference, state, calibrate), "kinds": kind_table(reference, state, calibrate)}


def markdown(diag: dict, worst: int = 25) -> str:
    """The diagnosis as Markdown: the kinds' table, then the ``worst`` sites by SNR (every site in the JSON)."""
    lines = ["## Quantisation diagnosis", ""]
    if diag.get("kinds"):
        lines += ["Teacher-forced on the calibration sentences, one site kind quantised at a time:", "",
                  "| site kind | KL(ref ‖ quant) per token | top-1 agreement | tokens |", "|---|---:|---:|---:|"]
        for k, r in diag["kinds"].items():
            lines.append(f"| {k} | {r['kl']:.4f} | {100 * r['top1_agreement']:.1f} % | {r['tokens']} |")
        lines.append("")
    sites = sorted(diag["sites"].items(), key=lambda kv: kv[1]["snr_db"])
    lines += [f"The {min(worst, len(sites))} sites of lowest SNR (of {len(sites)}):", "",
              "| site | kind | scale | observed max | calibrated amax | int8 step | → 0 | SNR dB |",
              "|---|---|---|---:|---:|---:|---:|---:|"]
    for name, r in sites[:worst]:
        amax = "—" if r["amax"] is None else f"{r['amax']:.4g}"
        step = "—" if r["step"] is None else f"{r['step']:.3g}"
        lines.append(f"| {name} | {r['kind']} | {r['granularity']} | {r['observed']:.4g} | {amax} | {step} | "
                     f"{100 * r['zero_share']:.1f} % | {r['snr_db']:.1f} |")
    return "\n".join(lines) + "\n"
