#!/usr/bin/python3
"""Reference accuracies for halfgrad's text classifiers: scikit-learn baselines and a PyTorch
fastText-style bag model that sees the same token ids as halfgrad.

Why: halfgrad's numbers need anchors on the same data and the same machine. The baselines say what
a well-tuned linear model reaches; the bag model says what a fastText-style hashed bag model
reaches in f32 PyTorch with halfgrad's tokenization (bench/halfgrad_tokenize.py, one copy shared
with its tests), so a gap between the two is halfgrad's, not the tokenizer's.

Data: --train/--test TSV files (`label<TAB>text`), or by default the language-id split exported
by `<--halfgrad> export-langid` into a temporary directory.

Models (each row of the output table is one trained model, test accuracy and wall time):
- logreg-char: TfidfVectorizer(analyzer="char_wb", ngram_range=(1, 4)) + LogisticRegression(C=10,
  lbfgs, max_iter 1000). Always run unless --no-logreg.
- logreg-words (with --words): TfidfVectorizer(ngram_range=(1, 2)) (word 1-2-grams, default
  token pattern) + the same LogisticRegression.
- bag (unless --no-torch): ids from halfgrad_tokenize (--tokenizer char: char n-grams
  ngram_min..ngram_max of "<"+word+">"; words: lower-cased words plus word bigrams), id =
  1 + fastText hash % buckets, 0 = padding, at most --max-len ids per text.
  nn.EmbeddingBag(buckets + 1, dim, mode="mean", padding_idx=0) -> LayerNorm(dim) ->
  [Linear(dim, hidden) -> GELU when hidden > 0] -> Linear(classes).
  Init: embedding N(0, 1) (PyTorch's default; the LayerNorm removes the scale), Linear layers
  PyTorch's default. AdamW(lr, betas (0.9, 0.999), eps 1e-8, weight_decay --wd on all
  parameters), lr linear warmup over --warmup steps then cosine to 0 (as torch_train.py), batch
  --batch, training set reshuffled each epoch (torch.Generator seeded by --seed), mean
  cross-entropy. --sparse-embedding instead gives the embedding sparse gradients and
  torch.optim.SparseAdam (lazy Adam: only rows in the batch move, no weight decay), which is what
  makes 2^20-bucket tables affordable on one core.
  --buckets, --dim, --hidden, --epochs, --ngram, --lr and --batch take comma-separated lists;
  every combination is trained (ngram values are MIN-MAX, e.g. 1-5,2-5). Defaults: char 1-5,
  2^16 buckets, dim 64, no hidden layer, 2 epochs, lr 0.03, batch 64, wd 0.01, 100 warmup steps,
  max_len 512, dense AdamW (2-3 minutes for the bag model on the language-id split on a loaded
  2-core machine; figures in docs/classifier_reference.md).

Wall time: tokenization/vectorization plus training plus evaluation of that row, in seconds,
torch.set_num_threads(--threads) (default 1). The "params" column of a logistic regression is its
number of weights (features x classes). The tokenization of one ngram range is done once and
its time is added to every row that uses it.

Usage (Debian's python: apt-get install python3-torch python3-sklearn python3-numpy):
  /usr/bin/python3 bench/classifier_reference.py --halfgrad build/bin/halfgrad
  /usr/bin/python3 bench/classifier_reference.py --train DIR/train.tsv --test DIR/test.tsv \\
      --words --tokenizer words --sparse-embedding --buckets 262144 --epochs 20 --lr 0.1
  /usr/bin/python3 bench/classifier_reference.py --halfgrad build/bin/halfgrad --no-logreg \\
      --sparse-embedding --buckets 65536,262144,1048576 --dim 64,128 --hidden 0,256 --epochs 5
"""
import argparse
import itertools
import math
import os
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")
import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from halfgrad_tokenize import char_ngram_hashes, read_tsv, word_hashes  # noqa: E402


# ----------------------------------------------------------------------------- data
def export_langid(halfgrad, out_dir):
    subprocess.run([halfgrad, "export-langid", "--out", out_dir], check=True,
                   stdout=subprocess.DEVNULL)
    return os.path.join(out_dir, "train.tsv"), os.path.join(out_dir, "test.tsv")


# ----------------------------------------------------------------------------- tokenization
def text_hashes(texts, tokenizer, ngram, max_len):
    """Per text, the uint64 array of hashes whose `1 + h % buckets` are halfgrad's ids, so one
    tokenization serves every --buckets value."""
    if tokenizer == "char":
        return [np.array(char_ngram_hashes(t, ngram[0], ngram[1], max_len), dtype=np.uint64) for t in texts]
    return [np.array(word_hashes(t, 2, max_len), dtype=np.uint64) for t in texts]


def to_ids(hashes, buckets):
    return [torch.from_numpy((1 + h % buckets).astype(np.int64)) for h in hashes]


def make_bag(ids_list):
    lengths = torch.tensor([len(x) for x in ids_list], dtype=torch.long)
    offsets = torch.zeros(len(ids_list), dtype=torch.long)
    offsets[1:] = torch.cumsum(lengths[:-1], 0)
    return torch.cat(ids_list), offsets


# ----------------------------------------------------------------------------- model
class BagClassifier(nn.Module):
    def __init__(self, buckets, dim, hidden, n_classes, sparse):
        super().__init__()
        self.emb = nn.EmbeddingBag(buckets + 1, dim, mode="mean", padding_idx=0, sparse=sparse)
        self.ln = nn.LayerNorm(dim)
        self.hidden = nn.Sequential(nn.Linear(dim, hidden), nn.GELU()) if hidden > 0 else nn.Identity()
        self.head = nn.Linear(hidden if hidden > 0 else dim, n_classes)

    def forward(self, flat_ids, offsets):
        return self.head(self.hidden(self.ln(self.emb(flat_ids, offsets))))


def lr_at(step, peak, warmup, total):
    if step < warmup:
        return peak * (step + 1) / warmup
    return peak * 0.5 * (1 + math.cos(math.pi * (step - warmup) / max(1, total - warmup)))


def evaluate(model, ids, y, batch=1024):
    model.eval()
    correct = 0
    with torch.no_grad():
        for s in range(0, len(ids), batch):
            flat, off = make_bag(ids[s: s + batch])
            correct += (model(flat, off).argmax(-1) == y[s: s + batch]).sum().item()
    model.train()
    return correct / len(ids)


def train_bag(tr_ids, tr_y, te_ids, te_y, n_classes, buckets, dim, hidden, epochs, lr, batch, args):
    torch.manual_seed(args.seed)
    model = BagClassifier(buckets, dim, hidden, n_classes, args.sparse_embedding)
    rest = [p for n, p in model.named_parameters() if not n.startswith("emb.")]
    opts = [torch.optim.AdamW(rest if args.sparse_embedding else model.parameters(), lr=lr,
                              betas=(0.9, 0.999), eps=1e-8, weight_decay=args.wd)]
    if args.sparse_embedding:
        opts.append(torch.optim.SparseAdam(model.emb.parameters(), lr=lr, betas=(0.9, 0.999), eps=1e-8))
    n = len(tr_ids)
    total = epochs * math.ceil(n / batch)
    gen = torch.Generator().manual_seed(args.seed)
    step = 0
    for _ in range(epochs):
        perm = torch.randperm(n, generator=gen)
        for s in range(0, n, batch):
            b = perm[s: s + batch]
            flat, off = make_bag([tr_ids[i] for i in b.tolist()])
            loss = F.cross_entropy(model(flat, off), tr_y[b])
            for opt in opts:
                opt.zero_grad(set_to_none=True)
                for g in opt.param_groups:
                    g["lr"] = lr_at(step, lr, args.warmup, total)
            loss.backward()
            for opt in opts:
                opt.step()
            step += 1
    return evaluate(model, te_ids, te_y), sum(p.numel() for p in model.parameters())


# ----------------------------------------------------------------------------- baselines
def logreg(tr_x, tr_y, te_x, te_y, vectorizer, C):
    from sklearn.linear_model import LogisticRegression
    t0 = time.time()
    xtr = vectorizer.fit_transform(tr_x)
    clf = LogisticRegression(C=C, max_iter=1000).fit(xtr, tr_y)
    acc = float((clf.predict(vectorizer.transform(te_x)) == np.array(te_y)).mean())
    return acc, xtr.shape[1], time.time() - t0


# ----------------------------------------------------------------------------- main
def int_list(s):
    return [int(v) for v in s.split(",")]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--train", help="training TSV (label<TAB>text); default: export-langid")
    ap.add_argument("--test", help="test TSV; default: export-langid")
    ap.add_argument("--halfgrad", default="build/bin/halfgrad",
                    help="halfgrad binary used to export the language-id split when --train is absent")
    ap.add_argument("--words", action="store_true", help="also run word 1-2-gram TF-IDF logistic regression")
    ap.add_argument("--no-logreg", action="store_true", help="skip the scikit-learn baselines")
    ap.add_argument("--no-torch", action="store_true", help="skip the PyTorch bag model")
    ap.add_argument("--C", type=float, default=10.0, help="inverse regularization of the logistic regressions")
    ap.add_argument("--tokenizer", choices=["char", "words"], default="char")
    ap.add_argument("--ngram", default="1-5", help="char n-gram ranges MIN-MAX, comma-separated")
    ap.add_argument("--max-len", type=int, default=512, help="ids per text at most")
    ap.add_argument("--buckets", type=int_list, default=[1 << 16])
    ap.add_argument("--dim", type=int_list, default=[64])
    ap.add_argument("--hidden", type=int_list, default=[0], help="0 = no hidden layer")
    ap.add_argument("--epochs", type=int_list, default=[2])
    ap.add_argument("--lr", default="0.03", help="peak learning rates, comma-separated")
    ap.add_argument("--batch", type=int_list, default=[64])
    ap.add_argument("--wd", type=float, default=0.01)
    ap.add_argument("--warmup", type=int, default=100, help="warmup steps")
    ap.add_argument("--sparse-embedding", action="store_true",
                    help="sparse embedding gradients with SparseAdam (no weight decay on the table)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    with tempfile.TemporaryDirectory() as tmp:
        if args.train and args.test:
            train_path, test_path = args.train, args.test
            source = f"{train_path} / {test_path}"
        elif args.train or args.test:
            ap.error("give both --train and --test, or neither")
        else:
            train_path, test_path = export_langid(args.halfgrad, tmp)
            source = f"{args.halfgrad} export-langid"
        tr_labels, tr_texts = read_tsv(train_path)
        te_labels, te_texts = read_tsv(test_path)
    names = sorted(set(tr_labels))
    print(f"data: {source}: {len(tr_texts)} train / {len(te_texts)} test, {len(names)} classes; "
          f"torch {torch.__version__}, {torch.get_num_threads()} thread(s)", flush=True)

    rows = []
    header = f"{'model':<13} {'tokens':<10} {'buckets':>8} {'dim':>4} {'hid':>4} {'ep':>3} {'lr':>7} " \
             f"{'batch':>5} {'params':>10} {'acc %':>6} {'wall s':>7}"
    if not args.no_logreg:
        from sklearn.feature_extraction.text import TfidfVectorizer
        baselines = [("logreg-char", "char_wb1-4", TfidfVectorizer(analyzer="char_wb", ngram_range=(1, 4)))]
        if args.words:
            baselines.append(("logreg-words", "word1-2", TfidfVectorizer(ngram_range=(1, 2))))
        for name, tokens, vec in baselines:
            acc, n_feat, wall = logreg(tr_texts, tr_labels, te_texts, te_labels, vec, args.C)
            rows.append(f"{name:<13} {tokens:<10} {'-':>8} {'-':>4} {'-':>4} {'-':>3} {'C=' + format(args.C, 'g'):>7} "
                        f"{'-':>5} {n_feat * len(names):>10} {100 * acc:6.2f} {wall:7.1f}")
            print(rows[-1], flush=True)

    if not args.no_torch:
        tr_y = torch.tensor([names.index(v) for v in tr_labels])
        te_y = torch.tensor([names.index(v) for v in te_labels])
        ngrams = [tuple(int(v) for v in r.split("-")) for r in args.ngram.split(",")]
        if args.tokenizer == "words":
            ngrams = [None]
        for ngram in ngrams:
            t0 = time.time()
            tr_h = text_hashes(tr_texts, args.tokenizer, ngram, args.max_len)
            te_h = text_hashes(te_texts, args.tokenizer, ngram, args.max_len)
            tok_s = time.time() - t0
            cut = sum(len(h) == args.max_len for h in tr_h + te_h)
            mean_len = sum(len(h) for h in tr_h) / len(tr_h)
            tokens = "words1-2" if ngram is None else f"char{ngram[0]}-{ngram[1]}"
            print(f"{tokens}: tokenized in {tok_s:.1f} s, {mean_len:.1f} ids per training text, "
                  f"{cut} texts cut at {args.max_len}", flush=True)
            for buckets, dim, hidden, epochs, lr, batch in itertools.product(
                    args.buckets, args.dim, args.hidden, args.epochs,
                    [float(v) for v in args.lr.split(",")], args.batch):
                t0 = time.time()
                acc, n_params = train_bag(to_ids(tr_h, buckets), tr_y, to_ids(te_h, buckets), te_y,
                                          len(names), buckets, dim, hidden, epochs, lr, batch, args)
                wall = time.time() - t0 + tok_s
                rows.append(f"{'bag' + ('-sparse' if args.sparse_embedding else ''):<13} {tokens:<10} "
                            f"{buckets:>8} {dim:>4} {hidden:>4} {epochs:>3} {lr:>7g} {batch:>5} "
                            f"{n_params:>10} {100 * acc:6.2f} {wall:7.1f}")
                print(rows[-1], flush=True)

    print("\n" + header)
    print("\n".join(rows))


if __name__ == "__main__":
    main()
