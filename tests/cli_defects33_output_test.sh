#!/bin/sh
# cli_defects33_output_test.sh - the data-loss and output-policy items of
# issue 33, one group each:
#
#     tests/cli_defects33_output_test.sh CKPT SOURCE_DIR GROUP
#
#   input   OUT is never a file of the input: a shard, the index, a DCP
#           .distcp or .metadata, a folder's one checkpoint file (by device
#           and inode: links too), for cat -o, extract -o / -d, convert OUT
#           and OUTDIR/, stdout, and the leftovers convert --force removes
#   batch   convert --force SRC OUTDIR/ over an earlier export, stopped by
#           SIGINT / SIGTERM at every file (CKPT_TEST_RAISE, output.c's test
#           hook) or failing with EFBIG (RLIMIT_FSIZE): the old export stays
#           whole (verify ok, equal to the old model) or the new one is
#           whole; no temporary file is left
#   enospc  the same failing with ENOSPC at every file: a small tmpfs (root
#           only; exit 77 when it cannot be mounted)
#   mode    a symlink replaced inside OUTDIR/ or an extract -d folder gives a
#           new file of mode 0666 & ~umask, not the link's 0777; a replaced
#           regular file keeps its mode
#   spool   FILE '-': the first bytes are checked before anything is spooled
#           (counted: the bytes a writer got into the pipe), and the spool is
#           bounded by --max-spool / CKPT_MAX_SPOOL
#   fifo    a FIFO named as FILE (or as a part of a folder) is refused by
#           every command at once, with no writer (timeout(1) is only a net)
#   sizes   a plain number is bytes for every size flag and its variable
#           (CKPT_MAX_MEMORY=300 too); --max-shard-size with one OUT file is
#           a usage error
#
# Prints "ok"/"not ok"/"skip" lines and "N passed, M failed"; exits 77 when
# what a group needs is missing.

case $1 in /*) CKPT=$1 ;; *) CKPT=$(pwd)/$1 ;; esac
SRC=$(cd "$2" && pwd)
GROUP=$3
SAMPLE=$SRC/examples/sample.pt
DCP=$SRC/tests/fixtures/sharded/dcp_split
T=model.fc1.bias # a tensor of the sample
PASSED=0
FAILED=0
ok() { PASSED=$((PASSED + 1)); echo "ok - $1"; }
nok() { FAILED=$((FAILED + 1)); echo "not ok - $1"; }
# check LABEL WHY: ok when WHY is empty
check() { if [ -z "$2" ]; then ok "$1"; else nok "$1: $2"; fi; }

TMP=$(mktemp -d "${TMPDIR:-/tmp}/ckpt-defects33.XXXXXX") || exit 1
MNT=
cleanup() {
    [ -n "$MNT" ] && umount "$MNT" 2>/dev/null
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'cleanup; exit 1' HUP INT TERM
cd "$TMP" || exit 1

run() { "$CKPT" "$@" >out 2>err; RC=$?; }
status_is() { [ "$RC" -eq "$1" ] || echo "exit $RC, want $1 (stderr: $(head -n 1 err))"; }
err_has() { grep -q -- "$1" err || echo "stderr lacks '$1': $(head -n 1 err)"; }
one_line() { [ "$(wc -l <err | tr -d ' ')" = 1 ] || echo "stderr is not one line: $(head -c 300 err)"; }
# the temporary files left in a folder (".NAME.XXXXXX")
leftovers() { ls -A "$1" | grep '^\.' | grep -v '^\.metadata$' | tr '\n' ' '; }
# same: folders A and B hold the same names with the same bytes
same_tree() { diff -r "$1" "$2" >/dev/null 2>&1 || echo "$1 changed"; }

# hf/: the sample as four shards of ~2 KB and their index
make_hf() {
    "$CKPT" convert --max-shard-size 300 "$SAMPLE" "$1/" 2>/dev/null
    [ -f "$1/model.safetensors.index.json" ] || { echo "Bail out! cannot shard the sample"; exit 1; }
}

# ---------------------------------------------------------------------------
group_input() {
    make_hf hf
    cp -a hf hf.orig
    cp -a "$DCP" dcp
    cp -a dcp dcp.orig
    mkdir one && cp "$SAMPLE" one/model.safetensors # a folder of one checkpoint file
    cp -a one one.orig
    shard=model-00002-of-00004.safetensors
    index=model.safetensors.index.json

    # OUT is a file of an input given as a folder, or as its index
    for input in hf/ "hf/$index"; do
        for out in "hf/$shard" "hf/$index"; do
            [ "$input" = "hf/$index" ] && [ "$out" = "hf/$index" ] && continue # the input itself: cli_output
            for cmd in cat extract convert; do
                case $cmd in
                cat) run cat "$input" "$T" -o "$out" --force ;;
                extract) run extract "$input" "$T" -o "$out" --force ;;
                convert) run convert "$input" "$out" --force ;;
                esac
                r=$(status_is 1)
                [ -z "$r" ] && r=$(err_has "files of the input")
                [ -z "$r" ] && r=$(same_tree hf hf.orig)
                check "$cmd $input -o $out --force: refused, the input unchanged" "$r"
                rm -rf hf && cp -a hf.orig hf
            done
        done
    done

    # links to a part, elsewhere: the file they lead to is the part
    ln -s "hf/$shard" sym.safetensors
    ln "hf/$shard" hard.safetensors
    for out in sym.safetensors hard.safetensors; do
        run cat hf/ "$T" -o "$out" --force
        r=$(status_is 1)
        [ -z "$r" ] && r=$(same_tree hf hf.orig)
        check "cat hf/ -o $out (a link to a shard) --force: refused" "$r"
    done
    "$CKPT" cat hf/ "$T" >>"hf/$shard" 2>err
    RC=$?
    r=$(status_is 1)
    [ -z "$r" ] && r=$(same_tree hf hf.orig)
    check "cat hf/ appended to a shard through stdout: refused" "$r"

    # a DCP folder: .distcp files and .metadata
    for f in __0_0.distcp __1_0.distcp .metadata; do
        run cat dcp/ w -o "dcp/$f" --force
        r=$(status_is 1)
        [ -z "$r" ] && r=$(same_tree dcp dcp.orig)
        check "cat dcp/ -o dcp/$f --force: refused" "$r"
    done
    run convert dcp/ dcp/
    r=$(status_is 0)
    [ -z "$r" ] && [ ! -s dcp/model.safetensors ] && r="no dcp/model.safetensors"
    [ -z "$r" ] && { "$CKPT" verify dcp/ >/dev/null 2>&1 || r="the DCP folder no longer verifies"; }
    check "convert dcp/ dcp/: model.safetensors beside the DCP files is allowed" "$r"

    # a folder of one checkpoint file
    run cat one/ "$T" -o one/model.safetensors --force
    r=$(status_is 1)
    [ -z "$r" ] && r=$(same_tree one one.orig)
    check "cat one/ -o one/model.safetensors (its one file) --force: refused" "$r"
    run convert one/ one/ --force
    r=$(status_is 1)
    [ -z "$r" ] && r=$(err_has "files of the input")
    [ -z "$r" ] && r=$(same_tree one one.orig)
    [ -z "$r" ] && [ -n "$(leftovers one)" ] && r="left $(leftovers one)"
    check "convert one/ one/ --force (would write its one file): refused" "$r"

    # convert into the input's own folder: every file it would write checked
    # before any is written (the index is one of them)
    run convert hf/ hf/ --force --max-shard-size 300
    r=$(status_is 1)
    [ -z "$r" ] && r=$(err_has "files of the input")
    [ -z "$r" ] && r=$(same_tree hf hf.orig)
    check "convert hf/ hf/ --force: refused before writing" "$r"

    # --force removes an earlier export's leftovers, never the input
    mkdir lone && cp "hf/$shard" lone/
    run convert "lone/$shard" lone/ --force
    r=$(status_is 1)
    [ -z "$r" ] && r=$(err_has "would remove")
    [ -z "$r" ] && ! cmp -s "lone/$shard" "hf/$shard" && r="the input shard was removed or changed"
    [ -z "$r" ] && [ -e lone/model.safetensors ] && r="wrote lone/model.safetensors anyway"
    check "convert SHARD its-folder/ --force: refused (it would remove the input as a leftover)" "$r"

    # extract -d into a folder whose one checkpoint file has a name -d writes
    mkdir npy && cp "$SAMPLE" "npy/$T.npy"
    cp -a npy npy.orig
    run extract npy/ -d npy/ --force
    r=$(status_is 1)
    [ -z "$r" ] && r=$(err_has "files of the input")
    [ -z "$r" ] && r=$(same_tree npy npy.orig)
    [ -z "$r" ] && [ -s out ] && r="wrote files before refusing: $(head -n 1 out)"
    check "extract DIR/ -d DIR/ --force over the input's file: refused before writing" "$r"
    run extract hf/ -d hf/
    r=$(status_is 0)
    [ -z "$r" ] && [ ! -s "hf/$T.npy" ] && r="no hf/$T.npy"
    [ -z "$r" ] && { "$CKPT" verify hf/ >/dev/null 2>&1 || r="hf/ no longer verifies"; }
    check "extract hf/ -d hf/: .npy files beside the shards are allowed" "$r"
}

# ---------------------------------------------------------------------------
# A.st: the sample; B.st: the same header, every tensor byte 'Z' (every
# tensor differs, so a mix of the two exports differs from both)
make_models() {
    "$CKPT" convert "$SAMPLE" A.st 2>/dev/null || { echo "Bail out! convert failed"; exit 1; }
    hl=$(od -An -tu8 -N8 A.st | tr -d ' ')
    size=$(wc -c <A.st | tr -d ' ')
    head -c $((8 + hl)) A.st >B.st
    head -c $((size - 8 - hl)) /dev/zero | tr '\000' Z >>B.st
    "$CKPT" diff A.st B.st >/dev/null 2>&1
    [ $? = 1 ] || { echo "Bail out! B.st does not differ from A.st"; exit 1; }
}

# whole DIR MODEL: DIR verifies and holds MODEL's tensors, with no temporary file
whole() {
    "$CKPT" verify "$1/" >/dev/null 2>&1 || { echo "$1/ does not verify"; return; }
    "$CKPT" diff "$1/" "$2" >/dev/null 2>&1 || { echo "$1/ is not $2"; return; }
    [ -z "$(leftovers "$1")" ] || echo "temporary files left: $(leftovers "$1")"
}

group_batch() {
    make_models
    make_hf old # 4 shards and the index: events 1-5 complete them, 6-10 put them in place
    nfiles=$(ls old | wc -l | tr -d ' ')
    "$CKPT" diff old/ A.st >/dev/null 2>&1 || { echo "Bail out! old/ is not A.st"; exit 1; }
    for sig in INT TERM; do
        case $sig in INT) want=130 ;; TERM) want=143 ;; esac
        k=1
        while [ $k -le $((2 * nfiles)) ]; do
            rm -rf o && cp -a old o
            CKPT_TEST_RAISE="$k $sig" "$CKPT" convert --force --max-shard-size 300 B.st o/ >out 2>err
            RC=$?
            r=$(status_is $want)
            if [ $k -le "$nfiles" ]; then
                [ -z "$r" ] && r=$(whole o A.st)
                check "SIG$sig when file $k of $nfiles is complete: the old export stays whole" "$r"
            else
                [ -z "$r" ] && r=$(whole o B.st)
                check "SIG$sig while file $((k - nfiles)) is put in place: held; the new export is whole" "$r"
            fi
            k=$((k + 1))
        done
    done

    # layouts that change: sharded -> one file, one file -> sharded
    rm -rf o && cp -a old o
    CKPT_TEST_RAISE="1 INT" "$CKPT" convert --force B.st o/ >out 2>err
    RC=$?
    r=$(status_is 130)
    [ -z "$r" ] && r=$(whole o A.st)
    [ -z "$r" ] && [ -e o/model.safetensors ] && r="o/model.safetensors appeared"
    check "shards -> model.safetensors, SIGINT before it is in place: the shards stay whole" "$r"
    CKPT_TEST_RAISE="2 INT" "$CKPT" convert --force B.st o/ >out 2>err
    RC=$?
    r=$(status_is 130)
    [ -z "$r" ] && r=$(whole o B.st)
    [ -z "$r" ] && [ "$(ls o)" != model.safetensors ] && r="o/ holds $(ls o | tr '\n' ' ')"
    check "shards -> model.safetensors, SIGINT while it is put in place: new file, leftovers removed" "$r"
    k=1
    while [ $k -le "$nfiles" ]; do
        rm -rf p && mkdir p && cp o/model.safetensors p/
        CKPT_TEST_RAISE="$k TERM" "$CKPT" convert --force --max-shard-size 300 A.st p/ >out 2>err
        RC=$?
        r=$(status_is 143)
        [ -z "$r" ] && r=$(whole p B.st)
        [ -z "$r" ] && [ "$(ls p)" != model.safetensors ] && r="p/ holds $(ls p | tr '\n' ' ')"
        check "model.safetensors -> shards, SIGTERM when file $k is complete: the old file stays alone" "$r"
        k=$((k + 1))
    done

    # EFBIG past RLIMIT_FSIZE (any user): a limit the new export's first
    # shard fits and a later file passes (the unit of ulimit -f is the
    # shell's: 512 bytes in dash, 1024 in bash; measured)
    "$CKPT" convert --max-shard-size 300 B.st new/ 2>/dev/null
    unit=$( (trap '' XFSZ; ulimit -f 1 && head -c 4096 /dev/zero >probe) 2>/dev/null; wc -c <probe | tr -d ' ')
    first=$(cat new/model-00001-of-*.safetensors | wc -c | tr -d ' ')
    blocks=$(((first + unit - 1) / unit))
    big=0
    for f in new/*; do [ "$(wc -c <"$f")" -gt $((blocks * unit)) ] && big=1; done
    if [ "$unit" -gt 0 ] && [ $big = 1 ]; then
        rm -rf o && cp -a old o
        (ulimit -f $blocks && exec "$CKPT" convert --force --max-shard-size 300 B.st o/) >out 2>err
        RC=$?
        r=$(status_is 1)
        [ -z "$r" ] && r=$(err_has "File too large")
        [ -z "$r" ] && r=$(whole o A.st)
        check "EFBIG after the first shard is complete: one error, the old export whole" "$r"
    else
        echo "skip - EFBIG: no file of the new export bigger than its first shard"
    fi
}

# ---------------------------------------------------------------------------
# ENOSPC at every file: a tmpfs of the old export's pages plus k more (each
# file here is under a page).  Root only (mount): exit 77 otherwise.
group_enospc() {
    make_models
    make_hf old
    nfiles=$(ls old | wc -l | tr -d ' ')
    page=$(getconf PAGESIZE 2>/dev/null || echo 4096)
    mkdir mnt
    if [ "$(id -u)" != 0 ] || ! mount -t tmpfs -o size=$(((nfiles + 1) * page)) tmpfs mnt 2>/dev/null; then
        echo "skip - ENOSPC on a small tmpfs: not root, or mount refused"
        exit 77
    fi
    umount mnt
    MNT=$TMP/mnt
    k=0
    while [ $k -le "$nfiles" ]; do
        mount -t tmpfs -o size=$(((nfiles + k) * page)) tmpfs mnt
        cp -a old mnt/o 2>/dev/null
        "$CKPT" convert --force --max-shard-size 300 B.st mnt/o/ >out 2>err
        RC=$?
        if [ $k -lt "$nfiles" ]; then
            r=$(status_is 1)
            [ -z "$r" ] && r=$(err_has "No space left on device")
            [ -z "$r" ] && r=$(one_line)
            [ -z "$r" ] && r=$(whole mnt/o A.st)
            check "ENOSPC at file $((k + 1)) of $nfiles: one error, the old export whole" "$r"
        else
            r=$(status_is 0)
            [ -z "$r" ] && r=$(whole mnt/o B.st)
            check "room for every file: the new export" "$r"
        fi
        umount mnt
        k=$((k + 1))
    done
    MNT=
}

# ---------------------------------------------------------------------------
group_mode() {
    umask 022
    mkdir out1 && echo target >target
    ln -s ../target out1/model.safetensors
    run convert "$SAMPLE" out1/ --force
    r=$(status_is 0)
    [ -z "$r" ] && [ -L out1/model.safetensors ] && r="the link is still there"
    [ -z "$r" ] && [ "$(cat target)" != target ] && r="wrote through the link"
    [ -z "$r" ] && [ "$(stat -c %a out1/model.safetensors)" != 644 ] &&
        r="mode $(stat -c %a out1/model.safetensors), want 644 under umask 022"
    check "convert --force over a symlink in OUTDIR/: a new file, mode 0666 & ~umask" "$r"

    umask 077
    mkdir npy && ln -s ../target "npy/$T.npy"
    run extract "$SAMPLE" "$T" -d npy --force
    r=$(status_is 0)
    [ -z "$r" ] && [ -L "npy/$T.npy" ] && r="the link is still there"
    [ -z "$r" ] && [ "$(stat -c %a "npy/$T.npy")" != 600 ] &&
        r="mode $(stat -c %a "npy/$T.npy"), want 600 under umask 077"
    check "extract -d --force over a symlink entry: a new file, mode 0666 & ~umask" "$r"
    umask 022

    mkdir out2 && ln -s nowhere out2/model.safetensors
    run convert "$SAMPLE" out2/
    r=$(status_is 1)
    [ -z "$r" ] && r=$(err_has "already exists")
    check "a dangling symlink entry is an entry: refused without --force" "$r"
    run convert "$SAMPLE" out2/ --force
    r=$(status_is 0)
    [ -z "$r" ] && [ -L out2/model.safetensors ] && r="the link is still there"
    [ -z "$r" ] && [ -e out2/nowhere ] && r="wrote through the link"
    check "and replaced by a new file with --force" "$r"

    chmod 640 out1/model.safetensors
    run convert "$SAMPLE" out1/ --force
    r=$(status_is 0)
    [ -z "$r" ] && [ "$(stat -c %a out1/model.safetensors)" != 640 ] &&
        r="mode $(stat -c %a out1/model.safetensors), want 640 kept"
    check "a replaced regular file in OUTDIR/ keeps its mode" "$r"
}

# ---------------------------------------------------------------------------
# feed N CMD...: head.bin then zeros, N bytes in all, piped into CMD; FED
# receives how many of the zeros got into the pipe
feed_run() {
    n=$1
    shift
    # SIGPIPE ignored: dd then stops at EPIPE and still counts what it wrote
    (
        trap '' PIPE
        cat head.bin
        dd if=/dev/zero bs=4096 count=$(((n - $(wc -c <head.bin)) / 4096)) 2>dd.err
    ) | "$@" >out 2>err
    RC=$?
    FED=$(sed -n 's/^\([0-9][0-9]*\) bytes.*/\1/p' dd.err)
}

group_spool() {
    size=$(wc -c <"$SAMPLE" | tr -d ' ')
    printf 'y\n' >head.bin
    feed_run 16777216 "$CKPT" ls -
    r=$(status_is 1)
    [ -z "$r" ] && r=$(err_has "not a checkpoint")
    [ -z "$r" ] && r=$(one_line)
    [ -z "$r" ] && [ "${FED:-0}" -ge 4194304 ] && r="the writer got $FED bytes into the pipe"
    check "'yes | ckpt ls -': refused from its first bytes, not spooled (16 MiB offered)" "$r"

    printf '\200\002' >head.bin # a pickle's PROTO 2, then zeros
    feed_run 16777216 "$CKPT" ls --max-spool 1M -
    r=$(status_is 1)
    [ -z "$r" ] && r=$(err_has "more than 1.0 MiB")
    [ -z "$r" ] && r=$(err_has "max-spool")
    [ -z "$r" ] && r=$(one_line)
    [ -z "$r" ] && [ "${FED:-0}" -ge 4194304 ] && r="the writer got $FED bytes into the pipe"
    check "--max-spool 1M: a 16 MiB stream stops past 1 MiB, one line naming the flag" "$r"
    feed_run 16777216 env CKPT_MAX_SPOOL=1M "$CKPT" ls -
    r=$(status_is 1)
    [ -z "$r" ] && r=$(err_has "more than 1.0 MiB")
    [ -z "$r" ] && [ "${FED:-0}" -ge 4194304 ] && r="the writer got $FED bytes into the pipe"
    check "CKPT_MAX_SPOOL=1M: the same" "$r"

    cat "$SAMPLE" | "$CKPT" ls --max-spool "$size" - >out 2>err
    RC=$?
    check "a checkpoint of exactly --max-spool bytes is read" "$(status_is 0)"
    cat "$SAMPLE" | "$CKPT" ls --max-spool $((size - 1)) - >out 2>err
    RC=$?
    r=$(status_is 1)
    [ -z "$r" ] && r=$(err_has "max-spool")
    check "one byte more than --max-spool is refused" "$r"
    cat "$SAMPLE" | "$CKPT" convert - piped.st >out 2>err
    RC=$?
    r=$(status_is 0)
    "$CKPT" convert "$SAMPLE" want.st 2>/dev/null
    [ -z "$r" ] && ! cmp -s piped.st want.st && r="differs from convert FILE"
    check "convert - still reads a checkpoint piped in" "$r"
    "$CKPT" --help >out 2>&1
    grep -q -- "--max-spool SIZE, CKPT_MAX_SPOOL=SIZE" out
    check "ckpt --help lists --max-spool and CKPT_MAX_SPOOL" "$([ $? = 0 ] || echo missing)"
}

# ---------------------------------------------------------------------------
group_fifo() {
    mkfifo fifo
    have_timeout=yes
    command -v timeout >/dev/null 2>&1 || have_timeout=no
    # nothing ever writes to the FIFO: a command that opens it would wait
    # for ever (timeout ends it as a failure: exit 124)
    guard() { if [ $have_timeout = yes ]; then timeout 20 "$CKPT" "$@"; else "$CKPT" "$@"; fi; }
    for args in "ls fifo" "show fifo" "info fifo" "verify fifo" "scan fifo" "cat fifo $T" \
        "extract fifo $T -o x.npy" "convert fifo x.st" "diff fifo $SAMPLE" "diff $SAMPLE fifo"; do
        # shellcheck disable=SC2086
        guard $args >out 2>err </dev/null
        RC=$?
        case $args in diff*) r=$(status_is 2) ;; *) r=$(status_is 1) ;; esac # diff: 2 is trouble
        [ -z "$r" ] && r=$(err_has "seekable file")
        check "ckpt $args: a FIFO with no writer is refused at once" "$r"
    done
    make_hf hf
    rm hf/model-00002-of-00004.safetensors
    mkfifo hf/model-00002-of-00004.safetensors
    for args in "ls hf/" "verify hf/" "cat hf/ $T" "convert hf/ x.st"; do
        # shellcheck disable=SC2086
        guard $args >out 2>err </dev/null
        RC=$?
        r=$(status_is 1)
        [ -z "$r" ] && r=$(err_has "regular file")
        check "ckpt $args with a FIFO for a shard: refused at once" "$r"
    done
}

# ---------------------------------------------------------------------------
group_sizes() {
    F=$SAMPLE
    run ls "$F" --max-memory 300
    r=$(status_is 1)
    [ -z "$r" ] && r=$(err_has "memory limit of 300 bytes")
    check "--max-memory 300 is 300 bytes" "$r"
    RC=0
    CKPT_MAX_MEMORY=300 "$CKPT" ls "$F" >out 2>err || RC=$?
    r=$(status_is 1)
    [ -z "$r" ] && r=$(err_has "memory limit of 300 bytes")
    check "CKPT_MAX_MEMORY=300 is 300 bytes too" "$r"
    RC=0
    CKPT_MAX_MEMORY=300M "$CKPT" ls "$F" >out 2>err || RC=$?
    check "CKPT_MAX_MEMORY=300M is 300 MiB" "$(status_is 0)"
    # every size variable: a plain number means what the flag's does
    for spec in "CKPT_MAX_TENSOR_SIZE --max-tensor-size cat $F $T" \
        "CKPT_MAX_PICKLE_SIZE --max-pickle-size ls $F" "CKPT_MAX_MEMORY --max-memory ls $F"; do
        # shellcheck disable=SC2086
        set -- $spec
        var=$1 flag=$2
        shift 2
        for v in 31 32 1000; do
            "$CKPT" "$@" "$flag" "$v" >out 2>flag.err
            a=$?
            env "$var=$v" "$CKPT" "$@" >out 2>err
            b=$?
            r=""
            [ $a = $b ] || r="flag exit $a, variable exit $b"
            [ -z "$r" ] && ! cmp -s flag.err err && r="flag: $(head -n 1 flag.err); variable: $(head -n 1 err)"
            check "$var=$v means $flag $v" "$r"
        done
    done
    cat "$F" | CKPT_MAX_SPOOL=100 "$CKPT" ls - >out 2>err
    RC=$?
    r=$(status_is 1)
    [ -z "$r" ] && r=$(err_has "more than 100 B")
    check "CKPT_MAX_SPOOL=100 is 100 bytes" "$r"

    for out in one.safetensors -; do
        run convert --max-shard-size 1GB "$F" "$out"
        r=$(status_is 2)
        [ -z "$r" ] && r=$(err_has "max-shard-size")
        [ -z "$r" ] && [ -e one.safetensors ] && r="wrote one.safetensors anyway"
        [ -z "$r" ] && [ -s out ] && r="wrote to stdout anyway"
        check "convert --max-shard-size to one file ($out): a usage error, not ignored" "$r"
    done
    run convert --max-shard-size 1GB "$F" dir/
    r=$(status_is 0)
    [ -z "$r" ] && [ ! -s dir/model.safetensors ] && r="no dir/model.safetensors"
    check "convert --max-shard-size into OUTDIR/ still works" "$r"
}

case $GROUP in
input | batch | enospc | mode | spool | fifo | sizes) "group_$GROUP" ;;
*)
    echo "usage: $0 CKPT SOURCE_DIR input|batch|enospc|mode|spool|fifo|sizes" >&2
    exit 2
    ;;
esac
echo "$PASSED passed, $FAILED failed"
[ "$FAILED" -eq 0 ]
