#!/usr/bin/python3
"""Checks bench/halfgrad_tokenize.py's fastText hashing against the real fastText library.

Why: the known-answer values in bench/test_halfgrad_tokenize.py were computed from a port of
fastText's src/dictionary.cc, not from fastText itself. This script asks Debian's python3-fasttext
(apt-get install python3-fasttext; run with /usr/bin/python3) and compares, for every case:

1. Full 32-bit hashes. get_subword_id(s) returns nwords + hash(s) % bucket. Tiny supervised models
   with buckets 65521, 65519 and 65497 (pairwise coprime, product > 2^32) give hash(s) modulo each;
   the Chinese remainder theorem gives hash(s) itself, compared with fasttext_hash(s).
2. Character n-grams. get_subwords(word) of a word absent from the vocabulary returns the n-gram
   strings and ids of "<" + word + ">" in computeSubwords order (minn 1, maxn 5); compared with
   compute_subwords() and 1 + fasttext_hash % bucket (fastText: nwords + hash % bucket).
3. Word bigrams (wordNgrams 2, bucket 2000000, no char n-grams). For a line of out-of-vocabulary
   words, getLine yields the id of "</s>" plus the bigram ids nwords + h % bucket, with h from
   addWordNgrams over the words and "</s>". get_sentence_vector averages the input-matrix rows of
   those ids, so with set_matrices the rows are made to encode their own index (r // 4096, r % 4096)
   and the averaged vector times the id count gives the sum of the ids; then a one-hot row per
   expected bigram id checks that each of them is there.
Prints one line per check and exits 1 on any mismatch.
"""
import argparse
import os
import sys
import tempfile

import fasttext
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))
from halfgrad_tokenize import compute_subwords, fasttext_hash, word_ngram_hashes  # noqa: E402

CRT_BUCKETS = (65521, 65519, 65497)
HASH_CASES = ["a", "<ab>", "hello", "é", "<é>", "</s>", "<hello>", "straße", "日本語", "ÿ"]
SUBWORD_CASES = ["ab", "hello", "é", "naïve", "日本"]
BIGRAM_CASES = [("a", "hello"), ("hello", "world"), ("é", "ÿ", "a")]
BIGRAM_BUCKET = 2000000
TRAIN_LINES = ["__label__x qqq rrr", "__label__y sss ttt"]


def train(path, **kw):
    return fasttext.train_supervised(input=path, epoch=1, minCount=1, thread=1, verbose=0, **kw)


def crt(residues, moduli):
    x, m = 0, 1
    for r, q in zip(residues, moduli):
        t = ((r - x) * pow(m, -1, q)) % q
        x, m = x + m * t, m * q
    return x


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.parse_args()
    failures = 0

    def report(ok, msg):
        nonlocal failures
        failures += not ok
        print(("OK   " if ok else "FAIL ") + msg)

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "train.txt")
        with open(path, "w", encoding="utf-8") as f:
            f.write("\n".join(TRAIN_LINES) + "\n")

        models = [train(path, dim=1, minn=1, maxn=5, bucket=b) for b in CRT_BUCKETS]
        for s in HASH_CASES:
            residues = [m.get_subword_id(s) - len(m.words) for m in models]
            got = crt(residues, CRT_BUCKETS)
            want = fasttext_hash(s)
            report(got == want, f"hash {s!r} ({s.encode('utf-8').hex()}): fastText {got}, ours {want}")

        m, bucket = models[0], CRT_BUCKETS[0]
        for w in SUBWORD_CASES:
            subs, ids = m.get_subwords(w)
            want_subs = [g.decode("utf-8") for g in compute_subwords(w, 1, 5)]
            want_ids = [len(m.words) + fasttext_hash(g) % bucket for g in compute_subwords(w, 1, 5)]
            ok = list(subs) == want_subs and list(ids) == want_ids
            report(ok, f"subwords {w!r}: {len(subs)} n-grams, order and ids "
                   f"{'match' if ok else 'differ: fastText ' + str(list(subs))}")

        m = train(path, dim=2, wordNgrams=2, bucket=BIGRAM_BUCKET)
        nwords = len(m.words)
        eos = m.get_word_id("</s>")
        rows = np.arange(nwords + BIGRAM_BUCKET)
        out = m.get_output_matrix()
        for words in BIGRAM_CASES:
            hashes = [fasttext_hash(w) for w in words + ("</s>",)]
            bigrams = [h % BIGRAM_BUCKET for h in word_ngram_hashes(hashes, 2)]
            ids = [eos] + [nwords + b for b in bigrams]
            m.set_matrices(np.stack([rows // 4096, rows % 4096], 1).astype(np.float32), out)
            v = m.get_sentence_vector(" ".join(words)) * len(ids)
            got = int(round(v[0])) * 4096 + int(round(v[1]))
            ok = got == sum(ids)
            for b in bigrams:
                onehot = np.zeros((nwords + BIGRAM_BUCKET, 2), np.float32)
                onehot[nwords + b, 0] = 1
                m.set_matrices(onehot, out)
                ok = ok and round(m.get_sentence_vector(" ".join(words))[0] * len(ids)) == 1
            report(ok, f"bigrams {words} + </s>: h % {BIGRAM_BUCKET} = {bigrams}")
    print(f"{failures} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
