// The tape's bookkeeping: recording, the reverse walk, gradient accumulation (the one place
// where broadcast gradients are summed back and rounded to the tensor's dtype), observers and
// anomaly detection.
#include "halfgrad/autograd/tape.h"

#include <algorithm>
#include <map>

#include "halfgrad/autograd/ops/elementwise.h"
#include "halfgrad/autograd/ops/reduce.h"
#include "halfgrad/autograd/ops/shape_ops.h"
#include "halfgrad/autograd/sparse_rows.h"
#include "halfgrad/base/error.h"

namespace hg {
namespace {

thread_local Tape t_tape;
thread_local bool t_grad_enabled = true;
// 0: off; 1: record the first anomaly; 2: throw on it.
thread_local int t_anomaly_mode = 0;
thread_local Anomaly t_anomaly;
// The op whose backward is running, named in observer calls and anomaly reports.
thread_local const char* t_backward_op = "";
thread_local std::map<int, GradObserver> t_observers;
thread_local int t_next_observer = 0;
thread_local std::map<int, ForwardObserver> t_forward_observers;

void report_anomaly(const char* op, const Tensor& t, const char* phase) {
  if (!t_anomaly.op.empty()) return;  // keep the first
  t_anomaly = {op, t.name(), phase, t.shape()};
  if (t_anomaly_mode == 2) throw Error(t_anomaly.message());
}

}  // namespace

void Tape::clear() {
  nodes_.clear();
  ++generation_;
}

Tape& active_tape() { return t_tape; }
bool grad_enabled() { return t_grad_enabled; }

NoGrad::NoGrad() : previous_(t_grad_enabled) { t_grad_enabled = false; }
NoGrad::~NoGrad() { t_grad_enabled = previous_; }

Tensor record(const char* op, Tensor output, const std::vector<Tensor>& inputs, BackwardFn backward) {
  if (t_anomaly_mode != 0 && !output.all_finite()) report_anomaly(op, output, "forward");
  for (const auto& [id, observer] : t_forward_observers) observer(op, output);
  if (!t_grad_enabled) return output;
  Node node{op, {}, output, std::move(backward)};
  for (const Tensor& input : inputs) {
    if (input.defined() && input.requires_grad()) node.inputs.push_back(input);
  }
  if (node.inputs.empty()) return output;
  TensorImpl& impl = output.impl();
  impl.requires_grad = true;
  impl.node = t_tape.size();
  impl.generation = t_tape.generation();
  t_tape.nodes_.push_back(std::move(node));
  return output;
}

void accumulate_grad(const Tensor& input, const Tensor& grad) {
  if (!input.requires_grad()) return;
  Tensor g = grad;
  if (!(g.shape() == input.shape())) g = sum_to(g, input.shape());
  if (g.dtype() != input.dtype()) g = cast(g, input.dtype());
  if (t_anomaly_mode != 0 && !g.all_finite()) report_anomaly(t_backward_op, input, "backward");
  for (const auto& [id, observer] : t_observers) observer(t_backward_op, input, g);
  TensorImpl& impl = input.impl();
  // Out of place: a gradient may be shared (add passes one gradient to both inputs).
  if (impl.sparse_grad) {  // a sparse gradient met a dense one: the sum is dense
    impl.grad = add(to_dense(*impl.sparse_grad, input.shape()), g).impl_ptr();
    impl.sparse_grad.reset();
  } else if (impl.grad) {
    impl.grad = add(Tensor(impl.grad), g).impl_ptr();
  } else {
    // A gradient that outlives backward (a leaf's, or a retained one) gets storage of its own
    // unless it was made just above: the one passed in may be shared -- add() hands one tensor
    // to both inputs, reshape() a view of its output's gradient, backward() the caller's seed --
    // and GradScaler::unscale and clip_grad_norm write gradients in place, so two parameters
    // sharing one buffer would be unscaled or clipped twice. (torch's AccumulateGrad also copies
    // a first gradient that others still reference.)
    const bool kept = input.is_leaf() || impl.retains_grad;
    impl.grad = (kept && g.same(grad) ? g.clone() : g).impl_ptr();
  }
}

void accumulate_grad(const Tensor& input, SparseRows grad) {
  if (!input.requires_grad()) return;
  check(input.ndim() == 2 && grad.values.ndim() == 2 && grad.values.size(1) == input.size(1),
        "accumulate_grad: sparse rows of shape ", grad.values.shape(), " for tensor '", input.name(), "' of shape ",
        input.shape());
  // Ops take dense gradients: only a leaf (a parameter) keeps a sparse one.
  if (!input.is_leaf()) return accumulate_grad(input, to_dense(grad, input.shape()));
  check(input.impl().hooks.empty(), "accumulate_grad: tensor '", input.name(),
        "' has hooks, which take dense gradients, and receives a row-sparse one (make its embedding dense)");
  if (grad.values.dtype() != input.dtype()) grad.values = cast(grad.values, input.dtype());
  if (t_anomaly_mode != 0 && !grad.values.all_finite()) report_anomaly(t_backward_op, input, "backward");
  for (const auto& [id, observer] : t_observers) observer(t_backward_op, input, grad.values);
  TensorImpl& impl = input.impl();
  if (impl.grad) {
    impl.grad = add(Tensor(impl.grad), to_dense(grad, input.shape())).impl_ptr();
  } else if (impl.sparse_grad) {
    impl.sparse_grad = std::make_shared<SparseRows>(add(*impl.sparse_grad, grad));
  } else {
    Tensor(input).set_sparse_grad(std::move(grad));
  }
}

namespace {

Tensor run_hooks(const Tensor& t, Tensor grad) {
  for (const GradHook& hook : t.impl().hooks) {
    Tensor replaced = hook(grad);
    if (replaced.defined()) grad = replaced;
  }
  return grad;
}

}  // namespace

void backward(const Tensor& loss, const Tensor& grad, bool retain_graph) {
  if (!loss.requires_grad()) {
    fail("backward: the loss", loss.name().empty() ? "" : " '" + loss.name() + "'",
         " does not require grad (no input of the graph requires grad, or it was computed under NoGrad)");
  }
  Tensor seed = grad;
  if (!seed.defined()) {
    check(loss.numel() == 1, "backward: a seed gradient is required for a non-scalar loss of shape ", loss.shape());
    seed = Tensor::ones(loss.shape(), loss.dtype());
  }
  check(seed.shape() == loss.shape(), "backward: seed gradient of shape ", seed.shape(), " for a loss of shape ",
        loss.shape());

  Tape& tape = t_tape;
  const TensorImpl& loss_impl = loss.impl();
  const bool leaf = loss_impl.node < 0;
  check(leaf || loss_impl.generation == tape.generation(),
        "backward: the graph of this loss was already freed by an earlier backward; pass "
        "retain_graph = true to the first backward to run it twice");

  NoGrad no_grad;  // backward closures use ops; they must not record
  t_backward_op = "backward";
  if (leaf) {
    accumulate_grad(loss, seed);
  } else {  // the seed is given, not produced: observers do not see it
    Tensor g = seed.dtype() == loss.dtype() ? seed : cast(seed, loss.dtype());
    loss.impl().grad = loss.impl().grad ? add(loss.grad(), g).impl_ptr() : g.impl_ptr();
  }
  std::vector<Tensor> leaves;
  for (int64_t i = leaf ? -1 : loss_impl.node; i >= 0; --i) {
    Node& node = tape.nodes_[size_t(i)];
    TensorImpl& out = node.output.impl();
    if (!out.grad) continue;  // nothing flowed into this op's output
    const Tensor grad_output = run_hooks(node.output, Tensor(out.grad));
    t_backward_op = node.op;
    node.backward(grad_output);
    for (const Tensor& input : node.inputs) {
      if (input.is_leaf()) leaves.push_back(input);
    }
    if (!out.retains_grad) out.grad.reset();  // intermediate gradients are not kept (as torch)
  }
  if (leaf) leaves.push_back(loss);
  // Leaf hooks see the complete gradient, once each.
  std::sort(leaves.begin(), leaves.end(), [](const Tensor& a, const Tensor& b) { return a.impl_ptr() < b.impl_ptr(); });
  leaves.erase(std::unique(leaves.begin(), leaves.end(), [](const Tensor& a, const Tensor& b) { return a.same(b); }),
               leaves.end());
  for (const Tensor& t : leaves) {
    if (!t.impl().hooks.empty() && t.impl().grad) t.impl().grad = run_hooks(t, t.grad()).impl_ptr();
  }
  t_backward_op = "";
  if (!retain_graph) tape.clear();
}

int add_grad_observer(GradObserver observer) {
  t_observers[t_next_observer] = std::move(observer);
  return t_next_observer++;
}

void remove_grad_observer(int id) { t_observers.erase(id); }

int add_forward_observer(ForwardObserver observer) {
  t_forward_observers[t_next_observer] = std::move(observer);
  return t_next_observer++;
}

void remove_forward_observer(int id) { t_forward_observers.erase(id); }

std::string Anomaly::message() const {
  return "anomaly: " + phase + " of op '" + op + "' produced inf/NaN in " +
         (tensor.empty() ? std::string("a tensor") : "'" + tensor + "'") + " of shape " + shape.str();
}

DetectAnomaly::DetectAnomaly(bool throw_on_anomaly) : previous_(t_anomaly_mode) {
  t_anomaly_mode = throw_on_anomaly ? 2 : 1;
  reset_anomaly();
}
DetectAnomaly::~DetectAnomaly() { t_anomaly_mode = previous_; }

bool anomaly_detection_enabled() { return t_anomaly_mode != 0; }
const Anomaly& last_anomaly() { return t_anomaly; }
void reset_anomaly() { t_anomaly = {}; }

}  // namespace hg
