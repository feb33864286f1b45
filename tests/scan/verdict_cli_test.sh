#!/bin/sh
# verdict_cli_test.sh - `ckpt scan` never calls a file it could not read to
# its end "safe", and keeps exit 3 for a dangerous file when its report
# cannot be written (issue 33).
#
#     tests/scan/verdict_cli_test.sh CKPT SCAN_DIR SAMPLE.pt
#
# Prints "ok"/"not ok" lines and "N passed, M failed".
case $1 in /*) CKPT=$1 ;; *) CKPT=$(pwd)/$1 ;; esac
F=$2/files
SAMPLE=$3
PASSED=0
FAILED=0
ok() { PASSED=$((PASSED + 1)); echo "ok - $1"; }
nok() { FAILED=$((FAILED + 1)); echo "not ok - $1"; }
check() { if [ "$1" = "$2" ]; then ok "$3"; else nok "$3 (got '$1', expected '$2')"; fi; }
T=$(mktemp -d) || exit 1
trap 'rm -rf "$T"' EXIT

verdict() { sed -n 's/.*"verdict": "\([a-z]*\)", "counts".*/\1/p'; }
complete() { sed -n 's/.*"complete": \([a-z]*\),.*/\1/p'; }

# the "unloaded" field of GLOBAL (default os.system) in FILE's --json
unloaded() {
    "$CKPT" scan --json "$F/$1" | tr '{' '\n' | grep "\"global\": \"${2:-os.system}\"" |
        sed -n 's/.*"unloaded": \([a-z]*\),.*/\1/p' | head -n 1
}

# a pickle kept as bytes that nothing in the file unpickles: listed, noted,
# counted apart, exit 0; handed to a loader (also through the memo, through
# io.BytesIO, torch.storage._load_from_bytes): counted, exit 3
out=$("$CKPT" scan --json "$F/bytes_blob_pickle.pkl")
check "$?" 0 "bytes nothing unpickles: exit 0"
check "$(unloaded bytes_blob_pickle.pkl)" true "bytes nothing unpickles: os.system listed with unloaded true"
case $out in *'"dangerous": 0, '*'"unloaded": 1, "unloaded_dangerous": 1}'*) ok "bytes nothing unpickles: counts.unloaded_dangerous 1, dangerous 0" ;;
*) nok "bytes nothing unpickles: counts.unloaded_dangerous 1, dangerous 0 ($out)" ;; esac
case $out in *'nothing in the file hands to a loader'*) ok "bytes nothing unpickles: a note says so" ;;
*) nok "bytes nothing unpickles: a note says so" ;; esac
"$CKPT" scan "$F/bytes_blob_pickle.pkl" | tail -n 1 | grep -q "a later load of those bytes would run code" &&
    ok "bytes nothing unpickles: the summary says what a later load would do" ||
    nok "bytes nothing unpickles: the summary says what a later load would do"
"$CKPT" scan --strict "$F/bytes_blob_pickle.pkl" >/dev/null
check "$?" 0 "bytes nothing unpickles: --strict exit 0 too"
for f in bytes_blob_twice.pkl bytes_loads_inside_blob.pkl bytes_blob_to_unknown_class.pkl; do
    check "$(unloaded $f)" true "$f: os.system unloaded"
done
check "$(unloaded bytes_pickle_loads_p0_codecs.pkl posix.system)" false \
    "_pickle.loads(_codecs.encode(...)): posix.system not unloaded"
for f in bytes_pickle_loads.pkl bytes_blob_then_loads.pkl bytes_torch_load_bytesio.pkl \
         bytes_storage_load_from_bytes.pt; do
    "$CKPT" scan "$F/$f" >/dev/null
    check "$?" 3 "$f: handed to a loader: exit 3"
    check "$(unloaded $f)" false "$f: os.system not unloaded"
done

# a file cut short (the ZIP has no central directory: nothing is read)
head -c 200 "$SAMPLE" >"$T/cut.pt"
out=$("$CKPT" scan --json "$T/cut.pt" 2>/dev/null)
check "$?" 1 "truncated ZIP: exit 1"
check "$(printf '%s' "$out" | verdict)" unknown "truncated ZIP: --json verdict unknown, not safe"
check "$(printf '%s' "$out" | complete)" false "truncated ZIP: complete false"
# a pickle cut after a safe global: the global is listed, the verdict is not safe
head -c 30 "$F/honest_ordereddict_p2.pkl" >"$T/cut.pkl"
out=$("$CKPT" scan --json "$T/cut.pkl" 2>/dev/null)
check "$?" 1 "truncated pickle: exit 1"
check "$(printf '%s' "$out" | verdict)" unknown "truncated pickle after a safe global: verdict unknown"
case $out in *'"safe": 1,'*) ok "truncated pickle: its safe global is counted" ;;
*) nok "truncated pickle: its safe global is counted ($out)" ;; esac
"$CKPT" scan "$T/cut.pkl" >"$T/out" 2>/dev/null
grep -q "the rest of the file could not be read" "$T/out" &&
    ok "truncated pickle: the summary says it was not read to the end" ||
    nok "truncated pickle: the summary says it was not read to the end"
# a ZIP whose record is flagged encrypted (libarchive refuses it; without
# libarchive the archive is refused as well): never safe
out=$("$CKPT" scan --json "$F/zip_flagged_encrypted.zip" 2>/dev/null)
check "$?" 1 "encrypted-flag ZIP: exit 1"
check "$(printf '%s' "$out" | verdict)" unknown "encrypted-flag ZIP: --json verdict unknown, not safe"
check "$(printf '%s' "$out" | complete)" false "encrypted-flag ZIP: complete false"
# a complete honest file is still safe
check "$("$CKPT" scan --json "$SAMPLE" | verdict)" safe "complete honest checkpoint: verdict safe"

# the report cannot be written (/dev/full): a dangerous file still exits 3,
# with the write error on stderr; an honest one exits 1
if [ -w /dev/full ]; then
    "$CKPT" scan "$F/os_system_p2.pkl" >/dev/full 2>"$T/err"
    check "$?" 3 "scan >/dev/full of a dangerous file: exit 3"
    grep -q "write error" "$T/err" && ok "scan >/dev/full: the write error is reported" ||
        nok "scan >/dev/full: the write error is reported ($(cat "$T/err"))"
    "$CKPT" scan --json "$F/os_system_p2.pkl" >/dev/full 2>/dev/null
    check "$?" 3 "scan --json >/dev/full of a dangerous file: exit 3"
    "$CKPT" scan "$F/os_system_p2.pkl" "$F/honest_ordereddict_p2.pkl" >/dev/full 2>/dev/null
    check "$?" 3 "scan of two files >/dev/full, the first dangerous: exit 3"
    "$CKPT" scan "$F/honest_ordereddict_p2.pkl" >/dev/full 2>/dev/null
    check "$?" 1 "scan >/dev/full of an honest file: exit 1 (write error)"
else
    echo "skip - no writable /dev/full"
fi

echo "$PASSED passed, $FAILED failed"
[ "$FAILED" -eq 0 ]
