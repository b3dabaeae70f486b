// UTF-8 characters, splitting and Latin lower-casing (Unicode 15 UnicodeData.txt, simple
// lowercase mappings of U+0000-U+017F).
#include "halfgrad/data/text.h"

namespace hg::data {

size_t utf8_char_bytes(std::string_view text, size_t i) {
  size_t j = i + 1;
  while (j < text.size() && (static_cast<unsigned char>(text[j]) & 0xC0) == 0x80) ++j;
  return j - i;
}

std::vector<std::string_view> utf8_chars(std::string_view text) {
  std::vector<std::string_view> chars;
  for (size_t i = 0; i < text.size();) {
    const size_t n = utf8_char_bytes(text, i);
    chars.push_back(text.substr(i, n));
    i += n;
  }
  return chars;
}

bool is_ascii_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

namespace {

bool is_ascii_punct(char c) {
  return (c >= '!' && c <= '/') || (c >= ':' && c <= '@') || (c >= '[' && c <= '`') || (c >= '{' && c <= '~');
}

template <class IsSeparator>
std::vector<std::string_view> split(std::string_view text, IsSeparator is_separator) {
  std::vector<std::string_view> out;
  size_t start = 0;
  for (size_t i = 0; i <= text.size(); ++i) {  // separators are ASCII, never inside a UTF-8 sequence
    if (i == text.size() || is_separator(text[i])) {
      if (i > start) out.push_back(text.substr(start, i - start));
      start = i + 1;
    }
  }
  return out;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += char(cp);
  } else {  // only U+0080-U+07FF occur here
    out += char(0xC0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3F));
  }
}

uint32_t lower_code_point(uint32_t cp) {
  if (cp >= 'A' && cp <= 'Z') return cp + 0x20;
  if (cp >= 0xC0 && cp <= 0xDE && cp != 0xD7) return cp + 0x20;
  if (cp == 0x130) return 'i';
  if (cp == 0x178) return 0xFF;
  const bool even = cp % 2 == 0;
  if ((cp >= 0x100 && cp <= 0x137) || (cp >= 0x14A && cp <= 0x177)) return even ? cp + 1 : cp;
  if ((cp >= 0x139 && cp <= 0x148) || (cp >= 0x179 && cp <= 0x17E)) return even ? cp : cp + 1;
  return cp;
}

}  // namespace

std::vector<std::string_view> split_whitespace(std::string_view text) { return split(text, is_ascii_space); }

std::vector<std::string_view> split_words(std::string_view text) {
  return split(text, [](char c) { return is_ascii_space(c) || is_ascii_punct(c); });
}

std::string lower_latin(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::string_view ch : utf8_chars(text)) {
    const auto b0 = static_cast<unsigned char>(ch[0]);
    uint32_t cp = 0;
    if (ch.size() == 1 && b0 > 0 && b0 < 0x80) {
      cp = b0;
    } else if (ch.size() == 2 && (b0 & 0xE0) == 0xC0) {
      cp = (uint32_t(b0 & 0x1F) << 6) | (static_cast<unsigned char>(ch[1]) & 0x3F);
    }
    if (cp == 0 || (ch.size() == 2 && cp < 0x80)) {
      out += ch;  // outside U+0000-U+07FF, or malformed: kept as it is
      continue;
    }
    append_utf8(out, lower_code_point(cp));
  }
  return out;
}

}  // namespace hg::data
