// Capture (aclmdlRI) internals shared by stream.cpp and capture.cpp.
#pragma once

#include "state.h"

namespace simcann {

// All of these are called with capture_mutex() held and s->capture set (or, for wait, either the
// stream capturing or the event captured by an active capture).
aclError capture_add_task(Stream* s, const char* name, Task fn, std::vector<CheckedRange> ranges);
aclError capture_record_event(Stream* s, Event* e);
aclError capture_wait_event(Stream* s, Event* e);

void push_task(Stream* s, QueuedTask t);
aclError refuse_if_capturing(Stream* s, const char* api);

}  // namespace simcann
