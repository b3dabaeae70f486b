#!/usr/bin/python3
"""Reference training step: pre-LayerNorm transformer encoder text classifier in plain
torch.nn (PyTorch 1.13 CPU), AdamW(lr=1e-3, wd=0.01), dropout 0, cross-entropy.

  /usr/bin/python3 torch_step.py --config S --threads 1 --dtype fp32
prints exactly one line on stdout:  ms_per_step=<median over --steps steps after --warmup>
Diagnostics (min, FLOPs, achieved GFLOP/s, autocast warnings) go to stderr.

--dtype: fp32 | bf16 (torch.autocast('cpu', dtype=torch.bfloat16) around forward+loss)
         | fp16 (torch.autocast('cpu', dtype=torch.float16)). torch 1.13 does NOT support it:
           the constructor warns "In CPU autocast, but the target dtype is not supported.
           Disabling autocast..." and __enter__ raises RuntimeError "Currently, AutocastCPU
           only support Bfloat16 as the autocast_cpu_dtype". The script then prints
           ms_per_step=nan, the warning/error on stderr, and exits with status 3.
--malloc tuned: re-exec with glibc malloc env vars (see MALLOC_TUNED_ENV); default = as shipped.
OpenBLAS kernels: some machines export OPENBLAS_CORETYPE=Haswell (AVX2 kernels); run under
`env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE` to let OpenBLAS 0.3.21 auto-select Cooperlake
(AVX-512) kernels, which were ~1.8x faster for fp32 GEMM on an AVX-512 Xeon (BENCHMARKS.md).
Threads: --threads N sets torch.set_num_threads(N) (OpenMP/oneDNN) AND limits OpenBLAS to N
threads (env var before import + threadpoolctl), because torch.set_num_threads does not
control the OpenBLAS pthread pool that torch's fp32 matmuls run on.

Model: tokens -> nn.Embedding(vocab,d) + learned positional nn.Embedding(seq,d)
       -> L x [x + MHA(LN(x)) ; x + Linear(ff,d)(GELU(Linear(d,ff)(LN(x))))]
       -> LayerNorm -> mean over tokens -> Linear(d, classes).
MultiheadAttention(batch_first=True) is called with need_weights=False (no averaged
attention-probability output; the math is unchanged).
"""
import argparse
import os
import statistics
import sys
import time
import warnings

CONFIGS = {
    'S': dict(vocab=256, batch=64, seq=32, d=128, heads=4, ff=512, layers=2, classes=8),
    'M': dict(vocab=256, batch=32, seq=128, d=256, heads=8, ff=1024, layers=4, classes=8),
}


# glibc malloc settings that stop torch's large activation buffers from being mmap'ed and
# munmap'ed (=> page faults + kernel page zeroing) on every step.
MALLOC_TUNED_ENV = {'MALLOC_MMAP_THRESHOLD_': str(4 << 30), 'MALLOC_TRIM_THRESHOLD_': str(64 << 30),
                    'MALLOC_TOP_PAD_': str(1 << 30)}


def matmul_flops(c):
    """Analytic matmul FLOPs: forward 2*M*N*K per GEMM; step = forward + 2x forward (backward)."""
    B, T, d, ff, L, C = c['batch'], c['seq'], c['d'], c['ff'], c['layers'], c['classes']
    BT = B * T
    per_layer = (2 * BT * d * 3 * d      # QKV in-projection
                 + 2 * B * T * T * d     # Q K^T (all heads)
                 + 2 * B * T * T * d     # P V
                 + 2 * BT * d * d        # out-projection
                 + 2 * BT * d * ff * 2)  # FFN up + down
    fwd = L * per_layer + 2 * B * d * C  # + classifier head
    return fwd, 3 * fwd


def set_blas_threads(n):
    try:
        from threadpoolctl import threadpool_limits
        threadpool_limits(limits=n, user_api='blas')
    except Exception as e:  # pragma: no cover
        print(f'warning: threadpoolctl failed: {e}', file=sys.stderr)


def build(config, dtype, seed=0, n_batches=4):
    """Returns (step_fn, info). step_fn() runs one full training step and returns the loss."""
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    c = CONFIGS[config]

    class Block(nn.Module):
        def __init__(self, d, h, ff):
            super().__init__()
            self.ln1 = nn.LayerNorm(d)
            self.attn = nn.MultiheadAttention(d, h, dropout=0.0, batch_first=True)
            self.ln2 = nn.LayerNorm(d)
            self.fc1 = nn.Linear(d, ff)
            self.act = nn.GELU()
            self.fc2 = nn.Linear(ff, d)

        def forward(self, x):
            y = self.ln1(x)
            x = x + self.attn(y, y, y, need_weights=False)[0]
            x = x + self.fc2(self.act(self.fc1(self.ln2(x))))
            return x

    class Classifier(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.tok = nn.Embedding(c['vocab'], c['d'])
            self.pos = nn.Embedding(c['seq'], c['d'])
            self.blocks = nn.ModuleList(
                [Block(c['d'], c['heads'], c['ff']) for _ in range(c['layers'])])
            self.lnf = nn.LayerNorm(c['d'])
            self.head = nn.Linear(c['d'], c['classes'])
            self.register_buffer('positions', torch.arange(c['seq']), persistent=False)

        def forward(self, idx):
            x = self.tok(idx) + self.pos(self.positions)[None]
            for b in self.blocks:
                x = b(x)
            x = self.lnf(x).mean(dim=1)
            return self.head(x)

    torch.manual_seed(seed)
    model = Classifier(c)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    g = torch.Generator().manual_seed(seed + 1)
    data = [(torch.randint(0, c['vocab'], (c['batch'], c['seq']), generator=g),
             torch.randint(0, c['classes'], (c['batch'],), generator=g)) for _ in range(n_batches)]

    info = {'autocast_warning': None, 'autocast_error': None, 'autocast_enabled': False}
    if dtype == 'fp32':
        make_ctx = None
    else:
        tdt = {'bf16': torch.bfloat16, 'fp16': torch.float16}[dtype]
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter('always')
            try:
                with torch.autocast('cpu', dtype=tdt):
                    info['autocast_enabled'] = torch.is_autocast_cpu_enabled()
            except Exception as e:  # torch 1.13 + fp16: RuntimeError in __enter__
                info['autocast_error'] = f'{type(e).__name__}: {e}'
            if w:
                info['autocast_warning'] = ' | '.join(str(x.message).replace('\n', ' ') for x in w)
        if info['autocast_error']:
            return None, info

        def make_ctx():
            with warnings.catch_warnings():
                warnings.simplefilter('ignore')
                return torch.autocast('cpu', dtype=tdt)

    state = {'i': 0}

    def step():
        idx, y = data[state['i'] % len(data)]
        state['i'] += 1
        opt.zero_grad(set_to_none=True)
        if make_ctx is None:
            logits = model(idx)
            loss = F.cross_entropy(logits, y)
        else:
            with make_ctx():
                logits = model(idx)
                loss = F.cross_entropy(logits, y)
        loss.backward()
        opt.step()
        return loss.item()

    info['parts'] = dict(model=model, opt=opt, data=data, make_ctx=make_ctx, F=F)
    info['n_params'] = sum(p.numel() for p in model.parameters())
    info['flops_fwd'], info['flops_step'] = matmul_flops(c)
    return step, info


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--config', choices=list(CONFIGS), default='S')
    ap.add_argument('--threads', type=int, default=1)
    ap.add_argument('--blas-threads', type=int, default=0,
                    help='OpenBLAS threads (default: = --threads). E.g. --threads 2 --blas-threads 1 '
                         'keeps fp32 GEMMs single-threaded so the OpenBLAS pthread pool does not '
                         'compete with the 2 OpenMP threads for the 2 vCPUs')
    ap.add_argument('--dtype', choices=['fp32', 'bf16', 'fp16'], default='fp32')
    ap.add_argument('--steps', type=int, default=30)
    ap.add_argument('--warmup', type=int, default=5)
    ap.add_argument('--seed', type=int, default=0)
    ap.add_argument('--malloc', choices=['default', 'tuned'], default='default',
                    help='tuned: re-exec with glibc MALLOC_MMAP_THRESHOLD_/TRIM_THRESHOLD_/TOP_PAD_ '
                         'so freed activations are reused instead of munmap/page-fault every step')
    a = ap.parse_args()
    if a.malloc == 'tuned' and os.environ.get('MALLOC_MMAP_THRESHOLD_') is None:
        os.environ.update(MALLOC_TUNED_ENV)
        os.execv(sys.executable, [sys.executable] + sys.argv)

    # Thread limits must be in place before torch / OpenBLAS initialise their pools.
    nb = a.blas_threads or a.threads
    os.environ['OMP_NUM_THREADS'] = str(a.threads)
    os.environ['OPENBLAS_NUM_THREADS'] = str(nb)
    import torch
    torch.set_num_threads(a.threads)
    set_blas_threads(nb)

    step, info = build(a.config, a.dtype, a.seed)
    if step is None:  # requested autocast dtype not supported by this torch build
        print(f'# config={a.config} threads={a.threads} dtype={a.dtype} torch={torch.__version__} '
              f'UNSUPPORTED: autocast_warning={info["autocast_warning"]!r} '
              f'autocast_error={info["autocast_error"]!r}', file=sys.stderr)
        print('ms_per_step=nan')
        sys.exit(3)
    for _ in range(a.warmup):
        step()
    times, losses = [], []
    for _ in range(a.steps):
        t0 = time.perf_counter()
        losses.append(step())
        times.append(time.perf_counter() - t0)
    med = statistics.median(times) * 1e3
    mn = min(times) * 1e3
    gf = info['flops_step'] / (med * 1e-3) / 1e9
    print(f'# config={a.config} threads={a.threads} blas_threads={nb} dtype={a.dtype} torch={torch.__version__} '
          f'malloc={a.malloc} OPENBLAS_CORETYPE={os.environ.get("OPENBLAS_CORETYPE", "(unset)")} '
          f'params={info["n_params"]} median_ms={med:.2f} min_ms={mn:.2f} '
          f'step_matmul_GFLOP={info["flops_step"] / 1e9:.3f} achieved_GFLOPs={gf:.1f} '
          f'loss_first={losses[0]:.4f} loss_last={losses[-1]:.4f} '
          f'autocast_enabled={info["autocast_enabled"]} autocast_warning={info["autocast_warning"]!r} '
          f'step_ms_all={[round(t * 1e3, 1) for t in times]}', file=sys.stderr)
    print(f'ms_per_step={med:.3f}')


if __name__ == '__main__':
    main()
