#!/usr/bin/python3
"""Tests of bench/halfgrad_tokenize.py (not part of the C++ test suite; Python is for tools only).

The hash and bigram known answers were computed from fastText's src/dictionary.cc (@1142dc4), confirmed
against Debian's python3-fasttext 0.9.2 by tools/check_fasttext_hash.py (which needs fastText;
these tests do not). Run: /usr/bin/python3 -m unittest bench/test_halfgrad_tokenize.py
"""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import halfgrad_tokenize as ht  # noqa: E402


class HashTest(unittest.TestCase):
    def test_known_answers(self):
        for s, h in [("a", 3826002220), ("<ab>", 674621742), ("hello", 1335831723),
                     ("é", 1023043777), ("<é>", 1002806231), ("</s>", 3617362777)]:
            self.assertEqual(ht.fasttext_hash(s), h, s)

    def test_bytes_and_str_agree(self):
        self.assertEqual(ht.fasttext_hash("straße"), ht.fasttext_hash("straße".encode("utf-8")))

    def test_bigrams_sign_extension(self):
        a, hello, world = (ht.fasttext_hash(w) for w in ("a", "hello", "world"))
        self.assertEqual(ht.word_ngram_hashes([a, hello], 2)[0] % 2000000, 616143)
        self.assertEqual(ht.word_ngram_hashes([hello, world], 2)[0] % 2000000, 1485020)
        self.assertEqual(ht.word_ngram_hashes([a, hello, world], 1), [])
        self.assertEqual(len(ht.word_ngram_hashes([a, hello, world], 3)), 3)


class CharTokenizerTest(unittest.TestCase):
    def test_subword_order(self):
        self.assertEqual(ht.compute_subwords("ab", 1, 5),
                         [b"<a", b"<ab", b"<ab>", b"a", b"ab", b"ab>", b"b", b"b>"])
        self.assertEqual(ht.compute_subwords("ab", 2, 3), [b"<a", b"<ab", b"ab", b"ab>", b"b>"])

    def test_multibyte_characters_kept_whole(self):
        self.assertEqual(ht.compute_subwords("é", 1, 5),
                         ["<é".encode(), "<é>".encode(), "é".encode(), "é>".encode()])

    def test_ids(self):
        ids = ht.char_ngram_ids(" ab\tab ", 1000, 1, 5)
        self.assertEqual(ids, [1 + ht.fasttext_hash(g) % 1000 for g in ht.compute_subwords("ab", 1, 5)] * 2)
        self.assertTrue(all(1 <= i <= 1000 for i in ids))
        self.assertEqual(len(ht.char_ngram_ids("hello world", 1000, max_len=7)), 7)
        self.assertEqual(ht.char_ngram_ids(" \n ", 1000), [])


class WordTokenizerTest(unittest.TestCase):
    def test_tokens(self):
        self.assertEqual(ht.word_tokens("Hello, WORLD! It's x-y\tÄrger İ ŸŁÓDŹ 日本"),
                         ["hello", "world", "it", "s", "x", "y", "ärger", "i", "ÿłódź", "日本"])

    def test_lower_matches_halfgrad_rule(self):
        # halfgrad's halfgrad/data/text.cpp lower_code_point, transcribed: Latin Extended-A pairs alternate.
        def rule(cp):
            if 0x41 <= cp <= 0x5A or (0xC0 <= cp <= 0xDE and cp != 0xD7):
                return cp + 0x20
            if cp == 0x130:
                return 0x69
            if cp == 0x178:
                return 0xFF
            if 0x100 <= cp <= 0x137 or 0x14A <= cp <= 0x177:
                return cp + 1 if cp % 2 == 0 else cp
            if 0x139 <= cp <= 0x148 or 0x179 <= cp <= 0x17E:
                return cp + 1 if cp % 2 == 1 else cp
            return cp
        for cp in list(range(0x250)) + [0x391, 0x410, 0x1E9E]:
            self.assertEqual(ht.lower_char(chr(cp)), chr(rule(cp)), hex(cp))

    def test_ids_unigrams_then_bigrams(self):
        h = [ht.fasttext_hash(w) for w in ("a", "hello", "world")]
        want = [1 + v % 2000000 for v in h + ht.word_ngram_hashes(h, 2)]
        self.assertEqual(ht.word_ids("A hello, World.", 2000000), want)
        self.assertEqual(want[3], 616144)
        self.assertEqual(ht.word_ids("A hello, World.", 2000000, max_len=4), want[:4])


if __name__ == "__main__":
    unittest.main()
