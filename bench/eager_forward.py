"""Benchmark: how much a hand-written, fused Llama forward gains over the transformers backend's HF eager model (issue 10 part 6).

Why it exists: 3x lm-evaluation-harness in float32 on this CPU would need the
forward pass at 0.71 of the measured matmul peak (docs/benchmarks.md). The
usual next step is a hand-written forward for the model family, as vLLM has.
This one is written for the measurement: fused Q/K/V and gate/up products, the
date's prefix K/V shared by broadcasting instead of copied per batch, the last
layer run at the last position only, ``F.rms_norm``; the same prompts (ARC-Challenge
x dates, rendered by dateeval), the same batches, float32. It prints both times,
their ratio and the largest probability difference. It is not an engine: a
second model implementation to keep exact is what the vLLM backend is for.

    .venv/bin/python bench/eager_forward.py [--items 100] [--dates 3] [--batch-size 32] [--threads N]
"""

from __future__ import annotations

import argparse
import datetime as dt
import math
import sys
import time
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np
import torch
import torch.nn.functional as F

from dateeval.backends.base import LabelRequest
from dateeval.backends.scheduler.plans import common_prefix_length
from dateeval.backends.transformers import TransformersBackend
from dateeval.conditions import expand
from dateeval.data import Subset
from dateeval.models import resolve
from dateeval.tasks import build_task
from dateeval.tasks.mcqa import label_tokens

parser = argparse.ArgumentParser()
parser.add_argument("--items", type=int, default=100)
parser.add_argument("--dates", type=int, default=3)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--threads", type=int)
parser.add_argument("--data-dir", default=str(ROOT.parent / "shared" / "data"))
args = parser.parse_args()
if args.threads:
    torch.set_num_threads(args.threads)
backend = TransformersBackend(resolve("smollm2-135m"), dtype="float32", device="cpu")
model, cfg = backend.model, backend.model.config
task = build_task("arc_challenge", args.data_dir, Subset(limit=args.items))
labels = label_tokens(backend.tokenizer, max(len(item.options) for item in task.items)).labels
days = [dt.date(2024, 1, 1) + dt.timedelta(days=97 * i) for i in range(args.dates)]
by_date = [
    [
        LabelRequest(
            backend.template.render(
                task.prompt(item, c).messages, mode=c.date_mode, day=c.date, injection=c.injection
            ).text,
            labels[: len(item.options)],
        )
        for item in task.items
    ]
    for c in expand(days)
]

nh, nkv = cfg.num_attention_heads, cfg.num_key_value_heads
d = cfg.hidden_size // nh
g = nh // nkv
eps = cfg.rms_norm_eps
L = []  # per layer: fused, transposed weights
for layer in model.model.layers:
    a, m = layer.self_attn, layer.mlp
    L.append(
        SimpleNamespace(
            wqkv=torch.cat([a.q_proj.weight, a.k_proj.weight, a.v_proj.weight], 0).T.contiguous(),
            wo=a.o_proj.weight.T.contiguous(),
            wgu=torch.cat([m.gate_proj.weight, m.up_proj.weight], 0).T.contiguous(),
            wd=m.down_proj.weight.T.contiguous(),
            ln1=layer.input_layernorm.weight,
            ln2=layer.post_attention_layernorm.weight,
        )
    )
emb = model.model.embed_tokens.weight
head = model.lm_head.weight
normw = model.model.norm.weight
inv_freq = model.model.rotary_emb.inv_freq
scaling = getattr(model.model.rotary_emb, "attention_scaling", 1.0)
pos = torch.arange(4096).float()
freqs = torch.outer(pos, inv_freq)
embp = torch.cat([freqs, freqs], -1)
COS, SIN = embp.cos() * scaling, embp.sin() * scaling
H = cfg.hidden_size
inter = cfg.intermediate_size


def rot(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary position embedding (HF's rotate_half form) on the last dimension."""
    x1, x2 = x[..., : d // 2], x[..., d // 2 :]
    return x * cos + torch.cat([-x2, x1], -1) * sin


def rms(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return F.rms_norm(x, (H,), w, eps)


def prefix_kv(ids: torch.Tensor) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Each layer's rotated K and V of the date's shared prefix (one sequence), kept once per date."""
    x = emb[ids]  # [P, H]
    P = len(ids)
    cos, sin = COS[:P], SIN[:P]
    kvs = []
    for l in L:
        h = rms(x, l.ln1)
        qkv = h @ l.wqkv
        q = qkv[:, :H].view(P, nh, d).transpose(0, 1)
        k = qkv[:, H : H + nkv * d].view(P, nkv, d).transpose(0, 1)
        v = qkv[:, H + nkv * d :].view(P, nkv, d).transpose(0, 1)
        q, k = rot(q, cos, sin), rot(k, cos, sin)
        kvs.append((k, v))
        o = F.scaled_dot_product_attention(
            q.unsqueeze(0),
            k.repeat_interleave(g, 0).unsqueeze(0),
            v.repeat_interleave(g, 0).unsqueeze(0),
            is_causal=True,
        )[0]
        x = x + o.transpose(0, 1).reshape(P, H) @ l.wo
        h = rms(x, l.ln2)
        gu = h @ l.wgu
        x = x + (F.silu(gu[:, :inter]) * gu[:, inter:]) @ l.wd
    return kvs


def score(suffixes: list[list[int]], kvs: list, P: int) -> torch.Tensor:
    """Log-softmax after each suffix (right-padded batch) following the shared prefix: attention over the prefix's K/V by
    broadcasting (no copy), the last layer at each row's last position only."""
    B = len(suffixes)
    Lm = max(len(s) for s in suffixes)
    ids = torch.zeros(B, Lm, dtype=torch.long)
    lens = torch.tensor([len(s) for s in suffixes])
    for i, s in enumerate(suffixes):
        ids[i, : len(s)] = torch.tensor(s)
    x = emb[ids]  # [B, Lm, H]
    cos, sin = COS[P : P + Lm], SIN[P : P + Lm]
    valid = torch.arange(Lm)[None, :] < lens[:, None]  # [B, Lm]
    causal = torch.ones(Lm, Lm, dtype=torch.bool).tril()
    mask_self = causal[None] & valid[:, None, :]  # [B, Lq, Lk]
    bias_self = torch.zeros(B, 1, 1, Lm, Lm).masked_fill(~mask_self[:, None, None], float("-inf"))
    last = lens - 1
    for li, l in enumerate(L):
        final = li == len(L) - 1
        h = rms(x, l.ln1)
        qkv = h @ l.wqkv  # [B, Lm, H+2kv]
        k = qkv[..., H : H + nkv * d].view(B, Lm, nkv, d).transpose(1, 2)
        v = qkv[..., H + nkv * d :].view(B, Lm, nkv, d).transpose(1, 2)
        k = rot(k, cos, sin)
        pk, pv = kvs[li]  # [nkv, P, d]
        if final:
            qx = qkv[torch.arange(B), last, :H].view(B, 1, nh, d).transpose(1, 2)
            qx = rot(qx, cos[last].view(B, 1, 1, d), sin[last].view(B, 1, 1, d))
            Lq = 1
        else:
            qx = rot(qkv[..., :H].view(B, Lm, nh, d).transpose(1, 2), cos, sin)
            Lq = Lm
        q5 = qx.reshape(B, nkv, g, Lq, d) / math.sqrt(d)
        sp = q5 @ pk.transpose(-1, -2)[None, :, None]  # [B,nkv,g,Lq,P]
        ss = q5 @ k.transpose(-1, -2)[:, :, None]  # [B,nkv,g,Lq,Lm]
        if final:
            b = bias_self[torch.arange(B), :, :, last].view(B, 1, 1, 1, Lm)
        else:
            b = bias_self
        ss = ss + b
        w = torch.softmax(torch.cat([sp, ss], -1), -1)
        o = w[..., :P] @ pv[None, :, None] + w[..., P:] @ v[:, :, None]  # [B,nkv,g,Lq,d]
        o = o.reshape(B, nh, Lq, d).transpose(1, 2).reshape(B, Lq, H)
        if final:
            x = x[torch.arange(B), last].unsqueeze(1)
        x = x + o @ l.wo
        hh = rms(x, l.ln2)
        gu = hh @ l.wgu
        x = x + (F.silu(gu[..., :inter]) * gu[..., inter:]) @ l.wd
    h = rms(x[:, 0], normw)
    return torch.log_softmax(h @ head.T, -1)


def fused_all(batch_size: int) -> list[np.ndarray]:
    out = []
    for reqs in by_date:
        enc = backend.encode([r.prompt for r in reqs])
        P = common_prefix_length(enc)
        kvs = prefix_kv(torch.tensor(enc[0][:P]))
        order = sorted(range(len(enc)), key=lambda i: (len(enc[i]), i))
        res = [None] * len(enc)
        for s in range(0, len(order), batch_size):
            chunk = order[s : s + batch_size]
            lp = score([enc[i][P:] for i in chunk], kvs, P)
            for r, i in enumerate(chunk):
                res[i] = lp[r, [lab.token_id for lab in reqs[i].labels]].double().numpy()
        out += res
    return out


def hf_all(batch_size: int) -> list[np.ndarray]:
    out = []
    for reqs in by_date:
        out += backend.label_logprobs(reqs, batch_size)
    return out


with torch.inference_mode():
    for _ in range(2):
        start = time.perf_counter()
        reference = hf_all(args.batch_size)
        eager = time.perf_counter() - start
        start = time.perf_counter()
        fused = fused_all(args.batch_size)
        hand = time.perf_counter() - start
        diff = max(np.abs(np.exp(x) - np.exp(y)).max() for x, y in zip(reference, fused))
        agree = np.mean([np.argmax(x) == np.argmax(y) for x, y in zip(reference, fused)])
        print(
            f"{len(reference)} prompts, float32, {torch.get_num_threads()} threads, batch {args.batch_size}: transformers backend {eager:.1f} s, "
            f"hand-written forward {hand:.1f} s = {eager / hand:.2f}x; max |dp| {diff:.1e}, agreement {agree:.1%}",
            flush=True,
        )
