// HtmlReport: one self-contained HTML page of a training run (`halfgrad train --report-to html`,
// HF's report_to): the training loss of every step with the evaluations' loss, the evaluation
// metrics, the learning rate, the loss scale with the steps the scaler skipped marked, and, when
// the numerics inspector ran, each tensor's share flushed to zero by its fp16 cast over the
// inspected steps as a heat map. Charts are inline SVG (halfgrad/report/svg_plot.h), styles and a small
// script (hover read-outs) inline: the page needs no network and no other file to be viewed.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "halfgrad/report/numerics_inspector.h"
#include "halfgrad/train/trainer.h"

namespace hg::report {

// What the page shows.
struct RunRecord {
  std::string title;               // the page's heading
  std::vector<std::string> about;  // lines under it: the run's data, model, precision
  // Every optimizer step this process ran: its number, loss (the mean over its micro-batches),
  // the loss scale it used, and whether the optimizer stepped (false: skipped by the scaler).
  std::vector<double> step, loss, scale;
  std::vector<bool> stepped;
  // TrainerState::log_history: entries with "learning_rate" (every logging_steps), with
  // "eval_loss", "eval_accuracy", "eval_f1" (every evaluation) and the final "train_loss", ...
  nlohmann::json log_history = nlohmann::json::array();
  std::vector<StepNumerics> inspected;  // the numerics inspector's steps, if it ran
};

// The page (UTF-8 HTML5). Series with no points (no evaluations, no inspector) are left out.
std::string html_report(const RunRecord& run);

// Records a Trainer's run and writes output_dir/report.html at the end of training (rank 0's
// job, as the log). `inspector`, when given, must be registered before this callback: its
// inspected steps are read at the end.
class HtmlReportCallback : public train::TrainerCallback {
 public:
  HtmlReportCallback(std::string output_dir, std::string title, std::vector<std::string> about,
                     std::shared_ptr<const InspectorCallback> inspector = nullptr);
  void on_step_end(const train::TrainerState& state, const nlohmann::json& step_info) override;
  void on_train_end(const train::TrainerState& state) override;
  const std::string& path() const { return path_; }

 private:
  RunRecord run_;
  std::string path_;
  std::shared_ptr<const InspectorCallback> inspector_;
};

}  // namespace hg::report
