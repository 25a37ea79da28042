// TEST ENVIRONMENT ONLY -- never needed on a real Ascend machine, which runs the CPU build of
// torch. See README.md beside this file.
//
// PyPI has only the CUDA build of torch 2.8-2.10 for Linux x86_64. Its libtorch_cuda.so
// registers CUDAAllocatorConfig's keys (REGISTER_ALLOCATOR_CONFIG_PARSE_HOOK) in
// c10::CachingAllocator::AcceleratorAllocatorConfig's key set at load; torch_npu's library
// then registers its own NPU keys in the same set when `import torch_npu` loads it, and
// registerDeviceConfigParserHook aborts on the first key both have
// ("Duplicated key 'pinned_reserve_segment_size_mb'"). A CPU build of torch registers no
// device keys, so this cannot happen there.
//
// pinpool_keyfix_apply() removes every key that is not one of AcceleratorAllocatorConfig's own
// (kBaseKeys, read from this torch's c10/core/AllocatorConfig.h at build time by install.py),
// i.e. the keys the CUDA build added. It must run after `import torch` and before torch_npu's
// library loads. getMutableKeys()'s static set is an STB_GNU_UNIQUE symbol, so this library,
// libc10, libtorch_cuda and libtorch_npu all see the same set.
#include <c10/core/AllocatorConfig.h>

#include <cstdio>
#include <iterator>
#include <string>
#include <unordered_set>

#include "base_keys.inc"  // static const char* const kBaseKeys[] = {...};

extern "C" {

// Writes the removed keys, comma-separated, into out[0..n) and returns how many were removed.
int pinpool_keyfix_apply(char* out, size_t n) {
  auto& keys = c10::CachingAllocator::AcceleratorAllocatorConfig::getMutableKeys();
  const std::unordered_set<std::string> base(std::begin(kBaseKeys), std::end(kBaseKeys));
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

// Writes the current key set, comma-separated (for checks and debugging).
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
