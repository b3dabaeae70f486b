// train/safetensors: bit-exact round trips, the written bytes parsed independently of our
// reader, hand-built files read as the spec says, every reader error with its exact message,
// and the stand-alone Python reader of docs/checkpoints.md run on a file we wrote.
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstring>
#include <iomanip>

#include <nlohmann/json.hpp>

#include "tests/temp_dir.h"
#include "halfgrad/io/safetensors.h"

namespace hg::io {
namespace {

using testing::error_of;
using testing::read_bytes;
using testing::TempDir;
using testing::write_bytes;

Tensor from_bits32(const std::vector<uint32_t>& bits, const Shape& shape) {
  Tensor t = Tensor::empty(shape, DType::f32);
  REQUIRE(size_t(t.numel()) == bits.size());
  std::memcpy(t.bytes(), bits.data(), t.nbytes());
  return t;
}

Tensor from_bits16(const std::vector<uint16_t>& bits, const Shape& shape, DType dtype) {
  Tensor t = Tensor::empty(shape, dtype);
  REQUIRE(size_t(t.numel()) == bits.size());
  std::memcpy(t.bytes(), bits.data(), t.nbytes());
  return t;
}

// A tensor's bytes in hex, so a bit-level failure prints the bits (STYLE.md 25).
std::string hex(const Tensor& t) {
  std::ostringstream out;
  out << std::hex << std::setfill('0');
  for (size_t i = 0; i < t.nbytes(); ++i) out << std::setw(2) << int(uint8_t(t.bytes()[i]));
  return out.str();
}

std::string le64(uint64_t n) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[size_t(i)] = char((n >> (8 * i)) & 0xFF);
  return out;
}

// A safetensors file from its parts: length, header as given (no padding), data.
std::string st_file(const std::string& header, const std::string& data) { return le64(header.size()) + header + data; }

// Every special value of each format: +-0, +-inf, quiet and signalling NaNs with payloads, the
// smallest and largest subnormals and normals, and ordinary numbers.
const std::vector<uint32_t> kF32Specials = {0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00001,
                                            0x7F800001, 0x7FA00123, 0x00000001, 0x807FFFFF, 0x00800000, 0x7F7FFFFF,
                                            0x3F800000, 0xBFC00000, 0x3DCCCCCD, 0x42F6E979};
const std::vector<uint16_t> kF16Specials = {0x0000, 0x8000, 0x7C00, 0xFC00, 0x7E00, 0xFE01, 0x7C01, 0x7D23,
                                            0x0001, 0x83FF, 0x0400, 0x7BFF, 0x3C00, 0xBE00, 0x2E66, 0x57B7};
const std::vector<uint16_t> kBF16Specials = {0x0000, 0x8000, 0x7F80, 0xFF80, 0x7FC0, 0xFFC1, 0x7F81, 0x7FA3,
                                             0x0001, 0x807F, 0x0080, 0x7F7F, 0x3F80, 0xBFC0, 0x3DCD, 0x42F7};

template <class T>
std::vector<T> cycle(const std::vector<T>& values, size_t n) {
  std::vector<T> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = values[(i * 7 + 3) % values.size()];
  return out;
}

nn::StateDict special_tensors() {
  return {
      {"f32.scalar", from_bits32({0x7FA00123}, {})},  // a signalling NaN: no float path may touch it
      {"f32.vec", from_bits32({0x80000000, 0x00000001, 0x7F800000}, {3})},
      {"f32.cube", from_bits32(cycle(kF32Specials, 24), {2, 3, 4})},
      {"f16.scalar", from_bits16({0x7D23}, {}, DType::f16)},
      {"f16.vec", from_bits16({0x8000, 0x0001, 0xFC00}, {3}, DType::f16)},
      {"f16.cube", from_bits16(cycle(kF16Specials, 24), {2, 3, 4}, DType::f16)},
      {"bf16.scalar", from_bits16({0x7F81}, {}, DType::bf16)},
      {"bf16.vec", from_bits16({0x8000, 0x0001, 0xFF80}, {3}, DType::bf16)},
      {"bf16.cube", from_bits16(cycle(kBF16Specials, 24), {2, 3, 4}, DType::bf16)},
      {"empty", Tensor::empty({0, 3}, DType::f16)},
  };
}

}  // namespace

TEST_CASE("safetensors round trip keeps dtype, shape, every bit and the metadata", "[safetensors]") {
  TempDir dir("st_roundtrip");
  const nn::StateDict tensors = special_tensors();
  const std::map<std::string, std::string> metadata = {
      {"format", "pt"}, {"note", "caf\xC3\xA9 \xE2\x9C\x93"}, {"empty", ""}, {"quote\"key", "a\\b\nc"}};
  save_safetensors(dir / "a.safetensors", tensors, metadata);
  const SafetensorsFile loaded = load_safetensors(dir / "a.safetensors");
  CHECK(loaded.metadata == metadata);
  REQUIRE(loaded.tensors.size() == tensors.size());
  for (const auto& [name, t] : tensors) {
    INFO(name);
    REQUIRE(loaded.tensors.count(name) == 1);
    const Tensor& u = loaded.tensors.at(name);
    CHECK(u.dtype() == t.dtype());
    CHECK(u.shape() == t.shape());
    CHECK(hex(u) == hex(t));
  }
  // No metadata: the key is omitted and reads back as empty.
  save_safetensors(dir / "b.safetensors", {{"x", from_bits32({0x3F800000}, {1})}});
  CHECK(load_safetensors(dir / "b.safetensors").metadata.empty());
  CHECK(read_bytes(dir.path / "b.safetensors").find("__metadata__") == std::string::npos);
  // No tensors at all: "{}" padded to 8 bytes and an empty data section.
  save_safetensors(dir / "c.safetensors", {});
  CHECK(read_bytes(dir.path / "c.safetensors") == le64(8) + "{}      ");
  CHECK(load_safetensors(dir / "c.safetensors").tensors.empty());
}

TEST_CASE("safetensors bytes parsed independently: header, offsets, padding, raw data", "[safetensors]") {
  TempDir dir("st_layout");
  const nn::StateDict tensors = special_tensors();
  save_safetensors(dir / "a.safetensors", tensors, {{"format", "pt"}});
  const std::string bytes = read_bytes(dir.path / "a.safetensors");

  // Decode the length by hand, little-endian, without our reader.
  REQUIRE(bytes.size() >= 8);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | uint8_t(bytes[size_t(i)]);
  CHECK(n % 8 == 0);  // the reference writer pads so the data is 8-byte aligned
  REQUIRE(8 + n <= bytes.size());
  const std::string text = bytes.substr(8, n);
  const size_t last = text.find_last_not_of(' ');
  CHECK(text[last] == '}');
  CHECK(n - (last + 1) < 8);                                            // at most 7 spaces of padding
  CHECK(text.find('\n') == std::string::npos);                          // compact, as serde_json::to_string
  CHECK(text.rfind("{\"__metadata__\":{\"format\":\"pt\"},", 0) == 0);  // metadata first, as the reference

  const nlohmann::json header = nlohmann::json::parse(text);
  CHECK(header.size() == tensors.size() + 1);
  CHECK(header["__metadata__"] == nlohmann::json({{"format", "pt"}}));
  uint64_t offset = 0;
  size_t text_position = 0;
  const std::map<DType, std::string> names = {{DType::f32, "F32"}, {DType::f16, "F16"}, {DType::bf16, "BF16"}};
  for (const auto& [name, t] : tensors) {  // std::map order = offset order
    INFO(name);
    const nlohmann::json& info = header.at(name);
    CHECK(info.size() == 3);
    CHECK(info["dtype"] == names.at(t.dtype()));
    const std::span<const int64_t> dims = t.shape().dims();
    CHECK(info["shape"] == nlohmann::json(std::vector<int64_t>(dims.begin(), dims.end())));
    CHECK(info["data_offsets"] == nlohmann::json({offset, offset + t.nbytes()}));
    const std::string raw(reinterpret_cast<const char*>(t.bytes()), t.nbytes());
    CHECK(bytes.substr(8 + n + offset, t.nbytes()) == raw);
    offset += t.nbytes();
    const size_t at = text.find("\"" + name + "\":{");  // the header lists them in the same order
    CHECK(at > text_position);
    text_position = at;
  }
  CHECK(bytes.size() == 8 + n + offset);  // nothing after the last tensor
}

TEST_CASE("safetensors writer output, byte for byte", "[safetensors]") {
  TempDir dir("st_golden");
  save_safetensors(
      dir / "g.safetensors",
      {{"w", from_bits16({0x3C00, 0xC000}, {2}, DType::f16)}, {"b", from_bits16({0x3F80}, {1}, DType::bf16)}},
      {{"format", "pt"}});
  // 139 header bytes + 5 spaces = 144 = 0x90; then b (bf16 1.0) and w (f16 1.0, -2.0).
  const std::string expected =
      std::string("\x90\0\0\0\0\0\0\0", 8) +
      R"({"__metadata__":{"format":"pt"},"b":{"dtype":"BF16","shape":[1],"data_offsets":[0,2]},)"
      R"("w":{"dtype":"F16","shape":[2],"data_offsets":[2,6]}}     )" +
      std::string("\x80\x3F\x00\x3C\x00\xC0", 6);
  CHECK(read_bytes(dir.path / "g.safetensors") == expected);
}

// The byte vectors of the reference implementation's own unit tests (safetensors/src/tensor.rs:
// test_serialization, test_serialization_forced_alignement, test_empty), restated as text.
TEST_CASE("safetensors writer reproduces the reference implementation's test vectors", "[safetensors]") {
  TempDir dir("st_reference");
  const std::string data =
      std::string("\0\0\0\0\0\0\x80\x3F\0\0\0\x40\0\0\x40\x40\0\0\x80\x40\0\0\xA0\x40", 24);  // 0..5
  const Tensor values = Tensor::from_vector({0, 1, 2, 3, 4, 5}, {1, 2, 3});
  save_safetensors(dir / "a.safetensors", {{"attn.0", values}});
  CHECK(read_bytes(dir.path / "a.safetensors") ==
        le64(64) + R"({"attn.0":{"dtype":"F32","shape":[1,2,3],"data_offsets":[0,24]}})" + data);
  save_safetensors(dir / "b.safetensors", {{"attn0", values.reshape({1, 1, 2, 3})}});
  CHECK(read_bytes(dir.path / "b.safetensors") ==
        le64(72) + R"({"attn0":{"dtype":"F32","shape":[1,1,2,3],"data_offsets":[0,24]}}       )" + data);
  save_safetensors(dir / "c.safetensors", {}, {{"framework", "pt"}});
  CHECK(read_bytes(dir.path / "c.safetensors") == le64(40) + R"({"__metadata__":{"framework":"pt"}}     )");
  CHECK(load_safetensors(dir / "b.safetensors").tensors.at("attn0").to_vector() == values.to_vector());
  CHECK(load_safetensors(dir / "c.safetensors").metadata.at("framework") == "pt");
}

TEST_CASE("hand-built safetensors files are read as the spec says", "[safetensors]") {
  TempDir dir("st_handmade");
  SECTION("offsets not in name order, metadata last, no padding") {
    // 131 = 0x83 header bytes; b (F32 scalar 1.5) is stored before a (F16 [1, -2]).
    const std::string header =
        R"({"b":{"dtype":"F32","shape":[],"data_offsets":[0,4]},"a":{"dtype":"F16","shape":[2],"data_offsets":[4,8]},)"
        R"("__metadata__":{"k":"v"}})";
    REQUIRE(header.size() == 131);
    write_bytes(dir.path / "h.safetensors",
                std::string("\x83\0\0\0\0\0\0\0", 8) + header + std::string("\x00\x00\xC0\x3F\x00\x3C\x00\xC0", 8));
    const SafetensorsFile f = load_safetensors(dir / "h.safetensors");
    CHECK(f.metadata == std::map<std::string, std::string>{{"k", "v"}});
    REQUIRE(f.tensors.size() == 2);
    const Tensor& b = f.tensors.at("b");
    CHECK(b.dtype() == DType::f32);
    CHECK(b.ndim() == 0);
    CHECK(b.item() == 1.5f);
    const Tensor& a = f.tensors.at("a");
    CHECK(a.dtype() == DType::f16);
    CHECK(a.shape() == Shape{2});
    CHECK(a.to_vector() == std::vector<float>{1.0f, -2.0f});
  }
  SECTION("BF16, an empty tensor sharing an offset, whitespace and extra fields") {
    const std::string header =
        "{ \"e\" : {\"dtype\": \"BF16\", \"shape\": [0, 3], \"data_offsets\": [2, 2]},\n"
        "  \"z\" : {\"dtype\": \"BF16\", \"shape\": [1, 1], \"data_offsets\": [0, 2], \"extra\": 1} }    ";
    write_bytes(dir.path / "h.safetensors", st_file(header, std::string("\xC0\xBF", 2)));
    const SafetensorsFile f = load_safetensors(dir / "h.safetensors");
    CHECK(f.metadata.empty());
    CHECK(f.tensors.at("e").shape() == Shape{0, 3});
    CHECK(f.tensors.at("z").dtype() == DType::bf16);
    CHECK(f.tensors.at("z").item() == -1.5f);  // 0xBFC0
  }
  SECTION("null metadata is no metadata (the reference reads it as None)") {
    write_bytes(dir.path / "h.safetensors", st_file(R"({"__metadata__":null})", ""));
    CHECK(load_safetensors(dir / "h.safetensors").metadata.empty());
  }
}

TEST_CASE("safetensors reader rejects malformed headers, naming the file and the field", "[safetensors]") {
  TempDir dir("st_errors");
  const std::string path = dir / "model.safetensors";
  const std::string f32x3 = R"({"dtype":"F32","shape":[3],"data_offsets":[0,12]})";
  struct Case {
    std::string header, data, message;
  };
  const std::vector<Case> cases = {
      {R"({"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,12]}})", std::string(12, 'x'),
       "tensor 'w': data_offsets [0, 12] hold 12 bytes but shape (2, 3) of F32 needs 24"},
      {R"({"w":{"dtype":"F16","shape":[3],"data_offsets":[0,12]}})", std::string(12, 'x'),
       "tensor 'w': data_offsets [0, 12] hold 12 bytes but shape (3,) of F16 needs 6"},
      {R"({"w":{"dtype":"F33","shape":[1],"data_offsets":[0,4]}})", "abcd",
       "tensor 'w': dtype 'F33' is not one halfgrad reads (F32, F16, BF16)"},
      {R"({"w":{"dtype":"F64","shape":[1],"data_offsets":[0,8]}})", "abcdefgh",
       "tensor 'w': dtype 'F64' is not one halfgrad reads (F32, F16, BF16)"},
      {R"({"w":{"dtype":32,"shape":[1],"data_offsets":[0,4]}})", "abcd", "tensor 'w': dtype 32 is not a string"},
      {R"({"w":{"dtype":"F32","data_offsets":[0,4]}})", "abcd", "tensor 'w': missing field 'shape'"},
      {R"({"w":{"dtype":"F32","shape":[1]}})", "abcd", "tensor 'w': missing field 'data_offsets'"},
      {R"({"w":5})", "", "tensor 'w': entry is not an object but 5"},
      {R"({"w":{"dtype":"F32","shape":[2,-1],"data_offsets":[0,0]}})", "",
       "tensor 'w': shape [2,-1] has a negative dimension"},
      {R"({"w":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}})", "abcd",
       "tensor 'w': shape [1.5] holds a dimension that is not an integer in [0, 2^63)"},
      {R"({"w":{"dtype":"F32","shape":3,"data_offsets":[0,12]}})", std::string(12, 'x'),
       "tensor 'w': shape 3 is not an array"},
      {R"({"w":{"dtype":"F32","shape":[1,1,1,1,1],"data_offsets":[0,4]}})", "abcd",
       "tensor 'w': shape (1, 1, 1, 1, 1) has 5 dimensions; halfgrad tensors have at most 4"},
      {R"({"w":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,4]}})", "abcd",
       "tensor 'w': shape (4611686018427387904, 4) is too large (its byte count overflows 64 bits)"},
      // A lying header asking for 4 EiB: rejected against the file size before any allocation.
      {R"({"w":{"dtype":"F32","shape":[1073741824,1073741824],"data_offsets":[0,4611686018427387904]}})", "abcd",
       "tensor 'w': data_offsets [0, 4611686018427387904] run past the end of the data section (4 bytes)"},
      {R"({"w":{"dtype":"F32","shape":[0],"data_offsets":[4,0]}})", "abcd",
       "tensor 'w': data_offsets [4, 0] end before they begin"},
      {R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0]}})", "abcd",
       "tensor 'w': data_offsets [0] are not two integers in [0, 2^63)"},
      {R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[-4,0]}})", "abcd",
       "tensor 'w': data_offsets [-4,0] are not two integers in [0, 2^63)"},
      {R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
       std::string(12, 'x'), "tensor 'b': data_offsets [8, 12] leave a gap after tensor 'a' [0, 4]"},
      {R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
       std::string(8, 'x'), "tensor 'b': data_offsets [4, 8] overlap tensor 'a' [0, 8]"},
      {R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", std::string(8, 'x'),
       "tensor 'a': data_offsets [4, 8] leave a gap: the data section starts at 0"},
      {R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", "abcd",
       "tensor 'a': data_offsets [0, 8] run past the end of the data section (4 bytes)"},
      {R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", "abcdef",
       "2 bytes after the last tensor (the data section is 6 bytes, the tensors end at 4)"},
      {"{\"w\":" + f32x3 + ",\"w\":" + f32x3 + "}", std::string(12, 'x'), "header names 'w' twice"},
      {R"({"w":{"dtype":"F32","dtype":"F16","shape":[3],"data_offsets":[0,12]}})", std::string(12, 'x'),
       "tensor 'w': key 'dtype' appears twice"},
      {R"({"__metadata__":{"k":1}})", "", "__metadata__ 'k' is 1, not a string"},
      {R"({"__metadata__":[1]})", "", "__metadata__ is [1], not an object of strings"},
      {"[1, 2]", "", "header does not start with '{'"},
      {" {}", "", "header does not start with '{'"},
  };
  for (const Case& c : cases) {
    INFO(c.header);
    write_bytes(path, st_file(c.header, c.data));
    CHECK(error_of([&] { load_safetensors(path); }) == path + ": " + c.message);
  }
  // Not JSON: nlohmann's message follows ours.
  for (const std::string& header : {std::string(R"({"w":})"), std::string("{\"\xFF\":1}"), std::string("{} x")}) {
    INFO(header);
    write_bytes(path, st_file(header, ""));
    CHECK_THAT(error_of([&] { load_safetensors(path); }),
               Catch::StartsWith(path + ": header is not valid JSON: [json.exception.parse_error.101]"));
  }
}

TEST_CASE("safetensors reader rejects short files and lying header lengths", "[safetensors]") {
  TempDir dir("st_lengths");
  const std::string path = dir / "model.safetensors";
  const auto error_for = [&](const std::string& bytes) {
    write_bytes(path, bytes);
    return error_of([&] { load_safetensors(path); });
  };
  const std::string too_short = " bytes is too short for a safetensors file (it starts with an 8-byte header length)";
  CHECK(error_for("") == path + ": 0" + too_short);
  CHECK(error_for(std::string("\x02\0\0\0\0\0\0", 7)) == path + ": 7" + too_short);
  CHECK(error_for(le64(1000) + "{}        ") == path + ": header length 1000 runs past the end of the file (18 bytes)");
  CHECK(error_for(le64(3) + "{}") == path + ": header length 3 runs past the end of the file (10 bytes)");
  // Absurd lengths are refused before reading (or allocating) the header.
  CHECK(error_for(le64(uint64_t(1) << 40) + "{}") ==
        path + ": header length 1099511627776 is larger than the 100000000-byte limit (not a safetensors file?)");
  CHECK(error_for(le64(~uint64_t(0)) + "{}") ==
        path +
            ": header length 18446744073709551615 is larger than the 100000000-byte limit (not a safetensors file?)");
  CHECK(error_for(le64(kMaxSafetensorsHeader) + "{}") ==
        path + ": header length 100000000 runs past the end of the file (10 bytes)");
  CHECK(error_for(le64(0)) == path + ": header does not start with '{'");

  // A valid file cut short in its data: the last tensor runs past the end.
  save_safetensors(path, {{"a", Tensor::zeros({4})}, {"b", Tensor::zeros({4})}});
  const std::string whole = read_bytes(path);
  CHECK(error_for(whole.substr(0, whole.size() - 5)) ==
        path + ": tensor 'b': data_offsets [16, 32] run past the end of the data section (27 bytes)");

  CHECK(error_of([&] { load_safetensors(dir / "missing.safetensors"); }) ==
        dir / "missing.safetensors" + ": cannot open: No such file or directory");
  CHECK(error_of([&] { load_safetensors(dir.path.string()); }) == dir.path.string() + ": not a regular file");
}

TEST_CASE("safetensors writer refuses bad input and leaves the old file untouched", "[safetensors]") {
  TempDir dir("st_write_errors");
  const std::string path = dir / "model.safetensors";
  save_safetensors(path, {{"w", Tensor::ones({2})}});
  const std::string before = read_bytes(path);
  CHECK(error_of([&] { save_safetensors(path, {{"w", Tensor()}}); }) == path + ": tensor 'w' is undefined");
  CHECK(error_of([&] {
          save_safetensors(path, {{"__metadata__", Tensor::ones({1})}});
        }) == path + ": '__metadata__' is reserved and cannot name a tensor");
  CHECK_THAT(error_of([&] {
               save_safetensors(path, {{"bad\xFF", Tensor::ones({1})}});
             }),
             Catch::StartsWith(path + ": a tensor name or metadata string is not valid UTF-8"));
  CHECK_THAT(error_of([&] {
               save_safetensors(path, {{"w", Tensor::ones({1})}}, {{"k", "\xC3"}});
             }),
             Catch::StartsWith(path + ": a tensor name or metadata string is not valid UTF-8"));
  CHECK(error_of([&] {
          save_safetensors(dir / "no/such/dir/x.safetensors", {});
        }).rfind(dir / "no/such/dir/x.safetensors" + ": cannot create ", 0) == 0);
  CHECK(read_bytes(path) == before);
  // Only the original file: no temporary left behind by the failed writes.
  int files = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(dir.path)) ++files;
  CHECK(files == 1);
}

// The stand-alone Python reader of docs/checkpoints.md (stdlib only), run on a file we wrote: it
// documents the format and proves a reader that shares no code with ours agrees with it.
TEST_CASE("the Python reader of docs/checkpoints.md reads model.safetensors", "[safetensors][python]") {
  if (std::system("python3 -c 'import struct, json' >/dev/null 2>&1") != 0) {
    WARN("python3 not found: the Python reader of docs/checkpoints.md was not run");
    return;
  }
  const std::string page = read_bytes(std::filesystem::path(HALFGRAD_SOURCE_DIR) / "docs" / "checkpoints.md");
  const size_t section = page.find("\n## The safetensors format");
  REQUIRE(section != std::string::npos);
  const size_t begin = page.find("```python\n", section);
  REQUIRE(begin != std::string::npos);
  const size_t end = page.find("```", begin + 10);
  REQUIRE(end != std::string::npos);

  TempDir dir("st_python");
  write_bytes(dir.path / "reader.py", page.substr(begin + 10, end - begin - 10));
  save_safetensors(dir / "model.safetensors",
                   {{"head.bias", from_bits16({0xC000}, {}, DType::bf16)},  // -2
                    {"head.weight", from_bits16({0x3C00, 0x7BFF, 0x0001, 0xFC00}, {2, 2}, DType::f16)},
                    {"norm.weight", from_bits32({0x3FC00000, 0x80000000, 0x7F800000}, {3})}},
                   {{"format", "pt"}});
  const std::string command = "cd '" + dir.path.string() + "' && python3 reader.py model.safetensors > out.txt 2>&1";
  CHECK(std::system(command.c_str()) == 0);
  CHECK(read_bytes(dir.path / "out.txt") ==
        "head.bias BF16 [] [-2.0]\n"
        "head.weight F16 [2, 2] [1.0, 65504.0, 5.960464477539063e-08, -inf]\n"
        "norm.weight F32 [3] [1.5, -0.0, inf]\n"
        "metadata {'format': 'pt'}\n");
}

}  // namespace hg::io
