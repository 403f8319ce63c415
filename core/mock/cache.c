/* cache.c - the mock's prompt cache: it reports cache usage the way the real APIs do
 * (docs/mock.md, "Prompt caching"), so tests and benchmarks can see what a continuation
 * costs against an uncached resend.
 *
 * A request is cut into segments in the order the providers build their prefix: tools,
 * then the system prompt (Anthropic system, Responses instructions), then messages /
 * input items. Each prefix (segments 0..i) has a hash (of the segments as sent, with any
 * cache_control taken out, so a marker does not change the content) and a size in tokens
 * (its bytes / 4, the mock's token model).
 *   - anthropic: only a segment that carries cache_control is a breakpoint. A breakpoint
 *     reads the longest prefix written before, looking back at most 20 segments from it;
 *     the last breakpoint writes what it covers beyond that read. Prefixes of fewer than
 *     1024 tokens are not cached. usage.input_tokens is what remains
 *     (cache_read_input_tokens and cache_creation_input_tokens are apart from it).
 *   - openai, responses: every prefix of 1024 tokens or more is cached under the
 *     request's prompt_cache_key (none is a key of its own); cached_tokens is the longest
 *     one seen before, in whole 128-token steps, and part of prompt_tokens / input_tokens.
 * Entries never expire (a mock's life is shorter than a 5-minute TTL). Thread-safe.
 */
#include "mock_internal.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define MIN_TOKENS 1024
#define LOOKBACK 20
#define MAX_SEGS 4096

struct ah__mock_cache {
    pthread_mutex_t mu;
    uint64_t *set; /* open addressing, 0 = empty */
    size_t cap, n;
};

ah__mock_cache *ah__mock_cache_new(void)
{
    ah__mock_cache *c = calloc(1, sizeof *c);
    if (!c || pthread_mutex_init(&c->mu, NULL) != 0) {
        free(c);
        return NULL;
    }
    return c;
}

void ah__mock_cache_free(ah__mock_cache *c)
{
    if (!c)
        return;
    pthread_mutex_destroy(&c->mu);
    free(c->set);
    free(c);
}

static int has(const ah__mock_cache *c, uint64_t h)
{
    if (!c->cap)
        return 0;
    for (size_t i = h & (c->cap - 1);; i = (i + 1) & (c->cap - 1)) {
        if (c->set[i] == h)
            return 1;
        if (c->set[i] == 0)
            return 0;
    }
}

static void add(ah__mock_cache *c, uint64_t h)
{
    if (has(c, h))
        return;
    if ((c->n + 1) * 2 > c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 256;
        uint64_t *s = calloc(cap, sizeof *s);
        if (!s)
            return; /* not cached: a later request pays in full */
        for (size_t i = 0; i < c->cap; i++) {
            if (!c->set[i])
                continue;
            size_t j = c->set[i] & (cap - 1);
            while (s[j])
                j = (j + 1) & (cap - 1);
            s[j] = c->set[i];
        }
        free(c->set);
        c->set = s;
        c->cap = cap;
    }
    size_t i = h & (c->cap - 1);
    while (c->set[i])
        i = (i + 1) & (c->cap - 1);
    c->set[i] = h;
    c->n++;
}

typedef struct seg {
    uint64_t hash;  /* of the prefix through this segment */
    long long tokens; /* of the prefix */
    int breakpoint;
} seg;

typedef struct segs {
    seg v[MAX_SEGS];
    size_t n;
    uint64_t h;
    size_t bytes;
} segs;

/* Take cache_control out of an item and of the blocks of its content; 1 when any. */
static int strip(cJSON *item)
{
    int had = 0;
    if (cJSON_GetObjectItemCaseSensitive(item, "cache_control")) {
        cJSON_DeleteItemFromObjectCaseSensitive(item, "cache_control");
        had = 1;
    }
    cJSON *content = cJSON_GetObjectItemCaseSensitive(item, "content");
    cJSON *b;
    cJSON_ArrayForEach(b, content)
    {
        if (cJSON_IsObject(b) && strip(b))
            had = 1;
    }
    return had;
}

static void push(segs *s, const cJSON *item)
{
    if (!item || s->n == MAX_SEGS)
        return;
    cJSON *d = cJSON_Duplicate(item, 1);
    if (!d)
        return;
    int bp = strip(d);
    char *txt = cJSON_PrintUnformatted(d);
    cJSON_Delete(d);
    if (!txt)
        return;
    size_t len = strlen(txt);
    s->h = ah__mock_fnv1a(s->h, txt, len + 1);
    s->bytes += len;
    cJSON_free(txt);
    s->v[s->n].hash = s->h ? s->h : 1;
    s->v[s->n].tokens = (long long)(s->bytes / 4);
    s->v[s->n].breakpoint = bp;
    s->n++;
}

static void push_all(segs *s, const cJSON *arr)
{
    const cJSON *it;
    if (cJSON_IsArray(arr)) {
        cJSON_ArrayForEach(it, arr) push(s, it);
    } else if (arr) {
        push(s, arr);
    }
}

void ah__mock_cache_apply(ah__mock_cache *c, ah_wire wire, const cJSON *req,
                          ah__mock_reply *r)
{
    if (!c || !req)
        return;
    segs *s = calloc(1, sizeof *s);
    if (!s)
        return;
    int anthropic = wire == AH_WIRE_ANTHROPIC;
    const char *key = ah__mock_get_str(req, "prompt_cache_key");
    s->h = AH__MOCK_FNV_INIT;
    if (!anthropic)
        s->h = ah__mock_fnv1a(s->h, key ? key : "", key ? strlen(key) + 1 : 1);
    s->h = ah__mock_fnv1a(s->h, &wire, sizeof wire);
    push_all(s, ah__mock_get(req, "tools"));
    push_all(s, ah__mock_get(req, anthropic ? "system" : "instructions"));
    push_all(s, ah__mock_get(req, wire == AH_WIRE_RESPONSES ? "input" : "messages"));
    if (s->n && s->v[s->n - 1].tokens > r->input_tokens)
        r->input_tokens = s->v[s->n - 1].tokens;

    long long read = 0, write = 0;
    pthread_mutex_lock(&c->mu);
    if (anthropic) {
        long long last = -1;
        for (size_t i = 0; i < s->n; i++) {
            if (!s->v[i].breakpoint)
                continue;
            last = (long long)i;
            for (size_t j = i + 1; j-- > 0 && i - j < LOOKBACK;) {
                if (s->v[j].tokens >= MIN_TOKENS && has(c, s->v[j].hash)) {
                    if (s->v[j].tokens > read)
                        read = s->v[j].tokens;
                    break;
                }
            }
        }
        if (last >= 0 && s->v[last].tokens >= MIN_TOKENS && s->v[last].tokens > read)
            write = s->v[last].tokens - read;
        for (size_t i = 0; i < s->n; i++)
            if (s->v[i].breakpoint && s->v[i].tokens >= MIN_TOKENS)
                add(c, s->v[i].hash);
        r->input_excludes_cache = 1;
    } else {
        for (size_t i = 0; i < s->n; i++)
            if (s->v[i].tokens >= MIN_TOKENS && has(c, s->v[i].hash))
                read = s->v[i].tokens;
        read -= read % 128;
        for (size_t i = 0; i < s->n; i++)
            if (s->v[i].tokens >= MIN_TOKENS)
                add(c, s->v[i].hash);
    }
    pthread_mutex_unlock(&c->mu);
    if (read + write > r->input_tokens)
        r->input_tokens = read + write;
    r->cache_read = read;
    r->cache_write = write;
    free(s);
}
