// DataLoader: batches of a Dataset for training and evaluation. Texts are tokenized once;
// each epoch's order is a seeded shuffle (the same for a given seed and epoch, whatever else
// happened), and each batch is padded to its longest sequence (at most max_len) with an
// attention mask (1 = real token) and the labels. With num_replicas > 1 (data-parallel
// training) the loader yields one rank's shard of each epoch's order, as torch's
// DistributedSampler: the order is padded with its own first examples to a multiple of
// num_replicas, and rank r takes positions r, r + num_replicas, ... -- disjoint shards of equal
// length, so every rank has the same number of batches, and the shards' batch k together are
// the single-process loader's batch k at num_replicas times the batch size.
#pragma once

#include <cstdint>
#include <vector>

#include "halfgrad/autograd/indices.h"
#include "halfgrad/data/dataset.h"
#include "halfgrad/data/tokenizer.h"

namespace hg::data {

struct Batch {
  Indices ids;             // (B, T), 0 = padding
  Indices attention_mask;  // (B, T), 1 = real token
  Indices labels;          // (B)
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
};

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
