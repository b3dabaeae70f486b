// Accelerator: prepare() and the step cycle with gradient accumulation.
#include "halfgrad/train/accelerator.h"

#include <unordered_map>

#include "halfgrad/autograd/ops/elementwise.h"
#include "halfgrad/autograd/tape.h"
#include "halfgrad/base/error.h"

namespace hg::train {

Accelerator::Accelerator(AcceleratorOptions options)
    : options_(std::move(options)),
      ddp_(options_.communicator ? *options_.communicator : dist::world(), options_.ddp) {
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

}  // namespace hg::train
