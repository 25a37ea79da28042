// Sites of the audit report (audit.h): "file.py:LINE" of the user's code that made a call, read
// from the calling thread's Python frames.
//
// Note [Sites]
// ~~~~~~~~~~~~
// A site is the innermost Python frame of the calling thread whose file is not under torch,
// torch_npu or this package (the library dirs given to Audit::enable) nor a frozen module: the
// user's line that pinned the tensor, enqueued the copy or called replay(). Taken only with the
// report on, at the moment of the call, from C++ with the GIL held: allocate and copy_ run
// without the GIL (torch's bindings release it), on the thread that called them - record_event
// runs on the thread that called copy_, never on torch_npu's task-queue thread - so the frames
// are that call's. A thread with no Python frames (autograd's device threads, the runtime's)
// gives no site. Never taken while holding a lock: the GIL's holder may be waiting for one.
// Code objects are cached (a reference is kept, so their address stays theirs), and each (file,
// line) is interned once: a site costs one frame walk and two hash lookups.
#include <Python.h>

#include <map>
#include <unordered_map>

#include "audit/audit.h"

namespace torch_npu_pinpool {

struct Audit::Sites {
  std::vector<std::string> library_dirs;
  std::string cwd;                               // with a trailing separator
  std::unordered_map<PyCodeObject*, int> files;  // code -> index in names_of_files, -1: library
  std::vector<std::string> names_of_files;
  std::map<std::pair<int, int>, SiteId> ids;  // (file, line) -> site
  std::vector<std::string> names{""};         // by SiteId; 0 is kNoSite
};

Audit::Sites* Audit::make_sites(std::vector<std::string> library_dirs, std::string cwd) {
  auto* sites = new Sites();
  sites->library_dirs = std::move(library_dirs);
  if (!cwd.empty() && cwd.back() != '/') {
    cwd += '/';
  }
  sites->cwd = std::move(cwd);
  return sites;
}

namespace {

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

bool python_finalizing() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing();
#else
  return _Py_IsFinalizing();
#endif
}

// The file index of `code` (-1: a library's), cached. GIL held.
int file_of(Audit::Sites& sites, PyCodeObject* code) {
  auto it = sites.files.find(code);
  if (it != sites.files.end()) {
    return it->second;
  }
  int index = -1;
  const char* utf8 = PyUnicode_AsUTF8(code->co_filename);
  if (utf8 == nullptr) {
    PyErr_Clear();
  } else {
    std::string file(utf8);
    bool library = starts_with(file, "<frozen");
    for (const std::string& dir : sites.library_dirs) {
      library = library || starts_with(file, dir);
    }
    if (!library) {
      if (!sites.cwd.empty() && starts_with(file, sites.cwd)) {
        file = file.substr(sites.cwd.size());
      }
      index = static_cast<int>(sites.names_of_files.size());
      sites.names_of_files.push_back(std::move(file));
    }
  }
  Py_INCREF(code);  // the cache keys on its address
  sites.files.emplace(code, index);
  return index;
}
}  // namespace

SiteId Audit::site_here() {
  if (!Py_IsInitialized() || python_finalizing()) {
    return kNoSite;
  }
  const PyGILState_STATE gil = PyGILState_Ensure();
  SiteId site = kNoSite;
  PyFrameObject* frame = PyEval_GetFrame();  // borrowed
  Py_XINCREF(frame);
  while (frame != nullptr) {
    PyCodeObject* code = PyFrame_GetCode(frame);  // new reference
    const int file = file_of(*sites_, code);
    Py_DECREF(code);
    if (file >= 0) {
      const std::pair<int, int> key{file, PyFrame_GetLineNumber(frame)};
      auto it = sites_->ids.find(key);
      if (it == sites_->ids.end()) {
        const auto id = static_cast<SiteId>(sites_->names.size());
        sites_->names.push_back(sites_->names_of_files[file] + ":" + std::to_string(key.second));
        it = sites_->ids.emplace(key, id).first;
      }
      site = it->second;
      Py_DECREF(frame);
      break;
    }
    PyFrameObject* back = PyFrame_GetBack(frame);  // new reference
    Py_DECREF(frame);
    frame = back;
  }
  PyGILState_Release(gil);
  return site;
}

std::pair<uint64_t, uint64_t> Audit::site_sizes() {
  if (!Py_IsInitialized()) {
    return {0, 0};
  }
  const PyGILState_STATE gil = PyGILState_Ensure();
  const std::pair<uint64_t, uint64_t> out{sites_->ids.size(), sites_->files.size()};
  PyGILState_Release(gil);
  return out;
}

std::vector<std::string> Audit::site_names(const std::vector<SiteId>& ids) {
  std::vector<std::string> out;
  if (!Py_IsInitialized()) {
    return out;
  }
  const PyGILState_STATE gil = PyGILState_Ensure();
  for (SiteId id : ids) {
    if (id < sites_->names.size()) {
      out.push_back(sites_->names[id]);
    }
  }
  PyGILState_Release(gil);
  return out;
}

}  // namespace torch_npu_pinpool
