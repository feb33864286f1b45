#!/bin/sh
# doc_test.sh - the man page and the bash completion keep up with the program.
#
#     tests/doc_test.sh CKPT SOURCE_DIR
#
# Every long option that `ckpt --help` or `ckpt COMMAND --help` lists must be
# in doc/ckpt.1 (as \-\-name), every command must have its entry, the page
# must render without groff warnings, and the completion script must offer
# each command's options.  README.md's set-up lines: the install command,
# run with stand-ins for apt-get, id and sudo, calls apt-get itself as root
# where there is no sudo, and through sudo as a user, installing what
# .ci/run installs; the test command runs ctest in parallel and is the line
# .ci/run runs.  Prints "ok"/"not ok"/"skip" lines and "N passed, M failed".
case $1 in /*) CKPT=$1 ;; *) CKPT=$(pwd)/$1 ;; esac
SRC=$2
MAN=$SRC/doc/ckpt.1
COMP=$SRC/doc/ckpt.bash
PASSED=0
FAILED=0
ok() { PASSED=$((PASSED + 1)); echo "ok - $1"; }
nok() { FAILED=$((FAILED + 1)); echo "not ok - $1"; }

commands=$("$CKPT" --help | sed -n '/^Commands:/,/^$/s/^  \([a-z][a-z0-9-]*\)  .*/\1/p')
[ -n "$commands" ] && ok "ckpt --help lists commands" || nok "ckpt --help lists commands"
for c in $commands; do
    if grep -q "^\.BR $c " "$MAN"; then ok "man page has an entry for $c"; else nok "man page has an entry for $c"; fi
    for o in $("$CKPT" "$c" --help | grep -oE '(^|[ ,[])--[a-z][a-z0-9-]*' | tr -d ' ,[' | sort -u); do
        pat=$(printf '%s' "$o" | sed 's/-/\\\\-/g')
        if grep -q -- "$pat" "$MAN"; then ok "man page: ckpt $c $o"; else nok "man page: ckpt $c $o"; fi
    done
done
for o in $("$CKPT" --help | grep -oE '^  --max-[a-z-]+' | tr -d ' '); do
    pat=$(printf '%s' "$o" | sed 's/-/\\\\-/g')
    if grep -q -- "$pat" "$MAN"; then ok "man page: $o"; else nok "man page: $o"; fi
done

if command -v groff >/dev/null 2>&1; then
    warn=$(LC_ALL=C.UTF-8 groff -man -Tutf8 -ww "$MAN" 2>&1 >/dev/null)
    if [ -z "$warn" ]; then ok "man page renders without warnings"; else nok "man page renders: $warn"; fi
else
    echo "skip - groff is not installed: rendering not checked"
fi

if command -v bash >/dev/null 2>&1; then
    for c in $commands; do
        got=$(bash -c '. "$1"; COMP_WORDS=("$2" "$3" --); COMP_CWORD=2; _ckpt; echo "${COMPREPLY[*]}"' \
            _ "$COMP" "$CKPT" "$c")
        miss=
        for o in $("$CKPT" "$c" --help | grep -oE '(^|[ ,[])--[a-z][a-z0-9-]*' | tr -d ' ,[' | sort -u); do
            case " $got " in *" $o "*) ;; *) miss="$miss $o" ;; esac
        done
        if [ -z "$miss" ]; then ok "completion offers every option of $c"; else nok "completion for $c lacks$miss"; fi
    done
    got=$(bash -c '. "$1"; COMP_WORDS=("$2" ""); COMP_CWORD=1; _ckpt; echo "${COMPREPLY[*]}"' _ "$COMP" "$CKPT")
    miss=
    for c in $commands; do case " $got " in *" $c "*) ;; *) miss="$miss $c" ;; esac; done
    if [ -z "$miss" ]; then ok "completion offers every command"; else nok "completion lacks$miss"; fi
else
    echo "skip - bash is not installed: completion not checked"
fi
# ---- README.md's set-up section -------------------------------------------
README=$SRC/README.md
CI=$SRC/.ci/run
T=$(mktemp -d "${TMPDIR:-/tmp}/ckpt-doc-test.XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT
# the ```sh blocks of the set-up section, one file each: $T/block.N
awk -v dir="$T" '
    /^## / { setup = ($0 ~ /^## Set-up/) }
    setup && /^```sh$/ { n++; inblock = 1; next }
    inblock && /^```$/ { inblock = 0; next }
    inblock { print > (dir "/block." n) }' "$README"
install=$(grep -l 'apt-get' "$T"/block.* 2>/dev/null | head -n 1)
testcmd=$(grep -l 'ctest' "$T"/block.* 2>/dev/null | head -n 1)

# the packages of an "apt-get install" (continuation lines joined; words that
# are not options, after "install"): one a line, sorted
packages() {
    sed -e ':a' -e '/\\$/N; s/\\\n//; ta' "$1" | grep 'apt-get.* install ' | head -n 1 |
        sed 's/.*apt-get.* install //' | tr ' ' '\n' | grep -v '^-' | grep -v '^$' |
        sed 's/[;&|>].*//' | LC_ALL=C sort -u
}

if [ -z "$install" ]; then
    nok "README set-up: an install command (apt-get) in a sh block"
else
    # stand-ins: apt-get logs its arguments, id -u says $FAKE_UID, and sudo
    # logs and runs its command, or is missing (exit 127) when FAKE_SUDO=no
    mkdir "$T/bin"
    printf '#!/bin/sh\necho "apt-get $*" >>"$LOG"\n' >"$T/bin/apt-get"
    printf '#!/bin/sh\nif [ "$1" = -u ]; then echo "$FAKE_UID"; else exec /usr/bin/id "$@"; fi\n' >"$T/bin/id"
    printf '#!/bin/sh\nif [ "$FAKE_SUDO" = no ]; then echo "sh: 1: sudo: not found" >&2; exit 127; fi\necho "sudo $*" >>"$LOG"\nexec "$@"\n' >"$T/bin/sudo"
    chmod +x "$T/bin/apt-get" "$T/bin/id" "$T/bin/sudo"
    LOG=$T/root.log FAKE_UID=0 FAKE_SUDO=no PATH="$T/bin:$PATH" sh "$install" >"$T/root.out" 2>&1
    rc=$?
    if [ "$rc" -eq 0 ] && grep -qx 'apt-get update' "$T/root.log" 2>/dev/null &&
        grep -q '^apt-get .*install ' "$T/root.log" && ! grep -q '^sudo' "$T/root.log"; then
        ok "README install command: as root without sudo, runs apt-get update and install itself"
    else
        nok "README install command as root without sudo: exit $rc, ran: $(cat "$T/root.log" 2>/dev/null | tr '\n' ';') $(head -c 200 "$T/root.out")"
    fi
    LOG=$T/user.log FAKE_UID=1000 FAKE_SUDO=yes PATH="$T/bin:$PATH" sh "$install" >"$T/user.out" 2>&1
    rc=$?
    if [ "$rc" -eq 0 ] && grep -q '^sudo .*apt-get update' "$T/user.log" 2>/dev/null &&
        grep -q '^sudo .*apt-get .*install ' "$T/user.log"; then
        ok "README install command: as a user, runs apt-get through sudo"
    else
        nok "README install command as a user: exit $rc, ran: $(cat "$T/user.log" 2>/dev/null | tr '\n' ';') $(head -c 200 "$T/user.out")"
    fi
    packages "$install" >"$T/readme.pkgs"
    packages "$CI" >"$T/ci.pkgs"
    missing=$(LC_ALL=C comm -23 "$T/readme.pkgs" "$T/ci.pkgs" | tr '\n' ' ')
    if [ -s "$T/readme.pkgs" ] && [ -z "$missing" ]; then
        ok "README install command: its $(wc -l <"$T/readme.pkgs" | tr -d ' ') packages are installed by .ci/run"
    else
        nok "README install command: packages .ci/run does not install: ${missing:-none listed}"
    fi
fi

if [ -z "$testcmd" ]; then
    nok "README set-up: a test command (ctest) in a sh block"
else
    line=$(grep 'ctest' "$testcmd" | head -n 1)
    # -j N / --parallel N with a value (a bare -j is not a number of jobs)
    if printf '%s\n' "$line" | grep -Eq '(^|[ ;&|])ctest( [^ ;&|]+)* (-j ?|--parallel )[^ ;&|-]' ||
        printf '%s\n' "$line" | grep -Eq 'CTEST_PARALLEL_LEVEL=[^ ]+ ctest '; then
        ok "README test command runs the tests in parallel: $line"
    else
        nok "README test command runs ctest one test at a time: $line"
    fi
    if printf '%s\n' "$line" | grep -Eq 'cmake --build( [^ ;&|]+)* (-j ?|--parallel )[^ ;&|-]'; then
        ok "README test command builds in parallel"
    else
        nok "README test command builds one file at a time: $line"
    fi
    if grep -qxF -- "$line" "$CI"; then
        ok ".ci/run runs the README's test command as it is"
    else
        nok ".ci/run does not run the README's test command: $line"
    fi
fi

echo "$PASSED passed, $FAILED failed"
[ "$FAILED" -eq 0 ]
