// Typed reads of the values in the JSON files halfgrad reads back (trainer_state.json's
// counters, training_args, config.json, the mixed-precision keys): a value of the wrong type or
// out of the field's range is an hg::Error that names it ("<at> has the wrong type (<value>,
// expected an integer)"). nlohmann's own conversions are not used for numbers: they cast a JSON
// float to an integer type, which is undefined behaviour past the type's range (a step count of
// 5.5e100 in trainer_state.json: a libFuzzer finding, fuzz/corpus/checkpoint_json/), truncate
// 40.5 to 40, and wrap an integer too wide for an int. In autograd/, the lowest layer with
// JSON, so that every reader above can use it (docs/ARCHITECTURE.md).
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include <nlohmann/json.hpp>

#include "halfgrad/base/error.h"

namespace hg::json_read {

// `v` itself if `ok`; otherwise throws, naming `at` (the file and key), the value and `expected`.
inline const nlohmann::json& expect(const nlohmann::json& v, bool ok, const std::string& at,
                                    std::string_view expected) {
  check(ok, at, " has the wrong type (", v.dump(), ", expected ", expected, ")");
  return v;
}

// The value of `v` as a T: bool (true or false), an integer type (a JSON integer in T's range),
// float or double (any finite JSON number a T can hold), or std::string.
template <class T>
T as(const nlohmann::json& v, const std::string& at) {
  if constexpr (std::is_same_v<T, bool>) {
    return expect(v, v.is_boolean(), at, "true or false").template get<bool>();
  } else if constexpr (std::is_integral_v<T>) {
    expect(v, v.is_number_integer(), at, "an integer");
    const bool fits = v.is_number_unsigned() ? std::in_range<T>(v.template get<uint64_t>())
                                             : std::in_range<T>(v.template get<int64_t>());
    check(fits, at, " is out of range (", v.dump(), ", expected ", std::numeric_limits<T>::min(), " to ",
          std::numeric_limits<T>::max(), ")");
    return v.template get<T>();
  } else if constexpr (std::is_floating_point_v<T>) {
    const double d = expect(v, v.is_number(), at, "a number").template get<double>();
    check(std::isfinite(d) && std::abs(d) <= double(std::numeric_limits<T>::max()), at, " is out of range (", v.dump(),
          ")");
    return T(d);
  } else {
    static_assert(std::is_same_v<T, std::string>, "json_read::as: bool, integers, float, double or std::string");
    return expect(v, v.is_string(), at, "a string").template get<std::string>();
  }
}

// Reads `v` into `field` (its type chooses the conversion, as in as<T>).
template <class T>
void read(const nlohmann::json& v, const std::string& at, T& field) {
  field = as<T>(v, at);
}

// Reads key `key` of the object `j` into `field`, named "<source>: key '<key>'" in an error; a
// missing key is an error too ("<source>: missing field '<key>'").
template <class T>
void read_field(const nlohmann::json& j, const std::string& source, const char* key, T& field) {
  check(j.contains(key), source, ": missing field '", key, "'");
  read(j.at(key), source + ": key '" + key + "'", field);
}

// The same for a key that older files lack: `field` keeps its value when the key is absent.
template <class T>
void read_optional_field(const nlohmann::json& j, const std::string& source, const char* key, T& field) {
  if (j.contains(key)) read_field(j, source, key, field);
}

}  // namespace hg::json_read
