// clip_grad_norm: scales gradients so their global L2 norm is at most max_norm, as
// torch.nn.utils.clip_grad_norm_ (coefficient max_norm / (norm + 1e-6), applied only when < 1).
// Returns the norm before clipping. A non-finite norm (inf/NaN in some gradient) is reported
// by returning it with the gradients left untouched: scaling by a NaN coefficient would
// silently turn every gradient into NaN (torch's default). Callers skip the step.
#pragma once

#include <vector>

#include "halfgrad/autograd/tensor.h"

namespace hg::optim {

float clip_grad_norm(const std::vector<Tensor>& params, float max_norm);

// The global L2 norm of the gradients (params without a gradient count as zero, and so do the
// rows a row-sparse gradient does not store), accumulated in double in parameter order: adding
// the zeros would not change the sum, so a sparse gradient gives its dense twin's norm exactly.
float grad_norm(const std::vector<Tensor>& params);

}  // namespace hg::optim
