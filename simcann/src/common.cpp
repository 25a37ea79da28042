// Configuration, logging, error messages, violations, the control API and the stub hook.
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "state.h"

namespace simcann {
namespace {

int64_t env_int(const char* name, int64_t dflt) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return dflt;
  return std::strtoll(v, nullptr, 10);
}

bool env_flag(const char* name) { return env_int(name, 0) != 0; }

long tid() { return static_cast<long>(syscall(SYS_gettid)); }

std::atomic<int64_t> g_violations{0};

thread_local std::string t_error;     // message for the next aclGetRecentErrMsg
thread_local std::string t_returned;  // keeps the returned pointer valid until the next call

void vprint(const char* prefix, const char* fmt, va_list ap) {
  char buf[2048];
  std::vsnprintf(buf, sizeof(buf), fmt, ap);
  std::fprintf(stderr, "%s[%ld]: %s\n", prefix, tid(), buf);
  std::fflush(stderr);
}

}  // namespace

Config& config() {
  // Leaked on purpose: worker threads may still run while static destructors do.
  static Config* c = [] {
    auto* cfg = new Config();
    cfg->device_count = static_cast<int>(env_int("SIMCANN_DEVICE_COUNT", 1));
    if (cfg->device_count < 1) cfg->device_count = 1;
    if (const char* soc = std::getenv("SIMCANN_SOC")) {
      if (*soc) cfg->soc = soc;
    }
    if (const char* v = std::getenv("SIMCANN_CANN_VERSION")) cfg->cann_version = v;
    // A driver new enough for what the CANN version offers, unless said otherwise (torch_npu
    // asks for driver >= 25.5.0 / 26.0.RC1 before it registers pinned memory).
    if (!cfg->cann_version.empty()) cfg->driver_version = "26.0.RC1";
    if (const char* v = std::getenv("SIMCANN_DRIVER_VERSION")) cfg->driver_version = v;
    cfg->trace = env_flag("SIMCANN_TRACE");
    cfg->strict = env_flag("SIMCANN_STRICT");
    cfg->report_leaks = env_flag("SIMCANN_REPORT_LEAKS");
    cfg->task_delay_us = env_int("SIMCANN_TASK_DELAY_US", 0);
    cfg->fail_malloc_host_at = env_int("SIMCANN_FAIL_MALLOC_HOST_AT", 0);
    cfg->fail_capture_begin_at = env_int("SIMCANN_FAIL_CAPTURE_BEGIN_AT", 0);
    cfg->fail_capture_end_at = env_int("SIMCANN_FAIL_CAPTURE_END_AT", 0);
    cfg->invalidate_capture_at = env_int("SIMCANN_INVALIDATE_CAPTURE_AT", 0);
    return cfg;
  }();
  return *c;
}

bool trace_enabled() { return config().trace; }

void log(const char* fmt, ...) {
  if (!trace_enabled()) return;
  va_list ap;
  va_start(ap, fmt);
  vprint("simcann", fmt, ap);
  va_end(ap);
}

void warn(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vprint("simcann", fmt, ap);
  va_end(ap);
}

void set_error(const char* fmt, ...) {
  char buf[2048];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  t_error = buf;
  log("error: %s", buf);
}

void violation(const char* fmt, ...) {
  char buf[2048];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  g_violations.fetch_add(1);
  std::fprintf(stderr, "SIMCANN VIOLATION: %s\n", buf);
  std::fflush(stderr);
  if (config().strict) {
    std::fprintf(stderr, "SIMCANN_STRICT=1: aborting\n");
    std::abort();
  }
}

int64_t violation_count() { return g_violations.load(); }

double now_ms() {
  using namespace std::chrono;
  return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}

const char* take_error() {
  t_returned = t_error;
  t_error.clear();
  return t_returned.c_str();
}

}  // namespace simcann

// ---------------------------------------------------------------------------------------------
// ACL entry points about errors and logs.
// Source: hicann/runtime docs/zh/api_ref/22_error_reporting_APIs.md (aclGetRecentErrMsg returns
// the latest error message of the calling thread).
extern "C" {

ACL_FUNC_VISIBILITY const char* aclGetRecentErrMsg() {
  SIMCANN_API();
  return simcann::take_error();
}

ACL_FUNC_VISIBILITY void aclAppLog(aclLogLevel logLevel, const char* func, const char* file,
                                   uint32_t line, const char* fmt, ...) {
  if (!simcann::trace_enabled()) return;
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  simcann::log("aclAppLog(%d) %s:%u %s: %s", static_cast<int>(logLevel), file, line, func, buf);
}

// Generated stubs (build.sh) call this. kind 0: generic (return 0), 1: op entry point that must
// fail loudly (aclnn* / aclop*Execute*), 2: a name only TorchAir's libraries need (aborts).
int simcann_stub_hit(const char* name, int kind) {
  simcann::log("stub %s", name);
  if (kind == 1) {
    simcann::set_error("simcann: %s is not implemented by the simulator (no op in src/ops)", name);
    simcann::warn("%s is not implemented by the simulator", name);
    return simcann::kNotImplemented;
  }
  if (kind == 2) {
    // Names only TorchAir's extension modules link (GE's C++ API, the TDT channel, libc_sec's
    // bounds-checked string functions) are not modelled: most are constructors and methods
    // returning objects, which no error code can answer. Resolving them at load time is fine;
    // a call stops the process here, naming it (a GE-mode path reached on the simulator).
    std::fprintf(stderr,
                 "simcann: %s is not modelled (only TorchAir's GE-mode libraries use it) and was "
                 "called: aborting\n",
                 name);
    std::fflush(stderr);
    std::abort();
  }
  return 0;
}

// ---- control / inspection API for tests (ctypes). See README.md. ----
int64_t simcann_violation_count() { return simcann::violation_count(); }
void simcann_set_task_delay_us(int64_t us) { simcann::config().task_delay_us = us; }
int64_t simcann_get_task_delay_us() { return simcann::config().task_delay_us.load(); }
void simcann_reset_faults() {
  auto& c = simcann::config();
  c.fail_malloc_host_at = 0;
  c.fail_capture_begin_at = 0;
  c.fail_capture_end_at = 0;
  c.invalidate_capture_at = 0;
  c.fail_model_destroy_at = 0;
  c.fail_record_event_at = 0;
}
// what: "malloc_host", "capture_begin", "capture_end", "invalidate_capture", "model_destroy",
// "record_event";
// n: fail the Nth
// attempt counted from now (1 = the next one), 0 = never.
int simcann_set_fault(const char* what, int64_t n) {
  auto& c = simcann::config();
  auto arm = [n](std::atomic<int64_t>& at, std::atomic<int64_t>& count) {
    at = n > 0 ? count.load() + n : 0;
  };
  if (std::strcmp(what, "malloc_host") == 0) {
    arm(c.fail_malloc_host_at, c.n_malloc_host);
  } else if (std::strcmp(what, "capture_begin") == 0) {
    arm(c.fail_capture_begin_at, c.n_capture_begin);
  } else if (std::strcmp(what, "capture_end") == 0) {
    arm(c.fail_capture_end_at, c.n_capture_end);
  } else if (std::strcmp(what, "invalidate_capture") == 0) {
    arm(c.invalidate_capture_at, c.n_captured_tasks);
  } else if (std::strcmp(what, "model_destroy") == 0) {
    arm(c.fail_model_destroy_at, c.n_model_destroy);
  } else if (std::strcmp(what, "record_event") == 0) {
    arm(c.fail_record_event_at, c.n_record_event);
  } else {
    return -1;
  }
  return 0;
}
// The address of one object in the library: equal from every library name = one state.
const void* simcann_state_id() { return &simcann::config(); }

}  // extern "C"
