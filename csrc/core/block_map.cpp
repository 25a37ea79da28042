// BlockMap (Note [Block map]).
#include "core/block_map.h"

#include <c10/util/Exception.h>

namespace torch_npu_pinpool {

void BlockMap::insert(c10::DataPtr data, size_t size, PinBlock* block) {
  const auto addr = reinterpret_cast<uintptr_t>(data.get());
  std::lock_guard<std::mutex> lock(mutex_);
  blocks_.emplace(addr, Entry{std::move(data), size, block});
}

void BlockMap::bind(const void* ptr, PinBlock* block) {
  std::lock_guard<std::mutex> lock(mutex_);
  blocks_.at(reinterpret_cast<uintptr_t>(ptr)).block = block;
}

c10::DataPtr BlockMap::take(const void* ptr) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = blocks_.find(reinterpret_cast<uintptr_t>(ptr));
  TORCH_INTERNAL_ASSERT(it != blocks_.end(), "pinned block not in the block map");
  c10::DataPtr data = std::move(it->second.data);
  blocks_.erase(it);
  return data;
}

PinBlock* BlockMap::find(const void* ptr) {
  const auto addr = reinterpret_cast<uintptr_t>(ptr);
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = blocks_.upper_bound(addr);
  if (it == blocks_.begin()) {
    return nullptr;
  }
  --it;
  return addr < it->first + it->second.size ? it->second.block : nullptr;
}

}  // namespace torch_npu_pinpool
