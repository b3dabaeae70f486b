// Row-sparse gradients: densifying, adding two, and the row reads and writes of optimizer steps.
#include "autograd/sparse_rows.h"

#include <algorithm>
#include <cstring>
#include <iterator>
#include <vector>

#include "autograd/kernels/cast.h"
#include "autograd/ops/elementwise.h"
#include "base/error.h"
#include "base/parallel.h"

namespace hg {
namespace {

size_t row_bytes(const Tensor& t) { return size_t(t.size(1)) * element_size(t.dtype()); }

// The rows of g placed at their positions in `rows` (a sorted superset of g.rows), zeros in the
// others: byte copies, so no value changes.
Tensor spread(const SparseRows& g, const std::vector<int64_t>& rows) {
  Tensor out = Tensor::zeros({int64_t(rows.size()), g.values.size(1)}, g.values.dtype());
  const size_t bytes = row_bytes(g.values);
  size_t k = 0;
  for (size_t i = 0; i < g.rows.size(); ++i) {
    while (rows[k] != g.rows[i]) ++k;
    std::memcpy(out.bytes() + k * bytes, g.values.bytes() + i * bytes, bytes);
  }
  return out;
}

}  // namespace

Tensor to_dense(const SparseRows& g, const Shape& shape) {
  check(shape.ndim() == 2 && g.values.ndim() == 2 && g.values.size(1) == shape[1] &&
            g.values.size(0) == int64_t(g.rows.size()),
        "to_dense: sparse rows of shape ", g.values.shape(), " (", g.rows.size(), " ids) into ", shape);
  Tensor out = Tensor::zeros(shape, g.values.dtype());
  const size_t bytes = row_bytes(g.values);
  for (size_t i = 0; i < g.rows.size(); ++i) {
    std::memcpy(out.bytes() + size_t(g.rows[i]) * bytes, g.values.bytes() + i * bytes, bytes);
  }
  return out;
}

SparseRows add(const SparseRows& a, const SparseRows& b) {
  check(a.values.dtype() == b.values.dtype() && a.values.size(1) == b.values.size(1), "add: sparse rows of shape ",
        a.values.shape(), " ", dtype_name(a.values.dtype()), " and ", b.values.shape(), " ",
        dtype_name(b.values.dtype()));
  std::vector<int64_t> rows;
  rows.reserve(a.rows.size() + b.rows.size());
  std::set_union(a.rows.begin(), a.rows.end(), b.rows.begin(), b.rows.end(), std::back_inserter(rows));
  // A row present on one side is added to +0 too: the dense sum turns a -0 into +0 there.
  Tensor values = add(spread(a, rows), spread(b, rows));
  return {std::move(rows), std::move(values)};
}

std::vector<float> read_rows(const Tensor& t, std::span<const int64_t> rows) {
  check(t.ndim() == 2, "read_rows: tensor '", t.name(), "' of shape ", t.shape(), " is not 2-D");
  const int64_t c = t.size(1);
  std::vector<float> out(rows.size() * size_t(c));
  const int64_t n = int64_t(rows.size());
  maybe_parallel(use_team(double(n) * double(c), kParallelElements), [&] {
#pragma omp for schedule(static)
    for (int64_t i = 0; i < n; ++i) t.read(std::span(out).subspan(size_t(i * c), size_t(c)), rows[size_t(i)] * c);
  });
  return out;
}

void write_rows(const Tensor& t, std::span<const int64_t> rows, std::span<const float> values) {
  check(t.ndim() == 2 && values.size() == rows.size() * size_t(t.size(1)), "write_rows: ", values.size(),
        " values for ", rows.size(), " rows of tensor '", t.name(), "' of shape ", t.shape());
  const int64_t c = t.size(1), n = int64_t(rows.size());
  if (t.dtype() == DType::f32) {
    maybe_parallel(use_team(double(n) * double(c), kParallelElements), [&] {
#pragma omp for schedule(static)
      for (int64_t i = 0; i < n; ++i) t.assign_nearest(values.subspan(size_t(i * c), size_t(c)), rows[size_t(i)] * c);
    });
    return;
  }
  // f16/bf16: rounded a block of rows at a time (nearest even, as assign_nearest), then the rows'
  // bits copied into place; a conversion call per row of a narrow table cost more than its row.
  const int64_t per = std::max<int64_t>(1, 4096 / std::max<int64_t>(c, 1)), blocks = (n + per - 1) / per;
  maybe_parallel(use_team(double(n) * double(c), kParallelElements), [&] {
    std::vector<uint16_t> bits(size_t(per * c));
#pragma omp for schedule(static)
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t first = b * per, count = std::min(per, n - first);
      kernels::store_rounded(bits.data(), t.dtype(), 0, values.data() + first * c, count * c, {}, 0, 0);
      for (int64_t r = 0; r < count; ++r) {
        std::memcpy(t.bytes() + size_t(rows[size_t(first + r)] * c) * sizeof(uint16_t), bits.data() + r * c,
                    size_t(c) * sizeof(uint16_t));
      }
    }
  });
}

}  // namespace hg
