// SentencePiece training, loading and encoding through libsentencepiece's public C++ API
// (sentencepiece_trainer.h, sentencepiece_processor.h @ v0.1.97), and a protobuf wire-format
// reader for the one field of ModelProto that API does not expose (the model type).
#include "halfgrad/data/sentencepiece.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <filesystem>
#include <fstream>
#include <unordered_map>

#include "halfgrad/base/error.h"

namespace hg::data {

namespace {

// Feeds the texts to the trainer without a file (SentenceIterator, sentencepiece_trainer.h).
class TextIterator : public sentencepiece::SentenceIterator {
 public:
  explicit TextIterator(const std::vector<std::string>& texts) : texts_(texts) {}
  bool done() const override { return i_ >= texts_.size(); }
  void Next() override { ++i_; }
  const std::string& value() const override { return texts_[i_]; }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  const std::vector<std::string>& texts_;
  size_t i_ = 0;
};

// A protobuf varint at text[pos], advancing pos; throws on a truncated or over-long one.
uint64_t read_varint(std::string_view text, size_t& pos) {
  uint64_t value = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    check(pos < text.size(), "sentencepiece model: truncated protobuf varint");
    const auto byte = static_cast<unsigned char>(text[pos++]);
    value |= uint64_t(byte & 0x7F) << shift;
    if ((byte & 0x80) == 0) return value;
  }
  fail("sentencepiece model: protobuf varint longer than 10 bytes");
}

// The first occurrence of field number `field` in a message: its payload when length-delimited,
// its value when a varint; found = false when the message has none.
struct Field {
  bool found = false;
  std::string_view bytes;
  uint64_t varint = 0;
};

Field find_field(std::string_view message, uint64_t field) {
  size_t pos = 0;
  while (pos < message.size()) {
    const uint64_t key = read_varint(message, pos);
    const uint64_t number = key >> 3, wire = key & 7;
    Field f;
    f.found = number == field;
    if (wire == 0) {
      f.varint = read_varint(message, pos);
    } else if (wire == 1 || wire == 5) {
      const size_t size = wire == 1 ? 8 : 4;
      check(message.size() - pos >= size, "sentencepiece model: truncated protobuf field");
      pos += size;
    } else if (wire == 2) {
      const uint64_t size = read_varint(message, pos);
      check(size <= message.size() - pos, "sentencepiece model: protobuf field longer than the model");
      f.bytes = message.substr(pos, size_t(size));
      pos += size_t(size);
    } else {
      fail("sentencepiece model: protobuf wire type ", wire, " (not a SentencePiece model)");
    }
    if (f.found) return f;
  }
  return {};
}

}  // namespace

std::string train_sentencepiece(const std::vector<std::string>& texts, SpmType type, int64_t vocab_size) {
  check(!texts.empty(), "sentencepiece: no texts to train on");
  const std::unordered_map<std::string, std::string> args = {
      {"model_type", std::string(kSpmTypeNames.name(type))},
      {"vocab_size", std::to_string(vocab_size)},
      {"num_threads", "1"},          // deterministic: see the header
      {"input_sentence_size", "0"},  // every text
      {"minloglevel", "1"},          // no progress lines on stderr
  };
  sentencepiece::SetRandomGeneratorSeed(0);  // fixed, although training draws from it only for self-tests
  TextIterator it(texts);
  std::string model;
  const sentencepiece::util::Status status = sentencepiece::SentencePieceTrainer::Train(args, &it, &model);
  check(status.ok(), "sentencepiece: training a ", kSpmTypeNames.name(type), " model of vocab_size ", vocab_size,
        " failed: ", status.ToString());
  return model;
}

std::string read_spm_model_file(const std::string& path) {
  std::error_code ec;
  const uintmax_t size = std::filesystem::file_size(path, ec);
  check(!ec, path, ": cannot read (", ec.message(), ")");
  check(size <= (uintmax_t{1} << 30), path, ": ", size, " bytes, more than a SentencePiece model's 1 GiB limit here");
  std::ifstream in(path, std::ios::binary);
  std::string bytes(size_t(size), '\0');
  check(in.read(bytes.data(), std::streamsize(size)) && in.gcount() == std::streamsize(size), path, ": cannot read");
  SentencePieceModel check_loads(bytes, path);
  return bytes;
}

SentencePieceModel::SentencePieceModel(std::string_view serialized, const std::string& source)
    : processor_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {
  check(!serialized.empty(), source, ": empty, not a SentencePiece model");
  try {
    type_ = spm_model_type(serialized);
  } catch (const Error& e) {
    fail(source, ": ", e.what());
  }
  const sentencepiece::util::Status status = processor_->LoadFromSerializedProto(serialized);
  check(status.ok(), source, ": not a SentencePiece model (", status.ToString(), ")");
}

SentencePieceModel::~SentencePieceModel() = default;

int64_t SentencePieceModel::piece_count() const { return processor_->GetPieceSize(); }

std::vector<int> SentencePieceModel::encode(std::string_view text) const {
  std::vector<int> ids;
  const sentencepiece::util::Status status = processor_->Encode(text, &ids);
  check(status.ok(), "sentencepiece: cannot encode a text: ", status.ToString());
  return ids;
}

SpmType spm_model_type(std::string_view serialized) {
  const Field trainer_spec = find_field(serialized, 2);  // ModelProto.trainer_spec
  if (!trainer_spec.found) return SpmType::kUnigram;
  const Field model_type = find_field(trainer_spec.bytes, 3);  // TrainerSpec.model_type
  if (!model_type.found) return SpmType::kUnigram;
  for (const auto& [t, name] : kSpmTypeNames.table) {
    if (model_type.varint == uint64_t(t)) return t;
  }
  fail("sentencepiece model: unknown model_type ", model_type.varint);
}

}  // namespace hg::data
