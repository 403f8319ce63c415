/* status.c - names and messages of ah_status, generated from AH_STATUS_MAP so they cannot
 * drift from the enum. */
#include "agenthost/status.h"

static const char *const names[] = {
#define X(name, s, m) s,
    AH_STATUS_MAP(X)
#undef X
};

static const char *const messages[] = {
#define X(name, s, m) m,
    AH_STATUS_MAP(X)
#undef X
};

const char *ah_status_name(ah_status st)
{
    if ((unsigned)st >= (unsigned)AH_STATUS_COUNT_)
        return "unknown";
    return names[st];
}

const char *ah_status_message(ah_status st)
{
    if ((unsigned)st >= (unsigned)AH_STATUS_COUNT_)
        return "unknown status";
    return messages[st];
}

const char *ah_version(void)
{
    return AH_VERSION_STRING;
}

int ah_version_num(void)
{
    return AH_VERSION_NUM;
}
