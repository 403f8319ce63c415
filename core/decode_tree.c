/* decode_tree.c - the non-delta events (message_start, content_block_start/stop, ping,
 * message_delta, message_stop; Chat's role, finish and usage chunks; the Responses
 * lifecycle events, three of which carry the whole `response` object) decoded without
 * cJSON's parse and free: a few of them per request, before the first delta, cost more
 * than every delta of a short answer (docs/performance.md).
 *
 * ah__tree_parse builds the tree cJSON would build, minus the members the format's
 * handlers never read, out of cJSON structs carved from an arena on decode.c's stack
 * (nothing is malloc'd per event but for a big one; nothing is kept between events, so a
 * decoder costs no more memory), and decode.c hands it to the same handler the cJSON
 * path uses. Which members are read is the format's key filter (provider.h `tree`,
 * defined beside each handler: decode_anthropic.c, decode_openai.c, decode_responses.c):
 * a list of keys per object, each kept whole (TK_DEEP), or kept as an object whose own
 * members are filtered again (TK_OBJ), or kept as an array whose object elements are
 * filtered (TK_EACH). A value of another type than the filter expects is kept whole, so
 * a handler that checks a type sees the type. Every other member is skipped: checked,
 * never built. A filtered object is only ever looked up by key (never walked, printed
 * or counted): the filters say where that holds.
 *
 * Why the tree equals cJSON's for what is read:
 *   - the input is accepted only when cJSON accepts it (else NULL, and cJSON parses it and
 * reports the error): the same grammar and cJSON's own quirks (trailing bytes after the
 * root ignored, raw control bytes inside strings taken as they are, `null`/`true`/`false`
 * matched as four or five bytes), but whitespace only space, tab, CR, LF (cJSON also
 * skips other bytes <= 32: not recognised here), nesting up to 64 (cJSON: 1000), numbers
 * of the form -?D+(.D+)?([eE][+-]?D+)? and at most 40 bytes (cJSON reads at most 63
 * number bytes, strtod decides), strings whose escapes are the two-character ones or a
 * \u of four hex digits outside the surrogates, and in a skipped string also a pair as
 * cJSON accepts one (a high \u then a low one; in a kept string or a key a pair is left
 * to cJSON);
 *   - kept strings (keys too) are decoded as cJSON decodes them, \u0000 included (the C
 * string then ends there, as cJSON's does); kept numbers are integers of up to 15 digits
 * (exact as a double; valueint saturated as cJSON does), any other kept number gives up;
 *   - members and elements keep their order, duplicates included, so a key lookup finds
 * the member cJSON's would;
 *   - the root must be an object with a "type" string (when the format's events name
 * their type) other than "error": the error handlers may print the whole root.
 * tests/fuzz/fuzz_decode_fast.c and tests/unit/test_decode_tree.c decode every input with
 * and without it and compare everything observable.
 */
#include "decode_internal.h"
#include "provider.h"

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- the arena: on the caller's stack, heap blocks only for a big event ---- */

typedef struct tblock {
    struct tblock *next;
    alignas(max_align_t) unsigned char mem[];
} tblock;

#define TBLOCK_MIN (8u << 10)

void ah__tree_arena_init(ah__tree_arena *a)
{
    a->blocks = NULL;
    a->cur = a->mem;
    a->left = sizeof a->mem;
}

void ah__tree_arena_release(ah__tree_arena *a)
{
    tblock *b = a->blocks;
    while (b) {
        tblock *n = b->next;
        free(b);
        b = n;
    }
    ah__tree_arena_init(a);
}

static void *aalloc(ah__tree_arena *a, size_t n)
{
    n = (n + 15u) & ~(size_t)15u;
    if (a->left < n) {
        size_t cap = n > TBLOCK_MIN ? n : TBLOCK_MIN;
        tblock *b = malloc(sizeof *b + cap);
        if (!b)
            return NULL;
        b->next = a->blocks;
        a->blocks = b;
        a->cur = b->mem;
        a->left = cap;
    }
    void *p = a->cur;
    a->cur += n;
    a->left -= n;
    return p;
}

/* ---- the parser ---- */

#define TDEPTH_MAX 64

typedef struct tp {
    const char *p, *end;
    ah__tree_arena *a;
    int depth;
} tp;

static void tws(tp *t)
{
    while (t->p < t->end &&
           (*t->p == ' ' || *t->p == '\t' || *t->p == '\n' || *t->p == '\r'))
        t->p++;
}

/* After a member or an element: 1 at a ',' (another follows), 0 at `close` (the end),
 * -1 at anything else. Either byte is consumed. */
static int tnext(tp *t, char close)
{
    tws(t);
    if (t->p < t->end && (*t->p == ',' || *t->p == close))
        return *t->p++ == ',';
    return -1;
}

/* The bytes that end a run of plain string bytes: '"', '\\' and NUL (other control bytes
 * are taken as they are: cJSON does; a NUL is too, but it ends the C string). */
static const unsigned char stop_byte[256] = {['"'] = 1, ['\\'] = 1, [0] = 1};

/* The first '"', '\\' or NUL in [p, end), or end. Most strings here are short keys and
 * values: their first 16 bytes (first: at the string's start, not after an escape) are
 * looked up four per bounds check; past that, eight
 * bytes at a time (the has-zero-byte test on x, x ^ '"' and x ^ '\\', exact for "is
 * there one"): a closing event repeating a long answer is mostly one long string. */
static const char *quote_or_backslash(const char *p, const char *end, int first)
{
    const unsigned char *u = (const unsigned char *)p, *e = (const unsigned char *)end;
    for (int k = first ? 0 : 4; k < 4 && e - u >= 4; k++, u += 4) {
        if (stop_byte[u[0]])
            return (const char *)u;
        if (stop_byte[u[1]])
            return (const char *)u + 1;
        if (stop_byte[u[2]])
            return (const char *)u + 2;
        if (stop_byte[u[3]])
            return (const char *)u + 3;
    }
    const uint64_t ones = 0x0101010101010101u, highs = 0x8080808080808080u;
    while (e - u >= 8) {
        uint64_t x;
        memcpy(&x, u, 8);
        uint64_t q = x ^ (ones * '"'), b = x ^ (ones * '\\');
        if ((((x - ones) & ~x) | ((q - ones) & ~q) | ((b - ones) & ~b)) & highs)
            break;
        u += 8;
    }
    while (u < e && !stop_byte[*u])
        u++;
    return (const char *)u;
}

/* The string whose opening quote is at p: just past its closing quote, or NULL when it is
 * not one this file accepts (see the top). *flags |= 1 when it has a backslash, 2 when a
 * NUL byte, 4 when a surrogate pair (accepted in skipped strings only: tstring refuses
 * it, tdecode does not decode pairs). */
static const char *str_end(const char *p, const char *end, int *flags)
{
    int first = 1;
    for (p++;; first = 0) {
        p = quote_or_backslash(p, end, first);
        if (p >= end)
            return NULL;
        if (*p == '"')
            return p + 1;
        if (*p == '\0') {
            *flags |= 2;
            p++;
            continue;
        }
        if (end - p < 2)
            return NULL;
        *flags |= 1;
        unsigned u;
        switch (p[1]) {
        case '"': case '\\': case '/': case 'b': case 'f': case 'n': case 'r': case 't':
            p += 2;
            break;
        case 'u':
            if (end - p < 6 || !ah__hex4(p + 2, &u))
                return NULL;
            if (u >= 0xD800 && u <= 0xDFFF) {
                /* a pair (high then low, as cJSON requires): only ever skipped here */
                unsigned lo;
                if (u > 0xDBFF || end - p < 12 || p[6] != '\\' || p[7] != 'u' ||
                    !ah__hex4(p + 8, &lo) || lo < 0xDC00 || lo > 0xDFFF)
                    return NULL;
                *flags |= 4;
                p += 12;
                break;
            }
            p += 6;
            break;
        default:
            return NULL;
        }
    }
}

/* The string at t->p (its opening quote): t->p moves past its closing quote; *b, *e are
 * its raw contents, *esc as str_end's flags. */
static int tstring(tp *t, const char **b, const char **e, int *esc)
{
    if (t->p >= t->end || *t->p != '"')
        return 0;
    *esc = 0;
    const char *q = str_end(t->p, t->end, esc);
    if (!q || (*esc & 4))
        return 0; /* a surrogate pair in a kept string or a key: left to cJSON */
    *b = t->p + 1;
    *e = q - 1;
    t->p = q;
    return 1;
}

/* The string's value as cJSON decodes it, NUL-terminated, in the arena. */
static char *tdecode(tp *t, const char *b, const char *e, int esc)
{
    esc &= 1; /* a NUL byte is copied like any other */
    size_t n = (size_t)(e - b);
    char *o = aalloc(t->a, n + 1), *w = o;
    if (!o)
        return NULL;
    if (!esc) {
        memcpy(o, b, n);
        o[n] = '\0';
        return o;
    }
    /* runs of plain bytes are copied whole: a long answer has few escapes */
    for (const char *q = b; q < e;) {
        const char *r = quote_or_backslash(q, e, 0);
        memcpy(w, q, (size_t)(r - q));
        w += r - q;
        if ((q = r) >= e)
            break;
        if (*q != '\\') { /* a NUL byte: kept, as cJSON keeps it */
            *w++ = *q++;
            continue;
        }
        q++;
        switch (*q) {
        case 'b': *w++ = '\b'; break;
        case 'f': *w++ = '\f'; break;
        case 'n': *w++ = '\n'; break;
        case 'r': *w++ = '\r'; break;
        case 't': *w++ = '\t'; break;
        case 'u': {
            unsigned u = 0;
            ah__hex4(q + 1, &u); /* checked by tstring: four hex digits, no surrogate */
            q += 4;
            if (u < 0x80) {
                *w++ = (char)u;
            } else if (u < 0x800) {
                *w++ = (char)(0xC0 | (u >> 6));
                *w++ = (char)(0x80 | (u & 0x3F));
            } else {
                *w++ = (char)(0xE0 | (u >> 12));
                *w++ = (char)(0x80 | ((u >> 6) & 0x3F));
                *w++ = (char)(0x80 | (u & 0x3F));
            }
            break;
        }
        default: *w++ = *q; break; /* " \ / */
        }
        q++;
    }
    *w = '\0';
    return o;
}

static int num_byte(char ch)
{
    return (ch >= '0' && ch <= '9') || ch == '+' || ch == '-' || ch == '.' || ch == 'e' ||
           ch == 'E';
}

static int digits(tp *t)
{
    const char *b = t->p;
    while (t->p < t->end && *t->p >= '0' && *t->p <= '9')
        t->p++;
    return t->p > b;
}

/* A number (see the top). *ival: 1 when it is an integer of up to 15 digits, its value
 * in *v. */
static int tnumber(tp *t, int *ival, double *v)
{
    const char *b = t->p;
    int neg = t->p < t->end && *t->p == '-';
    if (neg)
        t->p++;
    const char *db = t->p;
    if (!digits(t))
        return 0;
    size_t nd = (size_t)(t->p - db);
    *ival = nd <= 15;
    if (t->p < t->end && *t->p == '.') {
        t->p++;
        *ival = 0;
        if (!digits(t))
            return 0;
    }
    if (t->p < t->end && (*t->p == 'e' || *t->p == 'E')) {
        t->p++;
        *ival = 0;
        if (t->p < t->end && (*t->p == '+' || *t->p == '-'))
            t->p++;
        if (!digits(t))
            return 0;
    }
    if (t->p - b > 40 || (t->p < t->end && num_byte(*t->p)))
        return 0;
    if (*ival) {
        int64_t x = 0;
        for (const char *q = db; q < db + nd; q++)
            x = x * 10 + (*q - '0');
        *v = neg ? -(double)x : (double)x;
    }
    return 1;
}

static int tlit(tp *t, const char *s, size_t n)
{
    if ((size_t)(t->end - t->p) < n || memcmp(t->p, s, n) != 0)
        return 0;
    t->p += n;
    return 1;
}

enum { TM_SKIP = 0, TM_DEEP = AH__TK_DEEP, TM_OBJ = AH__TK_OBJ, TM_EACH = AH__TK_EACH };

static cJSON *tnode(tp *t, int type)
{
    cJSON *n = aalloc(t->a, sizeof *n);
    if (n) {
        memset(n, 0, sizeof *n);
        n->type = type;
    }
    return n;
}

#define WS(p, end)                                                                       \
    while ((p) < (end) && (*(p) == ' ' || *(p) == '\t' || *(p) == '\n' || *(p) == '\r'))   \
    (p)++

/* Check the value at t->p and move past it, building nothing: one loop over the tokens
 * with a stack of one bit per open container (1 object, 0 array), since most of a
 * Responses event is what no handler reads. The same grammar as the builders below. */
static int tskip(tp *t)
{
    const char *p = t->p, *end = t->end;
    uint64_t objs = 0;
    int depth = 0, f;
value:
    if (p >= end)
        return 0;
    switch (*p) {
    case '{':
    case '[':
        if (t->depth + ++depth > TDEPTH_MAX)
            return 0;
        objs = objs << 1 | (*p == '{');
        p++;
        WS(p, end);
        if (p < end && *p == (objs & 1 ? '}' : ']')) {
            p++;
            goto close;
        }
        if (objs & 1)
            goto key;
        goto value;
    case '"':
        f = 0;
        if (!(p = str_end(p, end, &f)))
            return 0;
        break;
    case 'n':
        if (end - p < 4 || memcmp(p, "null", 4) != 0)
            return 0;
        p += 4;
        break;
    case 't':
        if (end - p < 4 || memcmp(p, "true", 4) != 0)
            return 0;
        p += 4;
        break;
    case 'f':
        if (end - p < 5 || memcmp(p, "false", 5) != 0)
            return 0;
        p += 5;
        break;
    default: {
        int ival;
        double v;
        t->p = p;
        if (!tnumber(t, &ival, &v))
            return 0;
        p = t->p;
        break;
    }
    }
after:
    if (depth == 0) {
        t->p = p;
        return 1;
    }
    WS(p, end);
    if (p < end && *p == ',') {
        p++;
        WS(p, end);
        if (objs & 1)
            goto key;
        goto value;
    }
    if (p < end && *p == (objs & 1 ? '}' : ']')) {
        p++;
        goto close;
    }
    return 0;
close:
    depth--;
    objs >>= 1;
    goto after;
key:
    f = 0;
    if (p >= end || *p != '"' || !(p = str_end(p, end, &f)))
        return 0;
    WS(p, end);
    if (p >= end || *p != ':')
        return 0;
    p++;
    WS(p, end);
    goto value;
}

static int tvalue(tp *t, int mode, const ah__tree_key *keys, cJSON **out);

/* Append child c to parent's list (cJSON's layout: child->prev is the last one). */
static void tappend(cJSON *parent, cJSON *c)
{
    if (!parent->child) {
        parent->child = c;
        c->prev = c;
    } else {
        cJSON *last = parent->child->prev;
        last->next = c;
        c->prev = last;
        parent->child->prev = c;
    }
}

static const ah__tree_key *tfind(const ah__tree_key *keys, const char *k)
{
    for (; keys && keys->name; keys++)
        if (strcmp(keys->name, k) == 0)
            return keys;
    return NULL;
}

static const ah__tree_key *tfindn(const ah__tree_key *keys, const char *k, size_t n)
{
    for (; keys && keys->name; keys++)
        if (keys->len == n && keys->name[0] == k[0] && memcmp(keys->name, k, n) == 0)
            return keys;
    return NULL;
}

/* An object at t->p ('{'): mode TM_DEEP (every member) or TM_OBJ (the members in
 * keys; the others are skipped). */
static int tobject(tp *t, int mode, const ah__tree_key *keys, cJSON **out)
{
    cJSON *o = NULL;
    if (++t->depth > TDEPTH_MAX)
        return 0;
    t->p++;
    if (!(o = tnode(t, cJSON_Object)))
        return 0;
    tws(t);
    if (t->p < t->end && *t->p == '}') {
        t->p++;
        goto done;
    }
    for (;;) {
        const char *b, *e;
        int esc;
        tws(t);
        if (!tstring(t, &b, &e, &esc))
            return 0;
        tws(t);
        if (t->p >= t->end || *t->p != ':')
            return 0;
        t->p++;
        tws(t);
        {
            /* a key of plain bytes is looked up in place and copied only when kept; one
             * with an escape or a NUL byte is decoded first (cJSON compares the C
             * string: "type\u0000x" is "type") */
            size_t kn = (size_t)(e - b);
            int plain = !esc;
            char *k = plain ? NULL : tdecode(t, b, e, esc);
            if (!plain && !k)
                return 0;
            const ah__tree_key *f = mode == TM_DEEP ? NULL
                                    : plain        ? tfindn(keys, b, kn)
                                                   : tfind(keys, k);
            cJSON *c = NULL;
            if (mode == TM_OBJ && !f) {
                if (!tskip(t))
                    return 0;
            } else {
                /* a plain key that matched is the filter's own name: no copy (the tree
                 * is only read) */
                if (!k && f)
                    k = (char *)f->name;
                if (!k && !(k = tdecode(t, b, e, 0)))
                    return 0;
                if (!tvalue(t, f ? f->kind : TM_DEEP, f ? f->sub : NULL, &c))
                    return 0;
                c->string = k;
                tappend(o, c);
            }
        }
        int more = tnext(t, '}');
        if (more < 0)
            return 0;
        if (!more)
            break;
    }
done:
    t->depth--;
    if (out)
        *out = o;
    return 1;
}

/* An array at t->p ('['): mode TM_DEEP, or TM_EACH (each element an object
 * filtered by keys). */
static int tarray(tp *t, int mode, const ah__tree_key *keys, cJSON **out)
{
    cJSON *a = NULL;
    if (++t->depth > TDEPTH_MAX)
        return 0;
    t->p++;
    if (!(a = tnode(t, cJSON_Array)))
        return 0;
    tws(t);
    if (t->p < t->end && *t->p == ']') {
        t->p++;
        goto done;
    }
    for (;;) {
        cJSON *c = NULL;
        tws(t);
        if (!tvalue(t, mode == TM_EACH ? TM_OBJ : mode, keys, &c))
            return 0;
        tappend(a, c);
        int more = tnext(t, ']');
        if (more < 0)
            return 0;
        if (!more)
            break;
    }
done:
    t->depth--;
    if (out)
        *out = a;
    return 1;
}

/* One value at t->p (no whitespace before it). mode TM_SKIP: checked, *out untouched;
 * else *out is its node, built whole unless mode filters it (TM_OBJ for an object,
 * TM_EACH for an array; a value of another type is built whole). */
static int tvalue(tp *t, int mode, const ah__tree_key *keys, cJSON **out)
{
    if (mode == TM_SKIP)
        return tskip(t);
    if (t->p >= t->end)
        return 0;
    char ch = *t->p;
    if (ch == '{')
        return tobject(t, mode == TM_EACH ? TM_DEEP : mode, keys, out);
    if (ch == '[')
        return tarray(t, mode == TM_OBJ ? TM_DEEP : mode, keys, out);
    if (ch == '"') {
        const char *b, *e;
        int esc;
        if (!tstring(t, &b, &e, &esc))
            return 0;
        cJSON *n = tnode(t, cJSON_String);
        if (!n || !(n->valuestring = tdecode(t, b, e, esc)))
            return 0;
        *out = n;
        return 1;
    }
    if (ch == '-' || (ch >= '0' && ch <= '9')) {
        int ival;
        double v = 0;
        if (!tnumber(t, &ival, &v))
            return 0;
        if (!ival)
            return 0; /* a kept non-integer: strtod's exact value is cJSON's business */
        cJSON *n = tnode(t, cJSON_Number);
        if (!n)
            return 0;
        n->valuedouble = v;
        n->valueint = v >= INT_MAX ? INT_MAX : v <= (double)INT_MIN ? INT_MIN : (int)v;
        *out = n;
        return 1;
    }
    int type, vi = 0;
    if (tlit(t, "null", 4))
        type = cJSON_NULL;
    else if (tlit(t, "true", 4))
        type = cJSON_True, vi = 1;
    else if (tlit(t, "false", 5))
        type = cJSON_False;
    else
        return 0;
    cJSON *n = tnode(t, type);
    if (!n)
        return 0;
    n->valueint = vi;
    *out = n;
    return 1;
}

cJSON *ah__tree_parse_keys(const ah__tree_key *keys, int typed, ah__tree_arena *a,
                          const char *data, size_t len)
{
    if (!keys)
        return NULL;
    tp t = {data, data + len, a, 0};
    cJSON *root = NULL;
    tws(&t);
    if (t.p >= t.end || *t.p != '{' || !tobject(&t, TM_OBJ, keys, &root))
        return NULL; /* not recognised: cJSON parses it (and reports what is wrong) */
    if (typed) {
        const char *type = ah__jstr(root, "type");
        if (!type || strcmp(type, "error") == 0)
            return NULL; /* the cJSON path's message, or a handler that reads the root */
    }
    return root;
}

cJSON *ah__tree_parse(ah_decoder *d, ah__tree_arena *a, const char *data, size_t len)
{
    return ah__tree_parse_keys(d->p->tree, !d->p->event_type, a, data, len);
}
