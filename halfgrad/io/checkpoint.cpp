// Checkpoint directories: the atomic save protocol, the manifest, loading, listing, rotation
// and the cleanup of what crashed saves leave behind.
#include "halfgrad/io/checkpoint.h"

#include <signal.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <fstream>
#include <sstream>

#include "halfgrad/base/error.h"
#include "halfgrad/io/atomic_file.h"
#include "halfgrad/io/digest.h"
#include "halfgrad/io/safetensors.h"

namespace hg::io {
namespace fs = std::filesystem;

namespace {

constexpr const char* kModel = "model.safetensors";
constexpr const char* kConfig = "config.json";
constexpr const char* kOptimizerTensors = "optimizer.safetensors";
constexpr const char* kOptimizerMeta = "optimizer.json";
constexpr const char* kScheduler = "scheduler.json";
constexpr const char* kScaler = "scaler.json";
constexpr const char* kRng = "rng_state.json";
constexpr const char* kTrainerState = "trainer_state.json";
constexpr const char* kManifestFormat = "halfgrad-checkpoint";
// Version 2 records {"size", "sha256"} per file; version 1 (sizes only) still loads.
constexpr int kManifestVersion = 2;

bool rename_aside_forced = false;

// The data files; the manifest is added by checkpoint_files().
const std::vector<std::string>& data_files() {
  static const std::vector<std::string> files = {kModel,  kConfig, kOptimizerTensors, kOptimizerMeta, kScheduler,
                                                 kScaler, kRng,    kTrainerState};
  return files;
}

// The data files a model-only checkpoint (Checkpoint::model_only) leaves out.
bool training_state_file(const std::string& name) {
  return name == kOptimizerTensors || name == kOptimizerMeta || name == kScheduler || name == kScaler || name == kRng;
}

// Kinds of dot-directories a save or a rotation leaves while it runs:
//   .tmp-checkpoint-<step>-<pid>  a checkpoint being written (or, after the exchange, the old one
//                                 being deleted)
//   .old-checkpoint-<step>-<pid>  the previous checkpoint renamed aside (no RENAME_EXCHANGE)
//   .del-checkpoint-<step>-<pid>  a rotated checkpoint being deleted
fs::path temp_dir(const fs::path& output_dir, const char* kind, int64_t step) {
  std::string name = ".";  // appended piecewise: GCC 12's false -Wrestrict on "." + string (bug 105651)
  name += kind;
  name += "-checkpoint-" + std::to_string(step) + "-" + std::to_string(::getpid());
  return output_dir / name;
}

struct TempName {
  std::string kind;
  int64_t step;
  pid_t pid;
};

bool parse_digits(const std::string& text, int64_t& out) {
  if (text.empty() || text.size() > 18) return false;
  out = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    out = out * 10 + (c - '0');
  }
  return true;
}

std::optional<TempName> parse_temp_name(const std::string& name) {
  for (const char* kind : {"tmp", "old", "del"}) {
    std::string prefix = ".";
    prefix += kind;
    prefix += "-checkpoint-";
    if (name.rfind(prefix, 0) != 0) continue;
    const std::string rest = name.substr(prefix.size());
    const size_t dash = rest.find('-');
    int64_t step = 0, pid = 0;
    if (dash == std::string::npos || !parse_digits(rest.substr(0, dash), step) ||
        !parse_digits(rest.substr(dash + 1), pid) || pid <= 0 || pid > INT32_MAX) {
      return std::nullopt;
    }
    return TempName{kind, step, pid_t(pid)};
  }
  return std::nullopt;
}

// Whether a process with this id runs (EPERM: it runs under another user).
bool process_alive(pid_t pid) { return ::kill(pid, 0) == 0 || errno == EPERM; }

void remove_tree(const fs::path& path) {
  std::error_code ec;
  fs::remove_all(path, ec);
  check(!ec, "cannot remove ", path.string(), ": ", ec.message());
}

// A checkpoint file's bytes, bounded (halfgrad/io/digest.h): a file past the limit is an error.
std::string read_text(const fs::path& path) { return read_file_bounded(path, kMaxJsonFileBytes); }

nlohmann::json read_json(const fs::path& path) {
  const std::string text = read_text(path);
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    fail(path.string(), ": not valid JSON: ", e.what());
  }
}

// A manifest entry: the file's size and SHA-256.
nlohmann::json file_entry(uint64_t size, std::string sha256) { return {{"size", size}, {"sha256", std::move(sha256)}}; }

// Writes `bytes` through an AtomicFile; returns its manifest entry.
nlohmann::json write_file(const fs::path& path, std::string_view bytes) {
  AtomicFile file(path);
  file.write(bytes);
  file.commit(/*sync_directory=*/false);  // the checkpoint directory is fsync'ed once at the end
  return file_entry(bytes.size(), sha256_hex(bytes.data(), bytes.size()));
}

// Writes `value` as indented JSON; returns its manifest entry.
nlohmann::json write_json(const fs::path& path, const nlohmann::json& value) {
  std::string text;
  try {
    text = value.dump(2) + "\n";
  } catch (const nlohmann::json::exception& e) {
    fail(path.string(), ": cannot write JSON: ", e.what());
  }
  return write_file(path, text);
}

uint64_t size_of(const fs::path& path) {
  std::error_code ec;
  const uint64_t size = fs::file_size(path, ec);
  check(!ec, path.string(), ": ", ec.message());
  return size;
}

// Writes every file of `checkpoint` into `dir`, the manifest last.
void write_contents(const fs::path& dir, int64_t step, const Checkpoint& checkpoint) {
  nlohmann::json sizes = nlohmann::json::object();
  // transformers' from_pretrained refuses a model.safetensors without format "pt".
  save_safetensors((dir / kModel).string(), checkpoint.model, {{"format", "pt"}});
  sizes[kModel] = file_entry(size_of(dir / kModel), sha256_file(dir / kModel));
  sizes[kConfig] = write_json(dir / kConfig, checkpoint.config);
  if (!checkpoint.model_only) {
    save_safetensors((dir / kOptimizerTensors).string(), checkpoint.optimizer.tensors);
    sizes[kOptimizerTensors] = file_entry(size_of(dir / kOptimizerTensors), sha256_file(dir / kOptimizerTensors));
    sizes[kOptimizerMeta] = write_json(dir / kOptimizerMeta, checkpoint.optimizer.meta);
    sizes[kScheduler] = write_json(dir / kScheduler, checkpoint.scheduler);
    sizes[kScaler] = write_json(dir / kScaler, checkpoint.scaler);
    sizes[kRng] = write_json(dir / kRng, checkpoint.rng);
  }
  sizes[kTrainerState] = write_json(dir / kTrainerState, checkpoint.trainer_state);
  if (!checkpoint.fp8.is_null()) sizes[kFp8File] = write_json(dir / kFp8File, checkpoint.fp8);
  if (!checkpoint.tokenizer_model.empty()) {
    sizes[kTokenizerModelFile] = write_file(dir / kTokenizerModelFile, checkpoint.tokenizer_model);
  }
  nlohmann::json manifest = {
      {"format", kManifestFormat}, {"version", kManifestVersion}, {"step", step}, {"files", sizes}};
  if (checkpoint.model_only) manifest["model_only"] = true;
  write_json(dir / kManifestFile, manifest);
}

}  // namespace

const std::vector<std::string>& checkpoint_files() {
  static const std::vector<std::string> files = [] {
    std::vector<std::string> all = data_files();
    all.push_back(kManifestFile);
    return all;
  }();
  return files;
}

std::optional<int64_t> checkpoint_step(const fs::path& dir) {
  const std::string name = dir.filename().string();
  const std::string prefix = "checkpoint-";
  int64_t step = 0;
  if (name.rfind(prefix, 0) != 0 || !parse_digits(name.substr(prefix.size()), step)) return std::nullopt;
  return step;
}

fs::path save_checkpoint(const fs::path& output_dir, int64_t step, const Checkpoint& checkpoint) {
  check(step >= 0, "save_checkpoint: step must be >= 0, got ", step);
  std::error_code ec;
  fs::create_directories(output_dir, ec);
  check(!ec, "save_checkpoint: cannot create ", output_dir.string(), ": ", ec.message());
  cleanup_checkpoints(output_dir);

  const fs::path final_dir = output_dir / ("checkpoint-" + std::to_string(step));
  const fs::path tmp = temp_dir(output_dir, "tmp", step);
  remove_tree(tmp);  // left by an earlier failed save of this process
  fs::create_directory(tmp, ec);
  check(!ec, "save_checkpoint: cannot create ", tmp.string(), ": ", ec.message());
  try {
    write_contents(tmp, step, checkpoint);
    fsync_path(tmp);  // the renames of every file inside it
  } catch (...) {
    fs::remove_all(tmp, ec);
    throw;
  }

  if (!fs::exists(fs::symlink_status(final_dir))) {
    rename_path(tmp, final_dir);
  } else if (!rename_aside_forced && exchange_paths(tmp, final_dir)) {
    // The old checkpoint now sits under the temporary name: make the swap durable, then delete.
    fsync_path(output_dir);
    remove_tree(tmp);
  } else {
    // No RENAME_EXCHANGE: rename the old one aside first. A crash between the two renames
    // leaves it complete under .old-, and cleanup_checkpoints puts it back.
    const fs::path old = temp_dir(output_dir, "old", step);
    remove_tree(old);
    rename_path(final_dir, old);
    rename_path(tmp, final_dir);
    fsync_path(output_dir);
    remove_tree(old);
  }
  fsync_path(output_dir);
  return final_dir;
}

void verify_checkpoint(const fs::path& dir, bool checksums) {
  std::error_code ec;
  check(fs::is_directory(dir, ec), dir.string(), ": not a checkpoint directory (does not exist or is not a directory)");
  for (const std::string& name : data_files()) {
    check(training_state_file(name) || fs::is_regular_file(dir / name, ec), dir.string(), ": missing ", name);
  }
  check(fs::is_regular_file(dir / kManifestFile, ec), dir.string(), ": missing ", kManifestFile,
        " (written last: the save did not finish)");
  const nlohmann::json manifest = read_json(dir / kManifestFile);
  const bool model_only = manifest.is_object() && manifest.contains("model_only") && manifest["model_only"] == true;
  for (const std::string& name : data_files()) {
    check(model_only || fs::is_regular_file(dir / name, ec), dir.string(), ": missing ", name);
  }
  const std::string where = (dir / kManifestFile).string();
  // Comparisons only: a manifest of the wrong types is reported, never a nlohmann type_error.
  check(manifest.is_object() && manifest.contains("format") && manifest["format"] == kManifestFormat, where, ": not a ",
        kManifestFormat, " manifest");
  const nlohmann::json version = manifest.contains("version") ? manifest["version"] : nlohmann::json();
  check(version == 1 || version == kManifestVersion, where, ": version ", version.dump(),
        ", this halfgrad reads versions 1 and ", kManifestVersion);
  const nlohmann::json files = manifest.contains("files") ? manifest["files"] : nlohmann::json();
  std::vector<std::string> names;
  for (const std::string& name : data_files()) {
    if (!model_only || !training_state_file(name)) names.push_back(name);
  }
  for (const char* optional : {kFp8File, kTokenizerModelFile}) {  // fp8 runs; sentencepiece tokenizers
    if (files.is_object() && files.contains(optional)) names.push_back(optional);
  }
  for (const std::string& name : names) {
    // Version 1: {"name": size}; version 2: {"name": {"size": n, "sha256": "hex"}}.
    const nlohmann::json entry = files.is_object() && files.contains(name) ? files[name] : nlohmann::json();
    const nlohmann::json size = version == 1                                  ? entry
                                : entry.is_object() && entry.contains("size") ? entry["size"]
                                                                              : nlohmann::json();
    check(size.is_number_unsigned(), where, ": does not record the size of ", name);
    const uint64_t recorded = size.get<uint64_t>(), actual = size_of(dir / name);
    check(actual == recorded, dir.string(), ": ", name, " is ", actual, " bytes but ", kManifestFile, " records ",
          recorded, " (truncated or replaced)");
    if (version == 1) continue;
    const nlohmann::json sha = entry.contains("sha256") ? entry["sha256"] : nlohmann::json();
    check(sha.is_string() && sha.get_ref<const std::string&>().size() == 64, where, ": does not record the SHA-256 of ",
          name);
    if (!checksums) continue;
    const std::string actual_sha = sha256_file(dir / name);
    check(actual_sha == sha.get_ref<const std::string&>(), dir.string(), ": ", name, " has SHA-256 ", actual_sha,
          " but ", kManifestFile, " records ", sha.get<std::string>(), " (corrupted or replaced)");
  }
}

bool checkpoint_complete(const fs::path& dir) {
  try {
    verify_checkpoint(dir);
    return true;
  } catch (const Error&) {
    return false;
  }
}

Checkpoint load_checkpoint(const fs::path& dir) {
  verify_checkpoint(dir, /*checksums=*/true);
  Checkpoint out;
  out.model = load_safetensors((dir / kModel).string()).tensors;
  out.config = read_json(dir / kConfig);
  const nlohmann::json manifest = read_json(dir / kManifestFile);
  out.model_only = manifest.contains("model_only") && manifest["model_only"] == true;
  if (!out.model_only) {
    out.optimizer.tensors = load_safetensors((dir / kOptimizerTensors).string()).tensors;
    out.optimizer.meta = read_json(dir / kOptimizerMeta);
    out.scheduler = read_json(dir / kScheduler);
    out.scaler = read_json(dir / kScaler);
    out.rng = read_json(dir / kRng);
  }
  out.trainer_state = read_json(dir / kTrainerState);
  const nlohmann::json& files = manifest["files"];
  if (files.contains(kFp8File)) out.fp8 = read_json(dir / kFp8File);
  if (files.contains(kTokenizerModelFile)) out.tokenizer_model = read_text(dir / kTokenizerModelFile);
  return out;
}

std::vector<fs::path> list_checkpoints(const fs::path& output_dir) {
  std::vector<std::pair<int64_t, fs::path>> found;
  std::error_code ec;
  if (!fs::is_directory(output_dir, ec)) return {};
  for (const fs::directory_entry& entry : fs::directory_iterator(output_dir, ec)) {
    const std::optional<int64_t> step = checkpoint_step(entry.path());
    if (step && entry.is_directory(ec) && checkpoint_complete(entry.path())) found.emplace_back(*step, entry.path());
  }
  check(!ec, "list_checkpoints: cannot read ", output_dir.string(), ": ", ec.message());
  std::sort(found.begin(), found.end());
  std::vector<fs::path> out;
  for (auto& [step, path] : found) out.push_back(std::move(path));
  return out;
}

fs::path latest_checkpoint(const fs::path& output_dir) {
  const std::vector<fs::path> all = list_checkpoints(output_dir);
  return all.empty() ? fs::path() : all.back();
}

std::vector<fs::path> rotate_checkpoints(const fs::path& output_dir, int64_t save_total_limit, const fs::path& keep) {
  std::vector<fs::path> deleted;
  if (save_total_limit <= 0) return deleted;
  const std::vector<fs::path> all = list_checkpoints(output_dir);
  if (int64_t(all.size()) <= save_total_limit) return deleted;
  for (size_t i = 0; i < all.size() - size_t(save_total_limit); ++i) {
    std::error_code ec;
    if (!keep.empty() && fs::equivalent(all[i], keep, ec)) continue;
    const fs::path doomed = temp_dir(output_dir, "del", *checkpoint_step(all[i]));
    remove_tree(doomed);
    rename_path(all[i], doomed);
    fsync_path(output_dir);
    remove_tree(doomed);
    deleted.push_back(all[i]);
  }
  return deleted;
}

int cleanup_checkpoints(const fs::path& output_dir) {
  std::error_code ec;
  if (!fs::is_directory(output_dir, ec)) return 0;
  std::vector<std::pair<fs::path, TempName>> stale;
  for (const fs::directory_entry& entry : fs::directory_iterator(output_dir, ec)) {
    const std::optional<TempName> temp = parse_temp_name(entry.path().filename().string());
    // A directory of this process or of a running one belongs to a save in progress.
    if (temp && temp->pid != ::getpid() && !process_alive(temp->pid)) stale.emplace_back(entry.path(), *temp);
  }
  check(!ec, "cleanup_checkpoints: cannot read ", output_dir.string(), ": ", ec.message());
  int count = 0;
  for (const auto& [path, temp] : stale) {
    const fs::path home = output_dir / ("checkpoint-" + std::to_string(temp.step));
    if (temp.kind == "old" && !fs::exists(fs::symlink_status(home)) && checkpoint_complete(path)) {
      rename_path(path, home);
    } else {
      remove_tree(path);
    }
    ++count;
  }
  if (count > 0) fsync_path(output_dir);
  return count;
}

namespace detail {
void force_rename_aside(bool on) { rename_aside_forced = on; }
}  // namespace detail

}  // namespace hg::io
