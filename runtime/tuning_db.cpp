#include "runtime/tuning_db.h"

#include <cstdio>
#include <sstream>

#include "runtime/disk_cache.h"
#include "runtime/disk_cache_files.h"
#include "runtime/log.h"

namespace fusejit {
namespace {
constexpr const char* kMagic = "fusejit-tuning 1";
}

CacheKey tuning_key(const Graph& g, const DeviceInfo& d, const std::string& arch) {
  CacheKey k;
  k.add("graph", hash_hex(structural_hash(g)));
  k.add("device", d.name);
  k.add("sms", std::to_string(d.sm_count));
  k.add("driver", std::to_string(d.driver_version));
  k.add("fusejit", generator_version());
  k.add("arch", arch);
  return k;
}

std::string TuningDb::default_dir() {
  std::string base = DiskCache::default_dir();
  return base.empty() ? "" : base + "/tuning";
}

TuningDb::TuningDb(std::string dir, std::shared_ptr<RemoteCache> remote)
    : dir_(std::move(dir)), remote_(std::move(remote)) {}

std::string TuningDb::path(const CacheKey& key) const { return dir_ + "/" + key.digest() + ".tune"; }

std::optional<TuningRecord> TuningDb::lookup(const CacheKey& key) const {
  FileRead r;
  if (!dir_.empty()) r = read_private_file(path(key), 1 << 20);
  if (r.outcome == ReadOutcome::Ok) return parse(key, r.bytes);
  if (r.outcome != ReadOutcome::Absent && !dir_.empty()) {
    log::warn("ignoring tuning record " + path(key) + ": " + r.problem);
    return std::nullopt;
  }
  std::optional<std::string> remote = remote_ ? remote_->get(RemoteCache::kTuning, key) : std::nullopt;
  if (!remote) return std::nullopt;
  auto rec = parse(key, *remote);
  if (rec && !dir_.empty() && make_private_dir(dir_)) (void)write_file_atomically(dir_, path(key), *remote);
  return rec;
}

std::optional<TuningRecord> TuningDb::parse(const CacheKey& key, const std::string& text) const {
  std::istringstream in(text);
  std::string line;
  if (!std::getline(in, line) || line != kMagic) return std::nullopt;
  TuningRecord rec;
  CacheKey stored;
  bool has_winner = false;
  while (std::getline(in, line)) {
    auto sp = line.find(' ');
    std::string tag = line.substr(0, sp), rest = sp == std::string::npos ? "" : line.substr(sp + 1);
    if (tag == "key") {
      auto sp2 = rest.find(' ');
      stored.add(rest.substr(0, sp2), sp2 == std::string::npos ? "" : rest.substr(sp2 + 1));
    } else if (tag == "winner") {
      rec.config = rest;
      has_winner = true;
    } else if (tag == "winner_ms") {
      rec.median_ms = std::strtod(rest.c_str(), nullptr);
    } else if (tag == "spread_ms") {
      rec.spread_ms = std::strtod(rest.c_str(), nullptr);
    } else if (tag == "default_ms") {
      rec.default_ms = std::strtod(rest.c_str(), nullptr);
    } else if (tag == "created") {
      rec.created_unix = std::strtoll(rest.c_str(), nullptr, 10);
    } else if (tag == "candidates") {
      std::stringstream rest_of_file;
      rest_of_file << in.rdbuf();
      rec.table = rest_of_file.str();
      break;
    }
  }
  if (!has_winner || !(stored == key)) return std::nullopt;  // torn/foreign content: treat as a miss
  return rec;
}

Status TuningDb::save(const CacheKey& key, const TuningRecord& rec) const {
  std::string text = std::string(kMagic) + "\n";
  for (const auto& [name, value] : key.parts) text += "key " + name + " " + value + "\n";
  char nums[256];
  std::snprintf(nums, sizeof nums, "winner_ms %.6f\nspread_ms %.6f\ndefault_ms %.6f\ncreated %lld\n", rec.median_ms,
                rec.spread_ms, rec.default_ms, static_cast<long long>(rec.created_unix));
  text += "winner " + rec.config + "\n" + nums + "candidates\n" + rec.table;
  if (remote_) (void)remote_->put(RemoteCache::kTuning, key, text);  // failures have warned
  if (dir_.empty()) return Error("no cache directory (set FUSEJIT_CACHE_DIR or HOME)");
  if (Status s = make_private_dir(dir_); !s) return s;
  return write_file_atomically(dir_, path(key), text);
}

}  // namespace fusejit
