// The gradient reduction of ddp.h (layout, row ids and values gathered, summed in rank order),
// the replica checksums and the per-rank dropout streams.
#include "halfgrad/dist/ddp.h"

#include <algorithm>
#include <cstring>

#include "halfgrad/autograd/sparse_rows.h"
#include "halfgrad/base/error.h"
#include "halfgrad/base/fingerprint.h"
#include "halfgrad/precision/convert.h"

namespace hg::dist {

int64_t wire_value_bytes(WireFormat format) { return format == WireFormat::kF32 ? 4 : 2; }

namespace {

precision::FloatFormat narrow_format(WireFormat format) {
  return format == WireFormat::kF16 ? precision::kBinary16 : precision::kBFloat16;
}

template <class T>
std::span<const std::byte> bytes_of(const std::vector<T>& v) {
  return std::as_bytes(std::span(v));
}

template <class T>
std::vector<T> values_of(const std::vector<std::byte>& bytes) {
  std::vector<T> out(bytes.size() / sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), bytes.data(), out.size() * sizeof(T));
  return out;
}

// A parameter's gradient on one rank, as its layout entry says.
enum Kind : int64_t { kNone = 0, kDense = 1, kSparse = 2 };

}  // namespace

DistributedDataParallel::DistributedDataParallel(Communicator& comm, DdpOptions options)
    : comm_(comm), options_(options) {
  check(options_.bucket_bytes >= 1024 && options_.bucket_bytes <= (int64_t{1} << 30),
        "DistributedDataParallel: bucket_bytes must be in [1 KiB, 1 GiB], got ", options_.bucket_bytes);
}

// What every rank sends and receives in one reduce_gradients(). A layout has three entries per
// parameter: its gradient's Kind, its row count (sparse), its value count.
struct GradientExchange {
  size_t count = 0;                                     // parameters
  std::vector<int64_t> layout, rows;                    // this rank's
  std::vector<std::vector<int64_t>> layouts, all_rows;  // every rank's, in rank order
  std::vector<const float*> contributions;              // every rank's values g / W, as f32
  std::vector<size_t> value_at, row_at;                 // per rank: the values and rows the sums have used

  int64_t kind(int k, size_t p) const { return layouts[size_t(k)][3 * p]; }
  int64_t row_count(int k, size_t p) const { return layouts[size_t(k)][3 * p + 1]; }
  int64_t value_count(int k, size_t p) const { return layouts[size_t(k)][3 * p + 2]; }
};

namespace {

// The kind of parameter p's gradient on the ranks that have one (kNone: no rank has one); a
// parameter dense on some ranks and sparse on others is an agreed error.
int64_t agreed_kind(Communicator& comm, const GradientExchange& x, const Tensor& t, size_t p) {
  int64_t kind = kNone;
  for (int k = 0; k < int(x.layouts.size()); ++k) {
    const int64_t kk = x.kind(k, p);
    if (kk == kNone) continue;
    if (kind != kNone && kk != kind) {
      fail_agreed(comm, "DistributedDataParallel: parameter '" + t.name() +
                            "' has a dense gradient on some ranks and a row-sparse one on others");
    }
    kind = kk;
  }
  return kind;
}

}  // namespace

void DistributedDataParallel::reduce_gradients(const std::vector<Tensor>& params) {
  last_ = {};
  if (size() == 1) return;
  GradientExchange x;
  pack(params, x);
  gather_layouts(x);
  gather_values(x);
  x.value_at.assign(size_t(size()), 0);
  x.row_at.assign(size_t(size()), 0);
  for (size_t p = 0; p < x.count; ++p) {
    const int64_t kind = agreed_kind(comm_, x, params[p], p);
    if (kind == kDense) sum_dense(params[p], p, x);
    if (kind == kSparse) sum_sparse(params[p], p, x);
  }
}

// This rank's layout, row ids and values g / W (into values_: a fresh buffer of a few MB would
// fault in its pages every step).
void DistributedDataParallel::pack(const std::vector<Tensor>& params, GradientExchange& x) {
  x.count = params.size();
  x.layout.assign(3 * x.count, 0);
  const float divisor = float(size());
  std::vector<float>& values = values_;
  values.clear();
  for (size_t p = 0; p < x.count; ++p) {
    const Tensor& t = params[p];
    if (!t.has_grad()) continue;
    const SparseRows* sparse = t.sparse_grad();
    const Tensor g = t.grad_values();
    x.layout[3 * p] = sparse ? kSparse : kDense;
    x.layout[3 * p + 1] = sparse ? int64_t(sparse->rows.size()) : 0;
    x.layout[3 * p + 2] = g.numel();
    if (sparse) x.rows.insert(x.rows.end(), sparse->rows.begin(), sparse->rows.end());
    const size_t at = values.size();
    if (g.dtype() == DType::f32) {
      const std::span<const float> v = g.f32();
      values.insert(values.end(), v.begin(), v.end());
    } else {
      const std::vector<float> v = g.to_vector();
      values.insert(values.end(), v.begin(), v.end());
    }
    for (size_t i = at; i < values.size(); ++i) values[i] /= divisor;
  }
}

// The layout and the row ids travel together: one allgather (of the sizes, then the data).
void DistributedDataParallel::gather_layouts(GradientExchange& x) {
  std::vector<int64_t> header = x.layout;
  header.insert(header.end(), x.rows.begin(), x.rows.end());
  for (const auto& b : allgather(comm_, bytes_of(header))) {
    const std::vector<int64_t> h = values_of<int64_t>(b);
    if (h.size() < x.layout.size()) {
      fail_agreed(comm_, "DistributedDataParallel: the ranks reduce different numbers of parameters (" +
                             std::to_string(x.count) + " on rank " + std::to_string(rank()) + ")");
    }
    x.layouts.emplace_back(h.begin(), h.begin() + std::ptrdiff_t(x.layout.size()));
    x.all_rows.emplace_back(h.begin() + std::ptrdiff_t(x.layout.size()), h.end());
    int64_t stated = 0;
    for (size_t p = 0; p < x.count; ++p) stated += x.layouts.back()[3 * p + 1];
    if (stated != int64_t(x.all_rows.back().size())) {
      fail_agreed(comm_, "DistributedDataParallel: the ranks reduce different parameter lists (rank " +
                             std::to_string(x.layouts.size() - 1) + "'s layout does not match its row ids)");
    }
  }
}

// The values in the wire format, gathered rank after rank into all_ (one allgatherv when they
// fit a bucket, else bucket by bucket), then every rank's as f32: in place for f32, decoded
// into contributions_ otherwise.
void DistributedDataParallel::gather_values(GradientExchange& x) {
  const int world = size();
  const WireFormat format = options_.wire;
  const int64_t value_bytes = wire_value_bytes(format);
  std::span<const std::byte> wire = std::as_bytes(std::span(values_));
  if (format != WireFormat::kF32) {
    wire16_.resize(values_.size());
    precision::encode(narrow_format(format), values_, std::span(wire16_), {.stats = &last_.wire});
    wire = std::as_bytes(std::span(wire16_));
  }
  std::vector<int64_t> total(size_t(world), 0), offset(size_t(world) + 1, 0);
  for (int k = 0; k < world; ++k) {
    for (size_t p = 0; p < x.count; ++p) total[size_t(k)] += x.value_count(k, p) * value_bytes;
    offset[size_t(k) + 1] = offset[size_t(k)] + total[size_t(k)];
  }
  const int64_t bucket = std::max(value_bytes, options_.bucket_bytes / value_bytes * value_bytes);
  all_.resize(size_t(offset[size_t(world)]));
  const int64_t longest = *std::max_element(total.begin(), total.end());
  if (longest <= bucket) {
    comm_.allgatherv(wire, total, all_);
    last_.buckets = 1;
  } else {
    std::vector<int64_t> counts(static_cast<size_t>(world));
    for (int64_t at = 0; at < longest; at += bucket) {
      int64_t sum = 0;
      for (int k = 0; k < world; ++k) sum += counts[size_t(k)] = std::clamp(total[size_t(k)] - at, int64_t{0}, bucket);
      bucket_.resize(size_t(sum));
      const int64_t mine = counts[size_t(rank())];
      comm_.allgatherv(wire.subspan(size_t(std::min(at, total[size_t(rank())])), size_t(mine)), counts, bucket_);
      int64_t from = 0;
      for (int k = 0; k < world; ++k) {
        if (counts[size_t(k)] > 0) {
          std::memcpy(all_.data() + offset[size_t(k)] + at, bucket_.data() + from, size_t(counts[size_t(k)]));
        }
        from += counts[size_t(k)];
      }
      ++last_.buckets;
    }
  }
  x.contributions.resize(static_cast<size_t>(world));
  if (format == WireFormat::kF32) {
    for (int k = 0; k < world; ++k)
      x.contributions[size_t(k)] = reinterpret_cast<const float*>(all_.data() + offset[size_t(k)]);
  } else {
    contributions_.resize(all_.size() / 2);
    const std::span<const uint16_t> bits(reinterpret_cast<const uint16_t*>(all_.data()), contributions_.size());
    precision::decode(narrow_format(format), bits, contributions_);
    for (int k = 0; k < world; ++k) x.contributions[size_t(k)] = contributions_.data() + offset[size_t(k)] / 2;
  }
  last_.bytes = int64_t(wire.size() + x.rows.size() * sizeof(int64_t) + x.layout.size() * sizeof(int64_t));
}

// Parameter p's dense gradient: the ranks' values summed in rank order, each addition rounded to
// the wire format, written back as the mean.
void DistributedDataParallel::sum_dense(Tensor t, size_t p, GradientExchange& x) {
  std::vector<float>& acc = acc_;
  acc.assign(size_t(t.numel()), 0.0f);
  for (int k = 0; k < size(); ++k) {
    const int64_t n = x.value_count(k, p);
    if (x.kind(k, p) == kNone) continue;
    if (n != t.numel()) {
      fail_agreed(comm_, "DistributedDataParallel: parameter '" + t.name() + "' has " + std::to_string(n) +
                             " gradient values on rank " + std::to_string(k) + ", expected " +
                             std::to_string(t.numel()));
    }
    const float* c = x.contributions[size_t(k)] + x.value_at[size_t(k)];
    for (size_t i = 0; i < acc.size(); ++i) acc[i] += c[i];
    if (options_.wire != WireFormat::kF32) precision::round_to(narrow_format(options_.wire), acc);
    x.value_at[size_t(k)] += size_t(n);
  }
  if (t.sparse_grad() == nullptr && t.has_grad()) {
    t.grad().assign_nearest(acc);
  } else {
    t.set_grad(Tensor::from_vector(acc, t.shape(), t.dtype()));
  }
}

// Parameter p's row-sparse gradient: the union of every rank's rows, each rank's rows added
// where they land, in rank order, each addition rounded to the wire format.
void DistributedDataParallel::sum_sparse(Tensor t, size_t p, GradientExchange& x) {
  const int64_t width = t.numel() / t.shape()[0];
  std::vector<int64_t> rows_union;
  for (int k = 0; k < size(); ++k) {
    const auto first = x.all_rows[size_t(k)].begin() + std::ptrdiff_t(x.row_at[size_t(k)]);
    rows_union.insert(rows_union.end(), first, first + std::ptrdiff_t(x.row_count(k, p)));
  }
  std::sort(rows_union.begin(), rows_union.end());
  rows_union.erase(std::unique(rows_union.begin(), rows_union.end()), rows_union.end());
  std::vector<float>& acc = acc_;
  acc.assign(rows_union.size() * size_t(width), 0.0f);
  for (int k = 0; k < size(); ++k) {
    const int64_t r = x.row_count(k, p), n = x.value_count(k, p);
    if (x.kind(k, p) == kNone) continue;
    if (n != r * width) {
      fail_agreed(comm_, "DistributedDataParallel: parameter '" + t.name() + "': rank " + std::to_string(k) + " sent " +
                             std::to_string(n) + " values for " + std::to_string(r) + " rows of width " +
                             std::to_string(width));
    }
    const float* c = x.contributions[size_t(k)] + x.value_at[size_t(k)];
    const int64_t* ids = x.all_rows[size_t(k)].data() + x.row_at[size_t(k)];
    for (int64_t j = 0; j < r; ++j) {
      const size_t at = size_t(std::lower_bound(rows_union.begin(), rows_union.end(), ids[j]) - rows_union.begin());
      for (int64_t i = 0; i < width; ++i) acc[at * size_t(width) + size_t(i)] += c[j * width + i];
    }
    if (options_.wire != WireFormat::kF32) precision::round_to(narrow_format(options_.wire), acc);
    x.value_at[size_t(k)] += size_t(n);
    x.row_at[size_t(k)] += size_t(r);
  }
  const int64_t stored = int64_t(rows_union.size());
  t.set_sparse_grad({std::move(rows_union), Tensor::from_vector(acc, {stored, width}, t.dtype())});
}

void DistributedDataParallel::reduce_amaxes(Fp8Scaling& fp8) {
  if (size() == 1) return;
  std::vector<float> amaxes = fp8.staged_amaxes();
  const auto all = allgather(comm_, bytes_of(amaxes));
  for (size_t r = 0; r < all.size(); ++r) {
    const std::vector<float> other = values_of<float>(all[r]);
    check(other.size() == amaxes.size(), "fp8 scaling: rank ", r, " cast ", other.size() / kFp8Roles.size(),
          " GEMMs' operands this step, this rank ", amaxes.size() / kFp8Roles.size());
    // Staged amaxes are never NaN (the casts skip NaN, as CUDA's fmaxf), so std::max is the max.
    for (size_t i = 0; i < amaxes.size(); ++i) amaxes[i] = std::max(amaxes[i], other[i]);
  }
  fp8.set_staged_amaxes(amaxes);
}

void DistributedDataParallel::check_agreement(bool flag, const std::string& what) {
  if (size() == 1) return;
  const std::vector<uint8_t> flags = allgather_value(comm_, uint8_t(flag));
  for (size_t r = 1; r < flags.size(); ++r) {
    if (flags[r] != flags[0]) {
      fail_agreed(comm_, "the ranks disagree on " + what + " (" + std::to_string(flags[0]) + " on rank 0, " +
                             std::to_string(flags[r]) + " on rank " + std::to_string(r) +
                             "): their replicas have diverged");
    }
  }
}

void DistributedDataParallel::check_replicas(const std::vector<std::pair<std::string, Tensor>>& tensors,
                                             const nlohmann::json& scalars, int64_t step) {
  if (size() == 1) return;
  std::vector<uint64_t> sums;
  for (const auto& [name, t] : tensors) {
    sums.push_back(fnv1a(t.bytes(), t.nbytes()));
  }
  // One checksum per top-level scalar entry, so a difference names it ("scaler", "fp8_scaling")
  // rather than printing the whole state (an fp8 amax history alone is 1024 numbers a tensor).
  std::vector<std::string> scalar_names;
  for (const auto& [key, value] : scalars.items()) {
    const std::string text = value.dump();
    scalar_names.push_back(key);
    sums.push_back(fnv1a(text.data(), text.size()));
  }
  const auto all = allgather(comm_, bytes_of(sums));
  const std::vector<uint64_t> first = values_of<uint64_t>(all[0]);
  for (size_t r = 1; r < all.size(); ++r) {
    const std::vector<uint64_t> other = values_of<uint64_t>(all[r]);
    if (other.size() != first.size()) {
      fail_agreed(comm_, "replica check at step " + std::to_string(step) + ": rank " + std::to_string(r) + " checks " +
                             std::to_string(other.size()) + " tensors, rank 0 " + std::to_string(first.size()));
    }
    for (size_t i = 0; i < first.size(); ++i) {
      if (other[i] == first[i]) continue;
      const std::string name = i < tensors.size() ? "tensor '" + tensors[i].first + "'"
                                                  : "the state '" + scalar_names[i - tensors.size()] + "'";
      fail_agreed(comm_, "replica check at step " + std::to_string(step) + ": " + name + " on rank " +
                             std::to_string(r) + " differs from rank 0's: the replicas have diverged");
    }
  }
}

void DistributedDataParallel::begin_step(Generator& gen) {
  if (size() == 1) return;
  step_offset_ = gen.offset();
  gen = Generator(gen.seed(), step_offset_ + (uint64_t(rank()) << 32));
}

void DistributedDataParallel::end_step(Generator& gen) {
  if (size() == 1) return;
  const uint64_t used = gen.offset() - (step_offset_ + (uint64_t(rank()) << 32));
  check(used < (uint64_t{1} << 32), "DistributedDataParallel: a step drew ", used,
        " dropout counters on one rank, more than its stream of 2^32");
  gen = Generator(gen.seed(), step_offset_ + (uint64_t(size()) << 32));
}

}  // namespace hg::dist
