// Fuzzes the disk cache entry decoder: decode_manifest (the head that list()
// reads) and verify_entry (a whole entry) on arbitrary bytes. An entry that
// verifies must encode back to the same bytes.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "runtime/disk_cache_entry.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  (void)fusejit::decode_manifest(bytes);
  auto e = fusejit::verify_entry(bytes);
  if (!e) return 0;
  if (e->manifest_bytes > size || size - e->manifest_bytes != e->payload_bytes) std::abort();
  auto again = fusejit::encode_entry(e->key, bytes.substr(e->manifest_bytes), e->created_unix);
  if (!again || *again != bytes) std::abort();  // a verified entry is canonical
  return 0;
}
