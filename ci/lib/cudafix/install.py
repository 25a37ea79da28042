"""Install the torch_npu import workaround into a test venv whose torch is a CUDA build.

TEST ENVIRONMENT ONLY (see README.md beside this file). Run with the venv's python:

    python ci/lib/cudafix/install.py --venv VENV

- torch is not a CUDA build (a real Ascend setup, the 2.13 test env): removes any earlier copy
  of the workaround and does nothing else.
- torch is a CUDA build: builds libkeyfix.so against this torch's headers and measures, in a
  process that loaded libc10 alone, the keys AcceleratorAllocatorConfig starts with (the base
  keys: torch <= 2.12 initializes them in c10/core/AllocatorConfig.h, 2.13+ in libc10 itself, so
  they are measured, not read). If, after ``import torch``, the shared key set holds only those
  (torch 2.9: the CUDA build registers none), nothing can collide: it stops there. Otherwise
  (torch 2.10 - 2.12, 2.14) it installs the ``_pinpool_testenv`` package, the base keys and its
  ``.pth`` line into the venv's site-packages and checks, in a fresh interpreter, that the keys
  the workaround removes are exactly those of CUDAAllocatorConfig::getKeys()
  (c10/cuda/CUDAAllocatorConfig.h).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig

HERE = os.path.dirname(os.path.abspath(__file__))
PKG = "_pinpool_testenv"
PTH = "_pinpool_testenv.pth"


def getkeys_initializer(header: str, anchor: str) -> list[str] | None:
    """The string literals of ``anchor() { static std::unordered_set<std::string> x{...}; ...``.

    The keys a config class registers, as its header lists them; None when ``header`` has no
    such inline initializer. Adjacent literals are concatenated as C++ does
    ("release_lock_on_cud" "amalloc").
    """
    if not os.path.exists(header):
        return None
    with open(header) as f:
        text = f.read()
    m = re.search(
        re.escape(anchor) + r"\s*\{\s*static\s+std::unordered_set<std::string>\s+\w+\s*\{(.*?)\};",
        text,
        re.S,
    )
    if m is None:
        return None
    body = re.sub(r"//[^\n]*", "", m.group(1))
    body = re.sub(r'"\s*"', "", body)  # join adjacent literals
    keys = re.findall(r'"([^"]*)"', body)
    if not keys:
        raise SystemExit(f"{header}: no keys parsed in the initializer of '{anchor}'")
    return keys


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--venv", required=True)
    args = ap.parse_args()

    site = sysconfig.get_paths()["purelib"]
    if not os.path.realpath(site).startswith(os.path.realpath(args.venv)):
        raise SystemExit(f"run this with {args.venv}/bin/python (site-packages is {site})")
    for old in (os.path.join(site, PKG), os.path.join(site, PTH)):
        if os.path.isdir(old):
            shutil.rmtree(old)
        elif os.path.exists(old):
            os.remove(old)

    # torch must not import torch_npu by itself here (that would abort, or fail without CANN).
    os.environ["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
    import torch

    if not torch.version.cuda:
        print(f"torch {torch.__version__} is not a CUDA build: no workaround needed")
        return 0
    inc = os.path.join(os.path.dirname(torch.__file__), "include")
    libdir = os.path.join(os.path.dirname(torch.__file__), "lib")
    cfg = os.path.join(inc, "c10", "core", "AllocatorConfig.h")
    if not os.path.exists(cfg):
        # torch without AcceleratorAllocatorConfig has no shared key set to collide in.
        print(f"torch {torch.__version__}: no {cfg}, no shared key set: no workaround needed")
        return 0
    cuda_keys = getkeys_initializer(
        os.path.join(inc, "c10", "cuda", "CUDAAllocatorConfig.h"), "getKeys()"
    )  # torch 2.9's CUDAAllocatorConfig has none: it registers nothing in the shared set
    npu_hdr = os.path.join(
        os.path.dirname(os.path.dirname(torch.__file__)),
        *"torch_npu/include/torch_npu/csrc/core/npu/NPUAllocatorConfig.h".split("/"),
    )
    npu_keys = getkeys_initializer(npu_hdr, "getKeys()")
    print(f"torch {torch.__version__} (CUDA {torch.version.cuda})")
    print(f"CUDAAllocatorConfig keys (header): {cuda_keys}")
    print(f"NPUAllocatorConfig keys (torch_npu's header): {npu_keys}")
    if cuda_keys and npu_keys:
        print(f"both register: {sorted(set(cuda_keys) & set(npu_keys))}")

    pkg = os.path.join(site, PKG)
    os.makedirs(pkg)
    abi = int(torch._C._GLIBCXX_USE_CXX11_ABI)
    cmd = [
        os.environ.get("CXX", "c++"), "-shared", "-fPIC", "-O1", "-std=c++17",
        f"-D_GLIBCXX_USE_CXX11_ABI={abi}", "-I", inc,
        os.path.join(HERE, "keyfix.cpp"), "-o", os.path.join(pkg, "libkeyfix.so"),
        "-L", libdir, "-lc10", f"-Wl,-rpath,{libdir}",
    ]  # fmt: skip
    print("$ " + " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)
    shutil.copy(os.path.join(HERE, "hook.py"), os.path.join(pkg, "__init__.py"))

    def probe(code: str) -> dict | list:
        out = subprocess.run(
            [sys.executable, "-c", code],
            check=True,
            capture_output=True,
            text=True,
            env=dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="0"),
        ).stdout
        return json.loads(out.strip().splitlines()[-1])

    # 1. The base keys: the set as AcceleratorAllocatorConfig initializes it, in a process where
    #    libc10 is loaded alone (libkeyfix.so links it; no torch, no CUDA library).
    base = probe(
        "import ctypes, json\n"
        f"lib = ctypes.CDLL({os.path.join(pkg, 'libkeyfix.so')!r})\n"
        "buf = ctypes.create_string_buffer(8192); lib.pinpool_keyfix_list(buf, len(buf))\n"
        "print(json.dumps(sorted(k for k in buf.value.decode().split(',') if k)))\n"
    )
    print(f"base keys (libc10 alone): {base}")
    if not base:
        raise SystemExit("libc10 alone has no allocator-config keys: update ci/lib/cudafix")

    # 2. Which keys does `import torch` leave in the shared set? Only the base ones: the CUDA
    #    build registered none, nothing can collide, no workaround.
    loaded = probe("import json, torch, _pinpool_testenv as t; print(json.dumps(t.current_keys()))")
    print(f"keys after import torch: {loaded}")
    if sorted(loaded) == sorted(base):
        shutil.rmtree(pkg)
        print("the CUDA build registers no allocator-config keys: no workaround needed")
        return 0

    # 3. Install the hook, and check in a fresh interpreter that it is active and removes
    #    exactly CUDAAllocatorConfig's keys.
    with open(os.path.join(pkg, "base_keys.json"), "w") as f:
        json.dump(base, f)
    with open(os.path.join(site, PTH), "w") as f:
        f.write(f"import {PKG}\n")
    got = probe(
        "import sys, json, torch, _pinpool_testenv as t\n"
        "hooked = any(type(f).__name__ == '_BeforeTorchNpu' for f in sys.meta_path)\n"
        "before = t.current_keys(); removed = t.apply()\n"
        "print(json.dumps({'hooked': hooked, 'before': before, 'removed': sorted(removed),"
        " 'after': t.current_keys()}))\n"
    )
    print(f"probe: {got}")
    if not got["hooked"]:
        raise SystemExit(f"{PTH} did not install the import hook")
    if sorted(got["after"]) != sorted(base):
        raise SystemExit(f"after the fix the key set is {got['after']}, expected {base}")
    if cuda_keys is None or sorted(got["removed"]) != sorted(cuda_keys):
        raise SystemExit(
            f"removed {got['removed']} but CUDAAllocatorConfig registers {cuda_keys}:"
            " something else registered keys too; check before widening the workaround"
        )
    print(f"installed {PKG} into {site}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
