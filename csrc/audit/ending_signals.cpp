// Note [Ending signals reach the main thread]
#include "audit/ending_signals.h"

#include <pthread.h>
#include <signal.h>

namespace torch_npu_pinpool {
namespace {

pthread_t g_main_thread;
struct sigaction g_python[NSIG];  // CPython's handler of each routed signal

void call_python(int signum, siginfo_t* info, void* context) {
  const struct sigaction& python = g_python[signum];
  if ((python.sa_flags & SA_SIGINFO) != 0) {
    python.sa_sigaction(signum, info, context);
  } else {
    python.sa_handler(signum);
  }
}

void routed(int signum, siginfo_t* info, void* context) {
  if (!pthread_equal(pthread_self(), g_main_thread) && pthread_kill(g_main_thread, signum) == 0) {
    return;  // the main thread takes it
  }
  call_python(signum, info, context);
}

}  // namespace

bool route_to_main_thread(int signum) {
  if (signum <= 0 || signum >= NSIG) {
    return false;
  }
  struct sigaction current{};
  sigaction(signum, nullptr, &current);
  const bool sa_info = (current.sa_flags & SA_SIGINFO) != 0;
  if (sa_info && current.sa_sigaction == &routed) {
    return true;
  }
  if (!sa_info && (current.sa_handler == SIG_DFL || current.sa_handler == SIG_IGN)) {
    return false;
  }
  g_main_thread = pthread_self();
  g_python[signum] = current;
  struct sigaction wrapper = current;
  wrapper.sa_sigaction = &routed;
  wrapper.sa_flags |= SA_SIGINFO;
  return sigaction(signum, &wrapper, nullptr) == 0;
}

}  // namespace torch_npu_pinpool
