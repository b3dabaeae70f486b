// json_read::as: the typed reads behind every file halfgrad reads back. Each wrong type and each
// value outside the field's range is an hg::Error naming the key; nothing is cast.
#include <catch2/catch.hpp>
#include <cstdint>
#include <limits>
#include <string>

#include "halfgrad/autograd/json_read.h"
#include "tests/temp_dir.h"

namespace hg {
namespace {

using nlohmann::json;

template <class T>
std::string read_error(const json& v) {
  return testing::error_of([&] { (void)json_read::as<T>(v, "f.json: key 'k'"); });
}

TEST_CASE("json_read::as reads integers only from JSON integers in the field's range", "[json]") {
  CHECK(json_read::as<int64_t>(json(-7), "k") == -7);
  CHECK(json_read::as<int64_t>(json(std::numeric_limits<int64_t>::max()), "k") == std::numeric_limits<int64_t>::max());
  CHECK(json_read::as<uint64_t>(json(std::numeric_limits<uint64_t>::max()), "k") ==
        std::numeric_limits<uint64_t>::max());
  CHECK(json_read::as<int32_t>(json(int64_t{-2147483648}), "k") == std::numeric_limits<int32_t>::min());
  CHECK(read_error<int64_t>(json(5.5e100)) == "f.json: key 'k' has the wrong type (5.5e+100, expected an integer)");
  CHECK(read_error<int64_t>(json(40.0)) == "f.json: key 'k' has the wrong type (40.0, expected an integer)");
  CHECK(read_error<int64_t>(json("40")) == "f.json: key 'k' has the wrong type (\"40\", expected an integer)");
  // 2^63 is a JSON unsigned integer: one past int64_t's range.
  CHECK(read_error<int64_t>(json(uint64_t{1} << 63)) ==
        "f.json: key 'k' is out of range (9223372036854775808, expected -9223372036854775808 to 9223372036854775807)");
  CHECK(read_error<int32_t>(json(int64_t{1} << 31)) ==
        "f.json: key 'k' is out of range (2147483648, expected -2147483648 to 2147483647)");
  CHECK(read_error<size_t>(json(-1)) == "f.json: key 'k' is out of range (-1, expected 0 to 18446744073709551615)");
}

TEST_CASE("json_read::as reads floats from finite JSON numbers the type can hold", "[json]") {
  CHECK(json_read::as<float>(json(0.5), "k") == 0.5f);
  CHECK(json_read::as<float>(json(3), "k") == 3.0f);  // an integer is a number
  CHECK(json_read::as<double>(json(1e300), "k") == 1e300);
  // FLT_MAX = 3.4028234663852886e38 reads; 1e39 is past it (and would be inf, not a learning rate).
  CHECK(json_read::as<float>(json(double(std::numeric_limits<float>::max())), "k") ==
        std::numeric_limits<float>::max());
  CHECK(read_error<float>(json(1e39)) == "f.json: key 'k' is out of range (1e+39)");
  CHECK(read_error<double>(json("0.5")) == "f.json: key 'k' has the wrong type (\"0.5\", expected a number)");
}

TEST_CASE("json_read::as reads booleans and strings only from their JSON types", "[json]") {
  CHECK(json_read::as<bool>(json(true), "k"));
  CHECK(json_read::as<std::string>(json("out"), "k") == "out");
  CHECK(read_error<bool>(json(1)) == "f.json: key 'k' has the wrong type (1, expected true or false)");
  CHECK(read_error<std::string>(json(nullptr)) == "f.json: key 'k' has the wrong type (null, expected a string)");
}

}  // namespace
}  // namespace hg
