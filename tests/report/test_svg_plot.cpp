// SvgPlot: the SVG text is well formed (every tag closed, in order), names every series, and
// places data where the axis mapping says: the plot area is x in [70, width - 190] and y in
// [40, height - 50] pixels, so the corners of a fixed range land on those numbers exactly.
#include <catch2/catch.hpp>

#include <cmath>
#include <regex>
#include <string>
#include <vector>

#include "halfgrad/report/svg_plot.h"
#include "tests/report/text_count.h"

namespace hg::report {
namespace {

// A minimal XML check: tags nest and close in order, and the root is <svg>.
bool well_formed(const std::string& text) {
  std::vector<std::string> open;
  bool saw_root = false;
  const std::regex tag(R"(<(/?)([a-zA-Z][a-zA-Z0-9]*)[^>]*?(/?)>)");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), tag); it != std::sregex_iterator(); ++it) {
    const std::smatch& m = *it;
    if (m[1] == "/") {
      if (open.empty() || open.back() != m[2]) return false;
      open.pop_back();
    } else if (m[3] != "/") {
      if (open.empty()) saw_root = saw_root || m[2] == "svg";
      open.push_back(m[2]);
    }
  }
  return saw_root && open.empty();
}

}  // namespace

TEST_CASE("SvgPlot draws line series at the mapped pixel coordinates", "[svg]") {
  SvgPlot plot({.title = "loss <f32 & fp16>", .x_label = "step", .y_label = "loss"});
  plot.set_x_range(0, 10);
  plot.set_y_range(0, 2);
  plot.add_line("f32", {0, 10}, {0, 2});
  plot.add_line("fp16", {5}, {1});
  plot.add_markers("skipped", {5});
  const std::string svg = plot.svg();
  CHECK(well_formed(svg));
  CHECK(plot.pixel_x(0) == 70.0);
  CHECK(plot.pixel_x(10) == 530.0);  // 720 - 190
  CHECK(plot.pixel_y(0) == 370.0);   // 420 - 50
  CHECK(plot.pixel_y(2) == 40.0);
  CHECK_THAT(svg, Catch::Contains("points=\"70.00,370.00 530.00,40.00 \""));
  CHECK_THAT(svg, Catch::Contains("points=\"300.00,205.00 \""));
  CHECK_THAT(svg, Catch::Contains("x1=\"300.00\" y1=\"40.00\" x2=\"300.00\" y2=\"370.00\""));  // the marker
  CHECK_THAT(svg, Catch::Contains("loss &lt;f32 &amp; fp16&gt;"));
  CHECK_THAT(svg, Catch::Contains(">f32</text>"));
  CHECK_THAT(svg, Catch::Contains(">skipped</text>"));
  CHECK(count_of(svg, "class=\"series\"") == 2);
  CHECK(count_of(svg, "class=\"marker\"") == 1);
}

TEST_CASE("SvgPlot's log2 axis places 2^k linearly in k and labels ticks 2^k", "[svg]") {
  SvgPlot plot({.log2_y = true});
  plot.set_x_range(0, 4);
  plot.add_line("scale", {0, 1, 2, 4}, {65536, 32768, 1024, 1});
  const std::string svg = plot.svg();
  CHECK(well_formed(svg));
  // y range [2^0, 2^16] from the data: 2^8 is half way, 40 + 330 / 2.
  CHECK(plot.pixel_y(256) == Approx(205.0));
  CHECK(plot.pixel_y(65536) == Approx(40.0));
  CHECK_THAT(svg, Catch::Contains(">2^15</text>"));               // ticks every 5 doublings
  CHECK_THAT(svg, Catch::Contains("70.00,40.00 185.00,60.62 "));  // 2^15 is 1/16 of 330 px lower
}

TEST_CASE("SvgPlot's log2 bars rise from the floor and draw 0 as a dot on it, labelled 0", "[svg]") {
  SvgPlot plot({.log2_y = true});
  plot.set_categories({"a", "b", "c"});
  plot.add_bars("s", {0.25, 0.0, std::nan("")});  // NaN: no bar
  plot.add_bars("t", {1.0 / 512, 0.5, 0.125});
  const std::string svg = plot.svg();
  CHECK(well_formed(svg));
  // The data span 2^-9 .. 2^-1; the zero puts the floor one doubling lower, at 2^-10: 9 doublings
  // over 330 px.
  CHECK(plot.pixel_y(1.0 / 1024) == Approx(370.0));
  CHECK(plot.pixel_y(1.0 / 512) == Approx(370.0 - 330.0 / 9));
  CHECK(count_of(svg, "class=\"bar\"") == 4);
  CHECK(count_of(svg, "class=\"zero\"") == 1);
  // x range [-0.5, 2.5] over 460 px; the first series' bar of category 0 spans x in [-0.4, 0],
  // from 2^-2 (40 + 330 / 9 px) down to the floor (370 px), not to 2^0.
  CHECK_THAT(svg, Catch::Contains("x=\"85.33\" y=\"76.67\" width=\"61.33\" height=\"293.33\""));
  // The zero of category 1: x in [1.1, 1.5] -> centre 269.33 px, a 3 px dot resting on the floor.
  CHECK_THAT(svg, Catch::Contains("class=\"zero\" cx=\"269.33\" cy=\"367.00\" r=\"3.00\""));
  CHECK_THAT(svg, Catch::Contains("y=\"374.00\" text-anchor=\"end\">0</text>"));  // the floor reads 0 ...
  CHECK_THAT(svg, !Catch::Contains(">2^-10</text>"));                             // ... not 2^-10
  CHECK_THAT(svg, Catch::Contains(">2^-8</text>"));
}

TEST_CASE("SvgPlot draws step histograms, shaded regions, text and grouped bars", "[svg]") {
  SECTION("histogram with regions") {
    SvgPlot plot({.title = "gradients"});
    plot.set_x_range(-30, 0);
    plot.set_y_range(0, 1);
    plot.add_region(-40, -24, "underflow");  // clipped at the left edge
    plot.add_region(-24, -14, "subnormal");
    plot.add_line("unscaled", {-20}, {0.5}, /*steps=*/true);
    plot.add_text(-10, 0.9, "12.5% become zero in fp16");
    const std::string svg = plot.svg();
    CHECK(well_formed(svg));
    // bin [-20, -19) at height 0.5: from x = 70 + 460 * 10/30 to 70 + 460 * 11/30.
    CHECK_THAT(svg, Catch::Contains("223.33,205.00 238.67,205.00"));
    // the underflow band spans x = -30 (70 px) to -24 (70 + 460 * 6/30 = 162 px)
    CHECK_THAT(svg, Catch::Contains("class=\"region\" x=\"70.00\" y=\"40.00\" width=\"92.00\""));
    CHECK_THAT(svg, Catch::Contains(">subnormal</text>"));
    CHECK_THAT(svg, Catch::Contains(">12.5% become zero in fp16</text>"));
  }
  SECTION("bars") {
    SvgPlot plot({.y_label = "underflow share"});
    plot.set_categories({"head.weight", "norm.bias"});
    plot.set_y_range(0, 1);
    plot.add_bars("fp16", {0.5, 1.0});
    plot.add_bars("scaled", {0.0, 0.25});
    const std::string svg = plot.svg();
    CHECK(well_formed(svg));
    CHECK(count_of(svg, "class=\"bar\"") == 4);
    CHECK_THAT(svg, Catch::Contains(">head.weight</text>"));
    // x range [-0.5, 1.5] over 460 px: the first bar of category 1 spans x in [0.6, 1.0] ->
    // 70 + 230 * 1.1 = 323 px, 92 px wide, from y = 1.0 (40 px) down to 0 at 420 - 85.5 =
    // 334.5 px (the bottom margin fits the 11-character "head.weight" standing: 14 + 6.5 * 11).
    CHECK_THAT(svg, Catch::Contains("x=\"323.00\" y=\"40.00\" width=\"92.00\" height=\"294.50\""));
    CHECK_THAT(svg, Catch::Contains("rotate(-90 "));
  }
}

}  // namespace hg::report
