#!/usr/bin/python3
"""Builds a text classification set where word order alone decides the label.

Why: a bag of tokens (hashed n-grams, word 1-2-grams, TF-IDF) cannot tell two texts apart that hold
the same words in another order; a transformer with positions can. This set measures exactly
that, so every bag is at chance by construction and any accuracy above 1/6 comes from order.

Words: Debian's `wamerican` list (/usr/share/dict/american-english; apt-get install wamerican):
lower-case ASCII words of 3 to 8 letters. A seeded shuffle (random.Random(seed)) picks three
marker words and --fillers filler words, all distinct.
Each line: --length filler words drawn uniformly with replacement, with the three markers
inserted at three random positions such that no two markers are adjacent (so a word bigram never
pairs two markers) and none is the first or last word (fastText appends an end-of-line token, so
a marker in last place would form a bigram with it that tells which marker came last: with that
allowed, fastText's word bigrams reached 22% here instead of 1/6). The label is the order in which the markers appear, one of the 3! = 6
permutations, named by their initials in order (e.g. "bca" = second marker, third, first).
Labels are balanced: line i has permutation i mod 6, then the lines are shuffled.
Why a bag is at chance: every line holds each marker exactly once and its fillers are drawn
independently of the label, and the markers' positions are a uniformly random non-adjacent
triple; the label only permutes which marker sits at which of those positions. So the multiset
of words, of word bigrams (a marker's neighbours are random fillers) and of character n-grams has
the same distribution under every label: the Bayes accuracy of any bag is 1/6.

Output: DIR/train.tsv and DIR/test.tsv, lines `label<TAB>text`, UTF-8.
Usage: /usr/bin/python3 tools/make_order_task.py --out DIR [--train 12000] [--test 3000]
       [--length 20] [--fillers 2000] [--seed 0]
"""
import argparse
import itertools
import os
import random
import re

WORDS = "/usr/share/dict/american-english"
LETTERS = "abc"


def read_words():
    with open(WORDS, encoding="utf-8") as f:
        words = {w.strip() for w in f}
    return sorted(w for w in words if re.fullmatch(r"[a-z]{3,8}", w))


def marker_positions(rng, n_words):
    """Three sorted positions in [1, n_words - 1) (never first or last) with no two adjacent,
    uniformly over such triples."""
    while True:
        p = sorted(rng.sample(range(1, n_words - 1), 3))
        if p[1] - p[0] > 1 and p[2] - p[1] > 1:
            return p


def make_line(rng, markers, fillers, length, perm):
    n = length + 3
    pos = marker_positions(rng, n)
    words = [rng.choice(fillers) for _ in range(n)]
    for slot, marker_index in zip(pos, perm):
        words[slot] = markers[marker_index]
    label = "".join(LETTERS[i] for i in perm)
    return label, " ".join(words)


def make_split(rng, n, markers, fillers, length):
    perms = list(itertools.permutations(range(3)))
    lines = [make_line(rng, markers, fillers, length, perms[i % len(perms)]) for i in range(n)]
    rng.shuffle(lines)
    return lines


def write_tsv(path, lines):
    with open(path, "w", encoding="utf-8") as f:
        for label, text in lines:
            f.write(f"{label}\t{text}\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--train", type=int, default=12000)
    ap.add_argument("--test", type=int, default=3000)
    ap.add_argument("--length", type=int, default=20, help="filler words per line (3 markers are added)")
    ap.add_argument("--fillers", type=int, default=2000, help="size of the filler vocabulary")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    if args.length < 4:
        ap.error("--length must be >= 4 (two fillers between the markers, one before and one after)")
    rng = random.Random(args.seed)
    words = read_words()
    chosen = rng.sample(words, args.fillers + 3)
    markers, fillers = chosen[:3], chosen[3:]
    os.makedirs(args.out, exist_ok=True)
    write_tsv(os.path.join(args.out, "train.tsv"), make_split(rng, args.train, markers, fillers, args.length))
    write_tsv(os.path.join(args.out, "test.tsv"), make_split(rng, args.test, markers, fillers, args.length))
    print(f"markers {' '.join(markers)}; {args.train} train and {args.test} test lines in {args.out}")


if __name__ == "__main__":
    main()
