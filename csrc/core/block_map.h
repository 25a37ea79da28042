// BlockMap: which pinned blocks are ours, by address, and the DataPtr that pinned each.
//
// Note [Block map]
// ~~~~~~~~~~~~~~~~
// The map alone says which blocks are ours, by start address. A lookup takes the address a copy
// used (any byte of a block), never a ctx: an alias's ctx (from_numpy, DLPack, frombuffer) is not
// a block. A Base block is pinned before ATen makes its PinBlock, so it is bound on the way out of
// Base::allocate (allocate_eager). Its mutex is a leaf but for OwnBlockStats' (Note [Allocator
// design]); a DataPtr taken out of the map dies after it, with no lock of ours held.
#pragma once

#include <c10/core/Allocator.h>

#include <cstdint>
#include <map>
#include <mutex>

namespace torch_npu_pinpool {

struct PinBlock;

class BlockMap {
 public:
  // `block` is null for a Base block not yet made; bind() names it.
  void insert(c10::DataPtr data, size_t size, PinBlock* block);
  void bind(const void* ptr, PinBlock* block);
  c10::DataPtr take(const void* ptr);     // the block starting at `ptr`, which must be ours
  PinBlock* find(const void* ptr);        // the block holding any byte at `ptr`, or null
  std::mutex& mutex() { return mutex_; }  // taken around fork() (Note [Forked children])

 private:
  struct Entry {
    c10::DataPtr data;
    size_t size;
    PinBlock* block;
  };
  std::mutex mutex_;
  std::map<uintptr_t, Entry> blocks_;
};

}  // namespace torch_npu_pinpool
