#!/usr/bin/python3
"""Builds a small long-text topic classification set from Debian's fortune cookie files.

Why: halfgrad's language-id split has one short word per example; the word tokenizer and the
word 1-2-gram baselines need multi-sentence English texts. Nothing is downloaded: the text comes
from the Debian package `fortunes` (1:1.99.1-7.3 in bookworm; apt-get install fortunes), files
/usr/share/games/fortunes/<category>, entries separated by lines holding only "%".

Categories (= labels): computers, definitions, people, politics, songs-poems (5 categories whose
entries are mostly multi-sentence English prose or verse and that have enough entries).
Filters, in this order: every run of whitespace (newlines, tabs, indentation) collapsed to one
space and the ends stripped; entries shorter than 80 or longer than 700 UTF-8 bytes dropped;
texts that occur more than once (within or across categories) dropped entirely.
Split: per category, a seeded shuffle (random.Random(seed), default seed 0) puts the first
round(test_fraction * n) texts (default 0.15) in test.tsv and the rest in train.tsv, each file
then shuffled with the same generator. With the defaults: 3,046 texts, 2,590 train / 456 test
(computers 539, definitions 782, people 656, politics 480, songs-poems 589 before the split;
80-700 bytes, median 141); train.tsv md5 a5b4d8348eb86ba030572f0bb3eb7900, test.tsv md5
f484394ccc01cb150ae025d8d27b84c6.
Output: DIR/train.tsv and DIR/test.tsv, lines `label<TAB>text`, UTF-8.

Usage: /usr/bin/python3 tools/make_topics.py --out DIR [--seed 0] [--test-fraction 0.15]
"""
import argparse
import collections
import os
import random
import re

FORTUNE_DIR = "/usr/share/games/fortunes"
CATEGORIES = ("computers", "definitions", "people", "politics", "songs-poems")
MIN_BYTES = 80
MAX_BYTES = 700


def read_entries(category):
    with open(os.path.join(FORTUNE_DIR, category), encoding="utf-8") as f:
        raw = re.split(r"(?m)^%[ \t]*$", f.read())
    texts = [" ".join(e.split()) for e in raw]
    return [t for t in texts if MIN_BYTES <= len(t.encode("utf-8")) <= MAX_BYTES]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="output directory (created if missing)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--test-fraction", type=float, default=0.15)
    args = ap.parse_args()

    entries = {c: read_entries(c) for c in CATEGORIES}
    counts = collections.Counter(t for texts in entries.values() for t in texts)
    rng = random.Random(args.seed)
    train, test = [], []
    for c in CATEGORIES:
        texts = [t for t in entries[c] if counts[t] == 1]
        rng.shuffle(texts)
        n_test = round(args.test_fraction * len(texts))
        test += [(c, t) for t in texts[:n_test]]
        train += [(c, t) for t in texts[n_test:]]
        print(f"{c:12s} {len(texts):5d} texts  train {len(texts) - n_test:5d}  test {n_test:4d}")
    os.makedirs(args.out, exist_ok=True)
    for name, rows in (("train.tsv", train), ("test.tsv", test)):
        rng.shuffle(rows)
        with open(os.path.join(args.out, name), "w", encoding="utf-8") as f:
            f.writelines(f"{c}\t{t}\n" for c, t in rows)
    sizes = sorted(len(t.encode("utf-8")) for _, t in train + test)
    print(f"total {len(sizes)} texts: train {len(train)}, test {len(test)}; "
          f"bytes min {sizes[0]} median {sizes[len(sizes) // 2]} max {sizes[-1]} -> {args.out}")


if __name__ == "__main__":
    main()
