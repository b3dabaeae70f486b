// DistributedDataParallel: what data-parallel training needs between the ranks of a job
// (communicator.h) -- the mean of every rank's gradients, in a 32- or 16-bit wire format, with
// identical bits on every rank; a check that the replicas stayed identical; and per-rank dropout
// streams that keep one checkpointable generator state. The Accelerator calls it (train/).
//
// The gradient reduction, after backward, on the gradients the optimizer reads (fp16 O2: the f32
// master gradients), still multiplied by the loss scale:
//   1. each rank divides its gradient by the world size W in f32 (torch DDP divides too, before
//      the sum, so the sum cannot overflow where the mean would not);
//   2. 16-bit wire formats: rounds g / W once (nearest even) to fp16 or bf16 -- the loss scale is
//      still applied, so a small gradient survives the cast that would flush it unscaled; the
//      counts of that cast (flushed to zero, subnormal, overflowed to inf) are last_reduce().wire;
//   3. every rank's values are gathered on every rank (MPI_Allgatherv, in buckets of
//      bucket_bytes per rank) and summed in rank order, 0 + c_0 + c_1 + ... + c_{W-1}, each
//      addition rounded to the wire format (what a reduction carried in fp16/bf16 does);
//   4. the sum (f32, or a wire-format value widened exactly) replaces the gradient.
// torch's fp16_compress_hook casts first and divides in fp16 (two roundings; the cast overflows
// for |g| > 65504 even when g / W would fit); dividing in f32 first rounds once. A row-sparse
// gradient (a sparse embedding's) travels as its row ids and rows; the result holds the union of
// every rank's rows, each summed over the ranks that have it (the others count as zero).
// Determinism: MPI_Allreduce's summation order is the library's; gathering and summing in rank
// order on every rank gives the same bits on every rank and in every run. The cost: each rank
// receives (W - 1) x N values instead of a ring allreduce's 2 (W - 1) / W x N (the same at W = 2,
// W / 2 times more beyond), and holds W x N values while it sums. Loss scaling needs no extra
// agreement: every rank unscales the same bits, so an inf from any rank (including one the
// 16-bit cast made) is in every rank's sum, and every rank skips the step and halves the scale;
// the Accelerator still compares found_inf across ranks (check_agreement) and stops if they differ.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "halfgrad/autograd/fp8_scaling.h"
#include "halfgrad/autograd/generator.h"
#include "halfgrad/autograd/tensor.h"
#include "halfgrad/dist/communicator.h"
#include "halfgrad/precision/numerics_stats.h"

namespace hg::dist {

enum class WireFormat { kF32, kF16, kBf16 };

// "f32" | "fp16" | "bf16" (the --ddp-comm flag's values); an error names the flag.
WireFormat parse_wire_format(const std::string& text);
const char* wire_format_name(WireFormat format);
int64_t wire_value_bytes(WireFormat format);  // 4 or 2

struct DdpOptions {
  WireFormat wire = WireFormat::kF32;
  int64_t bucket_bytes = int64_t{4} << 20;  // per rank and MPI call (torch's bucket_cap_mb is 25)
};

// What one reduce_gradients() did on this rank.
struct ReduceStats {
  int64_t bytes = 0;    // bytes this rank sent: the values in the wire format, row ids, the layout
  int64_t buckets = 0;  // allgatherv calls for the values
  precision::NumericsStats wire;  // the cast of g / W to a 16-bit wire format (empty for f32)
};

class DistributedDataParallel {
 public:
  explicit DistributedDataParallel(Communicator& comm, DdpOptions options = {});

  Communicator& communicator() const { return comm_; }
  int rank() const { return comm_.rank(); }
  int size() const { return comm_.size(); }
  const DdpOptions& options() const { return options_; }

  // Replaces the gradient of every tensor in `params` (the same list, in the same order, on
  // every rank) by the mean over the ranks, as described above. A tensor without a gradient on
  // some ranks counts as zero there. A collective; a no-op on one rank.
  void reduce_gradients(const std::vector<Tensor>& params);
  const ReduceStats& last_reduce() const { return last_; }

  // fp8 training: replaces this step's staged amax of every scaled tensor by its max over the
  // ranks (Transformer Engine's reduce_amax, an all-reduce with MAX), so every rank computes the
  // same scales, and a checkpoint written by rank 0 holds every rank's state. A collective after
  // backward, before Fp8Scaling::update(); a no-op on one rank.
  void reduce_amaxes(Fp8Scaling& fp8);
  // Throws hg::Error on every rank (agreed) unless `flag` is the same on every rank: for
  // decisions every rank must take alike (skip a step), naming `what`.
  void check_agreement(bool flag, const std::string& what);

  // Compares a checksum of every named tensor (bits of the values as stored) and of `scalars`
  // (a JSON object: loss scale, optimizer steps, fp8 scales, ...) across ranks; throws (agreed)
  // naming the first tensor or top-level entry of `scalars` that differs from rank 0's, the
  // rank and `step`.
  void check_replicas(const std::vector<std::pair<std::string, Tensor>>& tensors, const nlohmann::json& scalars,
                      int64_t step);

  // Dropout under several ranks: during a step rank r draws from counters offset + r * 2^32 of
  // `gen` (its own masks, not a copy of rank 0's); after it every rank's generator is at offset +
  // W * 2^32, so the state is one value on every rank and a checkpoint resumes on any world size.
  // A no-op on one rank, where the stream stays that of a single-process run.
  void begin_step(Generator& gen);
  void end_step(Generator& gen);

 private:
  Communicator& comm_;
  DdpOptions options_;
  ReduceStats last_;
  uint64_t step_offset_ = 0;
  // reduce_gradients' buffers, kept from step to step (their pages stay mapped).
  std::vector<float> values_, contributions_, acc_;
  std::vector<uint16_t> wire16_;
  std::vector<std::byte> all_, bucket_;
};

}  // namespace hg::dist
