// SvgPlot's drawing: axis ranges from the data, "nice" ticks (1, 2, 5 x 10^k, or 2^k on a log2
// axis), series clipped to the plot area, and a legend to the right of it.
#include "halfgrad/report/svg_plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>

#include "halfgrad/base/error.h"

namespace hg::report {
namespace {

constexpr double kLeft = 70, kRight = 190, kTop = 40, kBottom = 50;
// Characters per line before a title (font size 15, about 8.3 px a character in 720 px) or a
// legend entry (font size 12, about 6.6 px a character in the legend's 158 px) wraps.
constexpr size_t kTitleChars = 80, kLegendChars = 24;
constexpr const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#17becf"};
constexpr const char* kRegionFills[] = {"#e8e8e8", "#fbe3c8", "#d9ead3", "#f4cccc"};

std::string num(double v) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.2f", v);
  return buffer;
}

std::string tick_label(double v) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%g", std::abs(v) < 1e-12 ? 0.0 : v);
  return buffer;
}

// Tick positions covering [lo, hi] with a step of 1, 2 or 5 times a power of ten (an integer
// step of at least 1 on a log2 axis).
std::vector<double> ticks(double lo, double hi, bool integer) {
  const double raw = (hi - lo) / 6;
  double step = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {2.0, 5.0, 10.0}) {
    if (step >= raw) break;
    step = std::pow(10.0, std::floor(std::log10(raw))) * m;
  }
  if (integer) step = std::max(1.0, std::round(step));
  std::vector<double> out;
  for (double t = std::ceil(lo / step) * step; t <= hi + 1e-9 * (hi - lo); t += step) out.push_back(t);
  return out;
}

// `text` broken at spaces into lines of at most `width` characters (a longer word stands alone).
std::vector<std::string> wrap(const std::string& text, size_t width) {
  std::vector<std::string> lines(1);
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(' ', start);
    if (end == std::string::npos) end = text.size();
    const std::string word = text.substr(start, end - start);
    if (!lines.back().empty() && lines.back().size() + 1 + word.size() > width) lines.emplace_back();
    lines.back() += (lines.back().empty() ? "" : " ") + word;
    start = end + 1;
  }
  return lines;
}

// <text> of `lines`, the first at (x, y), each next one `spacing` px lower.
std::string text_lines(const std::vector<std::string>& lines, double x, double y, double spacing,
                       const std::string& attributes) {
  std::string s = "<text x=\"" + num(x) + "\" y=\"" + num(y) + "\"" + attributes + ">";
  for (size_t i = 0; i < lines.size(); ++i) {
    s += i == 0 ? xml_escape(lines[i])
                : "<tspan x=\"" + num(x) + "\" dy=\"" + num(spacing) + "\">" + xml_escape(lines[i]) + "</tspan>";
  }
  return s + "</text>\n";
}

}  // namespace

std::string xml_escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

SvgPlot::SvgPlot(PlotOptions options) : options_(std::move(options)) {}

void SvgPlot::add_line(std::string name, std::vector<double> x, std::vector<double> y, bool steps) {
  check(x.size() == y.size(), "SvgPlot::add_line: ", x.size(), " x values but ", y.size(), " y values");
  series_.push_back({std::move(name), std::move(x), std::move(y), steps, false, false});
}

void SvgPlot::add_bars(std::string name, std::vector<double> values) {
  std::vector<double> x(values.size());
  for (size_t i = 0; i < x.size(); ++i) x[i] = double(i);
  series_.push_back({std::move(name), std::move(x), std::move(values), false, true, false});
}

void SvgPlot::set_categories(std::vector<std::string> names) { categories_ = std::move(names); }

void SvgPlot::add_markers(std::string name, std::vector<double> x) {
  std::vector<double> y(x.size(), 0.0);
  series_.push_back({std::move(name), std::move(x), std::move(y), false, false, true});
}

void SvgPlot::add_region(double x0, double x1, std::string label) { regions_.push_back({x0, x1, std::move(label)}); }

void SvgPlot::add_text(double x, double y, std::string text) { texts_.push_back({x, y, std::move(text)}); }

void SvgPlot::set_x_range(double lo, double hi) {
  check(lo < hi, "SvgPlot: empty x range [", lo, ", ", hi, "]");
  fixed_x_ = true;
  x_lo_ = lo;
  x_hi_ = hi;
}

void SvgPlot::set_y_range(double lo, double hi) {
  check(lo < hi, "SvgPlot: empty y range [", lo, ", ", hi, "]");
  fixed_y_ = true;
  y_lo_ = lo;
  y_hi_ = hi;
}

double SvgPlot::y_value(double y) const { return options_.log2_y ? std::log2(y) : y; }

bool SvgPlot::zero_floor() const {
  if (!options_.log2_y) return false;
  for (const Series& s : series_) {
    if (s.bars && std::find(s.y.begin(), s.y.end(), 0.0) != s.y.end()) return true;
  }
  return false;
}

std::pair<double, double> SvgPlot::x_range() const {
  if (fixed_x_) return {x_lo_, x_hi_};
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  for (const Series& s : series_) {
    for (double x : s.x) {
      lo = std::min(lo, s.bars ? x - 0.5 : x);
      hi = std::max(hi, s.bars ? x + 0.5 : s.steps ? x + 1 : x);
    }
  }
  if (!(lo < hi)) return {std::isfinite(lo) ? lo - 1 : 0.0, std::isfinite(lo) ? lo + 1 : 1.0};
  return {lo, hi};
}

std::pair<double, double> SvgPlot::y_range() const {
  if (fixed_y_) return {y_value(y_lo_), y_value(y_hi_)};
  double lo = options_.log2_y ? std::numeric_limits<double>::infinity() : 0.0,
         hi = -std::numeric_limits<double>::infinity();
  for (const Series& s : series_) {
    if (s.markers) continue;
    for (double y : s.y) {
      if (!std::isfinite(y_value(y))) continue;
      lo = std::min(lo, y_value(y));
      hi = std::max(hi, y_value(y));
    }
  }
  // Region labels stand at the top of the plot: room above the data keeps them clear of it.
  bool labels = false;
  for (const Region& r : regions_) labels = labels || !r.label.empty();
  if (options_.log2_y) {
    lo = std::floor(lo) - (zero_floor() ? 1 : 0);
    hi = std::ceil(hi) + (labels ? 1 : 0);
  } else {
    hi = hi > lo ? hi + (labels ? 0.15 : 0.05) * (hi - lo) : hi;
  }
  if (!(lo < hi)) return {std::isfinite(lo) ? lo - 1 : 0.0, std::isfinite(lo) ? lo + 1 : 1.0};
  return {lo, hi};
}

// A title longer than a line wraps, and the plot starts lower by the added lines.
double SvgPlot::top_margin() const { return kTop + 18 * double(wrap(options_.title, kTitleChars).size() - 1); }

double SvgPlot::pixel_x(double x) const {
  const auto [lo, hi] = x_range();
  return kLeft + (x - lo) / (hi - lo) * (options_.width - kLeft - kRight);
}

// Category names stand vertically below the axis, so the bottom margin grows with the longest
// (about 6.5 px a character at font size 11) and dozens of tensor names stay readable.
double SvgPlot::bottom_margin() const {
  size_t longest = 0;
  for (const std::string& c : categories_) longest = std::max(longest, c.size());
  return categories_.empty() ? kBottom : std::max(kBottom, 14 + 6.5 * double(longest));
}

double SvgPlot::pixel_y(double y) const {
  const auto [lo, hi] = y_range();
  const double top = top_margin(), h = options_.height - top - bottom_margin();
  return top + h - (y_value(y) - lo) / (hi - lo) * h;
}

// The plot area in pixels and the axis ranges, fixed once per drawing.
struct SvgPlot::Frame {
  double xlo, xhi, ylo, yhi;        // axis ranges (y on the axis scale: log2 applied)
  double w, h, right, bottom, top;  // image size and plot area edges (top below a wrapped title)
  double py(double v) const { return top + (bottom - top) * (yhi - v) / (yhi - ylo); }  // v on the axis scale
};

SvgPlot::Frame SvgPlot::frame() const {
  const auto [xlo, xhi] = x_range();
  const auto [ylo, yhi] = y_range();
  const double w = options_.width, h = options_.height;
  return {xlo, xhi, ylo, yhi, w, h, w - kRight, h - bottom_margin(), top_margin()};
}

std::string SvgPlot::svg() const {
  const Frame f = frame();
  std::string s = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" +
                  num(f.w) + "\" height=\"" + num(f.h) + "\" viewBox=\"0 0 " + num(f.w) + " " + num(f.h) +
                  "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  s += "<rect x=\"0\" y=\"0\" width=\"" + num(f.w) + "\" height=\"" + num(f.h) + "\" fill=\"white\"/>\n";
  s += "<defs><clipPath id=\"plot\"><rect x=\"" + num(kLeft) + "\" y=\"" + num(f.top) + "\" width=\"" +
       num(f.right - kLeft) + "\" height=\"" + num(f.bottom - f.top) + "\"/></clipPath></defs>\n";
  s += text_lines(wrap(options_.title, kTitleChars), f.w / 2, 22, 18, " text-anchor=\"middle\" font-size=\"15\"");
  s += draw_regions(f) + draw_axes(f) + draw_series(f);
  for (const Text& t : texts_) {
    s += "<text x=\"" + num(pixel_x(t.x)) + "\" y=\"" + num(pixel_y(t.y)) + "\">" + xml_escape(t.text) + "</text>\n";
  }
  s += draw_legend(f);
  s += "</svg>\n";
  return s;
}

std::string SvgPlot::draw_regions(const Frame& f) const {
  std::string s;
  for (size_t i = 0; i < regions_.size(); ++i) {
    const Region& r = regions_[i];
    const double x0 = pixel_x(std::max(r.x0, f.xlo)), x1 = pixel_x(std::min(r.x1, f.xhi));
    if (x1 <= x0) continue;
    s += "<rect class=\"region\" x=\"" + num(x0) + "\" y=\"" + num(f.top) + "\" width=\"" + num(x1 - x0) +
         "\" height=\"" + num(f.bottom - f.top) + "\" fill=\"" + kRegionFills[i % 4] + "\"/>\n";
    s += "<text x=\"" + num((x0 + x1) / 2) + "\" y=\"" + num(f.top + 14) +
         "\" text-anchor=\"middle\" font-size=\"11\">" + xml_escape(r.label) + "</text>\n";
  }
  return s;
}

// Axes, x ticks (or category names), y ticks with their grid lines, and the axis labels.
std::string SvgPlot::draw_axes(const Frame& f) const {
  std::string s = "<g stroke=\"#888\" stroke-width=\"1\">\n";
  s += "<line x1=\"" + num(kLeft) + "\" y1=\"" + num(f.bottom) + "\" x2=\"" + num(f.right) + "\" y2=\"" +
       num(f.bottom) + "\"/>\n";
  s += "<line x1=\"" + num(kLeft) + "\" y1=\"" + num(f.top) + "\" x2=\"" + num(kLeft) + "\" y2=\"" + num(f.bottom) +
       "\"/>\n";
  s += "</g>\n<g font-size=\"11\">\n";
  if (!categories_.empty()) {
    for (size_t i = 0; i < categories_.size(); ++i) {
      const double x = pixel_x(double(i));
      s += "<text x=\"" + num(x + 4) + "\" y=\"" + num(f.bottom + 6) +
           "\" text-anchor=\"end\" transform=\"rotate(-90 " + num(x + 4) + " " + num(f.bottom + 6) + ")\">" +
           xml_escape(categories_[i]) + "</text>\n";
    }
  } else {
    for (double t : ticks(f.xlo, f.xhi, false)) {
      s += "<text x=\"" + num(pixel_x(t)) + "\" y=\"" + num(f.bottom + 16) + "\" text-anchor=\"middle\">" +
           tick_label(t) + "</text>\n";
    }
  }
  const bool zero_at_floor = zero_floor();
  if (zero_at_floor) {
    s += "<text x=\"" + num(kLeft - 6) + "\" y=\"" + num(f.bottom + 4) + "\" text-anchor=\"end\">0</text>\n";
  }
  for (double t : ticks(f.ylo, f.yhi, options_.log2_y)) {
    if (zero_at_floor && t < f.ylo + 0.5) continue;  // the floor reads 0
    const std::string label = options_.log2_y ? "2^" + tick_label(t) : tick_label(t);
    s += "<line x1=\"" + num(kLeft) + "\" y1=\"" + num(f.py(t)) + "\" x2=\"" + num(f.right) + "\" y2=\"" +
         num(f.py(t)) + "\" stroke=\"#eee\"/>\n";
    s += "<text x=\"" + num(kLeft - 6) + "\" y=\"" + num(f.py(t) + 4) + "\" text-anchor=\"end\">" + label + "</text>\n";
  }
  s += "</g>\n";
  s += "<text x=\"" + num((kLeft + f.right) / 2) + "\" y=\"" + num(f.h - 8) + "\" text-anchor=\"middle\">" +
       xml_escape(options_.x_label) + "</text>\n";
  s += "<text x=\"16\" y=\"" + num((f.top + f.bottom) / 2) + "\" text-anchor=\"middle\" transform=\"rotate(-90 16 " +
       num((f.top + f.bottom) / 2) + ")\">" + xml_escape(options_.y_label) + "</text>\n";
  return s;
}

// Every series, clipped to the plot area: bars, vertical markers or a polyline.
std::string SvgPlot::draw_series(const Frame& f) const {
  int bar_series = 0, bar_index = 0;
  for (const Series& series : series_) bar_series += series.bars ? 1 : 0;
  std::string s = "<g clip-path=\"url(#plot)\">\n";
  for (size_t i = 0; i < series_.size(); ++i) {
    const Series& series = series_[i];
    const char* color = kColors[i % 7];
    if (series.bars) {
      s += draw_bars(f, series, color, 0.8 / bar_series, bar_index++);
    } else if (series.markers) {
      for (double x : series.x) {
        s += "<line class=\"marker\" x1=\"" + num(pixel_x(x)) + "\" y1=\"" + num(f.top) + "\" x2=\"" + num(pixel_x(x)) +
             "\" y2=\"" + num(f.bottom) + "\" stroke=\"" + color + "\" stroke-dasharray=\"4 3\"/>\n";
      }
    } else {
      std::string points;
      for (size_t j = 0; j < series.x.size(); ++j) {
        const double v = y_value(series.y[j]);
        if (!std::isfinite(v)) continue;
        points += num(pixel_x(series.x[j])) + "," + num(f.py(v)) + " ";
        if (series.steps) points += num(pixel_x(series.x[j] + 1)) + "," + num(f.py(v)) + " ";
      }
      s += "<polyline class=\"series\" fill=\"none\" stroke=\"" + std::string(color) +
           "\" stroke-width=\"1.8\" points=\"" + points + "\"/>\n";
    }
  }
  return s + "</g>\n";
}

// One bar series: the index-th of the groups beside each category, `width` of a category wide.
std::string SvgPlot::draw_bars(const Frame& f, const Series& series, const char* color, double width, int index) const {
  std::string s;
  const double base = f.py(options_.log2_y ? f.ylo : std::max(f.ylo, 0.0));
  for (size_t j = 0; j < series.x.size(); ++j) {
    const double x0 = pixel_x(series.x[j] - 0.4 + width * index);
    const double x1 = pixel_x(series.x[j] - 0.4 + width * (index + 1));
    if (std::isnan(series.y[j])) continue;
    if (options_.log2_y && series.y[j] == 0) {
      const double r = std::min(3.0, (x1 - x0) / 2);  // resting on the floor
      s += "<circle class=\"zero\" cx=\"" + num((x0 + x1) / 2) + "\" cy=\"" + num(base - r) + "\" r=\"" + num(r) +
           "\" fill=\"" + color + "\"/>\n";
      continue;
    }
    const double bar_top = f.py(y_value(series.y[j]));
    s += "<rect class=\"bar\" x=\"" + num(x0) + "\" y=\"" + num(std::min(bar_top, base)) + "\" width=\"" +
         num(x1 - x0) + "\" height=\"" + num(std::abs(base - bar_top)) + "\" fill=\"" + color + "\"/>\n";
  }
  return s;
}

// Legend: one entry per series, right of the plot; a long name wraps onto more lines.
std::string SvgPlot::draw_legend(const Frame& f) const {
  std::string s;
  double y = f.top + 10;
  for (size_t i = 0; i < series_.size(); ++i) {
    const std::vector<std::string> lines = wrap(series_[i].name, kLegendChars);
    s += "<rect x=\"" + num(f.right + 12) + "\" y=\"" + num(y - 8) + "\" width=\"14\" height=\"8\" fill=\"" +
         kColors[i % 7] + "\"/>\n" + text_lines(lines, f.right + 32, y, 14, "");
    y += 18 + 14 * double(lines.size() - 1);
  }
  return s;
}

void SvgPlot::save(const std::string& path) const {
  std::ofstream out(path);
  out << svg();
  check(out.good(), path, ": cannot write the figure");
}

}  // namespace hg::report
