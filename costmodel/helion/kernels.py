"""The Helion kernels, written after Helion's examples (matmul, softmax, layer_norm, rms_norm, attention) plus
fused kernels that have no Triton family here: the gated-MLP activations SwiGLU and GeGLU, a per-row cross-entropy
loss and a fused residual add with RMSNorm. Helion reads each kernel's source, so they live in this file; importing
it imports helion. A kernel's source text is its data's identity (``HelionFamily.kernel_hash``): edit one and its
rows are another kernel's."""

from __future__ import annotations

import math

import helion
import helion.language as hl
import torch

from costmodel.kernels.layernorm import EPS as LN_EPS
from costmodel.kernels.rmsnorm import EPS as RMS_EPS


@helion.kernel(static_shapes=True)
def matmul(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    m, k = x.size()
    _, n = y.size()
    out = torch.empty([m, n], dtype=x.dtype, device=x.device)
    for tile_m, tile_n in hl.tile([m, n]):
        acc = hl.zeros([tile_m, tile_n], dtype=torch.float32)
        for tile_k in hl.tile(k):
            acc = hl.dot(x[tile_m, tile_k], y[tile_k, tile_n], acc=acc)
        out[tile_m, tile_n] = acc.to(out.dtype)
    return out


@helion.kernel(static_shapes=True)
def softmax(x: torch.Tensor) -> torch.Tensor:
    m, _ = x.size()
    out = torch.empty_like(x)
    for tile_m in hl.tile(m):
        out[tile_m, :] = torch.nn.functional.softmax(x[tile_m, :].to(torch.float32), dim=1).to(x.dtype)
    return out


@helion.kernel(static_shapes=True)
def layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty_like(x)
    for tile_m in hl.tile(m):
        acc = x[tile_m, :].to(torch.float32)
        var, mean = torch.var_mean(acc, dim=-1, keepdim=True, correction=0)
        y = (acc - mean) * torch.rsqrt(var + LN_EPS)
        out[tile_m, :] = (y * weight[:].to(torch.float32) + bias[:].to(torch.float32)).to(x.dtype)
    return out


@helion.kernel(static_shapes=True)
def rms_norm(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty_like(x)
    for tile_m in hl.tile(m):
        acc = x[tile_m, :].to(torch.float32)
        y = acc * torch.rsqrt(torch.mean(acc * acc, dim=-1, keepdim=True) + RMS_EPS)
        out[tile_m, :] = (y * weight[:].to(torch.float32)).to(x.dtype)
    return out


@helion.kernel(static_shapes=True)
def attention(q_in: torch.Tensor, k_in: torch.Tensor, v_in: torch.Tensor, causal_shift: int) -> torch.Tensor:
    """Flash attention forward over (B, H, S, D); key j of query i is kept where j <= i + causal_shift (S: none
    masked, 0: causal)."""
    m_dim, n_dim = q_in.size(-2), k_in.size(-2)
    head_dim = hl.specialize(q_in.size(-1))
    q_view = q_in.reshape([-1, m_dim, head_dim])
    v_view = v_in.reshape([-1, n_dim, head_dim])
    k_view = k_in.reshape([-1, n_dim, head_dim]).transpose(1, 2)
    out = torch.empty_like(q_view)
    qk_scale = 1.0 / math.sqrt(head_dim) * 1.44269504  # 1/ln(2): exp2 below
    for tile_b, tile_m in hl.tile([q_view.size(0), m_dim]):
        m_i = hl.full([tile_b, tile_m], float("-inf"), dtype=torch.float32)
        l_i = torch.full_like(m_i, 1.0)
        acc = hl.zeros([tile_b, tile_m, head_dim], dtype=torch.float32)
        q = q_view[tile_b, tile_m, :]
        for tile_n in hl.tile(v_view.size(1)):
            k = k_view[tile_b, :, tile_n]
            qk = hl.dot(q, k)
            keep = tile_n.index[None, None, :] <= tile_m.index[None, :, None] + causal_shift
            qk = torch.where(keep, qk * qk_scale, float("-inf"))
            m_ij = torch.maximum(m_i, torch.amax(qk, -1))
            p = torch.exp2(qk - m_ij[:, :, None])
            l_ij = torch.sum(p, -1)
            alpha = torch.exp2(m_i - m_ij)
            l_i = l_i * alpha + l_ij
            acc = acc * alpha[:, :, None]
            v = v_view[tile_b, tile_n, :]
            acc = hl.dot(p.to(v.dtype), v, acc=acc)
            m_i = m_ij
        acc = acc / l_i[:, :, None]
        out[tile_b, tile_m, :] = acc.to(out.dtype)
    return out.view(q_in.size())


@helion.kernel(static_shapes=True)
def swiglu(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """silu(gate) * up, elementwise over (M, N): the activation of a gated MLP (Llama's FFN)."""
    out = torch.empty_like(gate)
    for tile in hl.tile(gate.size()):
        g = gate[tile].to(torch.float32)
        out[tile] = (g * torch.sigmoid(g) * up[tile].to(torch.float32)).to(out.dtype)
    return out


@helion.kernel(static_shapes=True)
def geglu(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """gelu(gate) * up with the tanh approximation of gelu, elementwise over (M, N): the activation of a GeGLU MLP
    (Gemma's FFN)."""
    out = torch.empty_like(gate)
    for tile in hl.tile(gate.size()):
        g = gate[tile].to(torch.float32)
        inner = 0.7978845608028654 * (g + 0.044715 * g * g * g)  # sqrt(2 / pi) * (g + 0.044715 g^3)
        out[tile] = (0.5 * g * (1.0 + torch.tanh(inner)) * up[tile].to(torch.float32)).to(out.dtype)
    return out


@helion.kernel(static_shapes=True)
def cross_entropy(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Per-row cross-entropy loss (float32) of logits (M, V) against int64 class indices (M,): log-sum-exp over the
    vocabulary in blocks with a running max (one pass over the logits, as an LLM's loss kernel reads them), less the
    target's logit, gathered by its flat index."""
    m, v = logits.size()
    loss = torch.empty([m], dtype=torch.float32, device=logits.device)
    flat = logits.view(-1)
    for tile_m in hl.tile(m):
        row_max = hl.full([tile_m], float("-inf"), dtype=torch.float32)
        row_sum = hl.zeros([tile_m], dtype=torch.float32)
        for tile_v in hl.tile(v):
            x = logits[tile_m, tile_v].to(torch.float32)
            new_max = torch.maximum(row_max, torch.amax(x, dim=-1))
            row_sum = row_sum * torch.exp(row_max - new_max) + torch.sum(torch.exp(x - new_max[:, None]), dim=-1)
            row_max = new_max
        picked = hl.load(flat, [tile_m.index * v + target[tile_m]]).to(torch.float32)
        loss[tile_m] = row_max + torch.log(row_sum) - picked
    return loss


@helion.kernel(static_shapes=True)
def add_rms_norm(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A transformer block's fused residual add and RMSNorm over rows of (M, N): h = x + residual in float32,
    returned as the next residual (in x's dtype) beside rms_norm(h) * weight."""
    m, n = x.size()
    out = torch.empty_like(x)
    new_residual = torch.empty_like(x)
    for tile_m in hl.tile(m):
        h = x[tile_m, :].to(torch.float32) + residual[tile_m, :].to(torch.float32)
        y = h * torch.rsqrt(torch.mean(h * h, dim=-1, keepdim=True) + RMS_EPS)
        out[tile_m, :] = (y * weight[:].to(torch.float32)).to(x.dtype)
        new_residual[tile_m, :] = h.to(x.dtype)  # after the loads: a rolled reduction stores it in its last pass
    return out, new_residual
