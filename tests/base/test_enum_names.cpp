// EnumNames (halfgrad/base/enum_names.h): name, parse with the field and every choice in the error, the
// list of names.
#include <catch2/catch.hpp>

#include "halfgrad/base/enum_names.h"

namespace hg {
namespace {

enum class Fruit { kApple, kPear, kPlum, kUnlisted };
constexpr EnumNames<Fruit, 3> kFruitNames{{{{Fruit::kApple, "apple"}, {Fruit::kPear, "pear"}, {Fruit::kPlum, "plum"}}}};

TEST_CASE("EnumNames: one table gives names, values, choices and a parse error naming the field", "[base][enum]") {
  static_assert(kFruitNames.name(Fruit::kPear) == "pear");
  CHECK(kFruitNames.name(Fruit::kUnlisted) == "?");
  CHECK(kFruitNames.parse("plum", "fruit (--fruit)") == Fruit::kPlum);
  CHECK(kFruitNames.names() == std::vector<std::string>{"apple", "pear", "plum"});
  CHECK(kFruitNames.choices() == "apple, pear or plum");
  REQUIRE_THROWS_WITH(kFruitNames.parse("Pear", "fruit (--fruit)"),
                      "fruit (--fruit): unknown value 'Pear' (expected apple, pear or plum)");
  constexpr EnumNames<Fruit, 1> one{{{{Fruit::kApple, "apple"}}}};
  CHECK(one.choices() == "apple");
  CHECK(kFruitNames.listed() == "apple | pear | plum");
}

TEST_CASE("EnumNames: an alias parses but is neither written nor listed", "[base][enum]") {
  constexpr EnumNames<Fruit, 2, 1> names{{{{Fruit::kApple, "apple"}, {Fruit::kPear, "pear"}}},
                                         {{{Fruit::kPear, "poire"}}}};
  CHECK(names.parse("poire", "fruit") == Fruit::kPear);
  CHECK(names.find("poire") == Fruit::kPear);
  CHECK(names.find("plum") == std::nullopt);
  CHECK(names.name(Fruit::kPear) == "pear");
  CHECK(names.names() == std::vector<std::string>{"apple", "pear"});
  REQUIRE_THROWS_WITH(names.parse("plum", "fruit (--fruit)"),
                      "fruit (--fruit): unknown value 'plum' (expected apple or pear)");
}

}  // namespace
}  // namespace hg
