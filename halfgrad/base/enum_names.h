// EnumNames: the one table of an enum's user-facing names (flags, JSON values). It gives a value's
// name, a name's value (an unknown name is an hg::Error naming the field and every choice) and the
// list of names for CLI11's IsMember and help texts, so an enum's spellings live in one place.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "halfgrad/base/error.h"

namespace hg {

// inline constexpr EnumNames<Color, 2> kColorNames{{{{Color::kRed, "red"}, {Color::kBlue, "blue"}}}};
// `aliases` (A of them) are older or other spellings that parse() accepts but nothing writes or lists:
// EnumNames<Color, 2, 1>{{{...}}, {{{Color::kRed, "crimson"}}}}.
template <class E, std::size_t N, std::size_t A = 0>
struct EnumNames {
  std::array<std::pair<E, std::string_view>, N> table;
  std::array<std::pair<E, std::string_view>, A> aliases{};

  constexpr std::string_view name(E value) const {
    for (const auto& [v, n] : table) {
      if (v == value) return n;
    }
    return "?";
  }
  // The value named `text` (a name or an alias), if any.
  constexpr std::optional<E> find(std::string_view text) const {
    for (const auto& [v, n] : table) {
      if (n == text) return v;
    }
    for (const auto& [v, n] : aliases) {
      if (n == text) return v;
    }
    return std::nullopt;
  }
  // `field` names the flag or key in the error: "rounding (--rounding): unknown value 'x' (expected
  // nearest, stochastic or toward-zero)".
  E parse(std::string_view text, std::string_view field) const {
    if (const std::optional<E> value = find(text)) return *value;
    fail(field, ": unknown value '", text, "' (expected ", choices(), ")");
  }
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& entry : table) out.emplace_back(entry.second);
    return out;
  }
  // "a, b or c"
  std::string choices() const {
    std::string out;
    for (std::size_t i = 0; i < N; ++i) {
      out += i == 0 ? "" : i + 1 == N ? " or " : ", ";
      out += table[i].second;
    }
    return out;
  }
  // "a | b | c", as the help texts list choices
  std::string listed() const {
    std::string out;
    for (std::size_t i = 0; i < N; ++i) {
      out += i == 0 ? "" : " | ";
      out += table[i].second;
    }
    return out;
  }
};

}  // namespace hg
