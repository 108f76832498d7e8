// An open-addressing hash map from non-negative int64 keys to small values,
// for the sampled reference's memo tables (far cheaper than unordered_map).
#pragma once

#include <cstdint>
#include <vector>

namespace fusejit::ref {

template <class V>
class FlatCache {
 public:
  const V* find(int64_t key) const {
    if (keys_.empty()) return nullptr;
    for (size_t i = slot(key);; i = (i + 1) & mask_) {
      if (keys_[i] == key) return &values_[i];
      if (keys_[i] == kEmpty) return nullptr;
    }
  }

  // `key` must not be present yet.
  void insert(int64_t key, const V& value) {
    if (2 * (size_ + 1) > keys_.size()) grow();
    size_t i = slot(key);
    while (keys_[i] != kEmpty) i = (i + 1) & mask_;
    keys_[i] = key;
    values_[i] = value;
    ++size_;
  }

  size_t size() const { return size_; }
  void clear() { *this = FlatCache(); }

 private:
  static constexpr int64_t kEmpty = -1;
  std::vector<int64_t> keys_;
  std::vector<V> values_;
  size_t size_ = 0, mask_ = 0;
  int shift_ = 64;

  size_t slot(int64_t key) const {
    return static_cast<size_t>((static_cast<uint64_t>(key) * 0x9E3779B97F4A7C15ull) >> shift_);
  }

  void grow() {
    std::vector<int64_t> old_keys = std::move(keys_);
    std::vector<V> old_values = std::move(values_);
    size_t cap = old_keys.empty() ? 64 : 2 * old_keys.size();
    keys_.assign(cap, kEmpty);
    values_.assign(cap, V{});
    mask_ = cap - 1;
    shift_ = 64 - __builtin_ctzll(cap);
    size_ = 0;
    for (size_t i = 0; i < old_keys.size(); ++i)
      if (old_keys[i] != kEmpty) insert(old_keys[i], old_values[i]);
  }
};

}  // namespace fusejit::ref
