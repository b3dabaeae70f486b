// Text handling shared by the tokenizers, defined once: UTF-8 characters (code points) as the
// unit, whitespace splitting, word extraction and lower-casing. No Unicode normalisation is done
// (NFC "é" U+00E9 and NFD "e" + U+0301 are different text), no Unicode whitespace or punctuation
// beyond ASCII is recognised, and malformed UTF-8 is not validated here (valid_utf8 in
// halfgrad/data/tokenizer.h is the gate for user input): a stray byte simply counts as one character.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace hg::data {

// Bytes of the UTF-8 character that starts at text[i]: the lead byte plus the continuation bytes
// (10xxxxxx) that follow it, as fastText's computeSubwords steps. Never splits a character.
size_t utf8_char_bytes(std::string_view text, size_t i);

// The text's characters, each a whole UTF-8 sequence.
std::vector<std::string_view> utf8_chars(std::string_view text);

// ASCII whitespace: space, \t, \n, \v, \f, \r (fastText's readWord also splits on these).
bool is_ascii_space(char c);

// Maximal runs of non-whitespace bytes (fastText's word split).
std::vector<std::string_view> split_whitespace(std::string_view text);

// Words for the `words` tokenizer: maximal runs of code points that are neither ASCII
// whitespace nor ASCII punctuation (!"#$%&'()*+,-./:;<=>?@[\]^_`{|}~), so "don't" -> "don", "t".
std::vector<std::string_view> split_words(std::string_view text);

// Lower case for the scripts of the language-id set, by the Unicode simple lowercase mapping
// restricted to three blocks: ASCII A-Z; Latin-1 Supplement U+00C0-U+00DE except U+00D7 (x
// sign), +0x20 (so "É" -> "é"); Latin Extended-A U+0100-U+017F, where upper/lower alternate in
// pairs (U+0100-U+0137 and U+014A-U+0177 even -> +1, U+0139-U+0148 and U+0179-U+017E odd -> +1),
// plus U+0130 -> "i" and U+0178 -> U+00FF. Everything else is kept ("ß" stays "ß").
std::string lower_latin(std::string_view text);

}  // namespace hg::data
