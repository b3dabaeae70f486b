#!/usr/bin/python3
"""Golden values for tests/optim/test_optimizers.cpp: three steps of torch.optim SGD (momentum,
Nesterov, weight decay), Adam (L2 weight decay) and AdamW in float32 on fixed parameters and
gradients, so halfgrad's f32 updates can be compared to torch's to a few ulp.

Regenerate (Debian's python3-torch):  /usr/bin/python3 make_optimizers.py > optimizers.json
"""
import json

import torch

torch.manual_seed(3)
p0 = torch.randn(7)
grads = [torch.randn(7) for _ in range(3)]
runs = {
    'sgd': lambda p: torch.optim.SGD([p], lr=0.1, momentum=0.9, weight_decay=0.1),
    'sgd_nesterov': lambda p: torch.optim.SGD([p], lr=0.1, momentum=0.9, nesterov=True),
    'sgd_plain': lambda p: torch.optim.SGD([p], lr=0.1),
    'adam': lambda p: torch.optim.Adam([p], lr=0.01, weight_decay=0.1),
    'adamw': lambda p: torch.optim.AdamW([p], lr=0.01, weight_decay=0.1),
}
out = {'p0': p0.tolist(), 'grads': [g.tolist() for g in grads], 'steps': {}}
for name, make in runs.items():
    p = p0.clone().requires_grad_()
    opt = make(p)
    trajectory = []
    for g in grads:
        p.grad = g.clone()
        opt.step()
        trajectory.append(p.detach().tolist())
    out['steps'][name] = trajectory
print(json.dumps(out))
