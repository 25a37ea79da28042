// Capture (aclmdlRI) internals shared by stream.cpp and capture.cpp.
#pragma once

#include "state.h"

namespace simcann {

// All of these are called with capture_mutex() held and s->capture set (or, for wait, either the
// stream capturing or the event captured by an active capture).
aclError capture_add_task(Stream* s, const char* name, Task fn, std::vector<CheckedRange> ranges);
aclError capture_record_event(Stream* s, Event* e);
aclError capture_wait_event(Stream* s, Event* e);

// Task groups and task update (Note [Task groups] in capture.cpp). Called with capture_mutex()
// held. A task is a kernel (an AI Core / Vector Core task, the only kind a task group may hold or
// an update may launch) iff it was enqueued under an aclnn* name.
bool is_kernel_task(const char* name);
// `s` is in update mode: `name` replaces the next task of the group it updates.
aclError update_add_task(Stream* s, const char* name, Task fn, std::vector<CheckedRange> ranges);
// Refuses a non-kernel task (event record/wait, value write/wait, model execute...) on a stream
// in update mode (507009); ACL_SUCCESS otherwise.
aclError refuse_if_updating(Stream* s, const char* api);

void push_task(Stream* s, QueuedTask t);
aclError refuse_if_capturing(Stream* s, const char* api);

}  // namespace simcann
