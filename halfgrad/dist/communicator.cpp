// The one-process communicator, the choice of the job's communicator, and the agreement steps
// built on allgatherv.
#include "halfgrad/dist/communicator.h"

#include <cstdlib>
#include <exception>

#include "halfgrad/base/error.h"

namespace hg::dist {

#ifdef HALFGRAD_HAVE_MPI
std::unique_ptr<Communicator> make_mpi_communicator();  // halfgrad/dist/mpi_communicator.cpp
#endif

void LocalCommunicator::allgatherv(std::span<const std::byte> mine, std::span<const int64_t> counts,
                                   std::span<std::byte> out) {
  check(counts.size() == 1 && counts[0] == int64_t(mine.size()) && out.size() == mine.size(),
        "LocalCommunicator::allgatherv: counts do not match the buffers");
  if (!mine.empty()) std::memcpy(out.data(), mine.data(), mine.size());
}

void LocalCommunicator::abort(int code) { std::exit(code); }

namespace {

// The number of processes the launcher started, from its environment (0: not launched by one).
int launched_processes() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"}) {
    if (const char* value = std::getenv(name)) return std::max(1, std::atoi(value));
  }
  return std::getenv("PMIX_RANK") != nullptr ? 1 : 0;
}

std::unique_ptr<Communicator> make_world() {
  const int processes = launched_processes();
#ifdef HALFGRAD_HAVE_MPI
  if (processes > 0) return make_mpi_communicator();
#else
  check(processes <= 1, "launched by mpirun with ", processes,
        " processes, but this halfgrad was built without MPI (the CMake option HALFGRAD_MPI is OFF: install "
        "libopenmpi-dev and rebuild); each process would train alone into the same output directory");
#endif
  return std::make_unique<LocalCommunicator>();
}

}  // namespace

Communicator& world() {
  static const std::unique_ptr<Communicator> communicator = make_world();
  return *communicator;
}

std::vector<std::vector<std::byte>> allgather(Communicator& comm, std::span<const std::byte> mine) {
  const std::vector<int64_t> counts = allgather_value(comm, int64_t(mine.size()));
  int64_t total = 0;
  for (int64_t c : counts) total += c;
  std::vector<std::byte> all(static_cast<size_t>(total));
  comm.allgatherv(mine, counts, all);
  std::vector<std::vector<std::byte>> out;
  size_t at = 0;
  for (int64_t c : counts) {
    out.emplace_back(all.begin() + std::ptrdiff_t(at), all.begin() + std::ptrdiff_t(at + size_t(c)));
    at += size_t(c);
  }
  return out;
}

namespace {

std::string text_of(const std::vector<std::byte>& bytes) {
  return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

}  // namespace

void fail_agreed(Communicator& comm, const std::string& message) {
  comm.set_failure_agreed();
  fail(message);
}

void agree(Communicator& comm, const std::function<void()>& body) {
  std::string error;
  try {
    body();
  } catch (const std::exception& e) {
    error = e.what();
    if (error.empty()) error = "unknown error";
  }
  if (comm.size() == 1) {  // nothing to agree on: rethrow as is
    if (!error.empty()) fail(error);
    return;
  }
  const auto all = allgather(comm, std::as_bytes(std::span(error.data(), error.size())));
  for (size_t r = 0; r < all.size(); ++r) {
    if (!all[r].empty()) fail_agreed(comm, "rank " + std::to_string(r) + ": " + text_of(all[r]));
  }
}

void check_same(Communicator& comm, const nlohmann::json& value, const std::string& what) {
  if (comm.size() == 1) return;
  const std::string mine = value.dump();
  const auto all = allgather(comm, std::as_bytes(std::span(mine.data(), mine.size())));
  const nlohmann::json first = nlohmann::json::parse(text_of(all[0])).flatten();
  for (size_t r = 1; r < all.size(); ++r) {
    if (text_of(all[r]) == text_of(all[0])) continue;
    const nlohmann::json other = nlohmann::json::parse(text_of(all[r])).flatten();
    std::string key = "(the whole value)", a = first.dump(), b = other.dump();
    for (const auto& [k, v] : first.items()) {
      if (!other.contains(k) || other.at(k) != v) {
        key = k, a = v.dump(), b = other.contains(k) ? other.at(k).dump() : "absent";
        break;
      }
    }
    if (key == "(the whole value)") {
      for (const auto& [k, v] : other.items()) {
        if (!first.contains(k)) {
          key = k, a = "absent", b = v.dump();
          break;
        }
      }
    }
    fail_agreed(comm, what + " differ across ranks: " + key + " is " + a + " on rank 0 but " + b + " on rank " +
                          std::to_string(r) + " (launch every rank with the same flags and the same data)");
  }
}

}  // namespace hg::dist
