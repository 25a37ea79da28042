# shellcheck shell=bash
# The aarch64 (Kunpeng) emulation layer of the test environments: what `PINPOOL_ARCH=aarch64`
# adds on an x86_64 machine. Sourced by ci/lib/envsetup.sh, which owns the pair's venv, the
# simulator build and the exports; this file owns the machine setup and the arm64 sysroot.
#
#   aarch64_machine_setup          as root, idempotently: the host packages (qemu-user-static
#                                  >= 10 from bookworm-backports, Note [qemu-user from
#                                  bookworm-backports]; the g++-aarch64-linux-gnu cross
#                                  toolchain), Debian's arm64 package lists (`dpkg
#                                  --add-architecture arm64`; no arm64 package is installed into
#                                  the host), the binfmt_misc mount and a qemu-aarch64 handler,
#                                  so that an aarch64 ELF (the venv's python, and every
#                                  `sys.executable` subprocess the tests spawn) runs under
#                                  qemu-user. Nothing else already there is replaced or undone:
#                                  an existing handler is kept if it runs qemu >= 10 (a probe
#                                  run through it tells); the one Debian's older
#                                  qemu-user-static registered is registered again.
#   aarch64_sysroot DIR            an arm64 Debian sysroot with CPython 3.11 in DIR: the
#                                  packages below and their dependencies, fetched with
#                                  `apt-get download` and unpacked with `dpkg -x` (38 packages,
#                                  ~100 MB, ENV_ROOT/aarch64/sysroot); stamped, so an
#                                  interrupted unpack is redone. Its stdlib is byte-compiled by
#                                  the host's CPython when that has the same bytecode magic.
#   aarch64_check_runs DIR PY      PY (an aarch64 interpreter) runs and says aarch64.
#   aarch64_byte_compile DIR...    byte-compile DIR with the host's CPython 3.11 (same magic
#                                  number as the sysroot's): compiling torch under emulation takes
#                                  minutes, and PYTHONDONTWRITEBYTECODE=1 environments would
#                                  recompile it in every process.
#
# The emulated process sees the sysroot through QEMU_LD_PREFIX (qemu-user's -L): its loader and
# every absolute path that exists under DIR (/lib, /usr/lib/python3.11, ...) are taken from DIR;
# other paths (the venv, /tmp, /etc/ssl, pip's config) are the host's.
#
# The callers' die / say / run_logged (ci/lib/envsetup.sh) report failures.

AARCH64_TRIPLET=aarch64-linux-gnu
# Bump when the sysroot recipe changes: every cached sysroot (and the venvs on it) is redone.
AARCH64_SYSROOT_RECIPE=1
# The roots of the sysroot: the C / C++ runtime torch's libraries need, CPython 3.11 with venv
# (ensurepip and the pip / setuptools wheels Debian ships), and CPython's headers for builds.
AARCH64_SYSROOT_PACKAGES=(libc6 libstdc++6 libgcc-s1 libgomp1 python3.11-venv)
AARCH64_SYSROOT_HEADERS=(libpython3.11-dev) # unpacked without its dependencies
AARCH64_PYTHON=usr/bin/python3.11
BINFMT=/proc/sys/fs/binfmt_misc
AARCH64_LIB="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

# Note [qemu-user from bookworm-backports]
# PyPI's aarch64 torch >= 2.11 (CUDA 13 builds; 2.14.0 measured) dies with SIGSEGV in
# cpuinfo_arm_linux_init (PyTorch's cpuinfo, linked into libtorch.so) under Debian 12's
# qemu-user-static 7.2 (1:7.2+dfsg-7+deb12u18): that qemu passes the x86 host's /proc/cpuinfo
# through to the guest, and cpuinfo's ARM parser faults on it. qemu-user 10.0.2 (Debian 13's,
# 1:10.0.2+ds-2+deb13u1~bpo12+1 in bookworm-backports) shows the guest an aarch64
# /proc/cpuinfo, and the import completes; torch 2.10 (the CPU build) imports under both. So
# the machine gets qemu-user-static from bookworm-backports: an apt source for that suite
# (amd64 only) and a pin that allows exactly the three qemu packages from it (in 10.0,
# qemu-user-static is a transitional package over qemu-user and qemu-user-binfmt) and nothing
# else (priority -1 for every other package there). The handler Debian's 7.2 registered names
# the same interpreter path, but with its F flag the kernel keeps the 7.2 binary it opened at
# registration, so after the upgrade it is registered again (a probe built with the cross
# compiler reads /proc/cpuinfo through the handler to tell which qemu it runs).
AARCH64_QEMU_MIN_MAJOR=10
AARCH64_QEMU_SUITE=bookworm-backports
AARCH64_QEMU_PACKAGES=(qemu-user-static qemu-user qemu-user-binfmt)
AARCH64_APT_SOURCE=/etc/apt/sources.list.d/torch-npu-pinpool-backports.sources
AARCH64_APT_PIN=/etc/apt/preferences.d/torch-npu-pinpool-qemu

aarch64_apt() {
    # apt-get as CI runs it: no prompts, waiting for another apt (other jobs on the machine).
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 -o Acquire::Retries=3 "$@"
}

aarch64_qemu_major() {
    # The major version of the installed qemu-aarch64-static; 0 when there is none.
    local v
    v="$(qemu-aarch64-static --version 2>/dev/null | sed -n '1s/.*version \([0-9][0-9]*\)\..*/\1/p')"
    echo "${v:-0}"
}

aarch64_backports_source() {
    # The apt source and pin of Note [qemu-user from bookworm-backports]; apt-get update when
    # they are new or that suite's lists are missing.
    local src pin
    src="# torch_npu_pinpool (ci/lib/aarch64.sh): qemu-user >= $AARCH64_QEMU_MIN_MAJOR for the aarch64 leg.
# Only what $AARCH64_APT_PIN allows is taken from this suite.
Types: deb
URIs: http://deb.debian.org/debian
Suites: $AARCH64_QEMU_SUITE
Components: main
Architectures: amd64
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg"
    pin="# torch_npu_pinpool (ci/lib/aarch64.sh): from $AARCH64_QEMU_SUITE, qemu-user and nothing else.
Package: ${AARCH64_QEMU_PACKAGES[*]}
Pin: release n=$AARCH64_QEMU_SUITE
Pin-Priority: 990

Package: *
Pin: release n=$AARCH64_QEMU_SUITE
Pin-Priority: -1"
    if [[ "$(cat "$AARCH64_APT_SOURCE" 2>/dev/null)" != "$src" ||
        "$(cat "$AARCH64_APT_PIN" 2>/dev/null)" != "$pin" ]]; then
        say "adding Debian's $AARCH64_QEMU_SUITE ($AARCH64_APT_SOURCE), pinned to ${AARCH64_QEMU_PACKAGES[*]} ($AARCH64_APT_PIN)"
        printf '%s\n' "$src" >"$AARCH64_APT_SOURCE"
        printf '%s\n' "$pin" >"$AARCH64_APT_PIN"
    elif apt-cache policy qemu-user-static 2>/dev/null | grep -q " $AARCH64_QEMU_SUITE/"; then
        return 0
    fi
    run_logged "apt-get update ($AARCH64_QEMU_SUITE)" "check access to Debian's repositories" aarch64_apt update -qq
}

aarch64_qemu_probe() {
    # What the qemu behind the binfmt handler shows an aarch64 guest in /proc/cpuinfo:
    # "aarch64", "host" (passed through: qemu < 10) or "" (the probe did not run); see
    # ci/lib/aarch64-cpuinfo-probe.c.
    local dir out=""
    dir="$(mktemp -d)"
    if "$AARCH64_TRIPLET-gcc" -static -O1 -o "$dir/probe" "$AARCH64_LIB/aarch64-cpuinfo-probe.c" \
        >>"${LOG:-/dev/null}" 2>&1; then
        out="$("$dir/probe" 2>>"${LOG:-/dev/null}")" || out=""
    fi
    rm -rf "$dir"
    echo "$out"
}

aarch64_binfmt_handler() {
    # The qemu-aarch64 handler, registered from the installed qemu-user-binfmt's conf unless one
    # that runs qemu >= 10 is there. Debian's own registration of an older qemu (the interpreter
    # path its conf names: the F flag kept the old binary open) is replaced; any other handler
    # belongs to someone else and is left alone, with an error.
    local need_root="$1" conf=/usr/lib/binfmt.d/qemu-aarch64.conf interp probe
    if [[ -e "$BINFMT/qemu-aarch64" ]]; then
        grep -qx enabled "$BINFMT/qemu-aarch64" ||
            die "the qemu-aarch64 binfmt handler is registered but disabled" \
                "enable it (echo 1 > $BINFMT/qemu-aarch64) if nothing relies on it being off"
        probe="$(aarch64_qemu_probe)"
        [[ "$probe" == aarch64 ]] && return 0
        interp="$(sed -n 's/^interpreter //p' "$BINFMT/qemu-aarch64")"
        [[ -f "$conf" && "$interp" == "$(grep -v '^#' "$conf" | cut -d: -f7)" ]] ||
            die "the qemu-aarch64 binfmt handler ($interp) does not run qemu >= $AARCH64_QEMU_MIN_MAJOR (/proc/cpuinfo probe: ${probe:-did not run}), and Debian's qemu-user-binfmt did not register it" \
                "point it at qemu >= $AARCH64_QEMU_MIN_MAJOR (Note [qemu-user from bookworm-backports], ci/lib/aarch64.sh), or remove it (echo -1 > $BINFMT/qemu-aarch64) if nothing else relies on it"
        [[ $EUID == 0 ]] || die "registering the qemu-aarch64 binfmt handler again (it still runs an older qemu)" "$need_root"
        say "registering qemu-aarch64 with binfmt_misc again: the handler still runs the qemu it opened when it was registered (/proc/cpuinfo probe: ${probe:-did not run}), not the installed one ($(qemu-aarch64-static --version | head -n 1))"
        echo -1 >"$BINFMT/qemu-aarch64" ||
            die "removing the old qemu-aarch64 binfmt handler" "see the kernel's message above"
    fi
    [[ $EUID == 0 ]] || die "registering the qemu-aarch64 binfmt handler" "$need_root"
    [[ -f "$conf" ]] || die "registering the qemu-aarch64 binfmt handler" "$conf is missing: reinstall qemu-user-binfmt"
    say "registering qemu-aarch64 with binfmt_misc ($conf)"
    grep -v '^#' "$conf" >"$BINFMT/register" ||
        die "registering the qemu-aarch64 binfmt handler" "see the kernel's message above"
    probe="$(aarch64_qemu_probe)"
    [[ "$probe" == aarch64 ]] ||
        die "the qemu-aarch64 handler just registered shows the guest no aarch64 /proc/cpuinfo (probe: ${probe:-did not run})" \
            "check $BINFMT/qemu-aarch64 and 'qemu-aarch64-static --version' (Note [qemu-user from bookworm-backports])"
}

aarch64_machine_setup() {
    local need_root="run it once as root (it installs Debian packages and registers a binfmt_misc handler), or have an administrator do what ci/lib/aarch64.sh's aarch64_machine_setup does"
    local missing=() qemu_major
    qemu_major="$(aarch64_qemu_major)"
    if ((qemu_major < AARCH64_QEMU_MIN_MAJOR)); then
        [[ $EUID == 0 ]] || die "installing qemu-user-static >= $AARCH64_QEMU_MIN_MAJOR from $AARCH64_QEMU_SUITE (installed: major version $qemu_major)" "$need_root"
        aarch64_backports_source
        missing+=("${AARCH64_QEMU_PACKAGES[@]}")
    fi
    command -v "$AARCH64_TRIPLET-g++" >/dev/null || missing+=("g++-$AARCH64_TRIPLET")
    if ! dpkg --print-foreign-architectures | grep -qx arm64; then
        [[ $EUID == 0 ]] || die "adding Debian's arm64 architecture" "$need_root"
        say "dpkg --add-architecture arm64 (package lists only: nothing arm64 is installed into this machine)"
        dpkg --add-architecture arm64
        run_logged "apt-get update (arm64 lists)" "check access to Debian's repositories" aarch64_apt update -qq
    elif ! apt-cache show --no-all-versions libc6:arm64 >/dev/null 2>&1; then
        [[ $EUID == 0 ]] || die "reading Debian's arm64 package lists" "$need_root"
        run_logged "apt-get update (arm64 lists)" "check access to Debian's repositories" aarch64_apt update -qq
    fi
    if ((${#missing[@]})); then
        [[ $EUID == 0 ]] || die "installing ${missing[*]}" "$need_root"
        say "installing ${missing[*]} (Debian packages, into this machine)"
        run_logged "apt-get install ${missing[*]}" "check access to Debian's repositories" \
            aarch64_apt install -y -qq --no-install-recommends "${missing[@]}"
        qemu_major="$(aarch64_qemu_major)"
        ((qemu_major >= AARCH64_QEMU_MIN_MAJOR)) ||
            die "qemu-aarch64-static is major version $qemu_major after the install, not >= $AARCH64_QEMU_MIN_MAJOR" \
                "see 'apt-cache policy qemu-user-static' ($AARCH64_APT_PIN pins it to $AARCH64_QEMU_SUITE)"
    fi
    # binfmt_misc: mount it if needed; then the qemu-aarch64 handler.
    if [[ ! -e "$BINFMT/register" ]]; then
        [[ $EUID == 0 ]] || die "mounting binfmt_misc" "$need_root"
        say "mounting binfmt_misc on $BINFMT"
        mount -t binfmt_misc binfmt_misc "$BINFMT" ||
            die "mounting binfmt_misc" "this kernel or container does not allow it: aarch64 subprocesses cannot run"
    fi
    [[ "$(cat "$BINFMT/status")" == enabled ]] ||
        die "binfmt_misc is disabled on this machine ($BINFMT/status)" \
            "enable it (echo 1 > $BINFMT/status) if nothing on the machine relies on it being off"
    aarch64_binfmt_handler "$need_root"
}

aarch64_resolve() {
    # The arm64 packages that the roots need (Depends / Pre-Depends, first alternative; a
    # virtual package by its first provider), as apt names them: NAME:arm64, or NAME for an
    # Architecture: all package (whose own dependencies are not followed: wheels and data).
    # One `apt-cache depends --recurse` (a superset: every alternative), walked here.
    apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks \
        --no-replaces --no-enhances "${@/%/:arm64}" 2>/dev/null | python3 -c '
import sys

sections, cur, entry = {}, None, None
for line in sys.stdin:
    line = line.rstrip("\n")
    if not line.startswith(" "):
        cur = sections.setdefault(line, [])  # [[alternative, ...], ...]; one list per group
        cont = False
        continue
    body = line.strip()
    if line.startswith("    "):  # a provider of the virtual package just named
        if entry is not None:
            entry[1].append(body.split(":")[0])
        continue
    kind, _, name = body.lstrip("|").partition(": ")
    if kind not in ("Depends", "PreDepends"):
        entry = None
        continue
    entry = [name, []]
    if cont:
        cur[-1].append(entry)
    else:
        cur.append([entry])
    cont = body.startswith("|")

out, seen, queue = [], set(), [r + ":arm64" for r in sys.argv[1:]]
while queue:
    pkg = queue.pop(0)
    if pkg in seen:
        continue
    seen.add(pkg)
    out.append(pkg)
    if not pkg.endswith(":arm64"):
        continue  # Architecture: all
    for group in sections.get(pkg, []):
        name, providers = group[0]
        if name.startswith("<"):
            name = providers[0] if providers else name.strip("<>")
        name = name.split(":")[0]
        queue.append(name + ":arm64" if name + ":arm64" in sections else name)
print("\n".join(out))
' "$@"
}

aarch64_sysroot_stamp() {
    echo "recipe=$AARCH64_SYSROOT_RECIPE packages=${AARCH64_SYSROOT_PACKAGES[*]} headers=${AARCH64_SYSROOT_HEADERS[*]}"
}

aarch64_sysroot_is_complete() {
    [[ -f "$1/.pinpool-stamp" && "$(cat "$1/.pinpool-stamp")" == "$(aarch64_sysroot_stamp)" &&
        -x "$1/$AARCH64_PYTHON" ]]
}

aarch64_sysroot() {
    local dir="$1" debs pkgs p d
    # Shared by the pairs: one setup at a time (fd 8; the pair's own lock is fd 9).
    exec 8>"$dir.lock"
    flock 8
    if aarch64_sysroot_is_complete "$dir"; then
        exec 8>&-
        return 0
    fi
    local start=$SECONDS LOG="$dir.log" # die / run_logged report this log
    : >"$LOG"
    say "making the arm64 Debian sysroot $dir (log: $LOG)"
    rm -rf "$dir" "$dir.debs"
    mkdir -p "$dir.debs"
    mapfile -t pkgs < <(aarch64_resolve "${AARCH64_SYSROOT_PACKAGES[@]}")
    for p in "${AARCH64_SYSROOT_HEADERS[@]}"; do pkgs+=("$p:arm64"); done
    printf '\n$ apt-get download %s\n' "${pkgs[*]}" >>"$LOG"
    # apt-get download writes into the current directory.
    (cd "$dir.debs" && aarch64_apt download "${pkgs[@]}") >>"$LOG" 2>&1 ||
        die "downloading the arm64 packages" "check access to Debian's repositories; rerun"
    debs=("$dir.debs"/*.deb)
    for d in "${debs[@]}"; do
        run_logged "unpacking $(basename "$d")" "rerun; the half-made sysroot is redone" dpkg -x "$d" "$dir"
    done
    rm -rf "$dir.debs" "$dir/usr/share/doc" "$dir/usr/share/man"
    aarch64_byte_compile "$dir/usr/lib/python3.11"
    {
        printf 'arm64 sysroot: %s packages\n' "${#debs[@]}"
        printf '%s\n' "${pkgs[@]}"
    } >>"$LOG"
    aarch64_sysroot_stamp >"$dir/.pinpool-stamp"
    exec 8>&-
    say "sysroot ready in $((SECONDS - start)) s (${#debs[@]} packages, $(du -sh "$dir" | cut -f1))"
}

aarch64_check_runs() {
    local sysroot="$1" py="$2" machine
    machine="$(QEMU_LD_PREFIX="$sysroot" "$py" -c 'import platform; print(platform.machine())' 2>>"$LOG")" ||
        die "running the aarch64 interpreter $py under qemu-user" \
            "check $BINFMT/qemu-aarch64 and the sysroot $sysroot (delete it to have it redone)"
    [[ "$machine" == aarch64 ]] || die "the interpreter $py says it runs on '$machine', not aarch64" \
        "another binfmt handler or interpreter is in the way; see $BINFMT"
}

aarch64_byte_compile() {
    # Only where the host's CPython writes the same bytecode as the sysroot's 3.11.
    local host_magic
    host_magic="$(python3 -c 'import importlib.util as u; print(u.MAGIC_NUMBER.hex())' 2>/dev/null)" || return 0
    [[ "$host_magic" == a70d0d0a ]] || return 0 # CPython 3.11's
    printf '\n$ python3 -m compileall -q -j 0 %s\n' "$*" >>"$LOG"
    python3 -m compileall -q -j 0 "$@" >>"$LOG" 2>&1 || true # a file that does not compile is skipped
}
