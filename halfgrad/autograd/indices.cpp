// Indices construction: the value count must match the shape.
#include "halfgrad/autograd/indices.h"

#include "halfgrad/base/error.h"

namespace hg {

Indices::Indices(std::vector<int32_t> v, Shape s) : values(std::move(v)), shape(s) {
  check(int64_t(values.size()) == shape.numel(), "Indices: ", values.size(), " values for shape ", shape);
}

}  // namespace hg
