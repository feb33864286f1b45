#!/bin/sh
# cli_output_test.sh - the output policy of every command that writes
# (cat -o, extract -o / -d, convert) and "-" for inputs and outputs.
#
#     tests/cli_output_test.sh CKPT SAMPLE.pt
#
# Devices are made with mknod in a temporary folder (root only; skipped with
# a message otherwise): the system's /dev is never touched.  Prints
# "ok - ..." / "not ok - ..." / "skip - ..." per check and
# "N passed, M failed, K skipped".

if [ $# -ne 2 ]; then
    echo "usage: $0 CKPT SAMPLE.pt" >&2
    exit 2
fi
case $1 in /*) CKPT=$1 ;; *) CKPT=$(pwd)/$1 ;; esac
case $2 in /*) SAMPLE=$2 ;; *) SAMPLE=$(pwd)/$2 ;; esac
T=model.fc1.bias     # a tensor of the sample: 8 float32, 32 bytes
T2=model.fc1.weight  # 128 bytes

TMP=$(mktemp -d "${TMPDIR:-/tmp}/ckpt-out-test.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT
trap 'rm -rf "$TMP"; exit 1' HUP INT TERM
cd "$TMP" || exit 1

PASSED=0
FAILED=0
SKIPPED=0
ok() { PASSED=$((PASSED + 1)); echo "ok - $1"; }
not_ok() { FAILED=$((FAILED + 1)); echo "not ok - $1: $2"; }
skip() { SKIPPED=$((SKIPPED + 1)); echo "skip - $1: $2"; }
check() { if [ -z "$2" ]; then ok "$1"; else not_ok "$1" "$2"; fi; }

run() { "$CKPT" "$@" >out 2>err; RC=$?; }
status_is() { [ "$RC" -eq "$1" ] || echo "exit $RC, want $1 (stderr: $(head -n 1 err))"; }
err_has() { grep -q -- "$1" err || echo "stderr lacks '$1': $(head -n 1 err)"; }
size_of() { wc -c <"$1" | tr -d ' '; }

# The expected bytes, written to stdout (a file, not a terminal).
"$CKPT" cat "$SAMPLE" "$T" >want.bin 2>/dev/null
"$CKPT" cat "$SAMPLE" "$T2" >want2.bin 2>/dev/null
"$CKPT" convert "$SAMPLE" want.safetensors 2>/dev/null
if [ "$(size_of want.bin)" != 32 ] || [ ! -s want.safetensors ]; then
    echo "Bail out! cannot produce the reference outputs"
    exit 1
fi

# ---------------------------------------------------------------------------
# Non-regular outputs: written in place, never replaced

is_root=no
[ "$(id -u)" = 0 ] && is_root=yes
if [ $is_root = yes ] && mknod full c 1 7 2>/dev/null && mknod null c 1 3 2>/dev/null; then
    for cmd in cat extract convert; do
        case $cmd in
        cat) args="cat $SAMPLE $T -o" ;;
        extract) args="extract $SAMPLE $T -o" ;;
        convert) args="convert $SAMPLE" ;;
        esac
        # shellcheck disable=SC2086
        run $args full
        r=$(status_is 1)
        [ -z "$r" ] && r=$(err_has "No space left on device")
        [ -z "$r" ] && [ ! -c full ] && r="full is no longer a character device"
        check "$cmd to a full device: 'No space left on device', exit 1, device kept" "$r"
        # shellcheck disable=SC2086
        run $args null
        r=$(status_is 0)
        [ -z "$r" ] && [ ! -c null ] && r="null is no longer a character device"
        check "$cmd to a null device works and keeps the device" "$r"
    done
    ln -s full full-link
    run cat "$SAMPLE" "$T" -o full-link
    r=$(status_is 1)
    [ -z "$r" ] && { [ -L full-link ] && [ -c full ]; } || r="${r:-link or device replaced}"
    check "cat to a symlink to a full device writes through it" "$r"
    mknod blk b 7 200 2>/dev/null && {
        run cat "$SAMPLE" "$T" -o blk
        r=$(status_is 1)
        [ -z "$r" ] && r=$(err_has "block device")
        [ -z "$r" ] && [ ! -b blk ] && r="blk is no longer a block device"
        check "a block device is refused without --force" "$r"
    }
else
    skip "device outputs" "not root or mknod refused: device nodes cannot be made here"
fi

mkfifo fifo
cat fifo >from-fifo &
reader=$!
run cat "$SAMPLE" "$T" -o fifo
wait $reader
r=$(status_is 0)
[ -z "$r" ] && ! cmp -s from-fifo want.bin && r="the reader got other bytes"
[ -z "$r" ] && [ ! -p fifo ] && r="fifo is no longer a FIFO"
check "cat -o FIFO: the reader gets the bytes, the FIFO stays" "$r"

cat fifo >from-fifo &
reader=$!
run convert "$SAMPLE" fifo
wait $reader
r=$(status_is 0)
[ -z "$r" ] && ! cmp -s from-fifo want.safetensors && r="the reader got other bytes"
check "convert to a FIFO streams the same file" "$r"

# ---------------------------------------------------------------------------
# Regular outputs: no clobbering, --force, symlinks, modes, names

for cmd in cat extract convert; do
    case $cmd in
    cat) args="cat $SAMPLE $T -o" ;;
    extract) args="extract $SAMPLE $T -o" ;;
    convert) args="convert $SAMPLE" ;;
    esac
    echo keep >exists
    # shellcheck disable=SC2086
    run $args exists
    r=$(status_is 1)
    [ -z "$r" ] && r=$(err_has "already exists (--force replaces it)")
    [ -z "$r" ] && [ "$(cat exists)" != keep ] && r="the file was changed"
    check "$cmd refuses an existing OUT, naming --force" "$r"
    # shellcheck disable=SC2086
    run $args exists --force
    r=$(status_is 0)
    [ -z "$r" ] && [ "$(cat exists)" = keep ] && r="the file was not replaced"
    check "$cmd --force replaces it" "$r"
    rm -f exists
    # shellcheck disable=SC2086
    run $args new --sync
    r=$(status_is 0)
    [ -z "$r" ] && [ ! -s new ] && r="no output"
    check "$cmd --sync writes OUT" "$r"
    rm -f new
done

echo old >target
chmod 600 target
ln -s target link
run cat "$SAMPLE" "$T" -o link --force
r=$(status_is 0)
[ -z "$r" ] && [ ! -L link ] && r="the link was replaced by a file"
[ -z "$r" ] && ! cmp -s target want.bin && r="the target does not hold the bytes"
[ -z "$r" ] && [ "$(stat -c %a target)" != 600 ] && r="mode became $(stat -c %a target)"
check "a symlink OUT: target replaced, link kept, mode 0600 kept" "$r"

umask 022
run cat "$SAMPLE" "$T" -o fresh
r=$(status_is 0)
[ -z "$r" ] && [ "$(stat -c %a fresh)" != 644 ] && r="mode $(stat -c %a fresh), want 644 under umask 022"
check "a new OUT gets the mode a new file gets" "$r"

ln -s nowhere dangling
run cat "$SAMPLE" "$T" -o dangling --force
r=$(status_is 1)
[ -z "$r" ] && [ -e nowhere ] && r="wrote through a dangling link"
check "a dangling symlink OUT is refused" "$r"

long=$(printf 'n%.0s' $(seq 1 255))
run cat "$SAMPLE" "$T" -o "$long"
r=$(status_is 0)
[ -z "$r" ] && ! cmp -s "$long" want.bin && r="wrong bytes"
check "an OUT name of 255 bytes works (the temporary name stays valid)" "$r"
run cat "$SAMPLE" "$T" -o "$long" --force
check "and it can be replaced" "$(status_is 0)"
rm -f "$long"

ls -A | grep -q '^\.' && r="temporary files left: $(ls -A | grep '^\.')" || r=""
check "no temporary file is left behind" "$r"

# ---------------------------------------------------------------------------
# The input is never the output

cp "$SAMPLE" in.pt
cp in.pt in.orig
ln -s in.pt in-sym
ln in.pt in-hard
for out in in.pt in-sym in-hard ./in.pt; do
    for force in "" --force; do
        run cat in.pt "$T" -o "$out" $force
        r=$(status_is 1)
        [ -z "$r" ] && r=$(err_has "same file")
        [ -z "$r" ] && ! cmp -s in.pt in.orig && r="the input was changed"
        check "cat -o $out $force: refused as the same file" "$r"
        run convert in.pt "$out" $force
        r=$(status_is 1)
        [ -z "$r" ] && r=$(err_has "same file")
        [ -z "$r" ] && ! cmp -s in.pt in.orig && r="the input was changed"
        check "convert in.pt $out $force: refused as the same file" "$r"
    done
done
"$CKPT" cat in.pt "$T" >>in-hard 2>err
RC=$?
r=$(status_is 1)
[ -z "$r" ] && ! cmp -s in.pt in.orig && r="the input was changed"
check "cat to stdout appended to the input: refused" "$r"

# ---------------------------------------------------------------------------
# extract -d: no clobbering, parents made, links not followed

run extract "$SAMPLE" -d a/b/c
r=$(status_is 0)
[ -z "$r" ] && [ ! -s "a/b/c/$T.npy" ] && r="no a/b/c/$T.npy"
check "extract -d creates missing parents" "$r"
n_before=$(ls a/b/c | wc -l)
cp "a/b/c/$T.npy" keep.npy
run extract "$SAMPLE" -d a/b/c
r=$(status_is 1)
[ -z "$r" ] && r=$(err_has "already exists")
[ -z "$r" ] && r=$(err_has "--force")
[ -z "$r" ] && [ -s out ] && r="wrote files before refusing: $(head -n 1 out)"
check "extract -d refuses files already in DIR" "$r"
run extract "$SAMPLE" -d a/b/c --force
r=$(status_is 0)
[ -z "$r" ] && [ "$(ls a/b/c | wc -l)" != "$n_before" ] && r="file count changed"
[ -z "$r" ] && ! cmp -s keep.npy "a/b/c/$T.npy" && r="bytes differ"
check "extract -d --force replaces them" "$r"
echo outside >outside.txt
rm -f "a/b/c/$T.npy"
ln -s ../../../outside.txt "a/b/c/$T.npy"
run extract "$SAMPLE" "$T" -d a/b/c --force
r=$(status_is 0)
[ -z "$r" ] && [ "$(cat outside.txt)" != outside ] && r="wrote through the link outside DIR"
[ -z "$r" ] && [ -L "a/b/c/$T.npy" ] && r="the link is still there"
check "extract -d --force replaces a symlink entry, never its target" "$r"

# ---------------------------------------------------------------------------
# "-" for inputs and outputs

run convert "$SAMPLE" -
r=$(status_is 0)
[ -z "$r" ] && ! cmp -s out want.safetensors && r="stdout differs from convert to a file"
check "convert FILE - streams the safetensors file to stdout" "$r"
"$CKPT" convert "$SAMPLE" - 2>err | cat >piped.safetensors
r=""
cmp -s piped.safetensors want.safetensors || r="bytes through a pipe differ"
check "convert FILE - through a pipe" "$r"

cat "$SAMPLE" | "$CKPT" cat - "$T" >out 2>err
RC=$?
r=$(status_is 0)
[ -z "$r" ] && ! cmp -s out want.bin && r="wrong bytes"
check "cat - reads a checkpoint piped in" "$r"
"$CKPT" ls "$SAMPLE" >ls.want 2>/dev/null
cat "$SAMPLE" | "$CKPT" ls - >out 2>err
RC=$?
r=$(status_is 0)
[ -z "$r" ] && ! cmp -s out ls.want && r="ls - differs from ls FILE"
check "ls - lists a checkpoint piped in" "$r"
"$CKPT" ls - <"$SAMPLE" >out 2>err
RC=$?
r=$(status_is 0)
[ -z "$r" ] && ! cmp -s out ls.want && r="differs"
check "ls - with a file redirected to stdin" "$r"
cat "$SAMPLE" | "$CKPT" convert - piped2.safetensors 2>err
RC=$?
r=$(status_is 0)
[ -z "$r" ] && ! cmp -s piped2.safetensors want.safetensors && r="differs"
check "convert - OUT reads a checkpoint piped in" "$r"
head -c 100 "$SAMPLE" | "$CKPT" ls - >out 2>err
RC=$?
r=$(status_is 1)
[ -z "$r" ] && r=$(err_has "ckpt: standard input: ")
check "a truncated checkpoint on stdin: one-line error naming standard input" "$r"

cat "$SAMPLE" >fifo &
run ls fifo
wait
r=$(status_is 1)
[ -z "$r" ] && r=$(err_has "needs a seekable file")
check "a FIFO named as input: 'needs a seekable file'" "$r"

# ---------------------------------------------------------------------------
# Binary output and terminals

if command -v script >/dev/null 2>&1; then
    script -qec "'$CKPT' cat '$SAMPLE' $T" /dev/null >tty.out 2>&1
    RC=$?
    r=$(status_is 1)
    [ -z "$r" ] && ! grep -q "not writing" tty.out && r="no refusal: $(head -c 80 tty.out)"
    check "cat refuses to write binary to a terminal" "$r"
    script -qec "'$CKPT' cat '$SAMPLE' $T -o -" /dev/null >tty.out 2>&1
    RC=$?
    r=$(status_is 0)
    [ -z "$r" ] && grep -q "not writing" tty.out && r="refused"
    check "cat -o - writes to a terminal when asked" "$r"
    script -qec "'$CKPT' convert '$SAMPLE' -" /dev/null >tty.out 2>&1
    RC=$?
    check "convert FILE - refuses a terminal" "$(status_is 1)"
else
    skip "terminal checks" "script(1) is not installed"
fi

# ---------------------------------------------------------------------------
# --filter on the writers

cat want2.bin want.bin >want-fc1.bin
run cat "$SAMPLE" --filter 'model.fc1.*'
r=$(status_is 0)
[ -z "$r" ] && ! cmp -s out want-fc1.bin && r="not the matching tensors in listing order"
check "cat --filter GLOB writes every matching tensor, in listing order" "$r"
run cat "$SAMPLE" --filter 'no.such.*'
r=$(status_is 1)
[ -z "$r" ] && r=$(err_has "no tensor name matches")
check "cat --filter matching nothing: exit 1, says so" "$r"
run cat "$SAMPLE" "$T" --filter '*'
check "cat NAME --filter: usage error" "$(status_is 2)"
run extract "$SAMPLE" -d filtered --filter '*.bias'
r=$(status_is 0)
want_n=$("$CKPT" ls --json "$SAMPLE" | python3 -c "import json,sys; print(sum(t['name'].endswith('.bias') for t in json.load(sys.stdin)['tensors']))" 2>/dev/null)
got_n=$(ls filtered | wc -l | tr -d ' ')
[ -z "$r" ] && [ -n "$want_n" ] && [ "$got_n" != "$want_n" ] && r="$got_n files, want $want_n"
[ -z "$r" ] && ls filtered | grep -qv '\.bias\.npy$' && r="a file that does not match: $(ls filtered | grep -v '\.bias\.npy$' | head -n 1)"
check "extract -d --filter writes only the matching tensors" "$r"

echo "$PASSED passed, $FAILED failed, $SKIPPED skipped"
[ "$FAILED" -eq 0 ]
