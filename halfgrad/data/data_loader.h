// DataLoader: batches of a Dataset, tokenized once, each epoch a seeded shuffle, padded to the
// batch's longest sequence with an attention mask; with num_replicas > 1, one rank's shard, as
// torch's DistributedSampler; with group_by_length, batches of similar lengths, as HF's
// LengthGroupedSampler. The sharding and the grouping: docs/design_notes.md#dataloader.
#pragma once

#include <cstdint>
#include <vector>

#include "halfgrad/autograd/indices.h"
#include "halfgrad/data/dataset.h"
#include "halfgrad/data/tokenizer.h"

namespace hg::data {

struct Batch {
  Indices ids;                // (B, T), 0 = padding
  Indices attention_mask;     // (B, T), 1 = real token
  Indices labels;             // (B)
  std::vector<int64_t> rows;  // the examples' positions in the dataset
  int64_t size() const { return labels.numel(); }
};

struct DataLoaderOptions {
  int64_t batch_size = 64;
  bool shuffle = true;
  bool drop_last = false;
  uint64_t seed = 0;
  int64_t max_len = 32;
  int64_t num_replicas = 1;  // data-parallel ranks sharing the epoch's order
  int64_t rank = 0;          // this loader's shard, in [0, num_replicas)
  // HF's group_by_length: the shuffled order is cut into mega-batches, each sorted by length
  // (longest first), so a batch pads to little more than its own texts; shuffle only.
  bool group_by_length = false;
};

// HF's get_length_grouped_indices (transformers' trainer_pt_utils.py) over an already shuffled
// `order`: mega-batches of mega_batch_mult * batch_size (mult = min(n / (4 batch_size), 50), at
// least 1), each sorted by descending length (a stable sort: ties keep the shuffled order), then
// the longest text of all swapped to the front, so the largest batch comes first.
void group_by_length(std::vector<int64_t>& order, const std::vector<int64_t>& lengths, int64_t batch_size);

class DataLoader {
 public:
  DataLoader(const Dataset& dataset, const Tokenizer& tokenizer, DataLoaderOptions options);

  // Selects the order of `epoch` (a permutation drawn from (seed, epoch) when shuffling).
  void set_epoch(int64_t epoch);
  int64_t num_batches() const;
  Batch batch(int64_t index) const;  // of the current epoch (this rank's shard)
  int64_t size() const { return int64_t(sequences_.size()); }
  int64_t shard_size() const { return int64_t(order_.size()); }  // examples per epoch on this rank
  // Texts longer than max_len that were cut (counted once, at construction).
  int64_t truncated() const { return truncated_; }
  const DataLoaderOptions& options() const { return options_; }

 private:
  DataLoaderOptions options_;
  std::vector<std::vector<int32_t>> sequences_;
  std::vector<int32_t> labels_;
  std::vector<int64_t> order_;
  int64_t truncated_ = 0;
};

}  // namespace hg::data
