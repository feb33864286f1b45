#!/bin/sh
# labels_test.sh - `ckpt scan` on what issue 12 added: archive members,
# pickles in bytes, npy object arrays, after STOP in containers, read from a
# path and from standard input alike, and the called_unknown count of --json.
#
#     tests/scan/labels_test.sh CKPT SCAN_DIR
#
# Prints "ok"/"not ok" lines and "N passed, M failed".
case $1 in /*) CKPT=$1 ;; *) CKPT=$(pwd)/$1 ;; esac
F=$2/files
PASSED=0
FAILED=0
ok() { PASSED=$((PASSED + 1)); echo "ok - $1"; }
nok() { FAILED=$((FAILED + 1)); echo "not ok - $1"; }
check() { if [ "$1" = "$2" ]; then ok "$3"; else nok "$3 (got '$1', expected '$2')"; fi; }

# built without libarchive, or unable to load it (dlopen() at scan time)
if ! "$CKPT" scan "$F/tar_of_pickles.tar" >/dev/null 2>&1 && \
   "$CKPT" scan "$F/tar_of_pickles.tar" 2>&1 | grep -Eq "without libarchive|libarchive \(.*\) cannot be loaded"; then
    LIB=0
else
    LIB=1
fi

# the PICKLE label of the last dangerous global of FILE
label() {
    "$CKPT" scan --json "$F/$1" | tr '{' '\n' | grep '"verdict": "dangerous"' |
        sed -n 's/.*"pickle": "\([^"]*\)".*/\1/p' | tail -n 1
}
check "$(label bytes_blob_twice.pkl)" 'pickle>bytes@16>bytes@16' "pickle in bytes in a pickle in bytes"
check "$(label bytes_torch_load_bytesio.pkl | sed 's/@[0-9]*/@N/')" 'pickle>bytes@N>data.pkl' \
    "torch.load(io.BytesIO(zip)): the inner data.pkl"
check "$(label npy_object_evil.npy)" 'npy:pickle' "npy object array"
check "$(label zip_record_second_pickle.pt)" 'data.pkl#2' "second pickle of a ZIP record"
check "$(label tar_member_second_pickle.pt)" 'tar:pickle#2' "second pickle of a TAR member"
check "$(label legacy_trailing_pickle.pt)" 'legacy:trailing#1' "pickle after a legacy stream"
if [ $LIB = 1 ]; then
    check "$(label tar_of_pickles.tar.gz)" 'sub/b.pkl' "member of a .tar.gz"
    check "$(label generic_zip_model_bin.zip)" 'model.bin>data.pkl' "torch ZIP zipped by hand"
    check "$(label npz_object_evil.npz)" 'b.npy>npy:pickle' "npz member"
else
    echo "skip - no libarchive (built without it, or it cannot be loaded): archive labels not checked"
fi

# standard input (a reader, spooled) gives the same exit status as the path
for f in tar_of_pickles.tar.gz evil_store.7z zip_unreadable_member.zip bytes_blob_twice.pkl \
         npz_object_evil.npz honest_tar_of_pickles.tar.gz; do
    "$CKPT" scan "$F/$f" >/dev/null 2>&1
    a=$?
    "$CKPT" scan - <"$F/$f" >/dev/null 2>&1
    check "$?" "$a" "$f from standard input: exit $a as from its path"
done

# --json counts called unknown globals: the count equals the globals listed
for f in honest_namespace_p2.pkl honest_npy_object.npy bytes_torch_load_bytesio.pkl; do
    out=$("$CKPT" scan --json "$F/$f")
    want=$(printf '%s' "$out" | tr '{' '\n' | grep -c '"called": true, "unloaded": false, "verdict": "unknown"')
    got=$(printf '%s' "$out" | sed -n 's/.*"called_unknown": \([0-9]*\).*/\1/p')
    check "$got" "$want" "$f: counts.called_unknown = $want"
done
check "$("$CKPT" scan --json "$F/honest_namespace_p2.pkl" | sed -n 's/.*"called_unknown": \([0-9]*\).*/\1/p')" 1 \
    "argparse.Namespace is an unknown global the pickle calls"

echo "$PASSED passed, $FAILED failed"
[ "$FAILED" -eq 0 ]
