#!/usr/bin/env bash
# crl's one set-up script: installs the Debian packages the build needs (when
# missing), generates the build system, builds out of tree in _build/, then
# runs what was asked for.
#
#   ./bootstrap.sh demo     set up, build, run the main job
#   ./bootstrap.sh test     set up, build, run the whole test suite
#   ./bootstrap.sh bench    set up, build, run every benchmark
#   ./bootstrap.sh build    set up and build only
#
# Extra arguments after the command go to ./configure (e.g. --enable-sanitizers).
# BUILD_DIR overrides _build.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
cmd=${1:-build}
shift || true
build=${BUILD_DIR:-$here/_build}

# Every Debian package the build, the tests and the benchmarks use.
packages=(
    build-essential autoconf automake autoconf-archive libtool pkg-config
    libglib2.0-dev libinih-dev libffi-dev librandom123-dev check
    libpython3-dev python3 python3-numpy valgrind libcairo2-dev zlib1g-dev
    libmujoco-dev libxml2-dev libosmesa6-dev libopenblas-dev man-db libopenmpi-dev openmpi-bin
    libprotobuf-c-dev protobuf-c-compiler protobuf-compiler python3-protobuf python3-scipy
    libavcodec-dev libavformat-dev libswscale-dev libavutil-dev ffmpeg
    libdnnl-dev
)

install_packages() {
    local missing=()
    for p in "${packages[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    echo "bootstrap: installing ${missing[*]}"
    local sudo=()
    if [ "$(id -u)" -ne 0 ]; then
        command -v sudo >/dev/null || { echo "bootstrap: need root (or sudo) to install: ${missing[*]}" >&2; exit 1; }
        sudo=(sudo)
    fi
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

configure_and_build() {
    # Regenerate when configure.ac or any Makefile fragment is newer than configure.
    if [ ! -x "$here/configure" ] || [ -n "$(find "$here" -path "$here/_build" -prune -o \
            \( -name configure.ac -o -name '*.am' \) -newer "$here/configure" -print -quit)" ]; then
        (cd "$here" && autoreconf -fi)
    fi
    mkdir -p "$build"
    if [ ! -f "$build/Makefile" ] || [ $# -gt 0 ]; then
        (cd "$build" && "$here/configure" -q "$@")
    fi
    make -C "$build" -j"$(nproc)"
}

case "$cmd" in
    build|demo|test|bench) ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) echo "bootstrap: unknown command '$cmd' (build, demo, test, bench)" >&2; exit 2 ;;
esac

install_packages
configure_and_build "$@"

crl="$build/core/cli/crl"
# The uninstalled crl scans plugins with the build tree's scanner.
export CRL_PLUGIN_SCANNER="${CRL_PLUGIN_SCANNER:-$build/core/crl-plugin-scanner}"
# ... and runs Python env workers (executor = processes) with its crl-env-worker.
export CRL_ENV_WORKER="${CRL_ENV_WORKER:-$build/core/crl-env-worker}"
case "$cmd" in
    build) ;;
    demo)
        # The main job: config-only DQN training on the native CartPole
        # (seconds on 2 cores), into runs/cartpole-dqn-DATE/.
        export CRL_PLUGIN_PATH="$build/plugins/transforms/.libs:$build/plugins/replay/.libs:$build/plugins/losses/.libs${CRL_PLUGIN_PATH:+:$CRL_PLUGIN_PATH}"
        "$crl" run "$here/conf/examples/cartpole-dqn.ini"
        ;;
    test)
        exec "$here/tests/run-all.sh" "$build"
        ;;
    bench)
        # The uninstalled crl finds the build tree's plugins through the path.
        export CRL_PLUGIN_PATH="$build/plugins/transforms/.libs:$build/plugins/replay/.libs:$build/plugins/losses/.libs:$build/plugins/gym/.libs:$build/plugins/dm_control/.libs${CRL_PLUGIN_PATH:+:$CRL_PLUGIN_PATH}"
        "$crl" bench core
        # The ffi figure: the springmass test library through the ffi backend and a native plugin over it.
        make -C "$build" -s tests/ffi/libspringmass.la tests/plugins/smnative.la
        CRL_PLUGIN_PATH="$CRL_PLUGIN_PATH:$build/plugins/ffi/.libs:$build/tests/plugins/.libs" \
            CRL_BENCH_FFI_LIB="$build/tests/ffi/.libs/libspringmass.so" "$crl" bench envs
        "$crl" bench batched
        "$crl" bench nn
        "$crl" bench replay
        "$crl" bench transforms
        "$crl" bench train
        CRL_BENCH_PLUGIN="$build/tests/plugins/bench/.libs/benchplug.so" "$crl" bench plugins
        # Built when configure found libpython3 and numpy.
        if "$crl" bench --help | grep -q '^  gym '; then "$crl" bench gym; fi
        # Built when configure found libmujoco.
        if "$crl" bench --help | grep -q '^  dm_control '; then "$crl" bench dm_control; fi
        # Built when configure found Open MPI.
        if "$crl" bench --help | grep -q '^  mpi '; then "$crl" bench mpi; fi
        ;;
esac
