// ForkGate's slow side: slots, the kernel's membarrier, closing and opening (Note [Fork gate]).
#include "runtime/fork_gate.h"

#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace torch_npu_pinpool {

namespace {
bool membarrier(int cmd) { return syscall(__NR_membarrier, cmd, 0, 0) == 0; }
}  // namespace

pthread_key_t ForkGate::slot_key() {
  static const pthread_key_t key = [] {
    pthread_key_t k;
    pthread_key_create(&k, [](void* slot) {  // after the thread's C++ thread_local destructors
      t_slot_ = nullptr;                      // a later Pass of this thread takes one again
      static_cast<Slot*>(slot)->taken.store(false, std::memory_order_release);
    });
    return k;
  }();
  return key;
}

void ForkGate::start() {
  slot_key();
  light_.store(membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED));
}

ForkGate::Slot* ForkGate::take_slot() {
  Slot* slot = slots_.load(std::memory_order_acquire);
  bool taken = false;
  while (slot != nullptr && (slot->taken.load(std::memory_order_relaxed) ||
                             !slot->taken.compare_exchange_strong(taken, true))) {
    slot = slot->next;
    taken = false;
  }
  if (slot == nullptr) {
    slot = new Slot();
    slot->taken.store(true, std::memory_order_relaxed);
    slot->next = slots_.load(std::memory_order_relaxed);
    while (!slots_.compare_exchange_weak(slot->next, slot)) {
    }
  }
  pthread_setspecific(slot_key(), slot);
  return t_slot_ = slot;
}

void ForkGate::close(std::chrono::milliseconds bound) {
  closed_.store(true);
  if (light_.load() && !membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)) {
    light_.store(false);  // not expected once registered; later Passes fence
  }
  const auto give_up = std::chrono::steady_clock::now() + bound;
  for (Slot* slot = slots_.load(std::memory_order_acquire); slot != nullptr; slot = slot->next) {
    poll_until([slot] { return slot->inside.load(std::memory_order_acquire) == 0; }, give_up);
  }
}

void ForkGate::open_in_child() {
  for (Slot* slot = slots_.load(); slot != nullptr; slot = slot->next) {
    if (slot != t_slot_) {
      slot->inside.store(0);
      slot->taken.store(false);
    }
  }
  light_.store(membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED));  // the child's own mm
  closed_.store(false);
}

}  // namespace torch_npu_pinpool
