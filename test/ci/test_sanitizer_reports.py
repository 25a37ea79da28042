"""test/sanitizer_reports.py: which sanitizer reports fail a leg. Reports here are cut-down
copies of real ones (the 2.10 legs); the rules are in that file's docstring."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from sanitizer_reports import parse, suppressed  # noqa: E402

ENV = "/envs/2.10/lib/python3.11/site-packages"

_PYBIND11_RECORD = f"""\
Direct leak of 24 byte(s) in 1 object(s) allocated from:
    #0 0x7f29d4eb89cf in __interceptor_malloc ../../../../src/libsanitizer/asan/asan_malloc_linux.cpp:69
    #1 0x7f29d45aa141 in _PyObject_New Objects/object.c:176
    #2 0x7f28a6e39604 in initialize<pybind11_init__C(pybind11::module_&)::<lambda()>, void> {ENV}/torch/include/pybind11/pybind11.h:491
    #3 0x7f28a6e39604 in def<pybind11_init__C(pybind11::module_&)::<lambda()> > {ENV}/torch/include/pybind11/pybind11.h:1437
    #4 0x7f28a6e39604 in pybind11_init__C csrc/module.cpp:122
    #5 0x7f29d45a8b35 in PyModule_ExecDef Objects/moduleobject.c:419
"""  # noqa: E501

# Our own leak through the same entry (an object csrc/module.cpp allocates itself).
_OURS = """\
Direct leak of 120 byte(s) in 1 object(s) allocated from:
    #0 0x7fd438cb94c8 in operator new(unsigned long) ../../../../src/libsanitizer/asan/asan_new_delete.cpp:95
    #1 0x7fd40eb00fb4 in operator() csrc/copy/pageable_copy_guard.cpp:123
    #2 0x7f29d45a8b35 in PyModule_ExecDef Objects/moduleobject.c:419
"""  # noqa: E501

_SUMMARY = "\nSUMMARY: AddressSanitizer: 144 byte(s) leaked in 2 allocation(s).\n"


def _by_size(text: str) -> dict[str, bool]:
    return {r.text.split(" byte")[0]: r.fails for r in parse(text)}


# How the symbolizer names the same frame for a function pointer rather than a lambda.
_PYBIND11_RECORD_OF_A_FUNCTION = _PYBIND11_RECORD.replace(
    "in initialize<pybind11_init__C(pybind11::module_&)::<lambda()>, void>",
    "in void pybind11::cpp_function::initialize<bool (*&)(), bool, , pybind11::name>(bool (*&)())",
)

# A function pointer whose initialize is inlined into an out-of-line module_::def<...>: that def is
# the frame, named by the module's file and offset (the 2.10 ASan leg, csrc/python/allocator.cpp).
_PYBIND11_RECORD_IN_DEF = _PYBIND11_RECORD.replace(
    f"in initialize<pybind11_init__C(pybind11::module_&)::<lambda()>, void> "
    f"{ENV}/torch/include/pybind11/pybind11.h:491",
    "in pybind11::module_& pybind11::module_::def<bool (*)()>(char const*, bool (*&&)()) "
    f"({ENV}/torch_npu_pinpool/_C.cpython-311-x86_64-linux-gnu.so+0xefcaad)",
)


@pytest.mark.parametrize(
    "record", [_PYBIND11_RECORD, _PYBIND11_RECORD_OF_A_FUNCTION, _PYBIND11_RECORD_IN_DEF]
)
def test_pybind11_function_record_is_a_third_partys_leak_and_ours_still_fails(record):
    reports = parse(record + "\n" + _OURS + _SUMMARY)
    assert [(r.ours, r.third_party, r.fails) for r in reports] == [
        (True, "pybind11's function records", False),
        (True, None, True),
    ]


def test_a_record_allocated_elsewhere_is_not_matched():
    # The same object made by our own code (a csrc frame right after _PyObject_New) fails.
    moved = _PYBIND11_RECORD.replace(
        f"initialize<pybind11_init__C(pybind11::module_&)::<lambda()>, void> "
        f"{ENV}/torch/include/pybind11/pybind11.h:491",
        "make_record csrc/module.cpp:40",
    )
    assert _by_size(moved + _SUMMARY) == {"Direct leak of 24": True}


def test_suppression_summary_is_not_a_report():
    race = """\
==================
WARNING: ThreadSanitizer: data race (pid=5326)
  Read of size 4 at 0x7b2c00030db8 by thread T3:
    #0 refuse_event_flags simcann/src/stream.cpp:309 (libhccl.so+0x66256)

SUMMARY: ThreadSanitizer: data race simcann/src/stream.cpp:309 in refuse_event_flags
==================
"""
    matched = "ThreadSanitizer: Matched 3 suppressions (pid=5326):\n3 race:libfoo.so\n"
    assert parse(matched) == []
    assert [(r.kind, r.fails) for r in parse(race + matched)] == [
        ("ThreadSanitizer: data race", True)
    ]


def test_a_frame_of_ours_by_its_relative_source_path_alone():
    lambda_only = """\
Direct leak of 16 byte(s) in 1 object(s) allocated from:
    #0 0x7fd438cb94c8 in operator new(unsigned long) ../../../../src/libsanitizer/asan/asan_new_delete.cpp:95
    #1 0x7fd40eb00fb4 in operator() csrc/graphs/graph_pools.cpp:88
    #2 0x7f29d45a8b35 in PyObject_Call Objects/call.c:10
"""  # noqa: E501
    assert _by_size(lambda_only + _SUMMARY) == {"Direct leak of 16": True}


_EVENT = f"""\
{{how}} leak of 168 byte(s) in 1 object(s) allocated from:
    #0 0x7fac384b94c8 in operator new(unsigned long) ../../../../src/libsanitizer/asan/asan_new_delete.cpp:95
    #1 0x7fab0ccf6f50 in create_event /repo/simcann/src/stream.cpp:480
    #2 0x7fab0ccfd9d2 in aclrtCreateEventExWithFlag /repo/simcann/src/stream.cpp:501
    #3 0x7fab0ece6e47 in {{caller}} ({ENV}/torch_npu/lib/libtorch_npu.so+0x1ae6e47)
    #4 0x7fab0ece837b in c10_npu::NPUEvent::record(c10_npu::NPUStream const&) ({ENV}/torch_npu/lib/libtorch_npu.so+0x1ae837b)
"""  # noqa: E501


@pytest.mark.parametrize(
    "how, caller, handed_over",
    [
        ("Direct", "c10_npu::NPUEvent::createEvent(signed char)", True),
        # Its holder leaked too: that holder's report decides (Note [Events torch_npu never ...]).
        ("Indirect", "c10_npu::NPUEvent::createEvent(signed char)", False),
        # Another caller of aclrtCreateEventExWithFlag is not named as its owner.
        ("Direct", "c10_npu::NPUEventManager::create(signed char)", False),
    ],
)
def test_an_event_is_handed_over_to_npuevent_alone_when_leaked_directly(how, caller, handed_over):
    (report,) = parse(_EVENT.format(how=how, caller=caller) + _SUMMARY)
    assert (report.ours, report.handed_over, report.fails) == (True, handed_over, not handed_over)


def test_suppressions_are_counted():
    text = "ThreadSanitizer: Matched 3 suppressions (pid=1):\n2 race:a::B\n1 race:c\n"
    assert suppressed(text + text) == {"race:a::B": 4, "race:c": 2}
