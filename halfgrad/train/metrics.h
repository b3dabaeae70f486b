// Classification metrics from predictions and labels: accuracy, macro-F1, per-class precision
// and recall, and the confusion matrix (rows: true class, columns: predicted), as
// sklearn.metrics computes them (a class never predicted has precision 0; never present,
// recall 0).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace hg::train {

struct ClassificationReport {
  double accuracy = 0;
  double macro_f1 = 0;
  std::vector<double> precision, recall, f1;
  std::vector<int64_t> support;                 // true examples per class
  std::vector<std::vector<int64_t>> confusion;  // [true][predicted]
};

ClassificationReport classification_report(const std::vector<int32_t>& predictions, const std::vector<int32_t>& labels,
                                           int64_t classes);

// The confusion matrix and per-class table as aligned text, with class names.
std::string format_report(const ClassificationReport& report, const std::vector<std::string>& names);

}  // namespace hg::train
