-- tools.lua - an agent with two tools, against the built-in mock (no API key needed).
--
--   agenthost examples/tools.lua
--
-- `charge` has a side effect, so it gets what side effects need: its own retry policy
-- (a transient gateway timeout is retried), an idempotency key derived from the order,
-- and a ledger, so asking the agent twice charges the card once. `quote` is read-only.
-- The mock's model calls the first tool offered (tools are offered in name order:
-- charge, quote) with arguments built from its schema (integers are 42); a real model
-- chooses from the question. The script then calls `quote` itself, outside any agent,
-- through the same machinery (ah.tool).
local ah = require "agenthost"

local mock = ah.mock{}      -- no faults: this example is about the tools
local client = ah.client{ provider = "anthropic", model = "mock-model", base_url = mock.url }

-- The outside world, with counters of what really happened.
local gateway = { attempts = 0, charges = 0 }
local function charge(args, ctx)
    gateway.attempts = gateway.attempts + 1
    if ctx.attempt == 1 then error(ah.transient("payment gateway timeout")) end
    gateway.charges = gateway.charges + 1
    return { charge_id = "ch_" .. gateway.charges, order = args.order, amount = args.amount }
end

local function quote(args)
    return { order = args.order, amount = args.order * 10 }   -- "price list"
end

local ledger = ah.ledger{}  -- in memory; ah.ledger{ path = "effects.db" } survives restarts

local agent = ah.agent{
    client = client,
    system = "You take payments for orders.",
    ledger = ledger,
    tools = {
        charge = {
            description = "Charge the customer's card for an order.",
            schema = { type = "object", required = { "order", "amount" },
                       properties = { order = { type = "integer" },
                                      amount = { type = "integer" } } },
            policy = { max_attempts = 3, base_ms = 50 },
            -- One order, one charge: the key names the effect, not the LLM's tool call.
            idempotency_key = function(args) return "charge-order-" .. args.order end,
            run = charge,
        },
        quote = {
            description = "Look up the price of an order.",
            schema = { type = "object", required = { "order" },
                       properties = { order = { type = "integer" } } },
            run = quote,
        },
    },
    on_event = function(ev)
        if ev.type == "tool_call_end" then
            print(("  tool %s: %s, %d attempt%s%s"):format(ev.name, ev.outcome, ev.attempts,
                ev.attempts == 1 and "" or "s",
                ev.duplicate and " (duplicate: the ledger answered, the body did not run)"
                or ""))
        end
    end,
}

for i = 1, 2 do
    print(("run %d: > Charge the order, please."):format(i))
    local r = agent:run("Charge the order, please.")
    print(("  < %s"):format(r.text))
end

print("the script calls quote itself, outside the agent:")
local quote_tool = ah.tool{ name = "quote", run = quote }
local q = quote_tool:call({ order = 42 })
print(("  quote: %s, amount %d"):format(q.outcome, q.receipt.amount))

print(("gateway: %d attempts, %d charge"):format(gateway.attempts, gateway.charges))
print("ledger:")
for _, e in ipairs(ledger:entries()) do
    print(("  #%d %s -> %s"):format(e.seq, e.key, e.receipt.charge_id))
end
mock:close()
