// Counting for classification_report, and its text form.
#include "halfgrad/train/metrics.h"

#include <algorithm>
#include <cstdio>

#include "halfgrad/base/error.h"

namespace hg::train {

ClassificationReport classification_report(const std::vector<int32_t>& predictions, const std::vector<int32_t>& labels,
                                           int64_t classes) {
  check(predictions.size() == labels.size(), "classification_report: ", predictions.size(), " predictions for ",
        labels.size(), " labels");
  ClassificationReport r;
  const size_t k = size_t(classes);
  r.confusion.assign(k, std::vector<int64_t>(k, 0));
  int64_t correct = 0;
  for (size_t i = 0; i < labels.size(); ++i) {
    check(labels[i] >= 0 && labels[i] < classes && predictions[i] >= 0 && predictions[i] < classes,
          "classification_report: class out of range at ", i);
    ++r.confusion[size_t(labels[i])][size_t(predictions[i])];
    correct += labels[i] == predictions[i];
  }
  r.accuracy = labels.empty() ? 0.0 : double(correct) / double(labels.size());
  for (size_t c = 0; c < k; ++c) {
    int64_t predicted = 0, actual = 0;
    for (size_t j = 0; j < k; ++j) {
      predicted += r.confusion[j][c];
      actual += r.confusion[c][j];
    }
    const double tp = double(r.confusion[c][c]);
    const double p = predicted ? tp / double(predicted) : 0.0, q = actual ? tp / double(actual) : 0.0;
    r.precision.push_back(p);
    r.recall.push_back(q);
    r.f1.push_back(p + q > 0 ? 2 * p * q / (p + q) : 0.0);
    r.support.push_back(actual);
  }
  for (double f : r.f1) r.macro_f1 += f / double(k);
  return r;
}

std::string format_report(const ClassificationReport& r, const std::vector<std::string>& names) {
  std::string out;
  char line[256];
  size_t width = 5;
  for (const std::string& n : names) width = std::max(width, n.size());
  const int w = int(width);
  std::snprintf(line, sizeof line, "%-*s %9s %9s %9s %9s\n", w, "class", "precision", "recall", "f1", "support");
  out += line;
  for (size_t c = 0; c < r.precision.size(); ++c) {
    std::snprintf(line, sizeof line, "%-*s %9.4f %9.4f %9.4f %9lld\n", w, names[c].c_str(), r.precision[c], r.recall[c],
                  r.f1[c], static_cast<long long>(r.support[c]));
    out += line;
  }
  std::snprintf(line, sizeof line,
                "accuracy %.4f   macro-F1 %.4f\n\nconfusion matrix (rows: true, columns: predicted)\n", r.accuracy,
                r.macro_f1);
  out += line;
  std::snprintf(line, sizeof line, "%-*s", w, "");
  out += line;
  for (const std::string& n : names) {
    std::snprintf(line, sizeof line, " %7s", n.c_str());
    out += line;
  }
  out += "\n";
  for (size_t c = 0; c < r.confusion.size(); ++c) {
    std::snprintf(line, sizeof line, "%-*s", w, names[c].c_str());
    out += line;
    for (int64_t v : r.confusion[c]) {
      std::snprintf(line, sizeof line, " %7lld", static_cast<long long>(v));
      out += line;
    }
    out += "\n";
  }
  return out;
}

}  // namespace hg::train
