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

// ---- shared by capture.cpp and cond.cpp (conditional nodes) ----
// All of these are called with capture_mutex() held unless said otherwise.

// A new model, registered as live (a handle find_model knows). A sub model starts in status NONE
// (not capturing, not begun).
std::shared_ptr<Model> new_model(int device, bool sub);
// Unregisters a model: its handle is dead from now on.
void forget_model(Model* m);
// The active capture recording into `m`, or nullptr.
std::shared_ptr<Capture> capture_of(const Model* m);
// Starts capturing `s` into `m` (`m` not yet recorded into), as aclmdlRICaptureBegin does after
// its checks.
std::shared_ptr<Capture> start_capture(Stream* s, aclmdlRICaptureMode mode,
                                       std::shared_ptr<Model> m);
// Adds a conditional task on the capturing stream `s` (like capture_add_task).
aclError capture_add_cond_task(Stream* s, std::shared_ptr<CondHandle> h,
                               std::vector<CheckedRange> ranges);

// Replays the tasks of `m` in order on the worker of `s` (Note [Replay order]). No lock held.
void replay_tasks(Model& m, Stream* s);

// cond.cpp. run_cond_task: on the replay worker, no lock held.
void run_cond_task(const CondHandle& h, Stream* s);
// At aclmdlRIExecuteAsync (host side): condition values of handles created with
// ACL_MODEL_RI_COND_HANDLE_ASSIGN_DEFAULT are set to their default.
void assign_default_cond_values(Model& root);
// True if every sub model below `m` (through its conditional tasks) ended its capture; else
// false and *first names one that did not.
bool sub_models_ready(const Model& m, const Model** first);
// Destroys what a model owns for its conditional nodes: its condition handles (their device
// memory is appended to *to_free, to be freed by the caller after releasing capture_mutex()) and,
// recursively, its sub models (a capture still recording into one is invalidated).
void destroy_cond_nodes(Model& m, std::vector<void*>* to_free);
// Frees what destroy_cond_nodes collected. No lock held.
void free_cond_memory(const std::vector<void*>& to_free);

}  // namespace simcann
