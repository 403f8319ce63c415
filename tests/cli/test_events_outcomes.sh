#!/usr/bin/env bash
# The outcomes of 2026 as a user and a machine see them: for a refusal (with and without
# a category, Anthropic and Gemini), a response that stopped at the context window, the
# provider's context-length 400 and a spend-limit 429, `agenthost --events FILE` writes
# run_end with the outcome, error.kind and error.category, llm_gave_up with its reason;
# and stderr (not a terminal: the default status display's plain lines, or the
# library's warning for a give-up) says each once, in words.
set -u
bin=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
cat >"$tmp/script.lua" <<'LUA'
local ah = require "agenthost"
local plans = {
  refusal = { { ok = true, stop_reason = "refusal", refusal_category = "cyber" } },
  refusal_plain = { { ok = true, stop_reason = "refusal" } },
  window = { { ok = true, stop_reason = "model_context_window_exceeded" } },
  too_long = { { status = 400, context_exceeded = true } },
  spend = { { status = 429, spend_limit = true } },
}
local m = ah.mock{ plan = plans[arg[1]] }
local agent = ah.agent{ client = ah.client{ provider = arg[2], model = "gemini-2.5-flash",
                                            base_url = m.url },
                        policy = { base_ms = 1, cap_ms = 2 } }
print(agent:run("hello").outcome)
m:close()
LUA

check() { # case provider outcome kind category reason stderr-words
    local case=$1 provider=$2
    "$bin" --events "$tmp/$case.jsonl" "$tmp/script.lua" "$case" "$provider" \
        >"$tmp/out" 2>"$tmp/err"
    local rc=$?
    if [ "$rc" -eq 0 ] && [ "$(cat "$tmp/out")" = "$3" ] &&
        [ "$(grep -cF -- "$7" "$tmp/err")" -eq 1 ] &&
        python3 - "$tmp/$case.jsonl" "$3" "$4" "$5" "$6" <<'PY'
import json, sys
path, outcome, kind, category, reason = sys.argv[1:]
evs = [json.loads(l) for l in open(path)]
end = [e for e in evs if e["type"] == "run_end"]
assert len(end) == 1, "one run_end"
end = end[0]
assert end["outcome"] == outcome, end
assert end["error"]["kind"] == kind, end
assert end["error"].get("category", "") == category, end
assert end["error"]["message"], "a message in words"
gave = [e for e in evs if e["type"] == "llm_gave_up"]
if reason:
    assert len(gave) == 1 and gave[0]["reason"] == reason, gave
else:
    assert not gave, gave
PY
    then
        echo "ok: $case ($provider): $3, $4 ${5:+($5)}; stderr: $7"
    else
        echo "FAIL: $case ($provider): exit $rc, stdout '$(cat "$tmp/out")'"
        cat "$tmp/err"; cat "$tmp/$case.jsonl" | grep -v text_delta; fail=1
    fi
}

refused_words="the model refused to answer (category: cyber); the run ends here"
check refusal anthropic refused refused cyber "" "agenthost: $refused_words"
check refusal_plain openai refused refused "" "" \
    "agenthost: the model refused to answer; the run ends here"
check refusal gemini refused refused SAFETY "" \
    "agenthost: the model refused to answer (category: SAFETY)"
check window anthropic context_exceeded context_exceeded "" "" \
    "agenthost: stopped: the conversation no longer fits the model's context window"
check too_long responses context_exceeded context_exceeded "" not_retryable \
    "the request does not fit the model's context window, not retried"
check spend anthropic failed spend_limit "" spend_limit \
    "spend limit reached, not retried (requests fail until the limit is raised or the period resets)"
exit $fail
