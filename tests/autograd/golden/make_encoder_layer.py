#!/usr/bin/python3
"""Golden values for tests/autograd/test_golden_encoder.cpp: one pre-LN transformer encoder
layer (the block of bench/torch_step.py, written with functional ops so every
weight maps to one halfgrad tensor), forward and backward in float64 PyTorch, stored as f32.

  y = h + W2 gelu(W1 LN2(h) + b1) + b2,   h = x + Wo attn(LN1(x)) + bo
  attn: q, k, v = Wq/Wk/Wv LN1(x) + b, split into H heads; softmax(q k^T / sqrt(D) with
        padding keys masked) v
  loss = sum(y * R) for a fixed random R, so every output element has a distinct weight.

Regenerate (Debian's python3-torch):  /usr/bin/python3 make_encoder_layer.py > encoder_layer.json
The reference runs in float64, so the committed values carry no float32 rounding of their own.
"""
import json
import math

import torch
import torch.nn.functional as F

B, T, C, H, FF = 2, 5, 8, 2, 16
D = C // H
torch.manual_seed(0)


def param(*shape, scale=0.3):
    return (torch.randn(*shape, dtype=torch.float64) * scale).requires_grad_()


names = {
    'x': (B, T, C), 'ln1.weight': (C,), 'ln1.bias': (C,),
    'q.weight': (C, C), 'q.bias': (C,), 'k.weight': (C, C), 'k.bias': (C,),
    'v.weight': (C, C), 'v.bias': (C,), 'out.weight': (C, C), 'out.bias': (C,),
    'ln2.weight': (C,), 'ln2.bias': (C,),
    'ff1.weight': (FF, C), 'ff1.bias': (FF,), 'ff2.weight': (C, FF), 'ff2.bias': (C,),
}
# Round every input to f32 first, so both sides start from identical values.
p = {k: param(*s).float().double().detach().requires_grad_() for k, s in names.items()}
with torch.no_grad():
    p['ln1.weight'] += 1.0
    p['ln2.weight'] += 1.0
mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])  # 1 = real token
R = torch.randn(B, T, C, dtype=torch.float64).float().double()


def heads(t):
    return t.view(B, T, H, D).permute(0, 2, 1, 3)


def forward():
    x = p['x']
    a = F.layer_norm(x, (C,), p['ln1.weight'], p['ln1.bias'], 1e-5)
    q = heads(F.linear(a, p['q.weight'], p['q.bias']))
    k = heads(F.linear(a, p['k.weight'], p['k.bias']))
    v = heads(F.linear(a, p['v.weight'], p['v.bias']))
    scores = q @ k.transpose(-1, -2) / math.sqrt(D)
    scores = scores.masked_fill(mask[:, None, None, :] == 0, float('-inf'))
    att = (torch.softmax(scores, -1) @ v).permute(0, 2, 1, 3).reshape(B, T, C)
    h = x + F.linear(att, p['out.weight'], p['out.bias'])
    b = F.layer_norm(h, (C,), p['ln2.weight'], p['ln2.bias'], 1e-5)
    return h + F.linear(F.gelu(F.linear(b, p['ff1.weight'], p['ff1.bias'])), p['ff2.weight'], p['ff2.bias'])


y = forward()
(y * R).sum().backward()
flat = lambda t: [float(v) for v in t.detach().reshape(-1)]
print(json.dumps({
    'config': {'B': B, 'T': T, 'C': C, 'H': H, 'FF': FF},
    'mask': flat(mask), 'R': flat(R),
    'inputs': {k: flat(v) for k, v in p.items()},
    'y': flat(y),
    'grads': {k: flat(v.grad) for k, v in p.items()},
    'torch_version': torch.__version__,
}, indent=1))
