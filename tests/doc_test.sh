#!/bin/sh
# doc_test.sh - the man page and the bash completion keep up with the program.
#
#     tests/doc_test.sh CKPT SOURCE_DIR
#
# Every long option that `ckpt --help` or `ckpt COMMAND --help` lists must be
# in doc/ckpt.1 (as \-\-name), every command must have its entry, the page
# must render without groff warnings, and the completion script must offer
# each command's options.  Prints "ok"/"not ok"/"skip" lines and
# "N passed, M failed".
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
echo "$PASSED passed, $FAILED failed"
[ "$FAILED" -eq 0 ]
