"""One greedy decoding step of an M2M-100-architecture model (M2M-100, SMaLL-100, the shipped teacher and students).

Two implementations with one interface — ``step(tokens) -> logits`` for the rows still decoding, and
``select(rows)`` to drop the rows that ended:

- ``HFStep``: the model's own ``forward`` with its key/value cache. Always correct: forward hooks, PTQ's op
  scopes, accelerate's device-map hooks and any architecture with an encoder-decoder ``forward`` see every op.
- ``DirectStep``: the same decoder computation written out over the model's own modules, without the per-step
  work of Hugging Face's ``forward`` that greedy decoding does not need (mask building, position ids from a
  cumulative sum, cache bookkeeping, output objects): about 1.5× faster per step at batch size 1 here, where
  that work is most of a step.

Rules of ``DirectStep`` (``direct_supported`` checks them; otherwise ``HFStep`` is used):

1. Only an ``M2M100ForConditionalGeneration`` in eval mode with eager attention, its weights on the CPU (on a
   GPU, other kernels: ``tests/test_cuda.py`` compares the two steps there; until then CUDA uses ``HFStep``,
   and the run record says so). The modules it calls (linear maps, layer norms, embeddings, activation) may
   carry hooks: they run. The modules whose ``forward`` it does
   not call (the model, its decoder, each decoder layer and attention block, the position table) may carry
   none, and no ``forward`` replaced — except by a fake-quantisation *op scope* (``compress.sites.OpScope``,
   found as ``forgetbench_op_scope``): the step then passes the same operands to the scope's sites (Q and Kᵀ,
   softmax weights and V; both sides of each residual addition) in the same order. Device-map hooks, user
   hooks and any other replaced ``forward`` send the model to ``HFStep``; so does a global module hook.
2. The same ops in the same order on the same shapes as the eager ``forward`` of transformers' M2M-100 (pre-LN
   layers; scaled word embedding + sinusoidal position ``padding_idx + 1 + t``; Q·Kᵀ·scaling + mask, softmax, ·V;
   cross-attention keys/values projected once and stored contiguous, as the cache stores them), so its logits
   are *equal* to ``HFStep``'s, bit for bit — dense, pruned and fake-quantised (asserted in the tests on the
   teacher, its PTQ variant and SMaLL-100-format models), not merely close: the greedy tokens cannot differ,
   and no result depends on which step produced it.
3. From 4 rows, on CPU, the output projection may run in 1024-column blocks: an output column of a matrix
   product does not depend on how the columns are split, so either way gives the same logits, and the faster
   is taken — timed once per process on the real input, per weight shape and row range (4–7, 8–15, 16–31,
   …), 3 alternated runs each: which is faster depends on the BLAS and the CPU (MKL packs the whole head for
   a few rows with AVX2 kernels; docs/METHOD.md §2.9b).
4. (``add``) Rows may join a batch that is decoding, as a cohort with its own step count, source padding and
   caches: the attentions and positions run per cohort, everything else on all rows at once; each cohort's
   logits equal those of a step over that cohort alone (see ``DirectStep``).
5. The self-attention cache is written in place into a buffer grown ``CACHE_CHUNK`` steps at a time, and the
   attention reads its first t+1 positions as a view, where ``forward`` concatenates the cache every step (a
   copy of the whole cache per step and layer). Each matrix of the batched products keeps its layout (rows of
   ``head_dim`` contiguous values; only the stride between matrices differs), so the products are the same,
   bit for bit (tested with rule 2).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F
from torch.nn.modules import module as nn_module

HEAD_BLOCK, HEAD_BLOCK_ROWS = 1024, 4  # rule 3
CACHE_CHUNK = 32  # rule 5: the self-attention cache's capacity grows by this many steps
_head_plans: dict = {}  # rule 3, this process: (weight shape, dtype, row count's bit length) -> blocks faster


def _scope_hook(h) -> bool:
    return bool(getattr(getattr(h, "__self__", None), "op_scope_hook", False))


def _hooks(m: nn.Module) -> list:
    return [h for h in (*m._forward_hooks.values(), *m._forward_pre_hooks.values()) if not _scope_hook(h)]


def direct_unsupported(model) -> str | None:
    """Rule 1: None where ``DirectStep`` computes exactly what the model's ``forward`` computes, else why not
    (the run record keeps the reason of every series decoded through ``HFStep``)."""
    if type(model).__name__ != "M2M100ForConditionalGeneration" or model.training:
        return "not an M2M-100 model in eval mode"
    if getattr(model.config, "_attn_implementation", "eager") != "eager":
        return "attention is not eager"
    if nn_module._global_forward_hooks or nn_module._global_forward_pre_hooks:
        return "a global module hook"
    dec = model.get_decoder()
    skipped = [model, model.model, dec, dec.embed_positions]
    for layer in dec.layers:
        skipped += [layer, layer.self_attn, layer.encoder_attn]
    for m in skipped:
        if _hooks(m) or ("forward" in vars(m) and getattr(m, "forgetbench_op_scope", None) is None):
            return "hooks or a replaced forward (a device map, user hooks)"
    if any(p.device.type != "cpu" for p in model.parameters()):
        return ("weights off the CPU: the direct step's bit-equality with forward is established on CPU kernels "
                "(tests/test_cuda.py checks it on a GPU)")
    return None


def direct_supported(model) -> bool:
    """Rule 1: whether ``DirectStep`` computes exactly what the model's ``forward`` computes."""
    return direct_unsupported(model) is None


def _site(module: nn.Module):
    """The op scope's ``site(j, operand, x)`` of a block, or None."""
    scope = getattr(module, "forgetbench_op_scope", None)
    return None if scope is None else scope.site


def _plain_linear(m: nn.Module) -> bool:
    """An ``nn.Linear`` without bias whose hooks are plain (no keyword-argument or always-called hooks)."""
    return (type(m) is nn.Linear and m.bias is None and not m._forward_pre_hooks_with_kwargs
            and not m._forward_hooks_with_kwargs and not m._forward_hooks_always_called)


def _blocks(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """``F.linear(x, w)`` in blocks of ``HEAD_BLOCK`` output columns: the same values (rule 3)."""
    return torch.cat([F.linear(x, w[i : i + HEAD_BLOCK]) for i in range(0, w.shape[0], HEAD_BLOCK)], dim=-1)


def _blocks_faster(w: torch.Tensor, x: torch.Tensor) -> bool:
    """Rule 3: whether the blocked product is the faster here, timed on the first input of each weight shape and
    row range (4-7, 8-15, 16-31, ...) in this process (the best of 3 runs each, alternated; a wrong pick costs
    time, never a value)."""
    key = (tuple(w.shape), w.dtype, x.shape[0].bit_length())
    if key not in _head_plans:
        best = {False: math.inf, True: math.inf}
        for _ in range(3):
            for blocked in (False, True):
                t = time.perf_counter()
                _blocks(x, w) if blocked else F.linear(x, w)
                best[blocked] = min(best[blocked], time.perf_counter() - t)
        _head_plans[key] = best[True] < best[False]
    return _head_plans[key]


def _blocked_head(head: nn.Linear, x: torch.Tensor) -> torch.Tensor:
    """Rule 3: ``head(x)`` in column blocks, its hooks run as ``Module.__call__`` runs them (a PTQ input site)."""
    for hook in head._forward_pre_hooks.values():
        r = hook(head, (x,))
        if r is not None:
            x = r[0] if isinstance(r, tuple) else r
    out = _blocks(x, head.weight)
    for hook in head._forward_hooks.values():
        r = hook(head, (x,), out)
        if r is not None:
            out = r
    return out


def _rows_of(parts: list[torch.Tensor]) -> torch.Tensor:
    """The cohorts' rows in batch order (one cohort: its tensor itself)."""
    return parts[0] if len(parts) == 1 else torch.cat(parts)


def _append(cache: torch.Tensor, t: int, x: torch.Tensor) -> torch.Tensor:
    """Write step t's keys or values ``x`` ``[rows, heads, 1, head_dim]`` into the cache, grown when full."""
    if t == cache.shape[2]:
        cache = torch.cat([cache, cache.new_empty(*cache.shape[:2], CACHE_CHUNK, cache.shape[3])], dim=2)
    cache[:, :, t : t + 1] = x
    return cache


def _add(site, j: int, x: torch.Tensor, branch: torch.Tensor) -> torch.Tensor:
    """The layer's j-th residual addition, through its op scope's sites when it has one."""
    return x + branch if site is None else site(j, 0, x) + site(j, 1, branch)


def cache_argument(model) -> str:
    """The name under which ``model``'s ``forward`` takes its key/value cache: ``cache`` (transformers ≥ 5.24, where
    ``past_key_values`` is a deprecated alias) or ``past_key_values`` (earlier 5.x releases)."""
    import inspect

    params = inspect.signature(type(model).forward).parameters
    return "cache" if "cache" in params else "past_key_values"


class HFStep:
    """A decoder step through ``model(...)`` with an ``EncoderDecoderCache``, passed under the name the installed
    transformers takes (``cache_argument``); the cache is updated in place, so no output field is read back."""

    def __init__(self, model, hidden: torch.Tensor, attention_mask: torch.Tensor):
        from transformers.cache_utils import DynamicCache, EncoderDecoderCache

        self.model, self.hidden, self.mask = model, hidden, attention_mask
        self.cache = EncoderDecoderCache(DynamicCache(), DynamicCache())
        self.cache_name = cache_argument(model)

    def __call__(self, tokens: torch.Tensor) -> torch.Tensor:
        o = self.model(encoder_outputs=(self.hidden,), attention_mask=self.mask, decoder_input_ids=tokens[:, None],
                       use_cache=True, **{self.cache_name: self.cache})
        return o.logits[:, -1]

    def select(self, rows: torch.Tensor) -> None:
        self.hidden, self.mask = self.hidden.index_select(0, rows), self.mask.index_select(0, rows)
        self.cache.batch_select_indices(rows)


@dataclass
class _Cohort:
    """Rows that entered the batch together: their step count, cross-attention mask and caches (per layer)."""

    n: int
    t: int
    bias: torch.Tensor
    cross: list
    keys: list
    values: list


class DirectStep:
    """Rule 2: the eager M2M-100 decoder step over the model's modules, caches held as plain tensors.

    Rule 4 (``add``): rows may join a batch that is decoding, as a *cohort* with its own step count, source
    padding and caches. The linear maps, layer norms, activations and residual additions run on every row at
    once; the two attentions and the position run per cohort, each exactly as a batch of that cohort alone would
    run them. A row of a matrix product does not depend on the other rows once the product has enough rows for
    the BLAS's large-matrix kernel, a threshold of the BLAS and the CPU (MKL: 4 to 16 rows, docs/METHOD.md
    §2.9b); fewer rows take another kernel and round differently, as they do in any batch whose other rows
    ended. So a cohort of at least that many rows gets the logits of a
    step over that cohort alone, bit for bit (tested), and the decoding loop can keep the batch full
    (``generation.greedy_stream``) without changing what it computes; a cohort below it may differ in the last
    bits (a flipped token is rare: the stream's tokens equal the nominal batches' in the tests)."""

    def __init__(self, model, hidden: torch.Tensor, attention_mask: torch.Tensor, max_steps: int):
        dec = model.get_decoder()
        self.layers, self.norm, self.head = dec.layers, dec.layer_norm, model.get_output_embeddings()
        self.embed = dec.embed_tokens
        pos = dec.embed_positions
        last = pos.padding_idx + 1 + max_steps
        if last > pos.weights.size(0):  # as the module grows its table for long outputs
            pos.make_weights(last + pos.offset, pos.embedding_dim, pos.padding_idx)
        self.positions = pos.weights[pos.padding_idx + 1 : last]
        self.heads = self.layers[0].self_attn.num_heads
        self.head_dim = hidden.shape[-1] // self.heads
        self.sites = [(_site(layer), _site(layer.self_attn), _site(layer.encoder_attn)) for layer in self.layers]
        self.cohorts: list[_Cohort] = []
        self.add(hidden, attention_mask)

    def add(self, hidden: torch.Tensor, attention_mask: torch.Tensor) -> None:
        """Rule 4: rows with these encoder states join after the rows already in the batch; the next step is
        their first (their token: the decoder start)."""
        b, s, _ = hidden.shape
        # the cross-attention mask as the eager path adds it: 0 where attended, the dtype's minimum at padding
        bias = torch.zeros(b, 1, 1, s, dtype=hidden.dtype, device=hidden.device).masked_fill(
            attention_mask[:, None, None, :] == 0, torch.finfo(hidden.dtype).min)
        # contiguous, as the cache stores them (the transposed view, its rows of head_dim values not contiguous,
        # would take another matmul kernel: other rounding)
        cross = [(self._split(layer.encoder_attn.k_proj(hidden)).contiguous(),
                  self._split(layer.encoder_attn.v_proj(hidden)).contiguous()) for layer in self.layers]
        self.cohorts.append(_Cohort(b, 0, bias, cross, self._buffers(hidden, b), self._buffers(hidden, b)))

    def _buffers(self, hidden: torch.Tensor, rows: int) -> list[torch.Tensor]:
        """Rule 5: an empty self-attention cache per layer (keys or values), filled in place."""
        return [hidden.new_empty(rows, self.heads, CACHE_CHUNK, self.head_dim) for _ in self.layers]

    def _split(self, x: torch.Tensor) -> torch.Tensor:  # [b, n, d] -> [b, heads, n, head_dim]
        return x.view(x.shape[0], x.shape[1], -1, self.head_dim).transpose(1, 2)

    @staticmethod
    def _attend(site, scaling, q, k, v, mask=None):
        """One cohort's attention, ``[rows, 1, d]`` before the output projection."""
        kt = k.transpose(2, 3)
        if site is not None:
            q, kt = site(0, 0, q), site(0, 1, kt)
        w = torch.matmul(q, kt) * scaling
        if mask is not None:
            w = w + mask
        w = F.softmax(w, dim=-1)
        if site is not None:
            w, v = site(1, 0, w), site(1, 1, v)
        out = torch.matmul(w, v).transpose(1, 2).contiguous()
        return out.reshape(out.shape[0], out.shape[1], -1).contiguous()

    def __call__(self, tokens: torch.Tensor) -> torch.Tensor:
        cs = self.cohorts
        if len(cs) == 1:
            pos = self.positions[cs[0].t]
        else:
            pos = torch.cat([self.positions[c.t].expand(c.n, -1) for c in cs])[:, None]
        x = self.embed(tokens[:, None]) + pos
        spans, a = [], 0
        for c in cs:
            spans.append((a, a + c.n))
            a += c.n
        for i, layer in enumerate(self.layers):
            residual, self_site, cross_site = self.sites[i]
            sa = layer.self_attn
            h = layer.self_attn_layer_norm(x)
            q, k, v = self._split(sa.q_proj(h)), self._split(sa.k_proj(h)), self._split(sa.v_proj(h))
            outs = []
            for c, (a, e) in zip(cs, spans, strict=True):
                c.keys[i], c.values[i] = _append(c.keys[i], c.t, k[a:e]), _append(c.values[i], c.t, v[a:e])
                outs.append(self._attend(self_site, sa.scaling, q[a:e], c.keys[i][:, :, : c.t + 1],
                                         c.values[i][:, :, : c.t + 1]))
            x = _add(residual, 0, x, sa.out_proj(_rows_of(outs)))
            ca = layer.encoder_attn
            h = layer.encoder_attn_layer_norm(x)
            q = self._split(ca.q_proj(h))
            outs = [self._attend(cross_site, ca.scaling, q[a:e], *c.cross[i], c.bias)
                    for c, (a, e) in zip(cs, spans, strict=True)]
            x = _add(residual, 1, x, ca.out_proj(_rows_of(outs)))
            h = layer.final_layer_norm(x)
            x = _add(residual, 2, x, layer.fc2(layer.activation_fn(layer.fc1(h))))
        for c in cs:
            c.t += 1
        x = self.norm(x)[:, -1]
        if (x.shape[0] < HEAD_BLOCK_ROWS or x.device.type != "cpu" or not _plain_linear(self.head)
                or not _blocks_faster(self.head.weight, x)):
            return self.head(x)
        return _blocked_head(self.head, x)

    def select(self, rows: torch.Tensor) -> None:
        """Keep these rows (indices into the batch, ascending); a cohort with no row left leaves."""
        kept, a = [], 0
        for c in self.cohorts:
            local = rows[(rows >= a) & (rows < a + c.n)] - a
            a += c.n
            if len(local) == 0:
                continue
            if len(local) < c.n:  # index_select, not x[rows]: the same copy, 6x faster here than advanced indexing
                c.bias = c.bias.index_select(0, local)
                c.cross = [(k.index_select(0, local), v.index_select(0, local)) for k, v in c.cross]
                c.keys = [k.index_select(0, local) for k in c.keys]
                c.values = [v.index_select(0, local) for v in c.values]
                c.n = len(local)
            kept.append(c)
        self.cohorts = kept
