// The run's HTML page: SvgPlot charts inlined, the flushed-share heat map drawn here as SVG
// rectangles, one stylesheet and one script inline.
#include "halfgrad/report/html_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <utility>

#include "halfgrad/base/error.h"

namespace hg::report {

namespace {

using Points = std::pair<std::vector<double>, std::vector<double>>;

constexpr int kWidth = 600, kHeight = 340;  // two charts side by side on a 1280-pixel screen

// An SvgPlot's SVG element without its XML declaration, to sit inside HTML.
std::string inline_svg(const SvgPlot& plot) {
  std::string s = plot.svg();
  if (s.rfind("<?xml", 0) == 0) s.erase(0, s.find('\n') + 1);
  return s;
}

// The log entries that hold a finite number under `key`: (step, value).
Points history(const nlohmann::json& log, const std::string& key) {
  Points p;
  for (const nlohmann::json& e : log) {
    const auto it = e.find(key);
    if (it == e.end() || !it->is_number() || !e.contains("step") || !std::isfinite(it->get<double>())) continue;
    p.first.push_back(e.at("step").get<double>());
    p.second.push_back(it->get<double>());
  }
  return p;
}

std::string number(double v, const char* format = "%.4g") {
  char text[32];
  std::snprintf(text, sizeof text, format, v);
  return text;
}

std::string figure(const std::string& id, const std::string& caption, const std::string& svg) {
  return "<figure id=\"" + id + "\">" + svg + "<figcaption>" + xml_escape(caption) + "</figcaption></figure>\n";
}

std::string loss_chart(const RunRecord& run, const std::vector<double>& skipped) {
  Points train;
  for (size_t i = 0; i < run.step.size(); ++i) {
    if (!std::isfinite(run.loss[i])) continue;  // a step the scaler skipped may have an inf/NaN loss
    train.first.push_back(run.step[i]);
    train.second.push_back(run.loss[i]);
  }
  const Points eval = history(run.log_history, "eval_loss");
  if (train.first.empty() && eval.first.empty()) return "";
  SvgPlot plot(
      {.title = "loss", .x_label = "optimizer step", .y_label = "cross-entropy", .width = kWidth, .height = kHeight});
  if (!train.first.empty()) plot.add_line("train (each step)", train.first, train.second);
  if (!eval.first.empty()) plot.add_line("eval", eval.first, eval.second);
  if (!skipped.empty()) plot.add_markers("skipped steps", skipped);
  return figure("loss", "Training loss of every optimizer step, evaluation loss at each evaluation.", inline_svg(plot));
}

std::string metrics_chart(const RunRecord& run) {
  const Points accuracy = history(run.log_history, "eval_accuracy"), f1 = history(run.log_history, "eval_f1");
  if (accuracy.first.empty() && f1.first.empty()) return "";
  SvgPlot plot(
      {.title = "evaluation", .x_label = "optimizer step", .y_label = "share", .width = kWidth, .height = kHeight});
  if (!accuracy.first.empty()) plot.add_line("accuracy", accuracy.first, accuracy.second);
  if (!f1.first.empty()) plot.add_line("macro-F1", f1.first, f1.second);
  double lowest = 1;  // from the lowest value's 0.05 below, so that close curves stay apart
  for (const Points* p : {&accuracy, &f1}) {
    for (const double v : p->second) lowest = std::min(lowest, v);
  }
  plot.set_y_range(std::max(0.0, std::floor(lowest * 20 - 1) / 20), 1);
  std::string caption = "Accuracy and macro-F1 on the evaluation data.";
  if (!accuracy.second.empty()) caption += " Last accuracy: " + number(100 * accuracy.second.back(), "%.2f") + "%.";
  return figure("metrics", caption, inline_svg(plot));
}

std::string learning_rate_chart(const RunRecord& run) {
  const Points lr = history(run.log_history, "learning_rate");
  if (lr.first.empty()) return "";
  SvgPlot plot({.title = "learning rate",
                .x_label = "optimizer step",
                .y_label = "learning rate",
                .width = kWidth,
                .height = kHeight});
  plot.add_line("learning rate", lr.first, lr.second);
  return figure("learning-rate", "The scheduler's learning rate at each log entry (every logging_steps).",
                inline_svg(plot));
}

std::string scale_chart(const RunRecord& run, const std::vector<double>& skipped) {
  if (run.step.empty()) return "";
  SvgPlot plot({.title = "loss scale",
                .x_label = "optimizer step",
                .y_label = "scale",
                .log2_y = true,
                .width = kWidth,
                .height = kHeight});
  plot.add_line("loss scale", run.step, run.scale);
  if (!skipped.empty()) plot.add_markers("skipped steps", skipped);
  const auto [lo, hi] = std::minmax_element(run.scale.begin(), run.scale.end());
  if (*lo == *hi) plot.set_y_range(*lo / 2, *hi * 2);
  return figure("loss-scale",
                "The loss scale each step used; dashed: the " + std::to_string(skipped.size()) +
                    " steps the scaler skipped (inf/NaN gradients). A constant 1: no loss scaling.",
                inline_svg(plot));
}

// Rows: every tensor the inspector saw ("name kind"), columns: the inspected steps; a cell's
// colour is its share flushed to zero by the fp16 cast, on a linear scale up to the largest.
std::string flushed_heat_map(const std::vector<StepNumerics>& steps) {
  if (steps.empty()) return "";
  std::vector<std::string> rows;
  for (const StepNumerics& s : steps) {
    for (const TensorNumerics& t : s.tensors) {
      const std::string row = t.name + " " + kind_name(t.kind);
      if (std::find(rows.begin(), rows.end(), row) == rows.end()) rows.push_back(row);
    }
  }
  double top = 0;
  for (const StepNumerics& s : steps) {
    for (const TensorNumerics& t : s.tensors) top = std::max(top, t.underflow_share());
  }
  const int label = 260, cell_w = std::max(4, std::min(40, 720 / int(steps.size()))), cell_h = 14, head = 40;
  const int width = label + cell_w * int(steps.size()) + 20, height = head + cell_h * int(rows.size()) + 30;
  std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"heat\" width=\"" + std::to_string(width) +
                    "\" height=\"" + std::to_string(height) + "\" font-family=\"sans-serif\" font-size=\"11\">\n";
  svg += "<text x=\"" + std::to_string(width / 2) + "\" y=\"16\" text-anchor=\"middle\" font-size=\"15\">" +
         "share flushed to zero by the fp16 cast (darkest: " + number(100 * top, "%.3g") + "%)</text>\n";
  for (size_t r = 0; r < rows.size(); ++r) {
    svg += "<text x=\"" + std::to_string(label - 6) + "\" y=\"" + std::to_string(head + cell_h * int(r) + 11) +
           "\" text-anchor=\"end\">" + xml_escape(rows[r]) + "</text>\n";
  }
  for (size_t c = 0; c < steps.size(); ++c) {
    const int x = label + cell_w * int(c);
    if (c == 0 || c + 1 == steps.size() || c % std::max<size_t>(1, steps.size() / 6) == 0) {
      svg += "<text x=\"" + std::to_string(x) + "\" y=\"" + std::to_string(head - 6) + "\">" +
             std::to_string(steps[c].step) + "</text>\n";
    }
    for (const TensorNumerics& t : steps[c].tensors) {
      const size_t r = size_t(std::find(rows.begin(), rows.end(), t.name + " " + kind_name(t.kind)) - rows.begin());
      const double share = t.underflow_share();
      const int shade = top > 0 ? int(std::lround(255 * (1 - share / top))) : 255;
      const std::string tip = "step " + std::to_string(steps[c].step) + ", " + rows[r] + ": " +
                              number(100 * share, "%.4g") + "% flushed to zero";
      svg += "<rect class=\"cell\" x=\"" + std::to_string(x) + "\" y=\"" + std::to_string(head + cell_h * int(r)) +
             "\" width=\"" + std::to_string(cell_w) + "\" height=\"" + std::to_string(cell_h) + "\" fill=\"rgb(255," +
             std::to_string(shade) + "," + std::to_string(shade) + ")\" data-tip=\"" + xml_escape(tip) + "\"><title>" +
             xml_escape(tip) + "</title></rect>\n";
    }
  }
  svg += "<text x=\"" + std::to_string(label) + "\" y=\"" + std::to_string(height - 8) +
         "\">inspected optimizer step</text>\n</svg>\n";
  return figure("flushed", "Per tensor (parameter gradients, activations, activation gradients), per inspected step.",
                svg);
}

// Hover read-outs for the heat map's cells; script errors are written into the page (#errors),
// so a headless browser's DOM shows them; body[data-ready] says the script ran to its end.
constexpr const char* kScript = R"JS(
window.addEventListener('error', function (e) {
  var box = document.getElementById('errors');
  box.hidden = false;
  box.textContent += 'script error: ' + e.message + '\n';
});
(function () {
  var readout = document.getElementById('readout');
  document.querySelectorAll('[data-tip]').forEach(function (cell) {
    cell.addEventListener('mouseenter', function () { readout.textContent = cell.getAttribute('data-tip'); });
  });
  document.body.setAttribute('data-ready', String(document.querySelectorAll('figure').length));
})();
)JS";

constexpr const char* kStyle = R"CSS(
body { font-family: sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.3em; margin-bottom: 0.2em; }
p.about { margin: 0.1em 0; color: #555; font-family: monospace; }
figure { display: inline-block; margin: 0.5em; vertical-align: top; }
figcaption { font-size: 0.85em; color: #555; max-width: 600px; }
#readout { font-family: monospace; min-height: 1.2em; }
#errors { color: #b00; white-space: pre; }
)CSS";

}  // namespace

std::string html_report(const RunRecord& run) {
  std::vector<double> skipped;
  for (size_t i = 0; i < run.step.size(); ++i) {
    if (!run.stepped[i]) skipped.push_back(run.step[i]);
  }
  std::string html = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>" +
                     xml_escape(run.title) + "</title>\n<style>" + kStyle + "</style>\n</head>\n<body>\n<h1>" +
                     xml_escape(run.title) + "</h1>\n";
  for (const std::string& line : run.about) html += "<p class=\"about\">" + xml_escape(line) + "</p>\n";
  html += "<pre id=\"errors\" hidden=\"hidden\"></pre>\n";
  html += loss_chart(run, skipped) + metrics_chart(run) + learning_rate_chart(run) + scale_chart(run, skipped);
  const std::string heat = flushed_heat_map(run.inspected);
  if (!heat.empty()) html += "<p id=\"readout\">hover over a cell</p>\n" + heat;
  html += "<script>" + std::string(kScript) + "</script>\n</body>\n</html>\n";
  return html;
}

HtmlReportCallback::HtmlReportCallback(std::string output_dir, std::string title, std::vector<std::string> about,
                                       std::shared_ptr<const InspectorCallback> inspector)
    : path_((std::filesystem::path(output_dir) / "report.html").string()), inspector_(std::move(inspector)) {
  run_.title = std::move(title);
  run_.about = std::move(about);
}

void HtmlReportCallback::on_step_end(const train::TrainerState& state, const nlohmann::json& step_info) {
  run_.step.push_back(double(state.global_step));
  run_.loss.push_back(step_info.at("loss").get<double>());
  run_.scale.push_back(step_info.at("scale").get<double>());
  run_.stepped.push_back(step_info.at("stepped").get<bool>());
}

// Written to a temporary name and renamed, so report.html is never half a page.
void HtmlReportCallback::on_train_end(const train::TrainerState& state) {
  run_.log_history = state.log_history;
  if (inspector_) run_.inspected = inspector_->inspected();
  const std::string temporary = path_ + ".tmp";
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    out << html_report(run_);
    check(out.good(), temporary, ": cannot write the report");
  }
  std::error_code ec;
  std::filesystem::rename(temporary, path_, ec);
  check(!ec, path_, ": cannot write the report (", ec.message(), ")");
}

}  // namespace hg::report
