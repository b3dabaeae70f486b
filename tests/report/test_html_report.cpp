// halfgrad/report/html_report.h: the page is well-formed (every tag closed in order, attributes quoted:
// checked by a small tokenizer here, as the page is written to be XML-clean), self-contained (no
// URL it would fetch) and holds the expected series: the loss with the skipped steps marked, the
// evaluation metrics, the learning rate, the loss scale and the flushed-share heat map, one cell
// per tensor and inspected step. Then `halfgrad train --report-to` writes what it says.
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include "halfgrad/data/dataset.h"
#include "halfgrad/report/html_report.h"
#include "tests/demos/run_program.h"
#include "tests/report/text_count.h"
#include "tests/temp_dir.h"

namespace hg::report {
namespace {

namespace fs = std::filesystem;

// Checks that `html` nests: every element closed in order (void elements: meta, br), attribute
// values double-quoted, and text inside <script> and <style> free of '<'. Returns "" or the
// first problem.
std::string nesting_error(const std::string& html) {
  std::vector<std::string> open;
  size_t at = 0;
  while ((at = html.find('<', at)) != std::string::npos) {
    if (html.compare(at, 9, "<!DOCTYPE") == 0) {
      at = html.find('>', at);
      continue;
    }
    const size_t end = html.find('>', at);
    if (end == std::string::npos) return "an unclosed tag at " + std::to_string(at);
    const std::string tag = html.substr(at + 1, end - at - 1);
    at = end + 1;
    if (tag.empty()) return "an empty tag";
    if (tag[0] == '/') {
      if (open.empty() || open.back() != tag.substr(1)) {
        return "</" + tag.substr(1) + "> closes <" + (open.empty() ? "" : open.back()) + ">";
      }
      open.pop_back();
      continue;
    }
    const std::string name = tag.substr(0, tag.find_first_of(" \n/"));
    // Attributes: name="value" pairs only.
    const std::regex attributes(R"(^[A-Za-z0-9-]+(\s+[A-Za-z:_-][A-Za-z0-9:_-]*="[^"<]*")*\s*/?$)");
    if (!std::regex_match(tag, attributes)) return "a malformed tag <" + tag.substr(0, 80) + ">";
    if (tag.back() == '/' || name == "meta" || name == "br") continue;
    open.push_back(name);
    if (name == "script" || name == "style") {  // raw text up to its end tag
      const size_t close = html.find("</" + name + ">", at);
      if (close == std::string::npos) return "<" + name + "> not closed";
      if (html.substr(at, close - at).find('<') != std::string::npos) return "a '<' inside <" + name + ">";
      at = close;
    }
  }
  return open.empty() ? "" : "<" + open.back() + "> not closed";
}

RunRecord sample_run() {
  RunRecord run;
  run.title = "a run <with> \"quotes\" & more";
  run.about = {"train.tsv: 16 examples"};
  for (int s = 1; s <= 20; ++s) {
    run.step.push_back(s);
    run.loss.push_back(s == 7 ? INFINITY : 2.0 / s);
    run.scale.push_back(s < 7 ? 65536 : 32768);
    run.stepped.push_back(s != 7 && s != 12);
    if (s % 5 == 0) {
      run.log_history.push_back({{"step", s}, {"loss", 1.0 / s}, {"learning_rate", 1e-3 * s}, {"loss_scale", 32768}});
      run.log_history.push_back(
          {{"step", s}, {"eval_loss", 1.5 / s}, {"eval_accuracy", 0.5 + 0.02 * s}, {"eval_f1", 0.4}});
    }
  }
  for (int s : {0, 10, 20}) {
    StepNumerics step;
    step.step = s;
    for (const char* name : {"head.weight", "linear#0"}) {
      TensorNumerics t;
      t.name = name;
      t.kind = name[0] == 'h' ? TensorKind::kParamGrad : TensorKind::kActivationGrad;
      step.tensors.push_back(t);
    }
    run.inspected.push_back(step);
  }
  return run;
}

TEST_CASE("the HTML report is well-formed, self-contained and holds every series", "[report][html]") {
  const RunRecord run = sample_run();
  const std::string html = html_report(run);
  CHECK(nesting_error(html) == "");
  CHECK(html.rfind("<!DOCTYPE html>", 0) == 0);
  // Nothing to fetch: no src or href attribute, no url(...) but of the page's own ids, no address
  // other than the SVG namespace.
  CHECK(count_of(html, " src=") == 0);
  CHECK(count_of(html, " href=") == 0);
  CHECK(count_of(html, "url(") == count_of(html, "url(#"));  // references inside the page only
  CHECK(count_of(html, "http") == count_of(html, "xmlns=\"http://www.w3.org/2000/svg\""));
  CHECK_THAT(html, Catch::Contains("<h1>a run &lt;with&gt; &quot;quotes&quot; &amp; more</h1>"));
  for (const char* id : {"loss", "metrics", "learning-rate", "loss-scale", "flushed"}) {
    INFO(id);
    CHECK(count_of(html, std::string("<figure id=\"") + id + "\">") == 1);
  }
  // The loss chart: the per-step series, the eval series and the two skipped steps' markers.
  const std::string loss = html.substr(html.find("<figure id=\"loss\">"),
                                       html.find("<figure id=\"metrics\">") - html.find("<figure id=\"loss\">"));
  CHECK_THAT(loss,
             Catch::Contains(">train (each step)<") && Catch::Contains(">eval<") && Catch::Contains(">skipped steps<"));
  CHECK(count_of(loss, "stroke-dasharray") >= 2);
  // The heat map: one cell per tensor and inspected step, read out on hover.
  CHECK(count_of(html, "class=\"cell\"") == 6);
  CHECK_THAT(html, Catch::Contains("data-tip=\"step 10, linear#0 act_grad: 0% flushed to zero\""));
  // Without evaluations or an inspector, their figures are left out.
  RunRecord plain = run;
  plain.log_history = nlohmann::json::array({{{"step", 5}, {"learning_rate", 1e-3}}});
  plain.inspected.clear();
  const std::string short_page = html_report(plain);
  CHECK(nesting_error(short_page) == "");
  CHECK(count_of(short_page, "<figure") == 3);
  CHECK(count_of(short_page, "class=\"cell\"") == 0);
}

TEST_CASE("the nesting check finds what it is for", "[report][html]") {
  CHECK(nesting_error("<p><b>x</p></b>") != "");
  CHECK(nesting_error("<p class=x>y</p>") != "");
  CHECK(nesting_error("<script>if (a < b) {}</script>") != "");
  CHECK(nesting_error("<p>x") != "");
  CHECK(nesting_error("<p a=\"1\">x<br><meta charset=\"utf-8\"></p>") == "");
}

TEST_CASE("halfgrad train --report-to html writes report.html, none writes no log", "[report][html][cli]") {
  const testing::TempDir dir("report_to");
  data::write_tsv(data::synthetic_dataset(16, 2, 3), dir / "train.tsv");
  data::write_tsv(data::synthetic_dataset(8, 2, 4), dir / "eval.tsv");
  const std::string run = std::string("train --precision fp16 --d-model 8 --heads 2 --layers 1 --d-ff 16 --max-len 8") +
                          " --batch-size 4 --threads 1 --tokenizer bytes --epochs 2 --logging-steps 2 --train " +
                          dir / "train.tsv" + " --eval " + dir / "eval.tsv";
  const testing::ProgramResult html =
      testing::run_program("halfgrad", run + " --inspect 3 --report-to html --output-dir " + dir / "html");
  INFO(html.output);
  REQUIRE(html.exit_code == 0);
  CHECK_THAT(html.output, Catch::Contains("report: " + dir / "html" + "/report.html"));
  CHECK_FALSE(fs::exists(dir.path / "html/log.jsonl"));
  const std::string page = testing::read_bytes(dir.path / "html/report.html");
  CHECK(nesting_error(page) == "");
  for (const char* id : {"loss", "metrics", "learning-rate", "loss-scale", "flushed"}) {
    CHECK(count_of(page, std::string("<figure id=\"") + id + "\">") == 1);
  }
  // 8 steps, inspected at 3 and 6: every tensor has a cell per inspected step.
  const int cells = count_of(page, "class=\"cell\"");
  CHECK(cells > 0);
  CHECK(cells % 2 == 0);
  CHECK_THAT(page, Catch::Contains("data-tip=\"step 3, ") && Catch::Contains("data-tip=\"step 6, "));

  const testing::ProgramResult none =
      testing::run_program("halfgrad", run + " --report-to none --output-dir " + dir / "none");
  REQUIRE(none.exit_code == 0);
  CHECK_FALSE(fs::exists(dir.path / "none/log.jsonl"));
  CHECK_FALSE(fs::exists(dir.path / "none/report.html"));
  CHECK(fs::exists(dir.path / "none/checkpoint-8"));
  const testing::ProgramResult both =
      testing::run_program("halfgrad", run + " --report-to none html --output-dir " + dir / "both");
  CHECK(both.exit_code == 1);
  CHECK_THAT(both.output, Catch::Contains("report_to (--report-to) none excludes the others"));
}

}  // namespace
}  // namespace hg::report
