// The safetensors writer (header as the reference writes it: compact JSON, "__metadata__"
// first, space padding to 8 bytes) and a validating reader that follows the reference
// implementation's checks (safetensors/src/tensor.rs: read_metadata, Metadata::validate).
#include "halfgrad/io/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <limits>
#include <set>
#include <sstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "halfgrad/base/error.h"
#include "halfgrad/io/unique_fd.h"
#include "halfgrad/io/atomic_file.h"

namespace hg::io {

// The format is little-endian and tensors are written from memory as they are.
static_assert(std::endian::native == std::endian::little, "safetensors I/O assumes a little-endian host");

namespace {

constexpr std::string_view kMetadataKey = "__metadata__";

// "(2, 3)", "(3,)", "()": a shape as Shape::str prints it (the dims may not fit a Shape).
std::string shape_text(const std::vector<int64_t>& dims) {
  std::ostringstream out;
  out << '(';
  for (size_t i = 0; i < dims.size(); ++i) out << (i ? ", " : "") << dims[i];
  out << (dims.size() == 1 ? ",)" : ")");
  return out.str();
}

// Reads exactly `size` bytes at `offset`; a short read means the file shrank under us.
void read_at(const std::string& path, int fd, void* out, size_t size, uint64_t offset) {
  auto* p = static_cast<char*>(out);
  while (size > 0) {
    const ssize_t n = ::pread(fd, p, size, off_t(offset));
    if (n < 0 && errno == EINTR) continue;
    check(n >= 0, path, ": read failed at byte ", offset, ": ", std::strerror(errno));
    check(n > 0, path, ": unexpected end of file at byte ", offset);
    p += n;
    size -= size_t(n);
    offset += uint64_t(n);
  }
}

// Parses the header, rejecting a key repeated within one object: JSON parsers keep one of the
// two silently (nlohmann the last, serde errors), so such a file means different things to
// different readers.
nlohmann::json parse_header(const std::string& path, const std::string& text) {
  using Event = nlohmann::json::parse_event_t;
  std::vector<std::set<std::string>> open_objects;
  std::string top_key, duplicate;
  size_t duplicate_depth = 0;
  auto callback = [&](int, Event event, nlohmann::json& parsed) {
    if (event == Event::object_start) {
      open_objects.emplace_back();
    } else if (event == Event::object_end) {
      open_objects.pop_back();
    } else if (event == Event::key) {
      const std::string key = parsed.get<std::string>();
      if (open_objects.size() == 1) top_key = key;
      if (!open_objects.back().insert(key).second && duplicate.empty()) {
        duplicate = key;
        duplicate_depth = open_objects.size();
      }
    }
    return true;
  };
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(text, callback);
  } catch (const nlohmann::json::exception& e) {
    fail(path, ": header is not valid JSON: ", e.what());
  }
  if (duplicate_depth == 1) fail(path, ": header names '", duplicate, "' twice");
  if (duplicate_depth > 1) fail(path, ": tensor '", top_key, "': key '", duplicate, "' appears twice");
  check(header.is_object(), path, ": header is not a JSON object");
  return header;
}

// A JSON number that is an integer in [0, 2^63): safetensors sizes and offsets.
bool non_negative_integer(const nlohmann::json& j, uint64_t& out) {
  if (!j.is_number_integer()) return false;
  if (j.is_number_unsigned()) {
    out = j.get<uint64_t>();
    return out <= uint64_t(std::numeric_limits<int64_t>::max());
  }
  const int64_t v = j.get<int64_t>();
  out = uint64_t(v);
  return v >= 0;
}

struct Entry {
  std::string name;
  DType dtype;
  std::vector<int64_t> dims;
  uint64_t begin, end;
};

Entry parse_entry(const std::string& path, const std::string& name, const nlohmann::json& info) {
  const std::string where = path + ": tensor '" + name + "'";
  check(info.is_object(), where, ": entry is not an object but ", info.dump());
  for (const char* field : {"dtype", "shape", "data_offsets"}) {
    check(info.contains(field), where, ": missing field '", field, "'");
  }
  Entry e{.name = name};

  const nlohmann::json& dtype = info["dtype"];
  check(dtype.is_string(), where, ": dtype ", dtype.dump(), " is not a string");
  const std::string d = dtype.get<std::string>();
  if (d == "F32") {
    e.dtype = DType::f32;
  } else if (d == "F16") {
    e.dtype = DType::f16;
  } else if (d == "BF16") {
    e.dtype = DType::bf16;
  } else {
    fail(where, ": dtype '", d, "' is not one halfgrad reads (F32, F16, BF16)");
  }

  const nlohmann::json& shape = info["shape"];
  check(shape.is_array(), where, ": shape ", shape.dump(), " is not an array");
  for (const nlohmann::json& dim : shape) {
    uint64_t size = 0;
    if (!non_negative_integer(dim, size)) {
      const bool negative = dim.is_number_integer() && !dim.is_number_unsigned();
      fail(where, ": shape ", shape.dump(),
           negative ? " has a negative dimension" : " holds a dimension that is not an integer in [0, 2^63)");
    }
    e.dims.push_back(int64_t(size));
  }
  check(e.dims.size() <= size_t(Shape::kMaxDims), where, ": shape ", shape_text(e.dims), " has ", e.dims.size(),
        " dimensions; halfgrad tensors have at most ", Shape::kMaxDims);
  uint64_t bytes = element_size(e.dtype);
  for (int64_t dim : e.dims) {
    check(!__builtin_mul_overflow(bytes, uint64_t(dim), &bytes), where, ": shape ", shape_text(e.dims),
          " is too large (its byte count overflows 64 bits)");
  }

  const nlohmann::json& offsets = info["data_offsets"];
  check(offsets.is_array() && offsets.size() == 2 && non_negative_integer(offsets[0], e.begin) &&
            non_negative_integer(offsets[1], e.end),
        where, ": data_offsets ", offsets.dump(), " are not two integers in [0, 2^63)");
  check(e.begin <= e.end, where, ": data_offsets [", e.begin, ", ", e.end, "] end before they begin");
  check(e.end - e.begin == bytes, where, ": data_offsets [", e.begin, ", ", e.end, "] hold ", e.end - e.begin,
        " bytes but shape ", shape_text(e.dims), " of ", d, " needs ", bytes);
  return e;
}

}  // namespace

const char* safetensors_dtype(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return "F32";
    case DType::f16:
      return "F16";
    case DType::bf16:
      return "BF16";
  }
  fail("safetensors: unknown dtype ", int(dtype));
}

void save_safetensors(const std::string& path, const nn::StateDict& tensors,
                      const std::map<std::string, std::string>& metadata) {
  // ordered_json keeps the reference writer's layout: "__metadata__" first, then the tensors in
  // the order of their data.
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header[std::string(kMetadataKey)] = metadata;
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    check(name != kMetadataKey, path, ": '", kMetadataKey, "' is reserved and cannot name a tensor");
    check(t.defined(), path, ": tensor '", name, "' is undefined");
    const std::span<const int64_t> dims = t.shape().dims();
    header[name] = {{"dtype", safetensors_dtype(t.dtype())},
                    {"shape", std::vector<int64_t>(dims.begin(), dims.end())},
                    {"data_offsets", {offset, offset + t.nbytes()}}};
    offset += t.nbytes();
  }
  std::string text;
  try {
    text = header.dump();  // compact, as serde_json::to_string
  } catch (const nlohmann::json::exception& e) {
    fail(path, ": a tensor name or metadata string is not valid UTF-8 (", e.what(), ")");
  }
  // Pad with spaces so the data starts 8-byte aligned (JSON allows trailing whitespace).
  text.append((8 - text.size() % 8) % 8, ' ');
  const uint64_t length = text.size();  // little-endian on this host (static_assert above)

  AtomicFile file(path);
  file.write(&length, sizeof length);
  file.write(text);
  for (const auto& [name, t] : tensors) file.write(t.bytes(), t.nbytes());
  file.commit();
}

SafetensorsFile load_safetensors(const std::string& path) {
  UniqueFd file{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  check(file.fd >= 0, path, ": cannot open: ", std::strerror(errno));
  struct stat st {};
  check(::fstat(file.fd, &st) == 0, path, ": cannot stat: ", std::strerror(errno));
  check(S_ISREG(st.st_mode), path, ": not a regular file");
  const uint64_t file_size = uint64_t(st.st_size);
  check(file_size >= 8, path, ": ", file_size,
        " bytes is too short for a safetensors file (it starts with an 8-byte header length)");

  uint64_t header_size = 0;
  read_at(path, file.fd, &header_size, 8, 0);
  check(header_size <= kMaxSafetensorsHeader, path, ": header length ", header_size, " is larger than the ",
        kMaxSafetensorsHeader, "-byte limit (not a safetensors file?)");
  check(header_size <= file_size - 8, path, ": header length ", header_size, " runs past the end of the file (",
        file_size, " bytes)");
  std::string text(header_size, '\0');
  read_at(path, file.fd, text.data(), text.size(), 8);
  check(!text.empty() && text[0] == '{', path, ": header does not start with '{'");
  const nlohmann::json header = parse_header(path, text);

  SafetensorsFile out;
  std::vector<Entry> entries;
  for (const auto& [name, info] : header.items()) {
    if (name == kMetadataKey) {
      if (info.is_null()) continue;  // serde reads null as "no metadata"
      check(info.is_object(), path, ": __metadata__ is ", info.dump(), ", not an object of strings");
      for (const auto& [key, value] : info.items()) {
        check(value.is_string(), path, ": __metadata__ '", key, "' is ", value.dump(), ", not a string");
        out.metadata[key] = value.get<std::string>();
      }
      continue;
    }
    entries.push_back(parse_entry(path, name, info));
  }

  // The data section must be exactly the tensors, back to back, in the order of their offsets
  // (not necessarily name order: the reference writer sorts by dtype first).
  const uint64_t data_start = 8 + header_size, data_size = file_size - data_start;
  for (const Entry& e : entries) {
    check(e.end <= data_size, path, ": tensor '", e.name, "': data_offsets [", e.begin, ", ", e.end,
          "] run past the end of the data section (", data_size, " bytes)");
  }
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return std::tie(a.begin, a.end) < std::tie(b.begin, b.end); });
  uint64_t expected = 0;
  for (size_t i = 0; i < entries.size(); ++i) {
    const Entry& e = entries[i];
    if (e.begin != expected) {
      if (i == 0)
        fail(path, ": tensor '", e.name, "': data_offsets [", e.begin, ", ", e.end,
             "] leave a gap: the data section starts at 0");
      const Entry& p = entries[i - 1];
      fail(path, ": tensor '", e.name, "': data_offsets [", e.begin, ", ", e.end, "] ",
           e.begin < expected ? "overlap" : "leave a gap after", " tensor '", p.name, "' [", p.begin, ", ", p.end, "]");
    }
    expected = e.end;
  }
  check(expected == data_size, path, ": ", data_size - expected, " bytes after the last tensor (the data section is ",
        data_size, " bytes, the tensors end at ", expected, ")");

  for (const Entry& e : entries) {
    Tensor t = Tensor::empty(Shape(std::span<const int64_t>(e.dims)), e.dtype);
    read_at(path, file.fd, t.bytes(), t.nbytes(), data_start + e.begin);
    out.tensors.emplace(e.name, std::move(t));
  }
  return out;
}

}  // namespace hg::io
