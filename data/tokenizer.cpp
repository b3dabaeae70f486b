// Byte tokenization and UTF-8 validation (RFC 3629, Table 3-7 of the Unicode standard).
#include "data/tokenizer.h"

#include "autograd/error.h"

namespace hg::data {

std::vector<int32_t> ByteTokenizer::encode(std::string_view text, int64_t max_len, bool* truncated) const {
  check(max_len >= (use_cls_ ? 2 : 1), "ByteTokenizer: max_len ", max_len, " leaves no room for text");
  std::vector<int32_t> ids;
  if (use_cls_) ids.push_back(kCls);
  const size_t room = size_t(max_len) - ids.size();
  const size_t n = std::min(room, text.size());
  for (size_t i = 0; i < n; ++i) ids.push_back(int32_t(static_cast<unsigned char>(text[i])));
  if (truncated) *truncated = text.size() > room;
  return ids;
}

std::string ByteTokenizer::decode(const std::vector<int32_t>& ids) const {
  std::string out;
  for (int32_t id : ids) {
    if (id > 0 && id < 256) out += char(id);
  }
  return out;
}

bool valid_utf8(std::string_view text, size_t* bad_offset) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  size_t i = 0;
  while (i < text.size()) {
    const unsigned char c = s[i];
    size_t length = 0;
    unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
    if (c < 0x80) {
      length = 1;
    } else if (c >= 0xC2 && c <= 0xDF) {
      length = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      length = 3;
      if (c == 0xE0) lo = 0xA0;  // no overlong forms
      if (c == 0xED) hi = 0x9F;  // no surrogates
    } else if (c >= 0xF0 && c <= 0xF4) {
      length = 4;
      if (c == 0xF0) lo = 0x90;
      if (c == 0xF4) hi = 0x8F;  // nothing past U+10FFFF
    }
    bool ok = length > 0 && i + length <= text.size();
    for (size_t k = 1; ok && k < length; ++k) {
      const unsigned char b = s[i + k];
      ok = k == 1 ? (b >= lo && b <= hi) : (b >= 0x80 && b <= 0xBF);
    }
    if (!ok) {
      if (bad_offset) *bad_offset = i;
      return false;
    }
    i += length;
  }
  return true;
}

}  // namespace hg::data
