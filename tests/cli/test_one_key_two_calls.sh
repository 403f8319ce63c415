#!/usr/bin/env bash
# One model response with TWO tool calls whose idempotency_key maps to ONE key (the model
# repeated itself): the charge runs once, the second call waits for the first's claim and
# answers with the same receipt (tool_call_end.duplicate = true), and both results go back
# to the model. Regression: both ran, the customer was charged twice. The provider is a
# small stand-in server (tests/cli/two_calls_server.py), since the built-in mock makes
# one tool call per response.
set -u
bin=$1
root=$(cd "$(dirname "$0")/../.." && pwd)
. "$root/tests/cli/wait_lib.sh"
tmp=$(mktemp -d)
server_pid=
trap '[ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null; rm -rf "$tmp"' EXIT
command -v python3 >/dev/null || { echo "skip: no python3"; exit 0; }
python3 "$root/tests/cli/two_calls_server.py" "$tmp/port" "$tmp/requests.log" &
server_pid=$!
wait_until "$server_pid" test -f "$tmp/port"
[ -f "$tmp/port" ] || { echo "FAIL: the server did not start"; exit 1; }
port=$(cat "$tmp/port")

for backend in memory sqlite; do
    rm -f "$tmp/requests.log"
    cat >"$tmp/run.lua" <<LUA
local ah = require "agenthost"
local backend, db = arg[1], arg[2]
local charged, ends = 0, {}
local agent = ah.agent {
  client = ah.client { provider = "anthropic", model = "m", api_key = "k",
                       base_url = "http://127.0.0.1:$port" },
  max_steps = 3,
  ledger = backend == "sqlite" and ah.ledger { path = db } or ah.ledger {},
  tools = { charge = {
    description = "charge an order",
    schema = { type = "object", properties = { order = { type = "integer" },
                                                amount = { type = "integer" } } },
    idempotency_key = function(args) return "order-" .. args.order end,
    run = function(args)
      charged = charged + 1
      ah.sleep(20) -- still in flight when the second call starts
      return { charge = "ch_" .. charged, amount = args.amount }
    end,
  } },
  on_event = function(ev)
    if ev.type == "tool_call_end" then ends[#ends + 1] = tostring(ev.duplicate) end
  end,
}
local r = agent:run("charge order 7")
print(r.outcome, charged, table.concat(ends, ","))
LUA
    out=$("$bin" "$tmp/run.lua" "$backend" "$tmp/$backend.db" 2>"$tmp/err")
    if [ "$out" != "$(printf 'completed\t1\tfalse,true')" ]; then
        echo "FAIL ($backend): got '$out', want 'completed 1 false,true'"; cat "$tmp/err"
        exit 1
    fi
    # The second request answers both calls with the one receipt.
    n=$(tail -n 1 "$tmp/requests.log" | grep -o '\\"charge\\":\\"ch_1\\"' | wc -l)
    if [ "$n" != "2" ]; then
        echo "FAIL ($backend): the model got $n copies of the receipt, want 2"
        tail -n 1 "$tmp/requests.log"; exit 1
    fi
    echo "ok ($backend): charged once, the second call a duplicate, both answered"
done
echo "all ok"
