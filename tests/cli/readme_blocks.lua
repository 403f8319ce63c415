-- readme_blocks.lua README OUTDIR - write the README's code blocks that test_readme.sh runs
-- to OUTDIR under fixed names, each found by a marker in its text (so the README can be
-- reordered freely). Exits 1 naming a block that is missing.
local readme, out = arg[1], arg[2]
local text = assert(io.open(readme)):read("*a")

local blocks = {}
for lang, body in text:gmatch("\n```(%w*)\n(.-)\n```") do
    blocks[#blocks + 1] = { lang = lang, body = body .. "\n" }
end

local function find(lang, marker)
    for i, b in ipairs(blocks) do
        if b.lang == lang and b.body:find(marker, 1, true) then return b, i end
    end
    io.stderr:write(("readme_blocks: no ```%s block containing %q\n"):format(lang, marker))
    os.exit(1)
end

local function write(name, body)
    local f = assert(io.open(out .. "/" .. name, "w"))
    f:write(body)
    f:close()
end

local hello, i = find("lua", "-- hello.lua")
write("hello.lua", hello.body)
-- The block after it is the transcript: "$ command" then the output.
write("hello.expected", (blocks[i + 1].body:gsub("^%$[^\n]*\n", "")))
write("real.lua", find("lua", '-- real.lua').body)
write("tools_fragment.lua", find("lua", "tools = {").body)
write("on_event_fragment.lua", find("lua", 'require("agenthost.status").new{ text = io.stdout }').body)
write("faults.json", find("json", "cut_after_events").body)
write("events.sample", find("", '{"type":"llm_retry"').body)
write("app.c", find("c", "ah_worker_run").body)
write("demo.expected", find("", "agenthost demo:").body)
write("cli.sh", find("sh", "agenthost mock --port 0").body)
