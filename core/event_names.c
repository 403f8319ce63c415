/* event_names.c - JSON names of event types and their enums, from the X-macros in
 * agenthost/event.h so names and enums cannot drift. */
#include "agenthost.h"

#define NAME_TABLE(fn, type, count, MAP)                                                  \
    const char *fn(type v)                                                                \
    {                                                                                     \
        static const char *const names[] = {MAP(NAME_ENTRY)};                             \
        return (unsigned)v < (unsigned)(count) ? names[v] : "unknown";                   \
    }
#define NAME_ENTRY(name, s) s,
#define EVENT_NAME_ENTRY(name, s, member, own, ...) s,
#define EVENT_NAMES(X) AH_EVENT_MAP(X, AH__EV_NO_FIELD)

const char *ah_event_type_name(ah_event_type v)
{
    static const char *const names[] = {EVENT_NAMES(EVENT_NAME_ENTRY)};
    return (unsigned)v < (unsigned)AH_EV_COUNT_ ? names[v] : "unknown";
}
NAME_TABLE(ah_wait_source_name, ah_wait_source, AH_WAIT_COUNT_, AH_WAIT_SOURCE_MAP)
NAME_TABLE(ah_giveup_reason_name, ah_giveup_reason, AH_GIVEUP_COUNT_, AH_GIVEUP_REASON_MAP)
NAME_TABLE(ah_run_outcome_name, ah_run_outcome, AH_OUTCOME_COUNT_, AH_RUN_OUTCOME_MAP)
NAME_TABLE(ah_tool_outcome_name, ah_tool_outcome, AH_TOOL_COUNT_, AH_TOOL_OUTCOME_MAP)
NAME_TABLE(ah_cont_mode_name, ah_cont_mode, AH_CONT_COUNT_, AH_CONT_MODE_MAP)
