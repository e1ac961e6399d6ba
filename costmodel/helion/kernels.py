"""The Helion kernels, written after Helion's examples (matmul, softmax, layer_norm, rms_norm, attention) plus
SwiGLU, a fused gated-MLP activation that has no Triton family here. Helion reads each kernel's source, so they
live in this file; importing it imports helion."""

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
