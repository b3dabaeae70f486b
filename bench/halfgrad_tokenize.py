"""halfgrad's hashed tokenizers in Python, for the reference benchmarks and their tests.

One copy of the tokenization the C++ side uses, so that a PyTorch model trained by
classifier_reference.py sees the same token ids as halfgrad. Ids live in [1, buckets]; 0 is padding.
Source: facebookresearch/fastText @1142dc4, src/dictionary.cc (hash, computeSubwords, addWordNgrams).

- fasttext_hash(bytes): fastText's FNV-1a 32-bit hash, each byte sign-extended before the XOR
  (h ^= uint32(int8(c)); h *= 16777619), so bytes >= 0x80 differ from textbook FNV-1a (dictionary.cc, Dictionary::hash).
- char_ngram_ids: text split on ASCII whitespace (space \\t \\n \\v \\f \\r, as halfgrad's
  halfgrad/data/text.h; fastText's readWord also splits on \\0); for each word, the character n-grams of
  "<" + word + ">" for n in [ngram_min, ngram_max] in computeSubwords order (start positions skip
  UTF-8 continuation bytes, n counts code points, the bare "<" and ">" 1-grams are skipped),
  id = 1 + hash % buckets (dictionary.cc, computeSubwords).
- word_ids: lower-cased word tokens (maximal runs of code points that are neither ASCII
  whitespace nor ASCII punctuation; ASCII A-Z, Latin-1 and Latin Extended-A capitals lower-cased
  by Unicode's simple lowercase mapping, as halfgrad's lower_latin), unigram ids 1 + hash % buckets
  first, then word n-gram ids from fastText's addWordNgrams formula h = h * 116049371 + hash[j]
  over uint64 with each word hash sign-extended from int32 first (fastText keeps them in int32_t:
  src/dictionary.cc, facebookresearch/fastText @1142dc4; docs/classifier.md). No end-of-sentence token.
Both truncate to max_len ids.
"""
import functools
import string

FNV_OFFSET = 2166136261
FNV_PRIME = 16777619
WORD_NGRAM_MULT = 116049371
MASK32 = 0xFFFFFFFF
MASK64 = 0xFFFFFFFFFFFFFFFF

WHITESPACE = " \t\n\v\f\r"  # ASCII whitespace, as halfgrad's halfgrad/data/text.h is_ascii_space
PUNCT = set(string.punctuation)


def read_tsv(path):
    """The (labels, texts) of a `label<TAB>text` file, blank lines skipped: the files halfgrad
    trains on, as the reference programs (classifier_reference.py, tasks.py) read them."""
    labels, texts = [], []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if line:
                label, text = line.split("\t", 1)
                labels.append(label)
                texts.append(text)
    return labels, texts


@functools.lru_cache(maxsize=1 << 20)  # texts repeat their n-grams and words
def fasttext_hash(data):
    """fastText's Dictionary::hash of a str (UTF-8 encoded) or bytes, as an unsigned 32-bit int."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    h = FNV_OFFSET
    for c in data:
        h ^= c | 0xFFFFFF00 if c >= 0x80 else c
        h = (h * FNV_PRIME) & MASK32
    return h


def compute_subwords(word, minn, maxn):
    """The n-gram byte strings fastText's computeSubwords emits for "<" + word + ">", in order."""
    w = b"<" + word.encode("utf-8") + b">"
    out = []
    for i in range(len(w)):
        if (w[i] & 0xC0) == 0x80:
            continue
        j, n, ngram = i, 1, bytearray()
        while j < len(w) and n <= maxn:
            ngram.append(w[j])
            j += 1
            while j < len(w) and (w[j] & 0xC0) == 0x80:
                ngram.append(w[j])
                j += 1
            if n >= minn and not (n == 1 and (i == 0 or j == len(w))):
                out.append(bytes(ngram))
            n += 1
    return out


def char_ngram_hashes(text, ngram_min=1, ngram_max=5, max_len=512):
    """fastText hashes of text's character n-grams, at most max_len; the ids are 1 + h % buckets."""
    hashes = []
    for word in split_whitespace(text):
        hashes += [fasttext_hash(g) for g in compute_subwords(word, ngram_min, ngram_max)]
        if len(hashes) >= max_len:
            break
    return hashes[:max_len]


def char_ngram_ids(text, buckets, ngram_min=1, ngram_max=5, max_len=512):
    """Token ids of text for halfgrad's character n-gram tokenizer."""
    return [1 + h % buckets for h in char_ngram_hashes(text, ngram_min, ngram_max, max_len)]


def split_whitespace(text):
    """Words separated by fastText's whitespace characters (empty words dropped)."""
    words, cur = [], []
    for ch in text:
        if ch in WHITESPACE:
            if cur:
                words.append("".join(cur))
                cur = []
        else:
            cur.append(ch)
    if cur:
        words.append("".join(cur))
    return words


def lower_char(ch):
    """Unicode simple lowercase mapping for ASCII, Latin-1 and Latin Extended-A; other code
    points unchanged. (str.lower() would turn U+0130 into two code points; its simple mapping is 'i'.)"""
    cp = ord(ch)
    if cp == 0x130:
        return "i"
    if cp < 0x80:
        return ch.lower()
    if 0xC0 <= cp <= 0x17F:
        return ch.lower()
    return ch


def word_tokens(text):
    """Lower-cased maximal runs of code points that are neither whitespace nor ASCII punctuation."""
    tokens, cur = [], []
    for ch in text:
        if ch in WHITESPACE or ch in PUNCT:
            if cur:
                tokens.append("".join(cur))
                cur = []
        else:
            cur.append(lower_char(ch))
    if cur:
        tokens.append("".join(cur))
    return tokens


def word_ngram_hashes(hashes, n):
    """fastText's addWordNgrams values (before % buckets) for token hashes, in fastText's order.
    hashes are uint32; fastText stores them as int32, hence the sign extension."""
    signed = [h - (1 << 32) if h >= 1 << 31 else h for h in hashes]
    out = []
    for i in range(len(signed)):
        h = signed[i] & MASK64
        for j in range(i + 1, min(i + n, len(signed))):
            h = (h * WORD_NGRAM_MULT + signed[j]) & MASK64
            out.append(h)
    return out


def word_hashes(text, word_ngrams=2, max_len=512):
    """Token hashes, then word n-gram values up to word_ngrams, at most max_len in all; the ids
    are 1 + h % buckets."""
    hashes = [fasttext_hash(t) for t in word_tokens(text)]
    return (hashes + word_ngram_hashes(hashes, word_ngrams))[:max_len]


def word_ids(text, buckets, word_ngrams=2, max_len=512):
    """Token ids of text for halfgrad's word tokenizer: unigrams, then word n-grams up to word_ngrams."""
    return [1 + h % buckets for h in word_hashes(text, word_ngrams, max_len)]
