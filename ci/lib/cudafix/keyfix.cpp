// TEST ENVIRONMENT ONLY -- never needed on a real Ascend machine, which runs the CPU build of
// torch. See README.md beside this file.
//
// PyPI has only the CUDA build of torch for Linux x86_64 (2.8-2.12, 2.14). Its libc10_cuda.so
// registers CUDAAllocatorConfig's keys (REGISTER_ALLOCATOR_CONFIG_PARSE_HOOK) in
// c10::CachingAllocator::AcceleratorAllocatorConfig's key set at load; torch_npu's library
// then registers its own NPU keys in the same set when `import torch_npu` loads it, and
// registerDeviceConfigParserHook aborts on the first key both have
// ("Duplicated key 'pinned_reserve_segment_size_mb'"). A CPU build of torch registers no
// device keys, so this cannot happen there.
//
// pinpool_keyfix_apply(base) removes every key that is not in `base`, the keys
// AcceleratorAllocatorConfig starts with (install.py measures them with libc10 loaded alone),
// i.e. the keys the CUDA build added. It must run after `import torch` and before torch_npu's
// library loads. getMutableKeys()'s static set is an STB_GNU_UNIQUE symbol, so this library,
// libc10, libc10_cuda and libtorch_npu all see the same set.
#include <c10/core/AllocatorConfig.h>

#include <cstdio>
#include <sstream>
#include <string>
#include <unordered_set>

extern "C" {

// base_csv: the keys to keep, comma-separated. Writes the removed keys, comma-separated, into
// out[0..n) and returns how many were removed.
int pinpool_keyfix_apply(const char* base_csv, char* out, size_t n) {
  std::unordered_set<std::string> base;
  std::istringstream in(base_csv != nullptr ? base_csv : "");
  for (std::string key; std::getline(in, key, ',');) {
    if (!key.empty()) base.insert(key);
  }
  auto& keys = c10::CachingAllocator::AcceleratorAllocatorConfig::getMutableKeys();
  std::string removed;
  int count = 0;
  for (auto it = keys.begin(); it != keys.end();) {
    if (base.count(*it) == 0) {
      if (!removed.empty()) removed += ',';
      removed += *it;
      it = keys.erase(it);
      ++count;
    } else {
      ++it;
    }
  }
  if (out != nullptr && n > 0) std::snprintf(out, n, "%s", removed.c_str());
  return count;
}

// Writes the current key set, comma-separated (for the measurement of the base keys, checks
// and debugging).
int pinpool_keyfix_list(char* out, size_t n) {
  const auto& keys = c10::CachingAllocator::AcceleratorAllocatorConfig::getKeys();
  std::string all;
  for (const auto& k : keys) {
    if (!all.empty()) all += ',';
    all += k;
  }
  if (out != nullptr && n > 0) std::snprintf(out, n, "%s", all.c_str());
  return static_cast<int>(keys.size());
}

}  // extern "C"
