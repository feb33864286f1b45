#!/bin/sh
# diff_test.sh - `ckpt diff` against torch's own answers.
#
#     tests/diff_test.sh CKPT SOURCE_DIR
#
# tests/gen_diff.py writes pairs of checkpoints with torch 1.13
# (/usr/bin/python3) and records, for each pair, which tensors torch finds
# only on one side, changed in dtype, shape or bytes, and the max abs
# difference; `ckpt diff --json --max-abs` must give the same.  Then the
# text output, --filter, --key and the exit statuses (0 same, 1 differ,
# 2 trouble).  Exit 77 (skipped) without torch.
case $1 in /*) CKPT=$1 ;; *) CKPT=$(pwd)/$1 ;; esac
SRC=$2
PY=/usr/bin/python3
PASSED=0
FAILED=0
ok() { PASSED=$((PASSED + 1)); echo "ok - $1"; }
nok() { FAILED=$((FAILED + 1)); echo "not ok - $1"; }
check() { if [ "$1" = "$2" ]; then ok "$3"; else nok "$3 (got '$1', want '$2')"; fi; }

if ! [ -x "$PY" ]; then
    echo "skip - no $PY (Debian's python3 with torch)"
    exit 77
fi
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
# One process of torch (importing it costs 2 s of CPU): gen_diff.py's pairs
# (it exits 77 without torch), then the two files of the --key checks below.
"$PY" - "$SRC/tests/gen_diff.py" "$T" >"$T/gen.log" 2>&1 <<'PYEOF'
import runpy, sys
gen, d = sys.argv[1], sys.argv[2]
sys.argv = [gen, d]
runpy.run_path(gen, run_name="__main__")
import torch
torch.save({"model": {"w": torch.ones(2)}, "epoch": 1}, d + "/key_a.pt")
torch.save({"model": {"w": torch.ones(2)}, "epoch": 2, "extra": torch.zeros(1)}, d + "/key_b.pt")
PYEOF
rc=$?
if [ "$rc" -eq 77 ]; then
    echo "skip - torch is not installed for $PY"
    exit 77
elif [ "$rc" -ne 0 ]; then
    echo "not ok - gen_diff.py"; sed 's/^/#   /' "$T/gen.log"; echo "0 passed, 1 failed"; exit 1
fi

# --json --max-abs against torch's answer, field by field
# (f8: float8 e4m3fn/e5m2 and their fnuz forms, written and answered by
# torch 2.6, committed in tests/fixtures/diffconv/ by gen_diff.py --float8)
cp "$SRC"/tests/fixtures/diffconv/f8* "$T"/
for pair in same changed f8; do
    "$CKPT" diff --json --max-abs "$T/${pair}_a.pt" "$T/${pair}_b.pt" >"$T/$pair.got" 2>"$T/$pair.err"
    rc=$?
    want_rc=$("$PY" -c 'import json,sys; print(0 if json.load(open(sys.argv[1]))["equal"] else 1)' "$T/$pair.expected.json")
    check "$rc" "$want_rc" "diff $pair: exit status"
    "$PY" - "$T/$pair.got" "$T/$pair.expected.json" >"$T/$pair.cmp" <<'PYEOF'
import json, sys
got = json.load(open(sys.argv[1]))
want = json.load(open(sys.argv[2]))
for k in ("equal", "compared", "identical", "only_a", "only_b"):
    print(("ok" if got[k] == want[k] else "not ok") + " - %s (got %r, torch %r)" % (k, got[k], want[k]))
changed = {c["name"]: c for c in got["changed"]}
print(("ok" if sorted(changed) == sorted(want["changed"]) else "not ok")
      + " - the changed tensors are torch's (%s)" % ", ".join(sorted(want["changed"])))
for name, w in sorted(want["changed"].items()):
    c = changed.get(name)
    if c is None:
        continue
    good = c["what"] == w["what"] and c["max_abs"] == w["max_abs"]
    print(("ok" if good else "not ok") + " - %s: %s, max abs %r (torch: %s, %r)"
          % (name, c["what"], c["max_abs"], w["what"], w["max_abs"]))
PYEOF
    while IFS= read -r line; do
        case $line in
        "ok - "*) ok "diff $pair: ${line#ok - }" ;;
        *) nok "diff $pair: ${line#not ok - }" ;;
        esac
    done <"$T/$pair.cmp"
done

# text output: one line per difference, then the summary
"$CKPT" diff "$T/changed_a.pt" "$T/changed_b.pt" >"$T/text" 2>&1
check "$?" 1 "text: exit 1 when the tensors differ"
grep -qx 'only in A: gone' "$T/text" && ok "text: only in A" || nok "text: only in A"
grep -qx 'only in B: added' "$T/text" && ok "text: only in B" || nok "text: only in B"
grep -qx 'dtype: dtype_change: float32 -> float16' "$T/text" && ok "text: dtype change" || nok "text: dtype change"
grep -qx 'shape: shape_change: \[2, 3\] -> \[3, 2\]' "$T/text" && ok "text: shape change" || nok "text: shape change"
grep -qx 'values: i64' "$T/text" && ok "text: values changed (no max abs without --max-abs)" || nok "text: values changed"
check "$(tail -n 1 "$T/text")" "14 compared, 2 identical, 12 differ, 1 only in A, 1 only in B" "text: summary line"
"$CKPT" diff --max-abs "$T/changed_a.pt" "$T/changed_b.pt" >"$T/text2" 2>&1
grep -qx 'values: f16: max abs diff 0.6875' "$T/text2" && ok "text: --max-abs" || nok "text: --max-abs"

# --filter: only the matching names take part
"$CKPT" diff --filter 'f*' "$T/changed_a.pt" "$T/changed_b.pt" >"$T/filt" 2>&1
check "$(tail -n 1 "$T/filt")" "4 compared, 0 identical, 4 differ, 0 only in A, 0 only in B" "--filter 'f*' (f32, f16, f64, flag)"
"$CKPT" diff --filter 'scalar' "$T/changed_a.pt" "$T/changed_b.pt" >/dev/null 2>&1
check "$?" 0 "--filter on an unchanged tensor: exit 0"

# --key on both files (key_a.pt, key_b.pt: written above)
"$CKPT" diff --key model "$T/key_a.pt" "$T/key_b.pt" >/dev/null 2>&1
check "$?" 0 "--key model: the same under the key"
"$CKPT" diff "$T/key_a.pt" "$T/key_b.pt" >/dev/null 2>&1
check "$?" 1 "without --key: 'extra' only in B"

# exit 2: trouble
"$CKPT" diff "$T/changed_a.pt" "$T/missing.pt" >/dev/null 2>"$T/err"
check "$?" 2 "a missing file: exit 2"
grep -q "^ckpt: $T/missing.pt: " "$T/err" && ok "a missing file: one line naming it" || nok "a missing file: message"
printf 'not a checkpoint' >"$T/junk"
"$CKPT" diff "$T/junk" "$T/changed_a.pt" >/dev/null 2>&1
check "$?" 2 "an unreadable file: exit 2"
"$CKPT" diff "$T/changed_a.pt" >/dev/null 2>&1
check "$?" 2 "one operand: exit 2"
"$CKPT" diff --bogus "$T/changed_a.pt" "$T/changed_b.pt" >/dev/null 2>&1
check "$?" 2 "an unknown option: exit 2"
"$CKPT" diff "$T/same_a.pt" "$T/same_a.pt" >/dev/null 2>&1
check "$?" 0 "a file against itself: exit 0"

echo "$PASSED passed, $FAILED failed"
[ "$FAILED" -eq 0 ]
