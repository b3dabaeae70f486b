#!/usr/bin/python3
"""Golden values for tests/nn/test_text_classifier.cpp: halfgrad's TextClassifier written in
PyTorch with the same parameter names (tiny config, dropout 0), forward, cross-entropy loss
and every parameter gradient, computed in float64 from f32-rounded weights.

Regenerate (Debian's python3-torch):  /usr/bin/python3 make_text_classifier.py > text_classifier.json
"""
import json
import math

import torch
import torch.nn.functional as F

cfg = dict(vocab=11, max_len=6, d_model=8, heads=2, d_ff=12, layers=2, classes=3)
B, T = 3, 5
V, L, C, H, FF, K = cfg['vocab'], cfg['max_len'], cfg['d_model'], cfg['heads'], cfg['d_ff'], cfg['classes']
D = C // H
torch.manual_seed(1)

shapes = {'token_embedding.weight': (V, C), 'position_embedding.weight': (L, C)}
for i in range(cfg['layers']):
    p = f'encoder.layers.{i}.'
    shapes.update({p + 'ln1.weight': (C,), p + 'ln1.bias': (C,), p + 'ln2.weight': (C,), p + 'ln2.bias': (C,)})
    for proj in ('q_proj', 'k_proj', 'v_proj', 'out_proj'):
        shapes.update({p + f'attn.{proj}.weight': (C, C), p + f'attn.{proj}.bias': (C,)})
    shapes.update({p + 'ff.fc1.weight': (FF, C), p + 'ff.fc1.bias': (FF,), p + 'ff.fc2.weight': (C, FF),
                   p + 'ff.fc2.bias': (C,)})
shapes.update({'norm.weight': (C,), 'norm.bias': (C,), 'head.weight': (K, C), 'head.bias': (K,)})

P = {}
for name, shape in shapes.items():
    t = torch.randn(*shape, dtype=torch.float64) * 0.4
    if name.endswith(('ln1.weight', 'ln2.weight', 'norm.weight')):
        t = t * 0.5 + 1.0
    P[name] = t.float().double().requires_grad_()

ids = torch.tensor([[3, 7, 1, 9, 2], [5, 5, 0, 0, 0], [10, 4, 8, 0, 0]])
mask = (ids != 0).long()
labels = torch.tensor([2, 0, 1])


def linear(x, n):
    return F.linear(x, P[n + '.weight'], P[n + '.bias'])


def ln(x, n):
    return F.layer_norm(x, (C,), P[n + '.weight'], P[n + '.bias'], 1e-5)


def forward():
    x = P['token_embedding.weight'][ids] + P['position_embedding.weight'][:T]
    for i in range(cfg['layers']):
        p = f'encoder.layers.{i}.'
        a = ln(x, p + 'ln1')
        split = lambda t: t.view(B, T, H, D).permute(0, 2, 1, 3)
        q, k, v = (split(linear(a, p + f'attn.{s}_proj')) for s in 'qkv')
        s = (q @ k.transpose(-1, -2) / math.sqrt(D)).masked_fill(mask[:, None, None, :] == 0, float('-inf'))
        att = (torch.softmax(s, -1) @ v).permute(0, 2, 1, 3).reshape(B, T, C)
        x = x + linear(att, p + 'attn.out_proj')
        x = x + linear(F.gelu(linear(ln(x, p + 'ln2'), p + 'ff.fc1')), p + 'ff.fc2')
    x = ln(x, 'norm')
    m = mask.unsqueeze(-1).double()
    pooled = (x * m).sum(1) / m.sum(1)
    return linear(pooled, 'head')


logits = forward()
loss = F.cross_entropy(logits, labels)
loss.backward()
flat = lambda t: [float(v) for v in t.detach().reshape(-1)]
print(json.dumps({
    'config': cfg, 'B': B, 'T': T,
    'ids': flat(ids), 'mask': flat(mask), 'labels': flat(labels),
    'params': {k: flat(v) for k, v in P.items()},
    'logits': flat(logits), 'loss': float(loss),
    'grads': {k: flat(v.grad) for k, v in P.items()},
    'torch_version': torch.__version__,
}))
