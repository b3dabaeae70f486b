// Accelerator: prepare() and the step cycle with gradient accumulation.
#include "halfgrad/train/accelerator.h"

#include <unordered_map>

#include "halfgrad/autograd/json_read.h"
#include "halfgrad/autograd/ops/elementwise.h"
#include "halfgrad/autograd/tape.h"
#include "halfgrad/base/error.h"
#include "halfgrad/train/evaluation.h"

namespace hg::train {

Accelerator::Accelerator(AcceleratorOptions options)
    : options_(std::move(options)), ddp_(options_.communicator ? *options_.communicator : dist::world(), options_.ddp) {
  check(options_.gradient_accumulation_steps >= 1, "Accelerator: gradient_accumulation_steps must be >= 1, got ",
        options_.gradient_accumulation_steps);
  options_.mixed_precision.validate();  // early, not only at prepare()
}

void Accelerator::prepare_module(nn::Module& model, optim::Optimizer& optimizer, optim::LrScheduler* scheduler) {
  check(mp_ == nullptr, "Accelerator::prepare: already prepared");
  model_ = &model;
  optimizer_ = &optimizer;
  scheduler_ = scheduler;
  mp_ = std::make_unique<optim::MixedPrecision>(model, options_.mixed_precision);
  if (ddp_.size() > 1) {
    mp_->set_gradient_reduction([this](optim::Optimizer& o) {
      ddp_.reduce_gradients(o.parameters());
      if (Fp8Scaling* fp8 = mp_->fp8()) ddp_.reduce_amaxes(*fp8);
    });
  }
  if (optim::MasterWeights* masters = mp_->masters()) {
    // Re-point the optimizer from the (now f16) model parameters to their f32 masters.
    std::unordered_map<const TensorImpl*, Tensor> master_of;
    for (size_t i = 0; i < masters->model_params().size(); ++i) {
      master_of.emplace(&masters->model_params()[i].impl(), masters->masters()[i]);
    }
    for (optim::ParamGroup& group : optimizer.param_groups()) {
      for (Tensor& p : group.params) {
        if (const auto it = master_of.find(&p.impl()); it != master_of.end()) p = it->second;
      }
    }
  }
}

Autocast Accelerator::autocast() const {
  check(mp_ != nullptr, "Accelerator: call prepare() first");
  return mp_->autocast();
}

void Accelerator::backward(const Tensor& loss) {
  check(mp_ != nullptr, "Accelerator: call prepare() first");
  const int64_t n = options_.gradient_accumulation_steps;
  const Tensor averaged = n > 1 ? mul_scalar(loss, 1.0f / float(n)) : loss;
  hg::backward(mp_->scale(averaged));
  ++micro_step_;
}

bool Accelerator::sync_gradients() const { return micro_step_ % options_.gradient_accumulation_steps == 0; }

float Accelerator::clip_grad_norm(float max_norm) { return mp_->clip_gradients(*optimizer_, max_norm); }

bool Accelerator::step() {
  check(mp_ != nullptr, "Accelerator: call prepare() first");
  if (ddp_.size() > 1) {
    // Every rank unscaled the same reduced bits, so found_inf agrees by construction; a rank
    // that disagrees would diverge silently, so it is checked (one byte per rank).
    mp_->unscale_gradients(*optimizer_);
    ddp_.check_agreement(mp_->scaler().found_inf(), "whether the gradients hold inf/NaN (found_inf)");
  }
  const bool stepped = mp_->finish_step(*optimizer_);
  skipped_ = !stepped;
  if (stepped && scheduler_ != nullptr) scheduler_->step();
  optimizer_->zero_grad();
  model_->zero_grad();
  return stepped;
}

void Accelerator::register_generator(const std::string& name, Generator& generator) {
  check(generators_.emplace(name, &generator).second, "Accelerator::register_generator: '", name,
        "' is registered already");
}

void Accelerator::register_loop_state(LoopState state) {
  check(!loop_state_, "Accelerator::register_loop_state: registered already");
  loop_state_ = std::move(state);
}

io::Checkpoint Accelerator::state_dict(bool model_only) const {
  check(mp_ != nullptr, "Accelerator: call prepare() first");
  io::Checkpoint state;
  state.model_only = model_only;
  save_model_state(*mp_, state);
  if (!model_only) {
    state.optimizer = optimizer_->state_dict();
    if (scheduler_ != nullptr) state.scheduler = scheduler_->state_dict();
    state.scaler = mp_->scaler().state_dict();
    state.rng = nlohmann::json::object();
    for (const auto& [name, gen] : generators_) state.rng[name] = {{"seed", gen->seed()}, {"offset", gen->offset()}};
  }
  if (loop_state_) state.trainer_state = loop_state_->save();
  return state;
}

void check_resumable(const io::Checkpoint& c, const std::string& dir) {
  check(!c.model_only, dir,
        ": a --save-only-model checkpoint (save_only_model) holds the weights alone, without the "
        "optimizer, scheduler, loss scaler and RNG state a resume needs: evaluate or predict with it, or resume from "
        "a checkpoint saved without --save-only-model");
}

void Accelerator::load_state_dict(const io::Checkpoint& state, const std::string& dir) {
  check(mp_ != nullptr, "Accelerator: call prepare() first");
  check_resumable(state, dir);
  load_model_state(*mp_, *model_, state, dir);
  for (const auto& [name, tensor] : state.optimizer.tensors) {
    check(tensor.all_finite(), dir, "/optimizer.safetensors: tensor '", name, "' holds inf or NaN");
  }
  optimizer_->load_state_dict(state.optimizer);
  if (scheduler_ != nullptr) scheduler_->load_state_dict(state.scheduler);
  mp_->scaler().load_state_dict(state.scaler);
  for (const auto& [name, gen] : generators_) {
    const nlohmann::json& rng = state.rng.at(name);
    const std::string at = dir + "/rng_state.json: '" + name + "'";
    *gen = Generator(json_read::as<uint64_t>(rng.at("seed"), at + " seed"),
                     json_read::as<uint64_t>(rng.at("offset"), at + " offset"));
  }
  if (loop_state_) loop_state_->load(state.trainer_state, dir + "/trainer_state.json");
}

void Accelerator::check_replicas(int64_t step) {
  check(mp_ != nullptr, "Accelerator: call prepare() first");
  if (ddp_.size() == 1) return;
  const io::Checkpoint state = state_dict();
  std::vector<std::pair<std::string, Tensor>> tensors;
  // The model as it computes (16-bit under O2), then the weights of the state: its f32 masters.
  for (const auto& [name, t] : model_->named_parameters()) tensors.emplace_back("model " + name, t);
  if (mp_->masters() != nullptr) {
    for (const auto& [name, t] : state.model) tensors.emplace_back("master " + name, t);
  }
  for (const auto& [name, t] : state.optimizer.tensors) tensors.emplace_back("optimizer " + name, t);
  nlohmann::json scalars = {{"optimizer", state.optimizer.meta},
                            {"scheduler", state.scheduler},
                            {"scaler", state.scaler},
                            {"rng", state.rng}};
  if (!state.fp8.is_null()) scalars["fp8_scaling"] = state.fp8;
  if (loop_state_) {
    nlohmann::json loop = state.trainer_state;
    for (const std::string& key : loop_state_->per_rank_keys) loop.erase(key);
    scalars["trainer_state"] = loop;
  }
  ddp_.check_replicas(tensors, scalars, step);
}

}  // namespace hg::train
