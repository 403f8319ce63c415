/* capabilities.c - the one table of model capabilities for continuation (see
 * agenthost/capabilities.h and docs/providers-encoding.md for the provider facts).
 *
 * Each provider's ops table (provider_*.c) points at its rows here; they are read top to
 * bottom and the first row whose condition holds decides. Adding a model family is
 * adding a row here, nothing else. */
#include "provider.h"

#include "agenthost/capabilities.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const char *const continuation_names[] = {
#define X(name, s) s,
    AH_CONTINUATION_MAP(X)
#undef X
};

const char *ah_continuation_name(ah_continuation c)
{
    return (unsigned)c < (unsigned)AH_CONTINUATION_COUNT_ ? continuation_names[c]
                                                           : "unknown";
}

int ah_continuation_from_name(const char *name)
{
    for (int i = 0; name && i < AH_CONTINUATION_COUNT_; i++)
        if (strcmp(name, continuation_names[i]) == 0)
            return i;
    return -1;
}

/* Find "claude-" case-insensitively (Bedrock and Vertex ids wrap it:
 * "us.anthropic.claude-opus-4-6-v1:0", "claude-opus-4-6@20260101"). */
static const char *find_claude(const char *s)
{
    for (; *s; s++)
        if (strncasecmp(s, "claude-", 7) == 0)
            return s + 7;
    return NULL;
}

int ah_claude_version(const char *model, int *major, int *minor)
{
    const char *p = model ? find_claude(model) : NULL;
    if (!p)
        return 0;
    int maj = -1, min = -1;
    /* Tokens between '-' (ending at '@', ':' or the end): family names (opus, sonnet,
     * haiku, instant) are skipped, the first number is the major version, a second small
     * number right after it the minor ("4-6"); "3.5" / "2.1" carry both; a date or any
     * other token after the major ends the scan. */
    while (*p && *p != '@' && *p != ':') {
        size_t n = strcspn(p, "-@:");
        size_t digits = 0;
        while (digits < n && isdigit((unsigned char)p[digits]))
            digits++;
        if (digits == n && n > 0 && n <= 2) {
            int v = atoi(p);
            if (maj < 0) {
                maj = v;
            } else {
                min = v;
                break;
            }
        } else if (digits > 0 && digits < n && p[digits] == '.' && maj < 0) {
            maj = atoi(p);
            min = atoi(p + digits + 1);
            break;
        } else if (maj >= 0) {
            break; /* "sonnet" after "3-5", a date after "4", "v1" */
        }
        p += n;
        if (*p == '-')
            p++;
    }
    if (maj < 0)
        return 0;
    *major = maj;
    *minor = min < 0 ? 0 : min;
    return 1;
}

static int claude_4_6_or_later(const char *model, int thinking)
{
    (void)thinking;
    int maj, min;
    return ah_claude_version(model, &maj, &min) && (maj > 4 || (maj == 4 && min >= 6));
}

static int with_thinking(const char *model, int thinking)
{
    (void)model;
    return thinking;
}

static int any_model(const char *model, int thinking)
{
    (void)model;
    (void)thinking;
    return 1;
}

/* THE TABLE, one list per provider. Sources: docs/providers-encoding.md, "A trailing
 * partial assistant message". */
const ah__cap_row ah__caps_anthropic[] = {
    {claude_4_6_or_later, 0,
     "Claude 4.6 and later (claude-opus-4-6, claude-sonnet-4-6, claude-opus-4-7, any "
     "claude-*-5...) answer a trailing assistant message with HTTP 400"},
    {with_thinking, 0, "Anthropic does not accept a prefill together with extended thinking"},
    {any_model, 1,
     "Claude 4.5 and earlier without thinking continue a trailing assistant message"},
    {NULL, 0, NULL},
};
const ah__cap_row ah__caps_chat[] = {
    {any_model, 0,
     "Chat Completions answers after a trailing assistant message instead of continuing it"},
    {NULL, 0, NULL},
};
const ah__cap_row ah__caps_responses[] = {
    {any_model, 0,
     "Responses answers after a trailing assistant message instead of continuing it"},
    {NULL, 0, NULL},
};

ah_model_caps ah_model_capabilities(ah_wire wire, const char *model, int thinking)
{
    const ah__provider *p = ah__provider_of(wire);
    for (const ah__cap_row *r = p ? p->caps : NULL; r && r->when; r++)
        if (r->when(model ? model : "", thinking))
            return (ah_model_caps){.prefill = r->prefill, .rule = r->rule};
    if (p)
        return (ah_model_caps){.prefill = 0,
                               .rule = "no capability row for this model: prompt"};
    return (ah_model_caps){.prefill = 0, .rule = "unknown wire format: prompt"};
}

int ah_error_is_prefill_refusal(const ah_error *err)
{
    if (!err || err->status != 400)
        return 0;
    /* every provider's phrases: the message names the refusal whichever format said it */
    for (int w = 0; w < AH_WIRE_COUNT_; w++) {
        const ah__provider *p = ah__provider_of((ah_wire)w);
        for (size_t i = 0; i < sizeof p->prefill_refusal / sizeof p->prefill_refusal[0] &&
                           p->prefill_refusal[i];
             i++)
            if (strstr(err->message, p->prefill_refusal[i]))
                return 1;
    }
    return 0;
}
