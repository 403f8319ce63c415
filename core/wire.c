/* wire.c - names and request paths of the wire formats, from AH_WIRE_MAP. */
#include "agenthost.h"

#include <string.h>

static const char *const names[] = {
#define X(name, s, path) s,
    AH_WIRE_MAP(X)
#undef X
};
static const char *const paths[] = {
#define X(name, s, path) path,
    AH_WIRE_MAP(X)
#undef X
};

const char *ah_wire_name(ah_wire w)
{
    return (unsigned)w < (unsigned)AH_WIRE_COUNT_ ? names[w] : "unknown";
}

const char *ah_wire_path(ah_wire w)
{
    return (unsigned)w < (unsigned)AH_WIRE_COUNT_ ? paths[w] : "";
}

int ah_wire_from_name(const char *name)
{
    for (int i = 0; name && i < AH_WIRE_COUNT_; i++)
        if (strcmp(name, names[i]) == 0)
            return i;
    return -1;
}
