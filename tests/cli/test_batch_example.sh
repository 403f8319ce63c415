#!/usr/bin/env bash
# examples/batch.lua runs under the host, and the counts it MEASURES are the ones the
# scenario implies: its JSON (alone with --json, and inside the markdown report) is parsed
# and checked by a Lua script run by the same host.
set -u
bin=$1
root=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0

"$bin" "$root/examples/batch.lua" --json >"$tmp/out.json" 2>"$tmp/err.txt" ||
    { echo "FAIL: batch.lua --json exited $?"; cat "$tmp/err.txt"; exit 1; }
"$bin" "$root/examples/batch.lua" >"$tmp/report.md" 2>"$tmp/err.txt" ||
    { echo "FAIL: batch.lua exited $?"; cat "$tmp/err.txt"; exit 1; }
# the fenced json block of the report
sed -n '/^```json$/,/^```$/p' "$tmp/report.md" | sed '1d;$d' >"$tmp/report.json"
for h in "What may be retried" "Where the caps are" "Why a duplicate is safe" \
         "What is kept when the budget runs out"; do
    grep -q "$h" "$tmp/report.md" || { echo "FAIL: report lacks '$h'"; fail=$((fail + 1)); }
done

cat >"$tmp/check.lua" <<'LUA'
local cjson = require "cjson"
local f = assert(io.open(arg[1]))
local r = cjson.decode(f:read("a"))
f:close()
local fails = 0
local function eq(got, want, what)
  if got ~= want then
    fails = fails + 1
    print(("FAIL: %s: %s: got %s, want %s"):format(arg[1], what, tostring(got), tostring(want)))
  end
end
local function list(l) return table.concat(l, ",") end
eq(r.no_retry.orders["A-1"].attempts, 1, "no retry: A-1 attempts")
eq(r.no_retry.orders["A-1"].error, "transient", "no retry: A-1 error")
eq(r.no_retry.body_executions, 3, "no retry: executions")
eq(r.no_retry.charged_total, 3200, "no retry: charged")
eq(r.default_policy.orders["A-1"].attempts, 3, "default: A-1 attempts")
eq(r.default_policy.orders["A-1"].outcome, "ok", "default: A-1 outcome")
eq(r.default_policy.orders["D-1"].attempts, 1, "default: D-1 attempts")
eq(r.default_policy.body_executions, 6, "default: executions")
eq(r.retry_everything.orders["D-1"].attempts, 3, "retry-everything: D-1 attempts")
eq(r.retry_everything.body_executions, 3, "retry-everything: executions")
eq(r.split_policy.orders["D-1"].attempts, 1, "split: D-1 attempts")
eq(r.split_policy.orders["A-1"].attempts, 3, "split: A-1 attempts")
eq(r.split_policy.charged_total, 4700, "split: charged")
local d = r.duplicate_delivery
eq(d.body_executions, 1, "duplicate: executions")
eq(d.ledger_rows, 1, "duplicate: ledger rows")
eq(d.charged_total, 2300, "duplicate: charged")
eq(d.second.duplicate, true, "duplicate: flagged")
eq(d.second.seq, d.first.seq, "duplicate: same seq")
eq(d.second.charge_id, d.first.charge_id, "duplicate: same receipt")
eq(d.reused_key_other_amount.error, "idempotency_mismatch", "reused key: error")
eq(d.reused_key_other_amount.body_executions, 0, "reused key: body not run")
local b = r.shared_budget_batch
eq(list(b.done), "A-1,A-2", "batch: done")
eq(list(b.skipped), "A-3", "batch: skipped")
eq(#b.failed, 0, "batch: failed")
eq(b.calls, 4, "batch: calls")
eq(b.body_executions, 4, "batch: executions")
eq(b.budget.limit, 4, "batch: budget limit")
eq(b.budget.used, 4, "batch: budget used")
eq(b.charged_total, 3800, "batch: charged")
eq(b.events["budget_exhausted(batch)"], 1, "batch: budget_exhausted event")
local again = r.resumed_batch
eq(again.calls, 1, "resume: calls")
eq(list(again.duplicates), "A-1,A-2", "resume: duplicates")
eq(again.charged_total, 4700, "resume: charged in all")
eq(again.ledger_rows, 3, "resume: ledger rows")
print(("%s: %d failed"):format(arg[1], fails))
if fails > 0 then os.exit(1) end
LUA
for doc in "$tmp/out.json" "$tmp/report.json"; do
    "$bin" "$tmp/check.lua" "$doc" || fail=$((fail + 1))
done
echo "$fail failed"
[ "$fail" -eq 0 ]
