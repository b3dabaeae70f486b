#!/usr/bin/python3
"""PyTorch reference ("accuracy anchor") for the C++ fp16 transformer classifier.

Usage (run with Debian's python, which has torch 1.13: apt-get install python3-torch):
  /usr/bin/python3 torch_train.py --train train.tsv --test test.tsv --epochs 5 --amp none
  /usr/bin/python3 torch_train.py --train train.tsv --test test.tsv --epochs 5 --amp bf16
  /usr/bin/python3 torch_train.py --train train.tsv --test test.tsv --epochs 3 --underflow 0,1,3
The project's own PyTorch reference for the byte-level transformer classifier (the model of
nn::TextClassifier with bytes, learned positions and mean pooling); BENCHMARKS.md compares
halfgrad's training runs against it on the language-id split (`halfgrad export-langid`).

Model (pre-LayerNorm encoder, plain torch.nn):
  ids (B,T) in [0,256), 0 = pad
  x = tok_emb(ids) + pos_emb(arange(T)); x = dropout(x)
  repeat n_layers:
     h = LN1(x); a = MHA(h,h,h, key_padding_mask=(ids==0)); x = x + dropout(a)
     h = LN2(x); f = fc2(GELU(fc1(h)));                      x = x + dropout(f)
  x = LN_f(x); pooled = mean of x over non-pad positions; logits = head(pooled)
  --bag_skip (halfgrad's --bag-skip): pooled += mean over non-pad positions of LN_bag(dropout(tok_emb(ids)))
  --encoder_drop_path P (halfgrad's --encoder-drop-path): in training the encoder's pooled output of each
     example is dropped with probability P, kept ones scaled by 1/(1-P), before the bag is added
  MHA has attention-probability dropout = dropout as well. GELU = exact (erf).
Init (default --init normal): every Linear/Embedding/in_proj weight ~ N(0, init_std=0.02),
  all biases 0, LN gamma=1 beta=0.   (--init torch keeps PyTorch's default init.)
Optimiser: AdamW(lr, betas (0.9,0.999), eps 1e-8, weight_decay 0.01 on ALL params).
LR: lr*(s+1)/warmup for s < warmup, then lr*0.5*(1+cos(pi*(s-warmup)/(total-warmup))),
  s = 0-based optimizer step; total = epochs*ceil(N_train/batch). Last partial batch kept.
Loss: mean cross-entropy. No grad clipping, no label smoothing.
Tokenisation (--tokens bytes): UTF-8 bytes (byte value = token id; byte 0 never occurs),
  truncated to max_len.  digits: pixel value v (0..16) -> token id v+1 (1..17), 64 tokens.
  --tokens words: lower-cased words in text order, ids from the training file's vocabulary.
  --tokens char-ngrams: halfgrad's hashed char n-grams (bench/halfgrad_tokenize.py: fastText's
  subwords of "<" + word + ">", n in 1..5, id = 1 + hash % --buckets), the same ids as `halfgrad
  train`'s default tokenizer; with --positions none (a bag into the encoder) and --decay matrices
  (halfgrad's AdamW: weight decay on matrices only) this is halfgrad's langid transformer.
Batches are padded to the longest sequence in the batch (<= max_len); --fixed_pad pads
  to max_len instead (mathematically identical outputs because of masking).
"""
import argparse
import json
import math
import os
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")
import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_MAX_LEN = {"langid": 32, "fortunes": 256, "digits": 65, "order": 32, "topics": 256}


# ----------------------------------------------------------------------------- data
def load_tsv(path, max_len, names=None, pixels=False, words=None, buckets=0):
    """Reads `label<TAB>text` lines. Text becomes UTF-8 byte ids (id = byte value; 0 is padding),
    or, with pixels=True, whitespace-separated integers shifted by one, or, with a dict `words`,
    lower-cased whitespace-separated words in text order: a word seen in the training file (the
    first file read, which fills the dict) gets ids 1..V in order of first appearance, any other
    word V+1. Label names map to ids in order of first appearance in the training file."""
    ids, labels = [], []
    names = [] if names is None else names
    grow = words is not None and not words
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                continue
            lab, text = line.split("\t", 1)
            if pixels:
                toks = [int(v) + 1 for v in text.split()]
            elif buckets:
                from halfgrad_tokenize import char_ngram_ids
                toks = char_ngram_ids(text, buckets, max_len=max_len)
            elif words is not None:
                toks = []
                for w in text.lower().split():
                    if grow and w not in words:
                        words[w] = len(words) + 1
                    toks.append(words.get(w, -1))
            else:
                toks = list(text.encode("utf-8"))
            if words is not None and not grow:
                toks = [t if t > 0 else len(words) + 1 for t in toks]
            assert toks and min(toks) > 0
            if lab not in names:
                names.append(lab)
            ids.append(toks[:max_len])
            labels.append(names.index(lab))
    return ids, torch.tensor(labels, dtype=torch.long), names


def make_batch(seqs, pad_to=None):
    T = pad_to if pad_to is not None else max(len(s) for s in seqs)
    out = torch.zeros(len(seqs), T, dtype=torch.long)
    for i, s in enumerate(seqs):
        out[i, : len(s)] = torch.tensor(s, dtype=torch.long)
    return out


# ----------------------------------------------------------------------------- model
class Block(nn.Module):
    def __init__(self, d, h, dff, p):
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, h, dropout=p, batch_first=True)
        self.drop1 = nn.Dropout(p)
        self.ln2 = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, dff)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(dff, d)
        self.drop2 = nn.Dropout(p)

    def forward(self, x, pad, tap, name):
        h = tap(name + ".ln1", self.ln1(x))
        a = self.attn(h, h, h, key_padding_mask=pad, need_weights=False)[0]
        x = x + self.drop1(tap(name + ".attn", a))
        h = tap(name + ".ln2", self.ln2(x))
        f = tap(name + ".fc1", self.fc1(h))
        f = tap(name + ".gelu", self.act(f))
        f = tap(name + ".fc2", self.fc2(f))
        return tap(name + ".out", x + self.drop2(f))


class Classifier(nn.Module):
    def __init__(self, n_classes, max_len, d=128, h=4, n_layers=2, dff=512, p=0.1, vocab=256, positions=True,
                 sparse=False, bag_skip=False, encoder_drop_path=0.0):
        super().__init__()
        self.encoder_drop_path = encoder_drop_path
        self.tok = nn.Embedding(vocab, d, sparse=sparse)
        self.pos = nn.Embedding(max_len, d) if positions else None
        self.drop = nn.Dropout(p)
        self.blocks = nn.ModuleList([Block(d, h, dff, p) for _ in range(n_layers)])
        self.lnf = nn.LayerNorm(d)
        # halfgrad's --bag-skip: the mean of a LayerNorm of the (dropped-out) token rows joins the pooled output
        self.bag_ln = nn.LayerNorm(d) if bag_skip else None
        self.head = nn.Linear(d, n_classes)
        self.tap_fn = None  # set by the underflow analysis to capture activation grads

    def init_normal(self, std):
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, 0.0, std)
                if getattr(m, "bias", None) is not None:
                    nn.init.zeros_(m.bias)
            elif isinstance(m, nn.MultiheadAttention):
                nn.init.normal_(m.in_proj_weight, 0.0, std)
                nn.init.zeros_(m.in_proj_bias)
                nn.init.normal_(m.out_proj.weight, 0.0, std)
                nn.init.zeros_(m.out_proj.bias)
            elif isinstance(m, nn.LayerNorm):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)

    def _tap(self, name, t):
        if self.tap_fn is not None:
            self.tap_fn(name, t)
        return t

    def forward(self, ids):
        pad = ids == 0
        T = ids.shape[1]
        tok = x = self.tok(ids)
        if self.pos is not None:
            x = x + self.pos(torch.arange(T, device=ids.device))[None]
        x = self.drop(self._tap("emb", x))
        bag_rows = None if self.bag_ln is None else x if self.pos is None else self.drop(tok)
        for i, b in enumerate(self.blocks):
            x = b(x, pad, self._tap, f"L{i}")
        x = self._tap("lnf", self.lnf(x))
        keep = (~pad).unsqueeze(-1)
        pooled = x.masked_fill(~keep, 0.0).sum(1) / keep.sum(1).clamp(min=1).to(x.dtype)
        if self.training and self.encoder_drop_path > 0:  # halfgrad's --encoder-drop-path (timm's drop_path)
            keep_p = 1.0 - self.encoder_drop_path
            pooled = pooled * (torch.rand(pooled.shape[0], 1) < keep_p).to(pooled.dtype) / keep_p
        if bag_rows is not None:
            bag = self.bag_ln(bag_rows).masked_fill(~keep, 0.0)
            pooled = pooled + bag.sum(1) / keep.sum(1).clamp(min=1).to(x.dtype)
        pooled = self._tap("pool", pooled)
        return self._tap("logits", self.head(pooled))


def group_by_length(perm, lengths, batch):
    """HF's get_length_grouped_indices (transformers' trainer_pt_utils.py) over a shuffled order,
    as halfgrad's DataLoader (halfgrad/data/data_loader.cpp): mega-batches of min(50, n / 4
    batches) batches, each sorted by length, longest first (stably), and the first element of the
    mega-batch with the longest text swapped to the front."""
    n = len(perm)
    mega = max(1, min(n // (4 * batch), 50)) * batch
    order = []
    for b in range(0, n, mega):
        order += sorted(perm[b:b + mega], key=lambda i: -lengths[i])
    best = 0
    for b in range(mega, n, mega):
        if lengths[order[b]] > lengths[order[best]]:
            best = b
    order[0], order[best] = order[best], order[0]
    return order


def lr_at(step, base_lr, warmup, total):
    if step < warmup:
        return base_lr * (step + 1) / warmup
    prog = (step - warmup) / max(1, total - warmup)
    return base_lr * 0.5 * (1.0 + math.cos(math.pi * min(1.0, prog)))


@torch.no_grad()
def evaluate(model, ids, labels, amp, bs=512):
    model.eval()
    correct, loss_sum = 0, 0.0
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))  # length-bucketed, faster
    for s in range(0, len(order), bs):
        idx = order[s: s + bs]
        x = make_batch([ids[i] for i in idx])
        y = labels[idx]
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=(amp == "bf16")):
            logits = model(x)
        logits = logits.float()
        loss_sum += F.cross_entropy(logits, y, reduction="sum").item()
        correct += (logits.argmax(-1) == y).sum().item()
    model.train()
    return correct / len(ids), loss_sum / len(ids)


# ----------------------------------------------------------------------------- underflow
FP16_MIN_SUB = 2.0 ** -24   # smallest fp16 subnormal
FP16_MIN_NORM = 2.0 ** -14  # smallest fp16 normal
FP16_MAX = 65504.0


def classify(t):
    a = t.detach().float().abs().flatten()
    nz = a[a > 0]
    n_all, n_nz = a.numel(), nz.numel()
    if n_nz == 0:
        return dict(n=n_all, nz=0, below=0, sub=0, over=0, f16zero=0)
    below = (nz < FP16_MIN_SUB).sum().item()
    sub = ((nz >= FP16_MIN_SUB) & (nz < FP16_MIN_NORM)).sum().item()
    over = (nz > FP16_MAX).sum().item()
    f16zero = (nz.half() == 0).sum().item()  # what an actual RNE cast to fp16 flushes
    return dict(n=n_all, nz=n_nz, below=below, sub=sub, over=over, f16zero=f16zero)


def log2_hist(tensors):
    h = {}
    for t in tensors:
        a = t.detach().float().abs().flatten()
        a = a[a > 0]
        e = torch.floor(torch.log2(a)).long()
        vals, cnts = torch.unique(e, return_counts=True)
        for v, c in zip(vals.tolist(), cnts.tolist()):
            h[v] = h.get(v, 0) + c
    return dict(sorted(h.items()))


def fmt_hist(h, title):
    tot = sum(h.values())
    if tot == 0:
        return title + ": (empty)\n"
    lines = [f"{title}  (n_nonzero={tot}; bin k holds 2^k <= |g| < 2^(k+1))"]
    mx = max(h.values())
    for k, c in h.items():
        mark = ""
        if k == -25:
            mark = "  <-- below 2^-24: flushes to 0 in fp16"
        elif k == -24:
            mark = "  <-- fp16 subnormal range [2^-24, 2^-14)"
        elif k == -14:
            mark = "  <-- fp16 normal range starts"
        elif k == 16:
            mark = "  <-- > 65504 overflows fp16"
        bar = "#" * max(1 if c else 0, int(round(50 * c / mx)))
        lines.append(f"  2^{k:>4d} {c:>9d} {100*c/tot:6.2f}% {bar}{mark}")
    return "\n".join(lines) + "\n"


def underflow_analysis(model, ids, labels, batch_size, scales, tag, seed=1234, out=sys.stdout):
    """One batch, train mode (dropout on, as in training), loss = mean CE * scale."""
    g = torch.Generator().manual_seed(seed)
    idx = torch.randperm(len(ids), generator=g)[:batch_size].tolist()
    x = make_batch([ids[i] for i in idx])
    y = labels[idx]
    model.train()
    result = {"tag": tag, "batch": batch_size, "scales": {}}
    for scale in scales:
        acts = {}

        def tap(name, t):
            if t.requires_grad:
                t.register_hook(lambda gr, name=name: acts.__setitem__(name, gr.detach().clone()))
        model.tap_fn = tap
        model.zero_grad(set_to_none=True)
        torch.manual_seed(seed)  # same dropout masks for every scale
        logits = model(x)
        loss = F.cross_entropy(logits, y)
        (loss * scale).backward()
        model.tap_fn = None
        params = {}
        for n, p in model.named_parameters():
            if p.grad is None:
                continue
            if "in_proj" in n:  # split fused q/k/v so the (analytically zero) k-bias grad is visible
                for part, gpart in zip("qkv", p.grad.detach().chunk(3, dim=0)):
                    params[f"{n}.{part}"] = gpart.clone()
            else:
                params[n] = p.grad.detach().clone()
        rows = []
        for kind, dct in (("act", acts), ("param", params)):
            for n, t in dct.items():
                c = classify(t)
                c.update(kind=kind, name=n, maxabs=t.abs().max().item())
                rows.append(c)
        tot = {}
        for kind in ("act", "param"):
            rs = [r for r in rows if r["kind"] == kind]
            agg = {k: sum(r[k] for r in rs) for k in ("n", "nz", "below", "sub", "over", "f16zero")}
            tot[kind] = agg
        rs = [r for r in rows if r["kind"] == "param" and not r["name"].endswith("in_proj_bias.k")]
        tot["param_excl_kbias"] = {k: sum(r[k] for r in rs) for k in ("n", "nz", "below", "sub", "over", "f16zero")}
        result["scales"][str(scale)] = {
            "loss": loss.item(), "totals": tot, "rows": rows,
            "hist_act": log2_hist(acts.values()), "hist_param": log2_hist(params.values())}
    model.zero_grad(set_to_none=True)
    # ---- print
    pr = lambda *a: print(*a, file=out, flush=True)  # noqa: E731
    pr(f"\n===== underflow analysis [{tag}] batch={batch_size} loss(unscaled)="
       f"{result['scales'][str(scales[0])]['loss']:.4f} =====")
    pr("scale    kind    nonzero    <2^-24   [2^-24,2^-14)  >65504   cast-to-fp16==0   "
       "(param* = params excluding attn k-bias, whose exact grad is 0)")
    for s in scales:
        for kind in ("act", "param", "param_excl_kbias"):
            t = result["scales"][str(s)]["totals"][kind]
            nz = max(1, t["nz"])
            pr(f"2^{int(math.log2(s)):<5d} {kind[:6]+('*' if kind.endswith('kbias') else ''):<7s}{t['nz']:>9d}  {100*t['below']/nz:7.3f}%  "
               f"{100*t['sub']/nz:9.3f}%  {100*t['over']/nz:8.4f}%  {100*t['f16zero']/nz:7.3f}%")
    pr(f"per-tensor, scale 2^{int(math.log2(scales[0]))} (fractions of nonzero elements):")
    pr(f"  {'tensor':<28s} {'kind':<5s} {'nonzero':>8s} {'<2^-24':>8s} {'subnorm':>8s} {'max|g|':>10s}")
    for r in result["scales"][str(scales[0])]["rows"]:
        nz = max(1, r["nz"])
        pr(f"  {r['name']:<28s} {r['kind']:<5s} {r['nz']:>8d} {100*r['below']/nz:7.2f}% "
           f"{100*r['sub']/nz:7.2f}% {r['maxabs']:10.3e}")
    s0 = result["scales"][str(scales[0])]
    pr(fmt_hist(s0["hist_act"], f"log2|grad| histogram, ACTIVATION grads, scale 2^{int(math.log2(scales[0]))}"))
    pr(fmt_hist(s0["hist_param"], f"log2|grad| histogram, PARAMETER grads, scale 2^{int(math.log2(scales[0]))}"))
    return result


# ----------------------------------------------------------------------------- main
def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--train", required=True, help="training TSV (label<TAB>text)")
    ap.add_argument("--test", required=True, help="test TSV (label<TAB>text)")
    ap.add_argument("--task", default="langid", choices=["langid", "fortunes", "digits", "order", "topics"],
                    help="only picks the default max_len and the token scheme")
    ap.add_argument("--tokens", default="bytes", choices=["bytes", "words", "char-ngrams"],
                    help="bytes (ids = UTF-8 bytes), words (a vocabulary of the training file's words) or "
                         "char-ngrams (halfgrad's hashed char 1..5-grams over --buckets)")
    ap.add_argument("--buckets", type=int, default=1 << 18, help="char-ngrams: hash buckets")
    ap.add_argument("--positions", default="learned", choices=["learned", "none"])
    ap.add_argument("--decay", default="all", choices=["all", "matrices"],
                    help="weight decay on all parameters, or on matrices only (halfgrad's AdamW)")
    ap.add_argument("--clip", type=float, default=0.0, help="gradient norm clipping (0: off; halfgrad: 1)")
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--bag_skip", action="store_true",
                    help="halfgrad's --bag-skip: add the mean of a LayerNorm of the token rows to the pooled output")
    ap.add_argument("--encoder_drop_path", type=float, default=0.0,
                    help="halfgrad's --encoder-drop-path: with --bag_skip, drop each example's pooled encoder output")
    ap.add_argument("--amp", default="none", choices=["none", "bf16"])
    ap.add_argument("--max_len", type=int, default=None)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--wd", type=float, default=0.01)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--dropout", type=float, default=0.1)
    ap.add_argument("--d_model", type=int, default=128)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--d_ff", type=int, default=512)
    ap.add_argument("--init", default="normal", choices=["normal", "torch"])
    ap.add_argument("--init_std", type=float, default=0.02)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--fixed_pad", action="store_true")
    ap.add_argument("--group_by_length", action="store_true",
                    help="batches of similar lengths (HF's group_by_length, as halfgrad's --group-by-length)")
    ap.add_argument("--max_steps", type=int, default=0, help="stop early (timing tests)")
    ap.add_argument("--underflow", default="", help="comma list of epochs at which to run the "
                    "gradient underflow analysis (0 = at init)")
    ap.add_argument("--underflow_batches", default="64", help="comma list of batch sizes")
    ap.add_argument("--emu_fp16_grads", type=float, default=0.0,
                    help="if > 0: emulate fp16 gradient storage with this static loss scale: every "
                    "tapped activation grad and every param grad is rounded to fp16 (RNE, with "
                    "subnormals), param grads are then unscaled in fp32; steps with inf/nan are skipped")
    ap.add_argument("--emu_ftz", action="store_true",
                    help="with --emu_fp16_grads: also flush fp16 subnormals (|g| < 2^-14) to zero")
    ap.add_argument("--emu_ftz_where", default="both", choices=["both", "act", "param"],
                    help="diagnostic: apply the FTZ flush only to activation grads or only to param grads")
    ap.add_argument("--emu_dynamic", action="store_true",
                    help="with --emu_fp16_grads S: dynamic loss scaling starting at S (GradScaler "
                    "defaults: x0.5 and skip on inf/nan, x2 after 2000 consecutive good steps)")
    ap.add_argument("--json", default="", help="write results json here")
    ap.add_argument("--save", default="", help="save final state_dict here")
    ap.add_argument("--save_each", action="store_true", help="also save <save>.e<epoch> each epoch")
    ap.add_argument("--load", default="", help="load a state_dict before training/analysis")
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    np.random.seed(args.seed)
    max_len = args.max_len or DEFAULT_MAX_LEN[args.task]
    pixels = args.task == "digits"
    words = {} if args.tokens == "words" else None
    buckets = args.buckets if args.tokens == "char-ngrams" else 0
    tr_ids, tr_y, names = load_tsv(args.train, max_len, pixels=pixels, words=words, buckets=buckets)
    te_ids, te_y, _ = load_tsv(args.test, max_len, names=names, pixels=pixels, words=words, buckets=buckets)
    vocab = len(words) + 2 if words is not None else buckets + 1 if buckets else 256
    model = Classifier(len(names), max_len, args.d_model, args.heads, args.layers, args.d_ff, args.dropout, vocab,
                       positions=args.positions == "learned", sparse=bool(buckets), bag_skip=args.bag_skip,
                       encoder_drop_path=args.encoder_drop_path)
    if args.init == "normal":
        model.init_normal(args.init_std)
    if args.load:
        model.load_state_dict(torch.load(args.load))
    n_params = sum(p.numel() for p in model.parameters())
    # A hashed token table (char-ngrams: 2^18 rows) takes sparse row gradients and a lazy Adam
    # (torch.optim.SparseAdam: untouched rows keep their value and moments), as halfgrad's
    # (docs/sparse_gradients.md; SparseAdam has no weight decay); the rest AdamW.
    dense = [p for p in model.parameters() if not (buckets and p is model.tok.weight)]
    if args.decay == "matrices":
        params = [{"params": [p for p in dense if p.dim() >= 2]},
                  {"params": [p for p in dense if p.dim() < 2], "weight_decay": 0.0}]
    else:
        params = dense
    opt = torch.optim.AdamW(params, lr=args.lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=args.wd)
    opt_rows = torch.optim.SparseAdam([model.tok.weight], lr=args.lr, betas=(0.9, 0.999), eps=1e-8) if buckets else None
    N = len(tr_ids)
    spe = math.ceil(N / args.batch)
    total = args.epochs * spe
    trunc = sum(len(s) >= max_len for s in tr_ids + te_ids)
    print(f"task={args.task} classes={len(names)} train={N} test={len(te_ids)} max_len={max_len} "
          f"(seqs at cap: {trunc}) params={n_params} steps/epoch={spe} total_steps={total} "
          f"amp={args.amp} threads={torch.get_num_threads()} init={args.init}/{args.init_std}",
          flush=True)
    uf_epochs = [int(e) for e in args.underflow.split(",") if e != ""]
    uf_batches = [int(b) for b in args.underflow_batches.split(",") if b != ""]
    results = {"args": vars(args), "n_params": n_params, "steps_per_epoch": spe,
               "total_steps": total, "epochs": [], "underflow": []}

    def run_uf(ep):
        if ep in uf_epochs:
            for b in uf_batches:
                results["underflow"].append(underflow_analysis(
                    model, tr_ids, tr_y, b, [1.0, 2.0 ** 8, 2.0 ** 16], f"{args.task} epoch {ep}"))

    run_uf(0)
    emu = args.emu_fp16_grads > 0

    def to_fp16(g, ftz=None):
        h = g.half().float()
        if args.emu_ftz if ftz is None else ftz:
            h = h.masked_fill(h.abs() < FP16_MIN_NORM, 0.0)
        return h
    ftz_act = args.emu_ftz and args.emu_ftz_where in ("both", "act")
    ftz_par = args.emu_ftz and args.emu_ftz_where in ("both", "param")

    def emu_tap(name, t):
        if t.requires_grad:
            t.register_hook(lambda g: to_fp16(g, ftz_act))
    skipped = 0
    loss_scale = args.emu_fp16_grads
    good_steps = 0
    step = 0
    t_start = time.time()
    gen = torch.Generator().manual_seed(args.seed)
    for ep in range(1, args.epochs + 1):
        t0 = time.time()
        model.train()
        perm = torch.randperm(N, generator=gen).tolist()
        if args.group_by_length:
            perm = group_by_length(perm, [len(t) for t in tr_ids], args.batch)
        tl, tc, tn = 0.0, 0, 0
        for s in range(0, N, args.batch):
            idx = perm[s: s + args.batch]
            x = make_batch([tr_ids[i] for i in idx], max_len if args.fixed_pad else None)
            y = tr_y[idx]
            for gp in opt.param_groups + (opt_rows.param_groups if opt_rows else []):
                gp["lr"] = lr_at(step, args.lr, args.warmup, total)
            model.tap_fn = emu_tap if emu else None
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=(args.amp == "bf16")):
                logits = model(x)
            loss = F.cross_entropy(logits.float(), y)
            opt.zero_grad(set_to_none=True)
            if opt_rows:
                opt_rows.zero_grad(set_to_none=True)
            if emu:
                (loss * loss_scale).backward()
                finite = True
                for p in model.parameters():
                    if p.grad is not None:
                        p.grad = to_fp16(p.grad, ftz_par) / loss_scale
                        finite = finite and bool(torch.isfinite(p.grad).all())
                model.tap_fn = None
                if finite:
                    opt.step()
                    good_steps += 1
                    if args.emu_dynamic and good_steps >= 2000:
                        loss_scale *= 2.0
                        good_steps = 0
                else:
                    skipped += 1
                    good_steps = 0
                    if args.emu_dynamic:
                        loss_scale *= 0.5
            else:
                loss.backward()
                if args.clip > 0:  # the norm over every gradient, sparse rows included (as halfgrad)
                    grads = [p.grad.coalesce().values() if p.grad.is_sparse else p.grad
                             for p in model.parameters() if p.grad is not None]
                    norm = torch.sqrt(sum(g.pow(2).sum() for g in grads))
                    if norm > args.clip:
                        for p in model.parameters():
                            if p.grad is not None:
                                p.grad.mul_(args.clip / (norm + 1e-6))
                opt.step()
                if opt_rows:
                    opt_rows.step()
            step += 1
            tl += loss.item() * len(idx)
            tc += (logits.argmax(-1) == y).sum().item()
            tn += len(idx)
            if args.max_steps and step >= args.max_steps:
                break
        t_train = time.time() - t0
        acc, te_loss = evaluate(model, te_ids, te_y, args.amp)
        rec = {"epoch": ep, "step": step, "skipped_steps": skipped, "loss_scale": loss_scale, "train_loss": tl / tn, "train_acc": tc / tn,
               "test_loss": te_loss, "test_acc": acc, "epoch_train_s": round(t_train, 1),
               "elapsed_s": round(time.time() - t_start, 1)}
        results["epochs"].append(rec)
        print(f"epoch {ep:3d} step {step:6d}{f' skipped {skipped} scale 2^{math.log2(loss_scale):g}' if emu else ''} train_loss {tl/tn:.4f} train_acc {tc/tn:.4f} "
              f"test_loss {te_loss:.4f} test_acc {acc:.4f}  epoch {t_train:.1f}s "
              f"elapsed {time.time()-t_start:.1f}s", flush=True)
        if args.save and args.save_each:
            torch.save(model.state_dict(), f"{args.save}.e{ep}")
        run_uf(ep)
        if args.max_steps and step >= args.max_steps:
            break
    if not results["epochs"]:  # analysis-only run (--epochs 0)
        acc, te_loss = evaluate(model, te_ids, te_y, args.amp)
        results["epochs"].append({"epoch": 0, "step": 0, "test_acc": acc, "test_loss": te_loss})
        print(f"(no training) test_acc {acc:.4f} test_loss {te_loss:.4f}")
    results["final_test_acc"] = results["epochs"][-1]["test_acc"]
    results["wall_s"] = round(time.time() - t_start, 1)
    print(f"FINAL task={args.task} amp={args.amp} epochs={args.epochs} steps={step} "
          f"test_acc={results['final_test_acc']:.4f} wall={results['wall_s']}s", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    if args.save:
        torch.save(model.state_dict(), args.save)


if __name__ == "__main__":
    main()
