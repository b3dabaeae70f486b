// Checkpoint directories, laid out like Hugging Face Trainer's (output_dir/checkpoint-<step>/:
// model.safetensors, config.json, optimizer, scheduler, scaler, RNG and trainer state, a SHA-256
// manifest written last), written atomically: a crash leaves the previous complete checkpoint or
// the new one. The files and the write sequence: docs/design_notes.md#checkpoint-directories.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "halfgrad/nn/module.h"
#include "halfgrad/optim/optimizer.h"

namespace hg::io {

struct Checkpoint {
  nn::StateDict model;              // -> model.safetensors
  nlohmann::json config;            // -> config.json
  optim::OptimizerState optimizer;  // -> optimizer.safetensors (tensors) + optimizer.json (meta)
  nlohmann::json scheduler;         // -> scheduler.json
  nlohmann::json scaler;            // -> scaler.json
  nlohmann::json rng;               // -> rng_state.json
  nlohmann::json trainer_state;     // -> trainer_state.json
  nlohmann::json fp8;               // -> fp8_scaling.json when not null (fp8 runs)
  std::string tokenizer_model;      // -> sentencepiece.model when not empty (its bytes)
  // HF's save_only_model: model.safetensors, config.json, trainer_state.json (and fp8_scaling.json)
  // only, no optimizer, scheduler, scaler or RNG state; the manifest says so ("model_only"). Such a
  // checkpoint loads for evaluation and prediction; resuming it is refused (Trainer).
  bool model_only = false;
};

// The files every complete checkpoint directory has, the manifest (kManifestFile) last; an fp8
// run's also has kFp8File, a sentencepiece run's kTokenizerModelFile, which the manifest then lists.
const std::vector<std::string>& checkpoint_files();
inline constexpr const char* kManifestFile = "checkpoint.json";
inline constexpr const char* kFp8File = "fp8_scaling.json";
inline constexpr const char* kTokenizerModelFile = "sentencepiece.model";

// Writes output_dir/checkpoint-<step>/ atomically (see above), replacing a checkpoint of the same
// step, and returns its path. Creates output_dir if needed and first removes stale temporary
// directories of crashed saves. On an error nothing is left behind and an existing checkpoint
// of that step is untouched.
std::filesystem::path save_checkpoint(const std::filesystem::path& output_dir, int64_t step,
                                      const Checkpoint& checkpoint);

// Reads a checkpoint directory after verify_checkpoint with checksums. Errors name the directory
// and the file. JSON files are read up to kMaxJsonFileBytes (halfgrad/io/digest.h).
Checkpoint load_checkpoint(const std::filesystem::path& dir);

// Throws hg::Error naming the first problem: a missing file (by name), a missing or unreadable
// manifest, a file whose size differs from the manifest's (truncated or replaced), and with
// `checksums` a file whose SHA-256 differs (corrupted). Without `checksums` (listing checkpoints)
// only the sizes are compared. A version-1 manifest (sizes only, before checksums) is accepted.
void verify_checkpoint(const std::filesystem::path& dir, bool checksums = false);
// verify_checkpoint without the exception.
bool checkpoint_complete(const std::filesystem::path& dir);

// The step of a "checkpoint-<digits>" directory name, or nullopt for any other name.
std::optional<int64_t> checkpoint_step(const std::filesystem::path& dir);

// Complete checkpoint directories in output_dir, by increasing step (empty if output_dir does not
// exist). Temporary and incomplete directories are ignored.
std::vector<std::filesystem::path> list_checkpoints(const std::filesystem::path& output_dir);
// The complete checkpoint of the highest step (transformers' get_last_checkpoint), or an empty
// path.
std::filesystem::path latest_checkpoint(const std::filesystem::path& output_dir);

// Deletes the oldest complete checkpoints so that the newest save_total_limit remain, never
// deleting `keep` (the best model: it is kept in addition to the newest save_total_limit, where
// transformers would count it within the limit). save_total_limit <= 0 keeps everything, as
// transformers' None. Incomplete directories are left alone. Each deleted directory is first
// renamed to a temporary name, so a crash mid-delete leaves no half checkpoint under a
// checkpoint name. Returns the deleted paths.
std::vector<std::filesystem::path> rotate_checkpoints(const std::filesystem::path& output_dir, int64_t save_total_limit,
                                                      const std::filesystem::path& keep = {});

// Removes the temporary directories of saves and deletes whose process is gone (a different pid
// that no longer runs); restores a checkpoint that a crash left renamed aside (the fallback for
// file systems without RENAME_EXCHANGE). Returns how many directories it removed or restored.
int cleanup_checkpoints(const std::filesystem::path& output_dir);

namespace detail {
// For tests: replace an existing checkpoint by renaming it aside and the new one into place (the
// path taken on file systems without RENAME_EXCHANGE) instead of exchanging them.
void force_rename_aside(bool on);
}  // namespace detail

}  // namespace hg::io
