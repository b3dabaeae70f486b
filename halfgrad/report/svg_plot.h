// SvgPlot: a small writer of SVG charts for the demos and the numerics inspector: line series
// and grouped bars over named categories (both also on a log2 y axis), step-shaped histograms,
// vertical markers (e.g. skipped steps), shaded x-regions with labels and free text. The output
// is plain SVG 1.1 text that any browser opens; no scripts, no external resources.
// Deliberately not here: automatic legends beyond one row per series, dates, multiple axes.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace hg::report {

struct PlotOptions {
  std::string title, x_label, y_label;
  bool log2_y = false;  // y values are drawn at log2(y); ticks read 2^k (y must be > 0)
  int width = 720, height = 420;
};

class SvgPlot {
 public:
  explicit SvgPlot(PlotOptions options);

  // A polyline through (x[i], y[i]). A step series draws a histogram: y[i] holds over
  // [x[i], x[i] + 1) (bins of width 1 in x, e.g. log2 magnitudes).
  void add_line(std::string name, std::vector<double> x, std::vector<double> y, bool steps = false);
  // One bar per category for this series; several series are grouped side by side. Categories
  // are named once with set_categories (x = 0, 1, ...). A NaN value draws no bar (a category
  // marked otherwise). On a log2 axis bars rise from the axis floor, and a value of 0, which has
  // no logarithm, is a dot on the floor, labelled 0 (the automatic range keeps the floor one
  // doubling below the smallest nonzero value, so 0 stays apart from it).
  void add_bars(std::string name, std::vector<double> values);
  void set_categories(std::vector<std::string> names);
  // Vertical dashed lines at these x (e.g. skipped optimizer steps), named in the legend.
  void add_markers(std::string name, std::vector<double> x);
  // A shaded band x0 <= x < x1 across the plot, with its label written at the top.
  void add_region(double x0, double x1, std::string label);
  // Text at a data coordinate.
  void add_text(double x, double y, std::string text);
  // Fixes the axis ranges (otherwise the data's range, y from 0 unless log2).
  void set_x_range(double lo, double hi);
  void set_y_range(double lo, double hi);

  std::string svg() const;
  void save(const std::string& path) const;  // throws hg::Error if the file cannot be written

  // Pixel coordinates of a data point, as svg() draws it (after finalising the ranges).
  double pixel_x(double x) const;
  double pixel_y(double y) const;

 private:
  struct Series {
    std::string name;
    std::vector<double> x, y;
    bool steps = false, bars = false, markers = false;
  };
  struct Region {
    double x0, x1;
    std::string label;
  };
  struct Text {
    double x, y;
    std::string text;
  };
  struct Frame;  // the plot area and ranges of one drawing (svg_plot.cpp)
  Frame frame() const;
  std::string draw_regions(const Frame& f) const;
  std::string draw_axes(const Frame& f) const;
  std::string draw_series(const Frame& f) const;
  std::string draw_bars(const Frame& f, const Series& series, const char* color, double width, int index) const;
  std::string draw_legend(const Frame& f) const;
  std::pair<double, double> x_range() const;
  std::pair<double, double> y_range() const;
  double bottom_margin() const;
  double top_margin() const;
  double y_value(double y) const;  // log2 when the axis is log2
  bool zero_floor() const;         // a log2 axis with bars of value 0, drawn on its floor

  PlotOptions options_;
  std::vector<Series> series_;
  std::vector<Region> regions_;
  std::vector<Text> texts_;
  std::vector<std::string> categories_;
  bool fixed_x_ = false, fixed_y_ = false;
  double x_lo_ = 0, x_hi_ = 1, y_lo_ = 0, y_hi_ = 1;
};

// Escapes &, <, > and " for SVG text and attributes.
std::string xml_escape(const std::string& text);

}  // namespace hg::report
