#!/bin/sh
# The Zephyr module's checks that need no Zephyr (zephyr/README.md):
#  1. the CONFIG_ -> make-arguments mapping (zephyr/spattn_config.cmake),
#     one cmake -P run per configuration, compared with the expected
#     TARGET / OPS / DTYPES / REASONS or the expected refusal;
#  2. zephyr/CMakeLists.txt under stand-ins for the zephyr_* functions
#     (tests/zephyr/standin): what it registers, and for one configuration
#     (cortex-m55, OPS=msda DTYPES=f32 REASONS=0) the real archive build into
#     a temporary build root, its symbols, and a program linked against it.
# One line per case; exits non-zero on the first failure. Without cmake it
# skips everything; without arm-none-eabi-gcc (and nm), make or m4 it skips
# part 2, whose configurations need them (the module looks them up).
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
passed=0

if ! command -v cmake >/dev/null 2>&1; then
    echo "zephyr-module-check: skipped (no cmake)"
    exit 0
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/spattn-zephyr.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
trap 'exit 1' INT TERM

fail() {
    echo "FAIL $1"
    shift
    for line in "$@"; do echo "  $line"; done
    exit 1
}

# mapping NAME EXPECTED [CONFIG_X=y ...]: EXPECTED is the printed line, or
# "FATAL: <text>" for a configuration that must stop with <text> in the
# message. cmake wraps long messages, so both are compared with runs of
# white space squeezed to one blank.
mapping() {
    name=$1 expected=$2
    shift 2
    defs=
    for c in "$@"; do defs="$defs -D$c"; done
    # shellcheck disable=SC2086 # one -D word per CONFIG_ value
    out=$(cmake $defs -P "$here/mapping.cmake" 2>&1)
    rc=$?
    flat=$(printf '%s\n' "$out" | tr -s ' \n\t' '   ')
    case $expected in
    FATAL:*)
        want=${expected#FATAL: }
        [ $rc -ne 0 ] || fail "$name" "expected a refusal, got: $out"
        case $flat in
        *"$want"*) ;;
        *) fail "$name" "expected a refusal saying '$want', got:" "$out" ;;
        esac ;;
    *)
        [ $rc -eq 0 ] || fail "$name" "cmake failed:" "$out"
        got=$(printf '%s\n' "$out" | sed -n 's/^-- TARGET=/TARGET=/p')
        [ "$got" = "$expected" ] || fail "$name" "expected: $expected" "got:      $got"
        ;;
    esac
    echo "ok   $name"
    passed=$((passed + 1))
}

m55='CONFIG_CPU_CORTEX_M55=y CONFIG_ARMV8_1_M_MVEF=y CONFIG_FPU=y'
m7='CONFIG_CPU_CORTEX_M7=y CONFIG_CPU_HAS_FPU_DOUBLE_PRECISION=y CONFIG_FPU=y'
hard=CONFIG_FP_HARDABI=y
soft=CONFIG_FP_SOFTABI=y
# every operator of mk/ops.mk, in its order: what every family with
# gradients must give (an op added there and not to a family fails here)
all_ops=$(sed -n '/^ALL_OPS :=/,/[^\\]$/p' "$root/mk/ops.mk" | sed 's/^ALL_OPS :=//; s/\\$//' | tr -s ' \n\t' '   ' | sed 's/^ //; s/ $//')

# shellcheck disable=SC2086 # $m55 and $m7 are lists of CONFIG_ values
{
mapping "m55 hard-float, msda, f32" \
    "TARGET=cortex-m55 | OPS=msda | DTYPES=f32 | REASONS=1" \
    $m55 $hard CONFIG_SPATTN_MSDA=y CONFIG_SPATTN_REASONS=y
mapping "m55 hard-float, msda with gradients, no reasons" \
    "TARGET=cortex-m55 | OPS=msda msda_grad | DTYPES=f32 | REASONS=0" \
    $m55 $hard CONFIG_SPATTN_MSDA=y CONFIG_SPATTN_GRADIENTS=y
mapping "m7 softfp, NSA inference, f16" \
    "TARGET=cortex-m7-softfp | OPS=nsa_select_infer nsa_compress_attention_infer nsa_compress_with_cache | DTYPES=f32 f16 | REASONS=1" \
    $m7 $soft CONFIG_SPATTN_NSA_INFERENCE=y CONFIG_SPATTN_FLOAT16=y CONFIG_SPATTN_REASONS=y
mapping "m7 hard-float, NSA training without gradients" \
    "TARGET=cortex-m7 | OPS=nsa_compress nsa_compress_attention nsa_select swa | DTYPES=f32 | REASONS=1" \
    $m7 $hard CONFIG_SPATTN_NSA_TRAINING=y CONFIG_SPATTN_REASONS=y
mapping "m7 hard-float, NSA training with gradients, bf16" \
    "TARGET=cortex-m7 | OPS=nsa_compress nsa_compress_grad nsa_compress_attention nsa_compress_attention_grad nsa_select nsa_select_grad swa swa_grad | DTYPES=f32 bf16 | REASONS=1" \
    $m7 $hard CONFIG_SPATTN_NSA_TRAINING=y CONFIG_SPATTN_GRADIENTS=y CONFIG_SPATTN_BFLOAT16=y CONFIG_SPATTN_REASONS=y
mapping "m55 hard-float, DSA with gradients, bf16" \
    "TARGET=cortex-m55 | OPS=dsa_lightning_indexer dsa_sparse_attention dsa_sparse_attention_grad dsa_lightning_indexer_grad | DTYPES=f32 bf16 | REASONS=0" \
    $m55 $hard CONFIG_SPATTN_DSA=y CONFIG_SPATTN_GRADIENTS=y CONFIG_SPATTN_BFLOAT16=y
mapping "gradients with NSA inference only: no backward ops" \
    "TARGET=cortex-m55 | OPS=nsa_select_infer nsa_compress_attention_infer nsa_compress_with_cache | DTYPES=f32 | REASONS=0" \
    $m55 $hard CONFIG_SPATTN_NSA_INFERENCE=y CONFIG_SPATTN_GRADIENTS=y
mapping "m55 softfp, every option: every op of mk/ops.mk" \
    "TARGET=cortex-m55-softfp | OPS=$all_ops | DTYPES=f32 f16 bf16 | REASONS=1" \
    $m55 $soft CONFIG_SPATTN_MSDA=y CONFIG_SPATTN_NSA_TRAINING=y CONFIG_SPATTN_NSA_INFERENCE=y CONFIG_SPATTN_DSA=y \
    CONFIG_SPATTN_GRADIENTS=y CONFIG_SPATTN_FLOAT16=y CONFIG_SPATTN_BFLOAT16=y CONFIG_SPATTN_REASONS=y
mapping "no FPU: refused" \
    "FATAL: spattn: CONFIG_FPU is not set." \
    CONFIG_CPU_CORTEX_M55=y CONFIG_ARMV8_1_M_MVEF=y CONFIG_SPATTN_MSDA=y
mapping "Cortex-M4: refused" \
    "FATAL: spattn: no target for this CPU" \
    CONFIG_CPU_CORTEX_M4=y CONFIG_FPU=y $hard CONFIG_SPATTN_MSDA=y
mapping "Cortex-M55 without Helium floating point: refused" \
    "FATAL: CONFIG_ARMV8_1_M_MVEF unset" \
    CONFIG_CPU_CORTEX_M55=y CONFIG_FPU=y $hard CONFIG_SPATTN_MSDA=y
mapping "Cortex-M7 with a single-precision FPU: refused" \
    "FATAL: CONFIG_CPU_HAS_FPU_DOUBLE_PRECISION unset" \
    CONFIG_CPU_CORTEX_M7=y CONFIG_FPU=y $soft CONFIG_SPATTN_MSDA=y
mapping "no float ABI chosen: refused" \
    "FATAL: neither CONFIG_FP_HARDABI nor CONFIG_FP_SOFTABI is set" \
    $m7 CONFIG_SPATTN_MSDA=y
mapping "Arm alternative half format: refused" \
    "FATAL: CONFIG_FP16_ALT is set" \
    $m55 $hard CONFIG_FP16_ALT=y CONFIG_SPATTN_MSDA=y
mapping "no operator family: refused" \
    "FATAL: no operator family is" \
    $m55 $hard CONFIG_SPATTN_GRADIENTS=y CONFIG_SPATTN_FLOAT16=y
}

# ---- zephyr/CMakeLists.txt under the stand-ins ----
missing=
for tool in arm-none-eabi-gcc arm-none-eabi-nm make m4; do
    command -v $tool >/dev/null 2>&1 || missing="$missing $tool"
done
if [ -n "$missing" ]; then
    echo "skip the module's CMake cases (missing:$missing)"
    echo "zephyr-module-check: $passed cases passed"
    exit 0
fi

# Ninja where there is one, as west builds; the build step's BYPRODUCTS
# matter there (without them Ninja knows no rule for the archive).
if command -v ninja >/dev/null 2>&1; then gen=Ninja; else gen="Unix Makefiles"; fi

# configure DIR [CMAKE_ARGS...]: configure the stand-in into DIR.
configure() {
    dir=$1
    shift
    out=$(cmake -S "$here/standin" -B "$dir" -G "$gen" "$@" 2>&1)
    rc=$?
}

name="module without CONFIG_SPATTN: registers nothing"
configure "$tmp/off" -DCONFIG_FPU=y
[ $rc -eq 0 ] || fail "$name" "$out"
[ ! -s "$tmp/off/zephyr_calls.txt" ] || fail "$name" "it called:" "$(cat "$tmp/off/zephyr_calls.txt")"
echo "ok   $name"
passed=$((passed + 1))

# The soft-float targets came with another change: in a tree without them
# the module must refuse them at configuration time, by name.
name="module, m7 softfp: configures, or names the missing target"
configure "$tmp/softfp" -DCONFIG_SPATTN=y -DCONFIG_CPU_CORTEX_M7=y \
    -DCONFIG_CPU_HAS_FPU_DOUBLE_PRECISION=y -DCONFIG_FPU=y -DCONFIG_FP_SOFTABI=y -DCONFIG_SPATTN_MSDA=y
if [ -f "$root/targets/cortex-m7-softfp/target.mk" ]; then
    [ $rc -eq 0 ] || fail "$name" "$out"
    grep -qx "zephyr_library_import spattn $tmp/softfp/spattn/cortex-m7-softfp/lib/libspattn.a" \
        "$tmp/softfp/zephyr_calls.txt" || fail "$name" "calls:" "$(cat "$tmp/softfp/zephyr_calls.txt")"
else
    flat=$(printf '%s\n' "$out" | tr -s ' \n\t' '   ')
    [ $rc -ne 0 ] || fail "$name" "configured without targets/cortex-m7-softfp"
    case $flat in
    *"has no target 'cortex-m7-softfp'"*) ;;
    *) fail "$name" "$out" ;;
    esac
fi
echo "ok   $name"
passed=$((passed + 1))

# The real case: cortex-m55, msda, f32, no refusal texts.
name="module, m55 msda f32 REASONS=0: configure ($gen)"
b=$tmp/m55
configure "$b" -DCONFIG_SPATTN=y -DCONFIG_CPU_CORTEX_M55=y -DCONFIG_ARMV8_1_M_MVEF=y \
    -DCONFIG_FPU=y -DCONFIG_FP_HARDABI=y -DCONFIG_SPATTN_MSDA=y \
    -DSPATTN_TEST_APP=ON -DCMAKE_SYSTEM_NAME=Generic -DCMAKE_C_COMPILER=arm-none-eabi-gcc \
    -DCMAKE_TRY_COMPILE_TARGET_TYPE=STATIC_LIBRARY \
    "-DCMAKE_C_FLAGS=-mcpu=cortex-m55 -mfloat-abi=hard -mthumb -std=c11 -Wall -Wextra -Werror"
[ $rc -eq 0 ] || fail "$name" "$out"
archive=$b/spattn/cortex-m55/lib/libspattn.a
want_calls="zephyr_library_import spattn $archive
zephyr_include_directories $root/include"
[ "$(cat "$b/zephyr_calls.txt")" = "$want_calls" ] || \
    fail "$name" "expected calls:" "$want_calls" "got:" "$(cat "$b/zephyr_calls.txt")"
[ "$(cat "$b/spattn_deps.txt")" = spattn_build ] || \
    fail "$name" "the imported spattn does not depend on spattn_build"
# The make command of the build step, as the generator wrote it.
want_make="-C $root TARGET=cortex-m55 OPS=msda DTYPES=f32 REASONS=0 BUILDROOT=$b/spattn $archive"
grep -rqF --include=build.ninja --include=build.make -- "$want_make" "$b" || \
    fail "$name" "no build step running make $want_make"
echo "ok   $name"
passed=$((passed + 1))

# Building the program must build the archive first (the dependency that
# Zephyr's link relies on), with the module's include path and archive.
name="module, m55 msda f32 REASONS=0: archive built and linked"
[ ! -e "$archive" ] || fail "$name" "archive there before the build"
if ! out=$(cmake --build "$b" --target app 2>&1); then
    fail "$name" "$(printf '%s\n' "$out" | tail -n 30)"
fi
[ -f "$archive" ] || fail "$name" "no $archive"
syms=$(arm-none-eabi-nm "$archive") || fail "$name" "nm failed"
printf '%s\n' "$syms" | grep -qE ' T spa_msda$' || fail "$name" "spa_msda not defined"
printf '%s\n' "$syms" | grep -qE ' T spa_k_msda_f32' || fail "$name" "no f32 msda kernel"
if printf '%s\n' "$syms" | grep -E 'spa_k_nsa_|spa_k_msda_grad|spa_k_[a-z_]*_b?f16' | head -3 | grep .; then
    fail "$name" "kernels of ops or dtypes left out are in the archive"
fi
arm-none-eabi-nm "$b/app" | grep -qE ' T spa_msda_get_workspace_size$' || fail "$name" "app does not hold MSDA's phase 1"
echo "ok   $name"
passed=$((passed + 1))

echo "zephyr-module-check: $passed cases passed"
