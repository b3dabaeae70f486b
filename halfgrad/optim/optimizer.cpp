// The shared step loop: widen, update in f32, round once into the parameter's dtype; for a
// row-sparse gradient, the same on the touched rows of the parameter and of its state.
#include "halfgrad/optim/optimizer.h"

#include <algorithm>
#include <cstring>

#include "halfgrad/autograd/allocator.h"
#include "halfgrad/autograd/json_read.h"
#include "halfgrad/autograd/sparse_rows.h"
#include "halfgrad/autograd/tape.h"
#include "halfgrad/base/error.h"
#include "halfgrad/base/parallel.h"
#include "halfgrad/precision/convert.h"

namespace hg::optim {

Optimizer::Optimizer(std::vector<ParamGroup> groups) : groups_(std::move(groups)) {
  size_t n = 0;
  for (const ParamGroup& g : groups_) {
    check(g.lr >= 0.0f, "optimizer: learning rate must be >= 0, got ", g.lr);
    check(g.weight_decay >= 0.0f, "optimizer: weight_decay must be >= 0, got ", g.weight_decay);
    n += g.params.size();
  }
  state_.resize(n);
  param_steps_.assign(n, 0);
}

std::vector<Tensor> Optimizer::parameters() const {
  std::vector<Tensor> out;
  for (const ParamGroup& g : groups_) out.insert(out.end(), g.params.begin(), g.params.end());
  return out;
}

void Optimizer::step() {
  NoGrad no_grad;
  size_t index = 0;
  for (const ParamGroup& group : groups_) {
    for (const Tensor& param : group.params) {
      const size_t i = index++;
      if (const SparseRows* sparse = param.sparse_grad()) {
        update_rows(param, *sparse, group, state_[i], ++param_steps_[i], i);
        continue;
      }
      if (!param.grad().defined()) continue;
      std::vector<float> p = param.to_vector();
      const std::vector<float> g = param.grad().to_vector();
      const std::vector<float> before = update_rounding_ == UpdateRounding::kKahan ? p : std::vector<float>();
      update(p, g, group, state_[i], ++param_steps_[i]);
      write_update(param, {}, p, before, state_[i], i);
    }
  }
  ++steps_;
}

void Optimizer::write_update(const Tensor& param, std::span<const int64_t> rows, std::vector<float>& p,
                             const std::vector<float>& before, std::map<std::string, std::vector<float>>& state,
                             size_t index) const {
  const bool narrow = param.dtype() != DType::f32;
  if (narrow && update_rounding_ == UpdateRounding::kKahan) {
    std::vector<float>& c = state["kahan"];
    c.resize(p.size(), 0.0f);                                        // (the first step: no update is owed yet)
    for (size_t k = 0; k < p.size(); ++k) c[k] += p[k] - before[k];  // c + u: what is owed
    for (size_t k = 0; k < p.size(); ++k) p[k] = before[k] + c[k];
    round_to(storage_format(param.dtype()), p);  // w' = round(w + c + u), nearest even
    for (size_t k = 0; k < p.size(); ++k) c[k] -= p[k] - before[k];
    round_to(storage_format(param.dtype()), c);  // the buffer holds values of the parameter's dtype
  }
  if (narrow && update_rounding_ == UpdateRounding::kStochastic) {
    // Events: the step in the high bits, the element's index in the low 36; the seed mixed with
    // the parameter's place, so no two draws of a run share a (seed, event) pair.
    const precision::RoundingOptions sr{.mode = precision::Rounding::kStochastic};
    const uint64_t seed = rounding_seed_ ^ (0x9E3779B97F4A7C15ull * (index + 1));
    const uint64_t events = uint64_t(steps_) << 36;
    if (rows.empty())
      param.assign_rounded(p, sr, seed, events);
    else
      write_rows(param, rows, p, sr, seed, events);
    return;
  }
  if (rows.empty())
    param.assign_nearest(p);
  else
    write_rows(param, rows, p);
}

void Optimizer::create_row_state(const Tensor& param, const ParamGroup& group,
                                 std::map<std::string, std::vector<float>>& state) const {
  std::vector<std::string> names = state_names(group);
  if (param.dtype() != DType::f32 && update_rounding_ == UpdateRounding::kKahan) names.push_back("kahan");
  for (const std::string& name : names) {
    std::vector<float>& buffer = state[name];
    if (!buffer.empty()) continue;
    // Zero in the rows no step has touched; on 2 MiB pages: rows are visited at random.
    buffer.reserve(size_t(param.numel()));
    advise_huge_pages(buffer.data(), size_t(param.numel()) * sizeof(float));
    buffer.assign(size_t(param.numel()), 0.0f);
  }
}

void Optimizer::update_rows(const Tensor& param, const SparseRows& grad, const ParamGroup& group,
                            std::map<std::string, std::vector<float>>& state, int64_t step, size_t index) {
  const int64_t c = param.size(1), n = int64_t(grad.rows.size());
  if (n == 0) return;
  create_row_state(param, group, state);  // before the chunks: each gathers every buffer update() keeps
  // In chunks of about 16K elements, so that a chunk's rows are still in L2 when they are
  // scattered back. Chunks share no row and every buffer exists before they run, so they run on
  // a team (update() inside gets a team of one: halfgrad/base/parallel.h), and how the rows are
  // chunked, and on which thread a chunk runs, cannot change a result.
  const int64_t per = std::max<int64_t>(1, (int64_t(1) << 14) / c);
  const int64_t chunks = (n + per - 1) / per;
  // Gathers chunk `k`'s rows of the parameter, its gradient and its state into `rows_state`,
  // updates them, writes the parameter's rows and scatters the state's rows back.
  const auto update_chunk = [&](int64_t k, std::map<std::string, std::vector<float>>& rows_state) {
    const std::span<const int64_t> rows(grad.rows.data() + k * per, size_t(std::min(per, n - k * per)));
    rows_state.clear();
    for (const auto& [name, buffer] : state) {
      std::vector<float>& gathered = rows_state[name];
      gathered.resize(rows.size() * size_t(c));
      for (size_t r = 0; r < rows.size(); ++r) {
        std::copy_n(buffer.begin() + rows[r] * c, c, gathered.begin() + ptrdiff_t(r) * c);
      }
    }
    std::vector<float> p = read_rows(param, rows);
    std::vector<float> g(rows.size() * size_t(c));
    grad.values.read(g, k * per * c);
    const std::vector<float> before = update_rounding_ == UpdateRounding::kKahan ? p : std::vector<float>();
    update(p, g, group, rows_state, step);
    write_update(param, rows, p, before, rows_state, index);
    for (const auto& [name, gathered] : rows_state) {
      std::vector<float>& buffer = state.at(name);  // state_names() lists every buffer update() keeps
      for (size_t r = 0; r < rows.size(); ++r) {
        std::copy_n(gathered.begin() + ptrdiff_t(r) * c, c, buffer.begin() + rows[r] * c);
      }
    }
  };
  maybe_parallel(use_team(double(n) * double(c), kParallelElements), [&] {
    std::map<std::string, std::vector<float>> rows_state;
#pragma omp for schedule(static)
    for (int64_t k = 0; k < chunks; ++k) update_chunk(k, rows_state);
  });
}

void Optimizer::zero_grad() {
  for (ParamGroup& g : groups_) {
    for (Tensor& p : g.params) p.zero_grad();
  }
}

OptimizerState Optimizer::state_dict() const {
  OptimizerState out;
  out.meta["steps"] = steps_;
  out.meta["param_steps"] = param_steps_;
  out.meta["hyperparameters"] = hyperparameters();
  nlohmann::json groups = nlohmann::json::array();
  for (const ParamGroup& g : groups_)
    groups.push_back({{"lr", g.lr}, {"weight_decay", g.weight_decay}, {"params", g.params.size()}});
  out.meta["param_groups"] = groups;
  for (size_t i = 0; i < state_.size(); ++i) {
    for (const auto& [name, values] : state_[i]) {
      out.tensors["state." + std::to_string(i) + "." + name] = Tensor::from_vector(values, {int64_t(values.size())});
    }
  }
  return out;
}

void Optimizer::load_state_dict(const OptimizerState& state) {
  const auto& groups = state.meta.at("param_groups");
  check(groups.size() == groups_.size(), "optimizer state: ", groups.size(), " parameter groups saved, ",
        groups_.size(), " in this optimizer");
  for (size_t k = 0; k < groups_.size(); ++k) {
    const std::string at = "optimizer state: group " + std::to_string(k) + ": key";
    const size_t saved = json_read::as<size_t>(groups[k].at("params"), at + " 'params'");
    check(saved == groups_[k].params.size(), "optimizer state: group ", k, " saved ", saved,
          " parameters, this optimizer has ", groups_[k].params.size());
    json_read::read(groups[k].at("lr"), at + " 'lr'", groups_[k].lr);
    json_read::read(groups[k].at("weight_decay"), at + " 'weight_decay'", groups_[k].weight_decay);
  }
  const std::vector<Tensor> params = parameters();
  std::vector<std::map<std::string, std::vector<float>>> restored(params.size());
  for (const auto& [key, tensor] : state.tensors) {
    const size_t dot1 = key.find('.'), dot2 = key.find('.', dot1 + 1);
    check(key.rfind("state.", 0) == 0 && dot2 != std::string::npos, "optimizer state: unexpected tensor '", key, "'");
    const size_t i = std::stoul(key.substr(dot1 + 1, dot2 - dot1 - 1));
    check(i < params.size(), "optimizer state: '", key, "' names parameter ", i, " of ", params.size());
    check(tensor.numel() == params[i].numel(), "optimizer state: '", key, "' has ", tensor.numel(),
          " values for a parameter of shape ", params[i].shape());
    restored[i][key.substr(dot2 + 1)] = tensor.to_vector();
  }
  state_ = std::move(restored);
  json_read::read(state.meta.at("steps"), "optimizer state: key 'steps'", steps_);
  const nlohmann::json& param_steps = state.meta.at("param_steps");
  json_read::expect(param_steps, param_steps.is_array(), "optimizer state: key 'param_steps'", "an array");
  param_steps_.clear();
  for (const nlohmann::json& n : param_steps)
    param_steps_.push_back(json_read::as<int64_t>(n, "optimizer state: param_steps"));
  check(param_steps_.size() == params.size(), "optimizer state: step counts for ", param_steps_.size(),
        " parameters, this optimizer has ", params.size());
}

}  // namespace hg::optim
