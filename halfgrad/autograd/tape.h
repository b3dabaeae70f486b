// The tape: reverse-mode autograd as a list of op records in execution order. Ops run eagerly;
// an op whose inputs require gradients appends one Node (its inputs, its output, and a closure
// mapping the output's gradient to the inputs' gradients). backward() walks the list in
// reverse (execution order is already a topological order), accumulating into `.grad`, and
// clears it. There is one tape per thread; a NoGrad guard stops recording.
//
// Gradients have the dtype of the tensor they belong to: the gradient of an f16 activation is
// rounded to f16 when it is accumulated, and underflows exactly where a GPU's would.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "halfgrad/autograd/sparse_rows.h"
#include "halfgrad/autograd/tensor.h"

namespace hg {

using BackwardFn = std::function<void(const Tensor& grad_output)>;

struct Node {
  const char* op;              // static name, e.g. "matmul"
  std::vector<Tensor> inputs;  // the inputs that require gradients
  Tensor output;
  BackwardFn backward;
};

class Tape {
 public:
  int64_t size() const { return int64_t(nodes_.size()); }
  const Node& node(int64_t i) const { return nodes_[size_t(i)]; }
  uint64_t generation() const { return generation_; }
  void clear();  // frees every node; tensors from earlier generations can no longer backward

 private:
  friend Tensor record(const char*, Tensor, const std::vector<Tensor>&, BackwardFn);
  friend void backward(const Tensor&, const Tensor&, bool);
  std::vector<Node> nodes_;
  uint64_t generation_ = 1;
};

Tape& active_tape();

// Whether ops record (false inside NoGrad).
bool grad_enabled();

class NoGrad {
 public:
  NoGrad();
  ~NoGrad();
  NoGrad(const NoGrad&) = delete;
  NoGrad& operator=(const NoGrad&) = delete;

 private:
  bool previous_;
};

// The one exit of every op: checks `output` for inf/NaN when anomaly detection is on, and, if
// gradients are enabled and any input requires them, records the op and marks `output` as
// requiring grad. Returns `output`.
Tensor record(const char* op, Tensor output, const std::vector<Tensor>& inputs, BackwardFn backward);
inline Tensor record(const char* op, Tensor output, std::initializer_list<Tensor> inputs, BackwardFn backward) {
  return record(op, std::move(output), std::vector<Tensor>(inputs), std::move(backward));
}

// Runs backward from `loss`: its seed gradient is `grad` (default: 1 for a one-element loss).
// Without retain_graph the tape is cleared afterwards, and a second backward through the same
// graph is an error.
void backward(const Tensor& loss, const Tensor& grad = {}, bool retain_graph = false);

// Adds `grad` into input's `.grad`, for backward closures: sums broadcast dimensions back to
// the input's shape, rounds to the input's dtype, and shows the gradient to the observers.
void accumulate_grad(const Tensor& input, const Tensor& grad);
// The same for a row-sparse gradient (sparse_rows.h) of a 2-D input: a leaf keeps it sparse while
// every contribution is sparse (their sum is SparseRows' add), a dense contribution makes the sum
// dense, and a non-leaf gets it densified. Observers see its (R, C) values.
void accumulate_grad(const Tensor& input, SparseRows grad);

// Global gradient observers: called for every gradient accumulated during backward with the
// op that produced it, the tensor it belongs to and the gradient (already in that tensor's
// dtype). The numerics inspector counts underflow per layer through this.
using GradObserver = std::function<void(std::string_view op, const Tensor& tensor, const Tensor& grad)>;
int add_grad_observer(GradObserver observer);  // returns an id for remove_grad_observer
void remove_grad_observer(int id);

// Global forward observers, the forward twin of the gradient observers: called by record() for
// the output of every op, recording or not (NoGrad), with the op's name. The numerics inspector
// reads activations through this; an observer must not run ops that record.
using ForwardObserver = std::function<void(std::string_view op, const Tensor& output)>;
int add_forward_observer(ForwardObserver observer);  // returns an id for remove_forward_observer
void remove_forward_observer(int id);

// Anomaly detection: while a guard lives, the first op whose forward output or backward
// gradient holds inf/NaN is reported (op name, tensor name, shape, phase): thrown as hg::Error
// (like torch.autograd.detect_anomaly) or, with throw_on_anomaly = false, recorded for
// last_anomaly() so a GradScaler can skip the step and still say where the overflow began.
struct Anomaly {
  std::string op, tensor, phase;  // phase: "forward" or "backward"
  Shape shape;
  std::string message() const;
};

class DetectAnomaly {
 public:
  explicit DetectAnomaly(bool throw_on_anomaly = true);
  ~DetectAnomaly();
  DetectAnomaly(const DetectAnomaly&) = delete;
  DetectAnomaly& operator=(const DetectAnomaly&) = delete;

 private:
  int previous_;
};

bool anomaly_detection_enabled();
// The first anomaly seen since the last reset (empty op if none).
const Anomaly& last_anomaly();
void reset_anomaly();

}  // namespace hg
