#!/usr/bin/env bash
# Installs this build into a temporary --destdir and builds tests/packaging/consumer.cpp against
# it as an outside user would: with pkg-config, with Meson's dependency('tether') and with
# CMake's find_package(tether). Each consumer must run (with LD_LIBRARY_PATH on the staged
# lib/) and must not link libcudart or cuBLAS. Usage: check_install.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$(realpath "$1")
here=$(realpath "$2")/tests/packaging
work=$(mktemp -d "${TMPDIR:-/tmp}/tether-packaging.XXXXXX")
trap 'rm -rf "$work"' EXIT

fail() { echo "FAIL: $*" >&2; exit 1; }
for tool in pkg-config c++ readelf ldd; do
  command -v "$tool" >/dev/null || { echo "SKIP: $tool is not installed"; exit 77; }
done

echo "== meson install --destdir $work/stage"
meson install -C "$build" --destdir "$work/stage" --no-rebuild --quiet
pcfile=$(find "$work/stage" -name tether.pc)
[[ -n "$pcfile" ]] || fail "meson install staged no tether.pc"
libdir=$(dirname "$(dirname "$pcfile")")
prefix=$(dirname "$libdir")
export PKG_CONFIG_PATH="$libdir/pkgconfig" LD_LIBRARY_PATH="$libdir"
ls -l "$libdir"/libtether*

# The library itself: no CUDA library among its dependencies or undefined symbols.
if readelf -d "$libdir/libtether.so" | grep -Ei 'NEEDED.*(cuda|cublas)'; then
  fail "libtether.so needs a CUDA library (above); only libtether-cuda.so may"
fi
if nm -D --undefined-only "$libdir/libtether.so" | grep -Ei ' (cuda|cublas)'; then
  fail "libtether.so has undefined CUDA symbols (above)"
fi

# A consumer must link only libtether and the C++ runtime, and must run.
check_consumer() {  # NAME BINARY
  echo "== $1: $2"
  readelf -d "$2" | grep NEEDED
  local deps
  deps=$(ldd "$2")
  echo "$deps"
  if grep -Ei 'cudart|cublas' <<<"$deps"; then fail "$1 consumer loads a CUDA library (above)"; fi
  grep -q "libtether.so.*=> $libdir/" <<<"$deps" || fail "$1 consumer does not resolve libtether.so to $libdir"
  local bytes
  bytes=$(awk '/=> \//{print $3}' <<<"$deps" | xargs -r readlink -f | xargs -r stat -c %s | awk '{s+=$1} END{print s}')
  echo "$1 consumer: shared libraries it loads total $((bytes / 1024)) KiB"
  "$2" | tee "$work/$1.out"
  grep -qx OK "$work/$1.out" || fail "$1 consumer did not print OK"
  # TETHER_VERSION_STRING (tether/version.hpp) is the version the .pc file states.
  grep -q "^tether $(pkg-config --modversion tether): " "$work/$1.out" ||
    fail "$1 consumer printed a version other than tether.pc's $(pkg-config --modversion tether)"
}

echo "== pkg-config"
flags=$(pkg-config --cflags --libs tether)
echo "pkg-config --cflags --libs tether: $flags"
expected="-I$prefix/include -L$libdir -ltether"
# pkg-config prints ${pcfiledir}/../.. unresolved; compare the directories each flag names.
normalized=$(for f in $flags; do case $f in -I*|-L*) echo "${f:0:2}$(realpath -m "${f:2}")";; *) echo "$f";; esac; done | xargs)
[[ "$normalized" == "$expected" ]] || fail "pkg-config flags are '$normalized', expected '$expected'"
defined=$(pkg-config --define-prefix --variable=prefix tether)
echo "pkg-config --define-prefix --variable=prefix tether: $defined"
[[ $(realpath -m "$defined") == "$prefix" ]] || fail "--define-prefix gives '$defined', expected $prefix"
# Requires and Requires.private both add the named packages' Cflags to every --cflags.
pkg-config --print-requires --print-requires-private tether | grep . &&
  fail "tether.pc requires other packages (above); its dependencies belong in Libs.private"
c++ -std=c++17 -O1 "$here/consumer.cpp" -o "$work/consumer-pkgconfig" $(pkg-config --cflags --libs tether) -pthread
check_consumer pkg-config "$work/consumer-pkgconfig"

# A strategy plugin built against the installed headers alone, run by the installed tether.
echo "== a strategy plugin for the installed tether command"
c++ -std=c++17 -O1 -shared -fPIC "$here/damped_sum_plugin.cpp" $(pkg-config --cflags tether) -o "$work/damped_sum.so"
cat > "$work/plugin.json" <<'JSON'
{"name": "plugin", "strategy": {"name": "damped-sum"}, "cluster": {"workers": 2},
 "data": {"source": "synthetic", "train_samples": 400, "test_samples": 100, "features": 8, "classes": 3},
 "model": {"hidden_layers": [8]},
 "training": {"epochs": 1, "batch_size": 32, "device": "cpu", "threads": 1, "optimizer": {"learning_rate": 0.05}}}
JSON
"$prefix/bin/tether" run "$work/plugin.json" --plugin "$work/damped_sum.so" --out "$work/plugin-run"
grep -q '"strategy": *"damped-sum"' "$work/plugin-run/summary.json" ||
  fail "the installed tether did not train with the plugin's strategy (summary.json above)"

# libtether loads libtether-cuda.so from its own directory when asked for CUDA memory, and
# says what is missing when it is not there. Only without a GPU: the consumer has no device
# memory to offer.
if [[ ! -e /dev/nvidia0 ]]; then
  echo "== CUDA memory asked for, no GPU"
  if [[ -e "$libdir/libtether-cuda.so" ]]; then
    # The installed command finds it too (RUNPATH $ORIGIN/../lib).
    "$prefix/bin/tether" version | tee "$work/version.out"
    grep -q "CUDA backend: built" "$work/version.out" || fail "the installed tether command does not load libtether-cuda.so"
    "$work/consumer-pkgconfig" cuda-error | tee "$work/cuda.out"
    grep -q "no CUDA GPU is visible" "$work/cuda.out" || fail "the installed libtether did not load libtether-cuda.so beside it"
    rm "$libdir/libtether-cuda.so"
  fi
  "$work/consumer-pkgconfig" cuda-error | tee "$work/cuda.out"
  grep -q "libtether-cuda.so could not be loaded: libtether-cuda.so: cannot open shared object file" "$work/cuda.out" ||
    fail "without libtether-cuda.so, asking for CUDA should name the library and dlerror()'s reason"
fi

if command -v meson >/dev/null && command -v ninja >/dev/null; then
  echo "== meson dependency('tether')"
  meson setup "$work/meson" "$here/meson" >/dev/null
  ninja -C "$work/meson" >/dev/null
  check_consumer meson "$work/meson/consumer"
fi

command -v cmake >/dev/null || { echo "SKIP: cmake is not installed (pkg-config and Meson consumers passed)"; exit 77; }
echo "== cmake find_package(tether)"
cmake -S "$here" -B "$work/cmake" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$work/cmake" >/dev/null
check_consumer cmake "$work/cmake/consumer"
echo "PASS: pkg-config, Meson and CMake consumers of the installed tether link no CUDA library and run"
