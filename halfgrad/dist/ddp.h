// DistributedDataParallel: what data-parallel training needs between the ranks of a job
// (communicator.h) -- the mean of every rank's gradients in a 32- or 16-bit wire format, with
// identical bits on every rank; a check that the replicas stayed identical; per-rank dropout
// streams with one checkpointable generator state. The Accelerator calls it (train/). The
// reduction step by step, its determinism and cost: docs/design_notes.md#distributeddataparallel.
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
#include "halfgrad/dist/wire_format.h"
#include "halfgrad/precision/numerics_stats.h"

namespace hg::dist {

int64_t wire_value_bytes(WireFormat format);  // 4 or 2

struct DdpOptions {
  WireFormat wire = WireFormat::kF32;
  int64_t bucket_bytes = int64_t{4} << 20;  // per rank and MPI call (torch's bucket_cap_mb is 25)
};

struct GradientExchange;  // one reduce_gradients()'s layouts, row ids and values (ddp.cpp)

// What one reduce_gradients() did on this rank.
struct ReduceStats {
  int64_t bytes = 0;              // bytes this rank sent: the values in the wire format, row ids, the layout
  int64_t buckets = 0;            // allgatherv calls for the values
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

  // reduce_gradients' steps, in order (ddp.cpp): this rank's layout, row ids and values g / W;
  // every rank's layout and row ids; every rank's values, through the wire format; the sums.
  void pack(const std::vector<Tensor>& params, GradientExchange& x);
  void gather_layouts(GradientExchange& x);
  void gather_values(GradientExchange& x);
  void sum_dense(Tensor t, size_t p, GradientExchange& x);
  void sum_sparse(Tensor t, size_t p, GradientExchange& x);
};

}  // namespace hg::dist
