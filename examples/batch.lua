-- examples/batch.lua - side effects that survive faults: retries, idempotency, budgets.
--
--   agenthost examples/batch.lua          a markdown report around the measured JSON
--   agenthost examples/batch.lua --json   the JSON alone
--
-- Three orders are charged: A-1 (1500), A-2 (2300), A-3 (900). A-1's payment gateway times
-- out twice, then works; the others work. D-1 is a card that is declined every time.
-- Each scenario runs the real tool machinery (ah.tool, ah.ledger, ah.budget, ah.batch) and
-- every number printed is MEASURED: counters incremented inside the tool bodies, and the
-- results the API returned. Nothing is typed in.
local ah = require "agenthost"

local ORDERS = {
  { key = "A-1", args = { amount = 1500 } },
  { key = "A-2", args = { amount = 2300 } },
  { key = "A-3", args = { amount = 900 } },
}
local DECLINED = { key = "D-1", args = { amount = 4200 } }
local MAX_ATTEMPTS = 3
local BUDGET = 4

-- The outside world: a payment processor that counts what really happened.
local function processor()
  local p = { executions = 0, per_key = {}, charged = 0 }
  function p.run(args, ctx)
    p.executions = p.executions + 1
    local n = (p.per_key[ctx.key] or 0) + 1
    p.per_key[ctx.key] = n
    if ctx.key == "A-1" and n <= 2 then error(ah.transient("gateway timeout")) end
    if ctx.key == "D-1" then error(ah.permanent("card declined")) end
    p.charged = p.charged + args.amount
    return { charge_id = string.format("ch_%s_%d", ctx.key, n), amount = args.amount }
  end
  return p
end

local function charge_tool(p, policy)
  return ah.tool { name = "charge", run = p.run, policy = policy }
end

local function with(list, extra)
  local out = {}
  for _, o in ipairs(list) do out[#out + 1] = o end
  if extra then out[#out + 1] = extra end
  return out
end

-- Charge each order once through tool:call, with a fresh ledger; report what happened.
local function scenario(policy, orders)
  local p = processor()
  local charge = charge_tool(p, policy)
  local ledger = ah.ledger {}
  local per_order = {}
  for _, o in ipairs(orders) do
    local r = charge:call(o.args, { key = o.key, ledger = ledger })
    per_order[o.key] = { outcome = r.outcome, attempts = r.attempts,
                         error = r.error and r.error.kind or nil }
  end
  return { body_executions = p.executions, charged_total = p.charged, orders = per_order,
           ledger_rows = #ledger }
end

local everything = function() return true end
local split = function(err) return err.kind == "transient" end
local report = { max_attempts = MAX_ATTEMPTS, budget = BUDGET }

-- 1. No retry at all.
report.no_retry = scenario({ max_attempts = 1 }, ORDERS)

-- 2. max_attempts 3 and no retry_on: the default retries transient failures only.
report.default_policy = scenario({ max_attempts = MAX_ATTEMPTS, base_ms = 10 },
                                 with(ORDERS, DECLINED))

-- 3. A retry-everything predicate against a permanent failure.
report.retry_everything = scenario({ max_attempts = MAX_ATTEMPTS, base_ms = 10,
                                     retry_on = everything }, { DECLINED })

-- 4. The transient/permanent split as an explicit predicate.
report.split_policy = scenario({ max_attempts = MAX_ATTEMPTS, base_ms = 10, retry_on = split },
                               with(ORDERS, DECLINED))

-- 5. A duplicate delivery of one key (a webhook sent twice), and a key reused by mistake
--    for a different amount.
do
  local p = processor()
  local charge = charge_tool(p, { max_attempts = MAX_ATTEMPTS, base_ms = 10, retry_on = split })
  local ledger = ah.ledger {}
  local first = charge:call({ amount = 2300 }, { key = "A-2", ledger = ledger })
  local second = charge:call({ amount = 2300 }, { key = "A-2", ledger = ledger })
  local executions = p.executions
  local reused = charge:call({ amount = 9999 }, { key = "A-2", ledger = ledger })
  report.duplicate_delivery = {
    first = { seq = first.seq, duplicate = first.duplicate, attempts = first.attempts,
              charge_id = first.receipt.charge_id },
    second = { seq = second.seq, duplicate = second.duplicate, attempts = second.attempts,
               charge_id = second.receipt.charge_id },
    body_executions = executions,
    ledger_rows = #ledger,
    charged_total = p.charged,
    reused_key_other_amount = { outcome = reused.outcome, error = reused.error.kind,
                                attempts = reused.attempts,
                                body_executions = p.executions - executions },
  }
end

-- 6. One budget of 4 body executions shared by the whole batch; then the same batch again
--    with a fresh budget and the same ledger (a resumed job).
do
  local p = processor()
  local charge = charge_tool(p, { max_attempts = MAX_ATTEMPTS, base_ms = 10, retry_on = split })
  local ledger = ah.ledger {}
  local events
  local function count(name)
    events[name] = (events[name] or 0) + 1
  end
  local function run_batch()
    events = {}
    local b = ah.batch(ORDERS, function(o, ctx)
      return charge:call(o.args, { key = o.key, ledger = ledger, budget = ctx.budget,
                                   on_event = function(ev) count(ev.type) end })
    end, { budget = BUDGET, on_event = function(ev) count(ev.type .. "(" .. ev.budget .. ")") end })
    return b, events
  end
  local b, first_events = run_batch()
  local attempts = {}
  for key, r in pairs(b.results) do attempts[key] = r.attempts or 0 end
  report.shared_budget_batch = {
    done = b.done, failed = b.failed, skipped = b.skipped, calls = b.calls,
    budget = b.budget, attempts = attempts, body_executions = p.executions,
    ledger_rows = #ledger, charged_total = p.charged, events = first_events,
  }
  local executions = p.executions
  local again = run_batch()
  local duplicates = {}
  for _, key in ipairs(again.done) do
    if again.results[key].duplicate then duplicates[#duplicates + 1] = key end
  end
  report.resumed_batch = {
    done = again.done, skipped = again.skipped, calls = again.calls,
    duplicates = duplicates, body_executions = p.executions - executions,
    ledger_rows = #ledger, charged_total = p.charged,
  }
end

-- ---- output -------------------------------------------------------------------------

local function json_string(s)
  return '"' .. s:gsub('[%c"\\]', function(c)
    return ({ ['"'] = '\\"', ["\\"] = "\\\\", ["\n"] = "\\n", ["\t"] = "\\t" })[c]
        or string.format("\\u%04x", c:byte())
  end) .. '"'
end

-- JSON with sorted keys, indented; an empty table is an empty list here.
local function json(v, indent)
  indent = indent or ""
  local t = type(v)
  if t == "nil" then return "null" end
  if t == "boolean" or t == "number" then return tostring(v) end
  if t == "string" then return json_string(v) end
  local inner = indent .. "  "
  if #v > 0 or next(v) == nil then
    local parts = {}
    for _, x in ipairs(v) do parts[#parts + 1] = json(x, inner) end
    return "[" .. table.concat(parts, ", ") .. "]"
  end
  local keys = {}
  for k in pairs(v) do keys[#keys + 1] = k end
  table.sort(keys)
  local parts = {}
  for _, k in ipairs(keys) do
    parts[#parts + 1] = inner .. json_string(k) .. ": " .. json(v[k], inner)
  end
  return "{\n" .. table.concat(parts, ",\n") .. "\n" .. indent .. "}"
end

local doc = json(report)
if arg and arg[1] == "--json" then
  print(doc)
  return
end

local r = report
local function list(l) return #l > 0 and table.concat(l, ", ") or "none" end
local function charged(orders)
  local n = 0
  for _, o in pairs(orders) do if o.outcome == "ok" then n = n + 1 end end
  return n
end
local sb, dd = r.shared_budget_batch, r.duplicate_delivery
print(([[
# Charging orders under faults: retries, idempotency, budgets

Orders A-1 (1500), A-2 (2300), A-3 (900); A-1's gateway times out twice, then works;
D-1 is a declined card. Every number here was measured by running `examples/batch.lua`.

```json
%s
```

**What may be retried.** A tool fails `transient` (`error(ah.transient(msg))`) or
`permanent`; anything else counts as permanent. Without retries, A-1 failed after %d
attempt and %d of 3 orders were charged. With `max_attempts = %d` and no `retry_on`, the
default retried the transient timeout only: A-1 succeeded after %d attempts, D-1's decline
took %d. A retry-everything `retry_on` spent %d attempts on that permanent decline; the
transient/permanent split spent %d there and still gave A-1 its %d.

**Where the caps are.** `max_attempts` counts every attempt, the first included. A budget
counts tool-body executions, retries included, checked before each one: the batch's %d
went to A-1 (%d) and A-2 (%d), so %s was skipped and never started (%d body executions in
all). Nothing raised; the batch reported %d `budget_exhausted` event.

**Why a duplicate is safe.** The ledger commits each receipt under its key before the call
returns. Delivering A-2 twice ran the body %d time: the second call returned the original
receipt (%s, seq %d, `duplicate = %s`); the ledger holds %d row, %d was charged. Reusing
the key for another amount was refused (a `%s` error) and ran the body %d times.

**What is kept when the budget runs out.** Every completed charge stays in the ledger (%d
rows after the first batch). The same batch again with a fresh budget cost %d execution:
%s came back as duplicates and only the skipped order ran; %d charged in all, each order
exactly once.
]]):format(
  doc,
  r.no_retry.orders["A-1"].attempts, charged(r.no_retry.orders),
  r.max_attempts, r.default_policy.orders["A-1"].attempts,
  r.default_policy.orders["D-1"].attempts, r.retry_everything.orders["D-1"].attempts,
  r.split_policy.orders["D-1"].attempts, r.split_policy.orders["A-1"].attempts,
  sb.budget.limit, sb.attempts["A-1"], sb.attempts["A-2"], list(sb.skipped),
  sb.body_executions, sb.events["budget_exhausted(batch)"] or 0,
  dd.body_executions, dd.second.charge_id, dd.second.seq, tostring(dd.second.duplicate),
  dd.ledger_rows, dd.charged_total, dd.reused_key_other_amount.error,
  dd.reused_key_other_amount.body_executions,
  sb.ledger_rows, r.resumed_batch.calls, list(r.resumed_batch.duplicates),
  r.resumed_batch.charged_total))
