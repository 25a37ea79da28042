// ForkGate: no thread is inside the allocator when the process forks.
//
// Note [Fork gate]
// ~~~~~~~~~~~~~~~~
// A child inherits every mutex as it was at the fork, held by threads it does not have. A thread
// is inside the allocator without the GIL more often than not: torch's bindings release it
// around pin_memory() and copies, and ours around frees, empty_cache and the graph hooks. Each
// call of the registered allocator (and its deleter, and each binding into the implementation,
// release_gil_in_pass) is a Pass. The prepare handler closes the gate and waits, bounded by
// kForkWait, until no Pass is inside, before it takes our locks (lock_for_fork); a thread that
// comes to the gate meanwhile waits at it until the fork is made. So no thread holds a lock of
// ours, ATen's or torch_npu's allocator's through our calls at the fork, and the child finds the
// gate open and empty. Natively a thread pinning at the fork may leave torch_npu's mutex locked in
// the child. The bound: a Pass may wait on torch_npu's task queue, whose thread may need the GIL
// the forking thread holds; the fork then goes on as it would without the gate. Passes do not nest
// (a call of the registered allocator never makes another): a nested one met at a closed gate would
// only hold the fork up until the bound.
#pragma once

#include <atomic>
#include <chrono>
#include <thread>

namespace torch_npu_pinpool {

// How long the prepare handler waits for the gate and for each lock.
inline constexpr std::chrono::milliseconds kForkWait{200};

class ForkGate {
 public:
  class Pass {
   public:
    Pass() { enter(); }
    ~Pass() { leave(); }
    Pass(const Pass&) = delete;
    Pass& operator=(const Pass&) = delete;
  };

  // The prepare handler: returns once no Pass is inside, or after `bound`; closed either way.
  static void close(std::chrono::milliseconds bound) {
    closed_.store(true);
    const auto give_up = std::chrono::steady_clock::now() + bound;
    while (inside_.load() != 0 && std::chrono::steady_clock::now() < give_up) {
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }
  static void open() { closed_.store(false); }
  static void open_in_child() {  // the threads inside are not in the child
    inside_.store(0);
    closed_.store(false);
  }

 private:
  static void enter() {
    for (;;) {
      inside_.fetch_add(1);
      if (!closed_.load()) {
        return;
      }
      inside_.fetch_sub(1);
      while (closed_.load()) {
        std::this_thread::sleep_for(std::chrono::microseconds(100));
      }
    }
  }
  static void leave() { inside_.fetch_sub(1); }

  static inline std::atomic<int> inside_{0};
  static inline std::atomic<bool> closed_{false};
};

}  // namespace torch_npu_pinpool
