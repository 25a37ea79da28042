#!/usr/bin/env bash
# Builds the simulated CANN runtime for the torch_npu installed in PY:
#   bash simcann/build.sh --python PY --out DIR   ->   DIR/lib/libascendcl.so + other names
#
# One shared library (libascendcl.so) holds the single implementation and the single state; every
# other library name torch_npu links or dlopens is a symlink to it (the dynamic loader maps one
# file once, whatever name it is reached by). The exported symbol list is derived from the
# installed wheel each build, so a new torch_npu needs no hand edits:
#   - undefined dynamic symbols of torch_npu/lib/*.so and torch_npu/_C*.so, minus what torch, the
#     Python executable and the system libraries define (C++ and Python symbols dropped), plus
#   - CANN-looking names found in their strings (torch_npu dlsym()s those at run time),
#   minus what src/**/*.cpp define. Each remaining name gets a generated stub: aclnn*/aclop
#   execution entry points fail loudly (error + aclGetRecentErrMsg naming the op), the rest
#   return 0. SIMCANN_TRACE=1 logs every call.
# TorchAir's extension modules (torch_npu/dynamo/torchair/core/*.so) are scanned too: their extra
# library names (libfmk_parser.so, libascend_protobuf.so) become symlinks, and the names only they
# need (GE's C++ API, the TDT channel, libc_sec) get stubs that abort naming the call, so that
# `import torchair` and its aclgraph (reduce-overhead) mode load, and a GE-mode call cannot pass.
# Needs only bash, gcc/g++ and binutils.
#
# Cross build (the aarch64 leg, ci/lib/aarch64.sh): --cross aarch64-linux-gnu- compiles, links and
# reads symbols with that toolchain (PREFIXg++, PREFIXgcc, PREFIXnm) and takes the system
# libraries from its sysroot instead of ldconfig's (host) list; PY is then the emulated
# interpreter (it only reports where torch / torch_npu are).
#   --sanitize address,undefined | thread   an instrumented build (frame pointers, debug info), for
#                                           ci/lib/sanitize.sh; use another --out than the normal one
#   --acl-include DIR   the ACL headers (DIR/acl/acl.h) to build against instead of the installed
#                       wheel's: ci/lib/envsetup.sh passes its line's newest build's for an older
#                       build of that line (the runtime is newer than the headers a build shipped)
set -euo pipefail

PY=python3
OUT=""
CROSS=""
JOBS=$(nproc 2>/dev/null || echo 2)
SANITIZE=""
ACL_INC=""
while [ $# -gt 0 ]; do
  case "$1" in
    --python) PY="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    --cross) CROSS="$2"; shift 2 ;;
    -j) JOBS="$2"; shift 2 ;;
    --sanitize) SANITIZE="$2"; shift 2 ;;
    --acl-include) ACL_INC="$2"; shift 2 ;;
    -h|--help) sed -n '2,29p' "$0"; exit 0 ;;
    *) echo "build.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[ -n "$OUT" ] || { echo "build.sh: --out DIR is required" >&2; exit 2; }
CXX="${CROSS}g++"
CC="${CROSS}gcc"
NM="${CROSS}nm"

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SRC="$HERE/src"
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
LIB="$OUT/lib"
OBJ="$OUT/obj"
GEN="$OUT/gen"
rm -rf "$OBJ" "$GEN"
mkdir -p "$LIB" "$OBJ" "$GEN" "$OUT/cache"

# Locate torch / torch_npu without importing them (torch_npu needs this library to import).
read -r TNPU TORCH PYEXE PYLIB < <(TORCH_DEVICE_BACKEND_AUTOLOAD=0 "$PY" - <<'PYEOF'
import importlib.util, os, sys, sysconfig
def where(name):
    spec = importlib.util.find_spec(name)
    if spec is None or spec.origin is None:
        sys.exit(f"build.sh: {name} is not installed for {sys.executable}")
    return os.path.dirname(spec.origin)
libdir = sysconfig.get_config_var("LIBDIR") or ""
ldlib = sysconfig.get_config_var("LDLIBRARY") or ""
pylib = os.path.join(libdir, ldlib) if ldlib.endswith(".so") or ".so." in ldlib else "-"
print(where("torch_npu"), where("torch"), os.path.realpath(sys.executable), pylib if os.path.exists(pylib) else "-")
PYEOF
)
[ "$PYLIB" = - ] || [ -f "$PYLIB" ] || PYLIB=-  # an emulated interpreter's path may be a guest path

if [ -n "$ACL_INC" ]; then
  [ -f "$ACL_INC/acl/acl.h" ] || { echo "build.sh: --acl-include $ACL_INC has no acl/acl.h" >&2; exit 2; }
  INC="$ACL_INC"
elif [ -f "$TNPU/include/acl/acl.h" ]; then
  INC="$TNPU/include"
elif [ -f "$TNPU/include/third_party/acl/inc/acl/acl.h" ]; then
  INC="$TNPU/include/third_party/acl/inc"
else
  echo "build.sh: no ACL headers (acl/acl.h) inside $TNPU/include" >&2
  exit 1
fi

CXXFLAGS=(-std=c++17 -O1 -g0 -fPIC -pthread -Wall -Wno-unused-parameter -I"$SRC" -I"$INC")
LDFLAGS=()
if [ -n "$SANITIZE" ]; then
  case "$SANITIZE" in
    address|undefined|address,undefined|undefined,address|thread) ;;
    *) echo "build.sh: --sanitize takes address,undefined, address, undefined or thread, not '$SANITIZE'" >&2; exit 2 ;;
  esac
  CXXFLAGS+=(-g -fno-omit-frame-pointer "-fsanitize=$SANITIZE")
  LDFLAGS+=("-fsanitize=$SANITIZE")
fi
# APIs an older wheel's ACL headers do not declare: their entry points are compiled only where the
# header has them (conditional graph nodes: torch_npu 2.13's acl_rt.h yes, 2.10's no).
if grep -q 'aclmdlRICondHandleCreate' "$INC/acl/acl_rt.h"; then
  CXXFLAGS+=(-DSIMCANN_HAVE_COND_NODES=1)
fi

# 1. Compile every source under src/ (runtime + src/ops), in parallel.
mapfile -t SOURCES < <(cd "$SRC" && find . -name '*.cpp' | sed 's|^\./||' | sort)
# Objects are cached in DIR/cache by a hash of the source, every header under src/, the flags and
# the compiler, so a rebuild only compiles what changed.
HDR_SUM=$( (cd "$SRC" && find . -name '*.h' | sort | xargs cat; cat "$INC"/acl/*.h; echo "${CXXFLAGS[*]}"; "$CXX" --version) \
  | sha1sum | cut -c1-40)
compile() {  # $1: path relative to src/
  local o="$OBJ/$(echo "$1" | tr / _ | sed 's/\.cpp$/.o/')"
  local key
  key=$( (echo "$HDR_SUM"; cat "$SRC/$1") | sha1sum | cut -c1-40)
  if [ ! -f "$OUT/cache/$key.o" ]; then
    "$CXX" "${CXXFLAGS[@]}" -c "$SRC/$1" -o "$OUT/cache/$key.o.tmp.$$" && mv "$OUT/cache/$key.o.tmp.$$" "$OUT/cache/$key.o" || return 1
  fi
  cp "$OUT/cache/$key.o" "$o"
}
pids=()
for s in "${SOURCES[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do sleep 0.05; done
  compile "$s" &
  pids+=($!)
done
fail=0
for p in "${pids[@]}"; do wait "$p" || fail=1; done
[ "$fail" = 0 ] || { echo "build.sh: compile failed" >&2; exit 1; }

# 2. Which names torch_npu needs from the runtime.
sys_lib() {  # path of a system library by soname
  local p=""
  [ -n "$CROSS" ] || p=$(ldconfig -p 2>/dev/null | awk -v n="$1" '$1 == n && /x86-64|64bit|AArch64/ {print $NF; exit}')
  [ -n "$p" ] || p=$("$CC" -print-file-name="$1")
  [ -f "$p" ] && echo "$p"
}
NPU_LIBS=("$TNPU"/lib/*.so "$TNPU"/_C*.so)
# TorchAir's extension modules (in the torch_npu wheel: dynamo/torchair/core/*.so) link GE's
# C++ API (ge::Session, ge::Tensor, ...) and the TDT channel. They are scanned separately: what
# they need beyond torch_npu's names is not modelled and gets a fatal stub (step 3).
shopt -s nullglob
TA_LIBS=("$TNPU"/dynamo/torchair/core/*.so)
shopt -u nullglob
DEF_LIBS=("$TORCH"/lib/*.so* "${NPU_LIBS[@]}" "${TA_LIBS[@]}" "$PYEXE")
[ "$PYLIB" != "-" ] && DEF_LIBS+=("$PYLIB")
for n in libc.so.6 libm.so.6 libstdc++.so.6 libgcc_s.so.1 libpthread.so.0 libdl.so.2 librt.so.1 \
         ld-linux-x86-64.so.2 ld-linux-aarch64.so.1; do
  p=$(sys_lib "$n" || true)
  [ -n "$p" ] && DEF_LIBS+=("$p")
done
"$NM" -D --defined-only "${DEF_LIBS[@]}" 2>/dev/null | awk 'NF >= 3 {print $3}' | sed 's/@.*//' \
  | sort -u > "$GEN/defined_elsewhere.txt"
"$NM" -D --undefined-only "${NPU_LIBS[@]}" 2>/dev/null | awk 'NF >= 2 {print $NF}' | sed 's/@.*//' \
  | grep -E '^[A-Za-z_][A-Za-z0-9_]*$' | sort -u > "$GEN/undefined.txt"
comm -23 "$GEN/undefined.txt" "$GEN/defined_elsewhere.txt" \
  | grep -Ev '^(_Z|_?Py|__|_ITM_|_init$|_fini$)' > "$GEN/linked.txt" || true
strings -n 5 "${NPU_LIBS[@]}" \
  | grep -E '^(acl[A-Za-z0-9]+|Hccl[A-Za-z0-9_]+|hccl[A-Z][A-Za-z0-9]+|Msprof[A-Za-z0-9]+|rt[A-Z][A-Za-z0-9]+)$' \
  | sort -u > "$GEN/dlsymed.txt" || true
# TorchAir: its undefined names (C and C++) that nothing above provides, and the CANN-looking
# names in its strings.
: > "$GEN/torchair.txt"
if [ ${#TA_LIBS[@]} -gt 0 ]; then
  { "$NM" -D --undefined-only "${TA_LIBS[@]}" 2>/dev/null | awk 'NF >= 2 {print $NF}' | sed 's/@.*//' \
      | grep -E '^[A-Za-z_][A-Za-z0-9_]*$' | sort -u | comm -23 - "$GEN/defined_elsewhere.txt" \
      | grep -Ev '^(_?Py|__|_ITM_|_init$|_fini$)'
    strings -n 5 "${TA_LIBS[@]}" \
      | grep -E '^(acl[A-Za-z0-9]+|Hccl[A-Za-z0-9_]+|hccl[A-Z][A-Za-z0-9]+|Msprof[A-Za-z0-9]+|rt[A-Z][A-Za-z0-9]+)$'
  } | sort -u | comm -23 - "$GEN/linked.txt" | comm -23 - "$GEN/dlsymed.txt" > "$GEN/torchair.txt" || true
fi
sort -u "$GEN/linked.txt" "$GEN/dlsymed.txt" "$GEN/torchair.txt" > "$GEN/wanted.txt"
"$NM" -g --defined-only "$OBJ"/*.o | awk 'NF >= 3 {print $3}' | sort -u > "$GEN/implemented.txt"
comm -23 "$GEN/wanted.txt" "$GEN/implemented.txt" > "$GEN/stubbed.txt"

# 3. Generate the stubs (C, no ACL header: the real prototypes vary; the x86-64/aarch64 ABI lets
#    a function that ignores its arguments be called with any). `long` return: pointer-returning
#    functions get NULL.
{
  echo '/* generated by build.sh: names torch_npu (and TorchAir) need that src/ does not implement */'
  echo 'int simcann_stub_hit(const char* name, int kind);'
  declare -A fatal=()
  while read -r n; do fatal[$n]=1; done < "$GEN/torchair.txt"
  while read -r n; do
    kind=0
    case "$n" in
      aclnn*|aclopCompileAndExecute*|aclopExecute*|aclopCompile) kind=1 ;;
    esac
    label="$n"
    if [ -n "${fatal[$n]:-}" ]; then
      # Only TorchAir needs it (GE's C++ API, the TDT channel, libc_sec): a call aborts, naming it.
      kind=2
      label=$(echo "$n" | c++filt | sed 's/\\/\\\\/g; s/"/\\"/g')
    fi
    echo "long $n(void) { return simcann_stub_hit(\"$label\", $kind); }"
  done < "$GEN/stubbed.txt"
} > "$GEN/stubs.c"
"$CC" -O0 -g0 -fPIC -w -c "$GEN/stubs.c" -o "$GEN/stubs.o"

# 4. Link one library; every other name is a symlink to it.
"$CXX" -shared -pthread "${LDFLAGS[@]}" -o "$LIB/libascendcl.so" "$OBJ"/*.o "$GEN/stubs.o" \
  -Wl,-soname,libascendcl.so
# Library names: the NEEDED entries of torch_npu's libraries that neither torch nor the system
# provides (libascendcl, libhccl, libacl_op_compiler, libge_runner, libgraph, libacl_tdt_channel,
# ...), plus those looked up at run time. Optional tool libraries torch_npu probes for
# (libmspti, libatb, libascend_kernel_hook, libasdsip, libcust_opapi, libaclnn_*) stay absent:
# that is the normal configuration without those packages.
NAMES=(libhccl.so libacl_op_compiler.so libge_runner.so libgraph.so libacl_tdt_channel.so
       libopapi.so libmsprofiler.so libruntime.so)
while read -r n; do
  case "$n" in libatb.so|libtorch*|libc10*|libtensorpipe*|libnpu_profiler*|libop_plugin*) continue ;; esac
  [ -e "$TORCH/lib/$n" ] || [ -e "$TNPU/lib/$n" ] || [ -e "$TNPU/dynamo/torchair/core/$n" ] \
    || sys_lib "$n" >/dev/null || NAMES+=("$n")
done < <(readelf -d "${NPU_LIBS[@]}" "${TA_LIBS[@]}" 2>/dev/null | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p' | sort -u)
for n in $(printf '%s\n' "${NAMES[@]}" | sort -u); do
  [ "$n" = libascendcl.so ] || ln -sfn libascendcl.so "$LIB/$n"
done
printf '%s\n' "${NAMES[@]}" libascendcl.so | sort -u > "$GEN/library_names.txt"

echo "simcann: built $LIB/libascendcl.so${SANITIZE:+ (-fsanitize=$SANITIZE)} for torch_npu at $TNPU" \
  "($(wc -l < "$GEN/implemented.txt") implemented symbols, $(wc -l < "$GEN/stubbed.txt") stubs;" \
  "names: $(tr '\n' ' ' < "$GEN/library_names.txt"))"
