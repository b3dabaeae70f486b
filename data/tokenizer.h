// ByteTokenizer: text as its UTF-8 bytes. Token id = byte value (1..255; byte 0 never occurs in
// text), id 0 is padding, and with a CLS token (for CLS pooling) id 256 is prepended. No
// vocabulary to learn or ship, any language works, and a model trained on it can be shared with
// ../shared/bench/torch_train.py, which uses the same ids.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace hg::data {

class ByteTokenizer {
 public:
  static constexpr int32_t kPad = 0;
  static constexpr int32_t kCls = 256;

  explicit ByteTokenizer(bool use_cls = false) : use_cls_(use_cls) {}

  int64_t vocab_size() const { return use_cls_ ? 257 : 256; }
  bool uses_cls() const { return use_cls_; }
  // At most max_len ids (the CLS token counts); *truncated is set when text was cut.
  std::vector<int32_t> encode(std::string_view text, int64_t max_len, bool* truncated = nullptr) const;
  // The bytes back (padding and CLS dropped). A cut in the middle of a UTF-8 character leaves
  // that character's first bytes, which decode() keeps as they are.
  std::string decode(const std::vector<int32_t>& ids) const;

 private:
  bool use_cls_;
};

// Whether `text` is well-formed UTF-8 (no overlong forms, surrogates or code points past
// U+10FFFF). On failure *bad_offset is the offset of the first bad byte.
bool valid_utf8(std::string_view text, size_t* bad_offset = nullptr);

}  // namespace hg::data
