"""Sanitizer reports of a sanitizer leg (``ci/lib/sanitize.sh``): read, classify, attribute.

Under a leg every process writes its AddressSanitizer / LeakSanitizer / UndefinedBehaviorSanitizer
/ ThreadSanitizer reports to ``$PINPOOL_SANITIZER_REPORTS/<tool>.<pid>`` (the runtimes'
``log_path``). ``test/conftest.py`` reads a scenario process's files when it exits and fails the
test that spawned it; ``ci/lib/sanitize.sh`` counts every file of the leg
(``python test/sanitizer_reports.py DIR``).

What fails:
  * every error report (ASan, UBSan, TSan; the process also stopped at the first one:
    ``halt_on_error``), whoever's frames it names;
  * a leak (LeakSanitizer, at exit) whose allocation stack has a frame of this project: the
    plugin (``csrc/``, ``torch_npu_pinpool/_C*.so``) or the simulated runtime
    (``simcann/``, ``libascendcl.so``). That is how leak checking is scoped: CPython and
    torch leave objects unreachable at exit that nobody frees, and those leaks (no frame of
    ours) are counted as foreign, never hidden, never failing.

One kind of leak with a frame of ours is torch_npu's, by the runtime's API contract: an object
an ACL entry point creates for its caller, who must destroy it (``aclCreateTensor`` and the other
``aclCreate*`` descriptors: ``aclDestroy*``; the executor of ``aclnnXxxGetWorkspaceSize``: its
``aclnnXxx`` call or ``aclDestroyAclOpExecutor``; an event, ``aclrtDestroyEvent``, under
Note [Events torch_npu never destroys]), allocated with nothing but the simulator's
frames between the allocation and that entry point, called by torch_npu itself (no frame of ours
further out). torch_npu drops such objects when its task queue stops on an error (the native
pageable copy of ``test_pageable_copy.py``, an eager task inside a task update). They are
counted and listed apart ("handed over"), and do not fail the leg.

Leaks with a frame of ours that a third party owns are recognised by their allocation stack,
each with its reason (``_THIRD_PARTY_LEAKS``), and counted and listed apart ("third party's");
nothing else is matched on.
"""

from __future__ import annotations

import dataclasses
import glob
import os
import re
import sys

# A frame of this project: source paths (debug info), our namespaces, our shared objects. The
# plugin's paths are relative ("csrc/python/report.cpp:40": pip builds the sdist in a temporary
# directory), and a lambda's frame names no namespace ("operator() csrc/...").
_OURS = re.compile(
    r"[\s/]csrc/|[\s/]simcann/src/|[\s/]simcann/gen/|torch_npu_pinpool::|simcann::|"
    r"torch_npu_pinpool/_C\.|/libascendcl\.so"
)
_FRAME = re.compile(r"^\s*#\d+ 0x[0-9a-f]+ ")
# Frames that belong to nobody: the sanitizer's own, and code inlined from the C++ headers.
_NEUTRAL = re.compile(r"/libsanitizer/|/usr/include/")
# The ACL entry points whose result the caller owns and destroys (see above).
_HANDED_OVER = re.compile(
    r" in (aclCreate(Tensor|Scalar|IntArray|FloatArray|BoolArray|TensorList|ScalarList)"
    r"|aclnn\w+GetWorkspaceSize) "
)
# Events (aclrtCreateEvent / ...WithFlag / ...ExWithFlag: the caller's until it calls
# aclrtDestroyEvent; hicann/runtime docs/zh/api_ref/07_event_management.md), handed over only to
# the torch_npu frame that owns them from then on, and only as a direct leak: see Note [Events
# torch_npu never destroys].
_EVENT_ENTRY = re.compile(r" in aclrtCreateEvent(WithFlag|ExWithFlag)? ")
_EVENT_OWNER = re.compile(r" in c10_npu::NPUEvent::createEvent\(")
_LEAK_HEAD = re.compile(r"^(Direct|Indirect) leak of ")
# A runtime's summary of the suppressions it applied (ThreadSanitizer prints it at exit, into the
# same log): not a report.
_SUPPRESSIONS_USED = re.compile(r"^ThreadSanitizer: Matched \d+ suppressions|^Suppressions used:")

# Leaks with a frame of ours whose owner is a third party: (owner, why, the allocation's first
# frames past the allocator, each a regex of one frame in order).
_THIRD_PARTY_LEAKS = (
    (
        "pybind11's function records",
        # Every m.def() of csrc/python/ makes one (pybind11.h, cpp_function::initialize_generic:
        # function_record_PyObject_New); when CPython frees the function (at exit), pybind11's
        # tp_dealloc_impl frees the C++ record but, in pybind11 3.0.1 (torch 2.10's bundled copy),
        # never the Python object itself: no PyObject_Free (3.0.4, torch 2.13's, has it;
        # pybind/pybind11#6010 describes it). 24 bytes a function of the module, at each exit.
        # The frame is pybind11.h's initialize<...>, or, for a plain function pointer whose
        # initialize is inlined into an out-of-line module_::def<...>, that def (no source line).
        (
            r" in _PyObject_New Objects/object\.c:",
            r" in ((void )?(pybind11::cpp_function::)?initialize<.*/pybind11/pybind11\.h:\d+"
            r"|pybind11::module_& pybind11::module_::def<.*\(\S*/torch_npu_pinpool/_C\S*\.so"
            r"\+0x[0-9a-f]+\))$",
        ),
    ),
)


@dataclasses.dataclass
class Report:
    """One report: ``kind`` as the tool names it ("AddressSanitizer: heap-use-after-free",
    "LeakSanitizer: Direct leak", ...), its text, and whether a frame of ours is in it."""

    kind: str
    text: str
    ours: bool

    @property
    def leak(self) -> bool:
        return self.kind.startswith("LeakSanitizer")

    @property
    def handed_over(self) -> bool:
        """A leak of an object the simulator created for torch_npu, which never destroyed it."""
        direct = self.kind == "LeakSanitizer: Direct leak"
        return self.leak and self.ours and _handed_over(self.text.splitlines(), direct)

    @property
    def third_party(self) -> str | None:
        """Who owns this leak with a frame of ours, if a third party does (_THIRD_PARTY_LEAKS)."""
        if not (self.leak and self.ours):
            return None
        frames = [x for x in self.text.splitlines() if _FRAME.match(x) and not _NEUTRAL.search(x)]
        frames = [x for x in frames if "interceptor" not in x and " operator new" not in x]
        for owner, first_frames in _THIRD_PARTY_LEAKS:
            if len(frames) >= len(first_frames) and all(
                re.search(pattern, frame) for pattern, frame in zip(first_frames, frames)
            ):
                return owner
        return None

    @property
    def fails(self) -> bool:
        return not self.leak or (self.ours and not self.handed_over and not self.third_party)

    def top_frame(self) -> str:
        """The first frame below the sanitizer's own interceptor (for the foreign-leak list)."""
        for line in self.text.splitlines():
            if _FRAME.match(line) and "libsanitizer" not in line and "interceptor" not in line:
                return re.sub(r"^\s*#\d+ 0x[0-9a-f]+ (in )?", "", line).strip()
        return "?"


def _has_our_frame(lines: list[str]) -> bool:
    return any(_FRAME.match(line) and _OURS.search(line) for line in lines)


def _handed_over(lines: list[str], direct: bool) -> bool:
    """From the allocation outwards: frames of ours (and neutral ones) up to a _HANDED_OVER
    entry point, then only foreign frames; or, for a direct leak, up to an event's entry point
    whose caller is torch_npu's NPUEvent::createEvent."""
    frames = [x for x in lines if _FRAME.match(x) and not _NEUTRAL.search(x)]
    ours = [bool(_OURS.search(x)) for x in frames]
    if not ours or not ours[0] or all(ours):
        return False
    caller = ours.index(False)  # the first foreign frame: the entry point's caller
    if any(ours[caller:]):
        return False
    entry = frames[caller - 1]
    if _HANDED_OVER.search(entry):
        return True
    return direct and bool(_EVENT_ENTRY.search(entry) and _EVENT_OWNER.search(frames[caller]))


# Note [Events torch_npu never destroys]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# torch_npu creates an NPUEvent's runtime event on its first record (NPUEvent::createEvent ->
# aclrtCreateEventExWithFlag) and gives it back in ~NPUEvent, but only while its runtime is up
# (NpuSysCtrl's init flag) and through its task queue (LaunchLazyDestroyEventTask). Once that queue
# has stopped on an error (test/stress r2_faults' invalidated capture: "The process exits for this
# inner error", after which its probe event is recorded and dropped), or after torch_npu's
# shutdown, aclrtDestroyEvent is never called: the real runtime would hold the event to the end of
# the process just the same. Only a direct leak is torch_npu's: the plugin's own events are
# NPUEvents it allocates itself (make_event, csrc/runtime/) and recycles, never deletes once
# recorded, so a plugin that lost one leaks that NPUEvent, whose stack has frames of csrc/ and
# fails the leg, and the runtime event it holds is then an indirect leak, which this does not
# match. (torch_npu is built without frame pointers: LeakSanitizer's stacks stop at
# NPUEvent::record, so whether a frame of ours called it cannot be read from the stack itself;
# ASAN_OPTIONS=fast_unwind_on_malloc=0 shows the whole stack, at many times the cost.)


def _kind(lines: list[str]) -> str:
    for line in lines:
        m = re.search(
            r"(?:ERROR|WARNING): (AddressSanitizer|ThreadSanitizer|LeakSanitizer): (.*)", line
        )
        if m:
            what = re.sub(r" (on|at|in) .*| \(pid=\d+\)", "", m.group(2))
            return f"{m.group(1)}: {what.strip()}"
        m = re.search(r"runtime error: ([^:]*)", line)
        if m:
            return f"UndefinedBehaviorSanitizer: {m.group(1).strip()}"
        # gcc 12's UBSan inside the ASan runtime may leave only its summary in log_path (the
        # "runtime error:" line went to stderr: the injected signed overflow, 2.14).
        m = re.search(r"SUMMARY: UndefinedBehaviorSanitizer: ([\w-]+)", line)
        if m:
            return f"UndefinedBehaviorSanitizer: {m.group(1)}"
        m = re.search(
            r"(AddressSanitizer|ThreadSanitizer|LeakSanitizer|UndefinedBehaviorSanitizer)"
            r".*(CHECK failed|has encountered a fatal error)",
            line,
        )
        if m:
            return f"{m.group(1)}: {m.group(2)}"
    return "unrecognised sanitizer output"


def _leaks(lines: list[str]) -> list[Report]:
    """The leak blocks of one LeakSanitizer report, one Report each."""
    out: list[Report] = []
    block: list[str] = []

    def flush() -> None:
        if block:
            head = _LEAK_HEAD.match(block[0])
            out.append(
                Report(
                    f"LeakSanitizer: {head.group(1)} leak", "\n".join(block), _has_our_frame(block)
                )
            )

    for line in lines:
        if _LEAK_HEAD.match(line):
            flush()
            block = [line]
        elif block and (_FRAME.match(line) or line.strip()):
            if line.startswith(("SUMMARY:", "-----")):
                flush()
                block = []
            else:
                block.append(line)
    flush()
    return out


def parse(text: str) -> list[Report]:
    """Every report in one log file. Reports end with their ``SUMMARY:`` line; output that
    ends without one (a CHECK failure, a report cut short) is kept as a report too."""
    reports: list[Report] = []
    chunk: list[str] = []
    in_suppressions = False
    for line in text.splitlines():
        # The suppressions summary: its head, then one "COUNT [BYTES] TYPE:TEMPLATE" line each.
        if _SUPPRESSIONS_USED.search(line):
            in_suppressions = True
            continue
        if in_suppressions and re.match(r"^\s*(\d+\s+)+\w+:\S|^\s*count\s+bytes", line):
            continue
        in_suppressions = False
        chunk.append(line)
        if not line.startswith("SUMMARY: "):
            continue
        if any(_LEAK_HEAD.match(x) for x in chunk):
            reports.extend(_leaks(chunk))
        else:
            reports.append(Report(_kind(chunk), "\n".join(chunk), _has_our_frame(chunk)))
        chunk = []
    if any("Sanitizer" in x or "runtime error" in x for x in chunk):
        reports.append(Report(_kind(chunk), "\n".join(chunk), _has_our_frame(chunk)))
    return reports


def suppressed(text: str) -> dict[str, int]:
    """What a runtime's suppressions summary in ``text`` says it suppressed: template -> count.
    (ThreadSanitizer counts its race: suppressions there; what called_from_lib: ignores is never
    reported, so never counted.)"""
    counts: dict[str, int] = {}
    in_summary = False
    for line in text.splitlines():
        if _SUPPRESSIONS_USED.search(line):
            in_summary = True
            continue
        m = re.match(r"^\s*(\d+)\s+(?:\d+\s+)?(\w+:\S.*)$", line) if in_summary else None
        if m is None:
            in_summary = False
            continue
        counts[m.group(2)] = counts.get(m.group(2), 0) + int(m.group(1))
    return counts


def files_of(reports_dir: str, pid: int | None = None) -> list[str]:
    """The report files in ``reports_dir`` (of process ``pid`` only, if given)."""
    pattern = f"*.{pid}" if pid is not None else "*.[0-9]*"
    return sorted(glob.glob(os.path.join(reports_dir, pattern)))


def failures_of_process(reports_dir: str, pid: int) -> str:
    """The failing reports process ``pid`` left, as one text ("" if none). Its files are then
    renamed (``<file>.seen``) so that a later process with the same pid cannot overwrite them;
    the leg's summary still counts them."""
    texts = []
    for path in files_of(reports_dir, pid):
        with open(path, errors="replace") as f:
            reports = parse(f.read())
        os.replace(path, path + ".seen")
        texts += [f"[{os.path.basename(path)}] {r.kind}\n{r.text}" for r in reports if r.fails]
    return "\n\n".join(texts)


def summarize(reports_dir: str) -> tuple[str, bool]:
    """One line for the leg's summary, and whether the leg passes (no failing report)."""
    reports = []
    hidden: dict[str, int] = {}
    for path in files_of(reports_dir):
        with open(path, errors="replace") as f:
            text = f.read()
        reports += [(os.path.basename(path), r) for r in parse(text)]
        for template, n in suppressed(text).items():
            hidden[template] = hidden.get(template, 0) + n
    failing = [(p, r) for p, r in reports if r.fails]
    handed = [r for _, r in reports if r.handed_over]
    third = [r for _, r in reports if not r.fails and r.third_party]
    foreign = [r for _, r in reports if not r.fails and not r.handed_over and not r.third_party]
    for path, r in failing:
        print(f"--- {path}: {r.kind}\n{r.text}\n")
    owners = sorted({r.third_party for r in third})
    for title, leaks in (
        ("leaks of objects the simulator created for torch_npu, never destroyed by it", handed),
        (f"third party's leaks with a frame of ours ({', '.join(owners)})", third),
        ("foreign leaks (no frame of csrc/ or simcann/)", foreign),
    ):
        tops: dict[str, int] = {}
        for r in leaks:
            tops[r.top_frame()] = tops.get(r.top_frame(), 0) + 1
        if leaks:
            print(f"{title}; not failing; by top frame:")
            for top, n in sorted(tops.items(), key=lambda kv: -kv[1]):
                print(f"  {n:5d}  {top}")
    line = (
        f"reports: {len(failing)} (errors, leaks in csrc/ or simcann/); not failing: "
        f"{len(foreign)} foreign leaks, {len(handed)} handed over to torch_npu, {len(third)} "
        "third party's"
    )
    if hidden:
        line += "; suppressed: " + ", ".join(f"{n} {t}" for t, n in sorted(hidden.items()))
    return line, not failing


# The injected defects (Note [Injected sanitizer reports]): the sanitizer each needs, and the
# report its test must fail with.
INJECTED = {
    "use_after_free": ("address", "AddressSanitizer: heap-use-after-free"),
    # The summary names the kind only as "undefined-behavior"; the check below also requires
    # the source of the defect (sanitizer_selftest.cpp) in the report.
    "signed_overflow": ("undefined", "UndefinedBehaviorSanitizer: undefined-behavior"),
    "data_race": ("thread", "ThreadSanitizer: data race"),
}


def check_injected(junit_xml: str, sanitizers: str) -> tuple[str, bool]:
    """Each injected defect this build has the sanitizer for failed its test with the
    sanitizer's report, naming the defect's source (test/pinpool/test_sanitizer_injected.py)."""
    import xml.etree.ElementTree as ET

    cases = {}
    for case in ET.parse(junit_xml).getroot().iter("testcase"):
        m = re.search(r"\[(\w+)\]$", case.get("name", ""))
        if m:
            bad = case.find("failure")
            bad = bad if bad is not None else case.find("error")
            cases[m.group(1)] = None if bad is None else (bad.get("message", "") + (bad.text or ""))
    words, ok = [], True
    for kind, (sanitizer, pattern) in INJECTED.items():
        if sanitizer not in sanitizers.split(","):
            continue
        text = cases.get(kind)
        caught = text is not None and pattern in text and "sanitizer_selftest.cpp" in text
        ok &= caught
        words.append(f"{kind} {'caught' if caught else 'NOT CAUGHT'}")
    return ", ".join(words) or "none for this build", ok and bool(words)


def count_tests(junit_xml: str) -> str:
    """How many tests a pytest run's JUnit XML says ran, failed and were skipped."""
    import xml.etree.ElementTree as ET

    n = dict.fromkeys(("tests", "failures", "errors", "skipped"), 0)
    for suite in ET.parse(junit_xml).getroot().iter("testsuite"):
        for k in n:
            n[k] += int(suite.get(k, 0))
    ran, failed = n["tests"] - n["skipped"], n["failures"] + n["errors"]
    return f"{ran} tests ran ({failed} failed, {n['skipped']} skipped)"


if __name__ == "__main__":
    if sys.argv[1] == "--injected":  # --injected JUNIT_XML SANITIZERS
        line, ok = check_injected(sys.argv[2], sys.argv[3])
    elif sys.argv[1] == "--count":  # --count JUNIT_XML
        line, ok = count_tests(sys.argv[2]), True
    else:
        line, ok = summarize(sys.argv[1])
    print(line)
    sys.exit(0 if ok else 1)
