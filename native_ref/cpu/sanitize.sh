#!/usr/bin/env bash
# Sanitizer check of the native CPU reference. Builds build/asan (AddressSanitizer +
# UndefinedBehaviorSanitizer) and build/tsan (ThreadSanitizer) with `make asan tsan`, then
# runs a small real case through each build:
#   - pack a small Q4_0 expert file (3 layers x 8 experts, hidden 128 x inter 256),
#   - stream prefills over it with the pipelined executor (dispatcher, Q reader threads and
#     the compute pool) for every prefetch point and several (G, B, Q, threads),
#   - the micro-benchmarks at tiny sizes (threaded reads, FFN, non-FFN, dequant),
#   - under ASan only: corrupted pack headers, each of which must be refused with exit 2
#     and a one-line message naming the field (never a read out of bounds).
# Exit status: 0 clean; 1 a sanitizer report, an unexpected exit status, a missing refusal or
# a failed build; 3 sanitizers unavailable here (no runtime libraries, or TSan cannot map
# its shadow memory even with ASLR off).
#
#   bash native_ref/cpu/sanitize.sh            (CC=clang bash ... for another compiler,
#                                               which then needs its sanitizer runtimes)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
jobs=$(nproc 2>/dev/null || echo 2)
t_start=$(date +%s)

command -v python3 >/dev/null || { echo "sanitize.sh: needs python3 (writes the routing and corrupted headers)" >&2; exit 2; }
if ! make_log=$(make -C "$here" -j"$jobs" --no-print-directory asan tsan 2>&1); then
    printf '%s\n' "$make_log" | tail -20 >&2
    if grep -qE "cannot find .*(asan|tsan|ubsan|clang_rt)|-l(asan|tsan|ubsan)" <<<"$make_log"; then
        echo "sanitize.sh: this compiler's sanitizer runtimes are not installed" >&2
        exit 3
    fi
    echo "sanitize.sh: the sanitizer builds failed" >&2
    exit 1
fi
asan="$here/build/asan" tsan="$here/build/tsan"

work=$(mktemp -d "${TMPDIR:-/tmp}/moeref-sanitize.XXXXXX")
trap 'rm -rf "$work"' EXIT

# halt at the first report, with an exit status no tool uses on purpose (0, 1, 2)
export ASAN_OPTIONS="halt_on_error=1:abort_on_error=0:exitcode=86:detect_leaks=1:detect_stack_use_after_return=1:strict_string_checks=1"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:exitcode=86"
export TSAN_OPTIONS="halt_on_error=1:exitcode=86:second_deadlock_stack=1"
report_re='ERROR: (Address|Leak|UndefinedBehavior)Sanitizer|WARNING: ThreadSanitizer|FATAL: ThreadSanitizer|runtime error:|SUMMARY: [A-Za-z]*Sanitizer'

# TSan needs a memory layout that some kernels' ASLR (high mmap_rnd_bits) breaks
# ("unexpected memory mapping"); then run its programs with ASLR off.
tsan_prefix=()
probe=$("$tsan/executor" 2>&1 || true)
if grep -qE 'unexpected memory mapping|FATAL: ThreadSanitizer' <<<"$probe"; then
    if command -v setarch >/dev/null && setarch "$(uname -m)" -R true 2>/dev/null; then
        tsan_prefix=(setarch "$(uname -m)" -R)
        echo "note: ThreadSanitizer needs ASLR off on this kernel; running its programs under setarch -R"
    else
        printf '%s\n' "$probe" | head -3 >&2
        echo "sanitize.sh: ThreadSanitizer cannot run here and setarch -R is unavailable" >&2
        exit 3
    fi
fi

failed=0
n_ok=0
# check NAME WANT_RC CMD...: run CMD; fail on a sanitizer report or another exit status
check() {
    local name=$1 want=$2 rc=0
    shift 2
    "$@" >"$work/$name.out" 2>"$work/$name.err" || rc=$?
    if grep -qE "$report_re" "$work/$name.err"; then
        echo "FAIL $name: sanitizer report (exit $rc)"
        head -40 "$work/$name.err"
        failed=1
        return 1
    fi
    if [ "$rc" != "$want" ]; then
        echo "FAIL $name: exit status $rc, expected $want"
        tail -5 "$work/$name.err"
        failed=1
        return 1
    fi
    n_ok=$((n_ok + 1))
}

pack="$work/small.pack" routing="$work/routing.bin"
check pack 0 "$asan/executor" pack --file "$pack" --layers 3 --experts 8 --hidden 128 --inter 256 --seed 7 || exit 1
python3 - "$routing" <<'EOF'
import random, struct, sys
tokens, layers, top_k, experts = 16, 3, 2, 8
rng = random.Random(5)
ids = []
for t in range(tokens):
    for l in range(layers):
        allowed = list(range(experts))[l:l + 5]     # some groups stay inactive in every layer
        ids += rng.sample(allowed, top_k)
with open(sys.argv[1], "wb") as f:
    f.write(b"MOEROUT1" + struct.pack("<4I", tokens, layers, top_k, 0) + struct.pack(f"<{len(ids)}h", *ids))
EOF

# (G, B, Q, threads): one bank; groups that do not divide E; Q > B; a whole layer per group
pipelines=("1 1 1 1" "3 2 2 2" "3 4 3 2" "8 2 1 2")
run_matrix() { # run_matrix LABEL BUILD_DIR [PREFIX...]
    local label=$1 dir=$2
    shift 2
    local g b q t pf
    for pf in non-ffn after-routing on-demand; do
        for spec in "${pipelines[@]}"; do
            read -r g b q t <<<"$spec"
            check "$label-run-$pf-G$g-B$b-Q$q-T$t" 0 "$@" "$dir/executor" run --file "$pack" --routing "$routing" \
                --group-size "$g" --banks "$b" --queue-depth "$q" --threads "$t" --prefetch "$pf" \
                --intervals "$work/$label-iv.csv" || true
        done
    done
    check "$label-run-buffered" 0 "$@" "$dir/executor" run --file "$pack" --routing "$routing" --group-size 2 \
        --banks 2 --queue-depth 2 --threads 2 --prefetch after-routing --io buffered || true
    check "$label-bench-read" 0 "$@" "$dir/bench" read --file "$work/read.bin" --file-mib 1 --sizes 4096,65536 \
        --qd 1,3 --pattern seq,rand --repeats 1 --requests 8 || true
    check "$label-bench-ffn" 0 "$@" "$dir/bench" ffn --shapes 128x64 --tokens 1,5 --repeats 1 --threads 2 --pool-mib 1 || true
    check "$label-bench-nonffn" 0 "$@" "$dir/bench" nonffn --tokens 8 --dims 64 --repeats 1 --threads 2 || true
    check "$label-bench-dequant" 0 "$@" "$dir/bench" dequant --mib 1 --row-len 256 --repeats 1 || true
}
run_matrix asan "$asan"
run_matrix tsan "$tsan" "${tsan_prefix[@]}"

# Corrupted headers under ASan: each refused with exit 2 and a message naming the field.
python3 - "$pack" "$work" <<'EOF'
import struct, sys
src, out = sys.argv[1], sys.argv[2]
data = open(src, "rb").read()
head, body = bytearray(data[:4096]), data[4096:]
L, E = struct.unpack_from("<2I", head, 8)
def put(name, fields, body_bytes=None):
    h = bytearray(head)
    for off, fmt, value in fields:
        struct.pack_into(fmt, h, off, value)
    open(f"{out}/bad-{name}.pack", "wb").write(bytes(h) + (body if body_bytes is None else body_bytes))
put("magic", [(0, "8s", b"GGUF\x03\x00\x00\x00")])
put("version", [(7, "c", b"2")])
put("format", [(56, "8s", b"q8_0")])
put("reserved", [(100, "B", 1)])
put("layers", [(8, "<I", 0)])
put("experts", [(12, "<I", 40000)])
put("hidden", [(16, "<I", 1 << 31)])
put("inter", [(20, "<I", 100)])
put("expert_bytes", [(32, "<Q", 55296 + 18)])
# the review's case: a consistent file size, but experts 8192 B apart (one is 55296 B)
put("expert_stride", [(40, "<Q", 8192)], body[:L * E * 8192])
put("stride_align", [(40, "<Q", 57344 + 512)], bytes(L * E * (57344 + 512)))
put("data_offset", [(48, "<Q", 0)])
put("overflow", [(40, "<Q", 1 << 62)])
open(f"{out}/bad-truncated.pack", "wb").write(data[:-4096])
open(f"{out}/bad-short.pack", "wb").write(data[:100])
EOF
refusals=(magic:magic version:version format:format reserved:reserved layers:layers experts:experts hidden:hidden
          inter:inter expert_bytes:expert_bytes expert_stride:expert_stride stride_align:expert_stride
          data_offset:data_offset "overflow:data_offset + layers x experts x expert_stride" "truncated:file size" "short:file size")
for spec in "${refusals[@]}"; do
    name=${spec%%:*} field=${spec#*:}
    if check "asan-refuse-$name" 2 "$asan/executor" run --file "$work/bad-$name.pack" --routing "$routing" \
        --group-size 2 --banks 2 --queue-depth 2 --threads 2 --prefetch non-ffn; then
        msg=$(cat "$work/asan-refuse-$name.err")
        if [ "$(wc -l <"$work/asan-refuse-$name.err")" != 1 ] || ! grep -qF "pack header: $field" <<<"$msg"; then
            echo "FAIL asan-refuse-$name: expected one line naming '$field', got: $msg"
            failed=1
        fi
    fi
done
echo "refused as it must be (ASan): $(sed "s|$work/||" "$work/asan-refuse-expert_stride.err")"

elapsed=$(($(date +%s) - t_start))
if [ "$failed" != 0 ]; then
    echo "sanitize.sh: FAILED (${elapsed} s)"
    exit 1
fi
echo "sanitize.sh: ok, $n_ok runs under ASan+UBSan and TSan without a report (${elapsed} s)"
