// cast, reshape and the copying layout ops. Layout ops move raw elements (no rounding); a
// permutation is one gather loop that transpose, permute and their backwards share.
#include "halfgrad/autograd/ops/shape_ops.h"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "halfgrad/autograd/autocast.h"
#include "halfgrad/autograd/ops/map.h"
#include "halfgrad/autograd/tape.h"
#include "halfgrad/base/error.h"

namespace hg {

Tensor cast(const Tensor& x, DType dtype) {
  if (x.dtype() == dtype) return x;
  Tensor y = detail::map<1>(x.shape(), dtype, {x}, [](float* out, const std::array<const float*, 1>& in, int64_t n) {
    std::memcpy(out, in[0], size_t(n) * sizeof(float));
  });
  const DType source = x.dtype();
  return record("cast", y, {x}, [x, source](const Tensor& dy) { accumulate_grad(x, cast(dy, source)); });
}

Tensor reshape(const Tensor& x, const Shape& shape) {
  check(shape.numel() == x.numel(), "reshape: cannot view shape ", x.shape(), " (", x.numel(), " elements) as ", shape,
        " (", shape.numel(), " elements)");
  auto impl = std::make_shared<TensorImpl>();
  impl->shape = shape;
  impl->dtype = x.dtype();
  impl->storage = x.impl().storage;
  const Shape original = x.shape();
  return record("reshape", Tensor(std::move(impl)), {x},
                [x, original](const Tensor& dy) { accumulate_grad(x, dy.reshape(original)); });
}

namespace {

// out[j] = x[source(j)] where out's dims are x's dims reordered by `order`. Trailing dims that
// keep their place are copied as one contiguous run (attention's (0, 2, 1, 3) moves rows of D).
Tensor gather_permuted(const Tensor& x, const std::vector<int>& order) {
  const int nd = x.ndim();
  std::array<int64_t, Shape::kMaxDims> in_stride{}, out_dims{};
  int64_t s = 1;
  for (int i = nd - 1; i >= 0; --i) {
    in_stride[size_t(i)] = s;
    s *= x.shape()[i];
  }
  for (int i = 0; i < nd; ++i) out_dims[size_t(i)] = x.shape()[order[size_t(i)]];
  Tensor out = Tensor::empty(Shape(std::span<const int64_t>(out_dims.data(), size_t(nd))), x.dtype());
  int kept = nd;  // dims [kept, nd) stay in place
  while (kept > 0 && order[size_t(kept - 1)] == kept - 1) --kept;
  int64_t run = 1;
  for (int i = kept; i < nd; ++i) run *= x.shape()[i];
  const size_t width = element_size(x.dtype()), run_bytes = size_t(run) * width;
  const std::byte* src = x.bytes();
  std::byte* dst = out.bytes();
  const int64_t runs = run ? x.numel() / run : 0;
  // Blocks of runs, split between threads (a copy: any split gives the same bytes); each block
  // finds its first run's index once, then steps through the following runs.
  const int64_t per_block = std::max<int64_t>(1, detail::kChunk / std::max<int64_t>(run, 1));
  const int64_t blocks = (runs + per_block - 1) / per_block;
  maybe_parallel(blocks > 1 && use_team(x.numel(), kParallelElements), [&] {
#pragma omp for schedule(static)
    for (int64_t block = 0; block < blocks; ++block) {
      const int64_t first = block * per_block, last = std::min(runs, first + per_block);
      std::array<int64_t, Shape::kMaxDims> index{};
      for (int64_t i = kept - 1, rest = first; i >= 0; --i) {
        index[size_t(i)] = rest % out_dims[size_t(i)];
        rest /= out_dims[size_t(i)];
      }
      for (int64_t j = first; j < last; ++j) {
        int64_t offset = 0;
        for (int i = 0; i < kept; ++i) offset += index[size_t(i)] * in_stride[size_t(order[size_t(i)])];
        std::memcpy(dst + size_t(j) * run_bytes, src + size_t(offset) * width, run_bytes);
        for (int i = kept - 1; i >= 0 && ++index[size_t(i)] == out_dims[size_t(i)]; --i) index[size_t(i)] = 0;
      }
    }
  });
  return out;
}

}  // namespace

Tensor permute(const Tensor& x, const std::vector<int>& order) {
  const int nd = x.ndim();
  check(int(order.size()) == nd, "permute: ", order.size(), " dims given for shape ", x.shape());
  std::vector<int> inverse(size_t(nd), -1);
  for (int i = 0; i < nd; ++i) {
    const int d = x.shape().axis(order[size_t(i)], "permute");
    check(inverse[size_t(d)] < 0, "permute: dim ", d, " repeated");
    inverse[size_t(d)] = i;
  }
  std::vector<int> normalised(static_cast<size_t>(nd));
  for (int i = 0; i < nd; ++i) normalised[size_t(inverse[size_t(i)])] = i;
  Tensor y = gather_permuted(x, normalised);
  return record("permute", y, {x}, [x, inverse](const Tensor& dy) { accumulate_grad(x, permute(dy, inverse)); });
}

Tensor transpose(const Tensor& x) {
  check(x.ndim() >= 2, "transpose: needs at least 2 dims, got shape ", x.shape());
  std::vector<int> order(static_cast<size_t>(x.ndim()));
  std::iota(order.begin(), order.end(), 0);
  std::swap(order[order.size() - 1], order[order.size() - 2]);
  return permute(x, order);
}

Tensor cat(const std::vector<Tensor>& xs, int dim) {
  check(!xs.empty(), "cat: no tensors");
  const Shape& first = xs[0].shape();
  const int axis = first.axis(dim, "cat");
  int64_t total = 0;
  DType dtype = xs[0].dtype();
  for (const Tensor& t : xs) {
    check(t.ndim() == first.ndim() && t.shape().with(axis, 1) == first.with(axis, 1), "cat: shape ", t.shape(),
          " does not match ", first, " outside dim ", axis);
    total += t.shape()[axis];
    dtype = promote(dtype, t.dtype());
  }
  const Shape shape = first.with(axis, total);
  const int64_t outer = shape.outer(axis), inner = shape.numel() / std::max<int64_t>(1, outer * total);
  Tensor out = Tensor::empty(shape, dtype);
  int64_t at = 0;
  for (const Tensor& t : xs) {
    const int64_t block = t.shape()[axis] * inner;
    const Tensor converted = t.dtype() == dtype ? t : cast(t, dtype);
    for (int64_t o = 0; o < outer; ++o) {
      std::memcpy(out.bytes() + size_t((o * total * inner + at) * int64_t(element_size(dtype))),
                  converted.bytes() + size_t(o * block * int64_t(element_size(dtype))),
                  size_t(block) * element_size(dtype));
    }
    at += block;
  }
  std::vector<int64_t> sizes;
  for (const Tensor& t : xs) sizes.push_back(t.shape()[axis]);
  return record("cat", out, xs, [xs, axis, sizes](const Tensor& dy) {
    int64_t offset = 0;
    for (size_t i = 0; i < xs.size(); ++i) {
      if (xs[i].requires_grad()) accumulate_grad(xs[i], narrow(dy, axis, offset, sizes[i]));
      offset += sizes[i];
    }
  });
}

Tensor narrow(const Tensor& x, int dim, int64_t start, int64_t length) {
  const int axis = x.shape().axis(dim, "narrow");
  const int64_t size = x.shape()[axis];
  check(start >= 0 && length >= 0 && start + length <= size, "narrow: [", start, ", ", start + length,
        ") out of range for dim ", axis, " of size ", size, " in shape ", x.shape());
  const Shape shape = x.shape().with(axis, length);
  const int64_t outer = x.shape().outer(axis);
  const int64_t inner = x.numel() / std::max<int64_t>(1, outer * size);
  const size_t width = element_size(x.dtype());
  Tensor out = Tensor::empty(shape, x.dtype());
  for (int64_t o = 0; o < outer; ++o) {
    std::memcpy(out.bytes() + size_t(o * length * inner) * width,
                x.bytes() + size_t((o * size + start) * inner) * width, size_t(length * inner) * width);
  }
  return record("narrow", out, {x}, [x, axis, start, length](const Tensor& dy) {
    // Pad dy with zeros back to x's shape: a cat of [zeros, dy, zeros] along the axis.
    const int64_t size = x.shape()[axis];
    std::vector<Tensor> parts;
    if (start > 0) parts.push_back(Tensor::zeros(x.shape().with(axis, start), dy.dtype()));
    parts.push_back(dy);
    if (start + length < size) parts.push_back(Tensor::zeros(x.shape().with(axis, size - start - length), dy.dtype()));
    accumulate_grad(x, cat(parts, axis));
  });
}

}  // namespace hg
