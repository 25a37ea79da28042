// Ending signals routed to the main thread, for the report's SIGTERM / SIGINT handler.
//
// Note [Ending signals reach the main thread]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Where a process has no handler of its own for SIGTERM / SIGINT, the report installs one
// (_report_writer.py: _die_like_default) that writes the report and then dies of the signal as
// SIG_DFL would. It is a Python handler: it runs on the main thread, between bytecodes. The kernel
// delivers a process-directed signal to any thread that does not block it, and on another thread
// CPython's C handler only sets a flag: a main thread blocked in a wait (Event.wait, join, a
// lock) would run the handler when the wait ends, if ever, where SIG_DFL ends the process at once.
// So while that handler is installed the C handler is wrapped: on another thread it sends the
// signal on to the main thread (pthread_kill), whose wait then returns EINTR and runs the Python
// handler; on the main thread it is CPython's. Setting any handler later (signal.signal) replaces
// the wrapper.
#pragma once

namespace torch_npu_pinpool {

// On the main thread, right after signal.signal(signum, a Python handler). Returns false (and
// changes nothing) when no Python handler is installed for `signum`.
bool route_to_main_thread(int signum);

}  // namespace torch_npu_pinpool
