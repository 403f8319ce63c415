/* error_hints.c - server retry hints: Retry-After (delta-seconds and all three RFC 9110
 * HTTP-date forms), retry-after-ms, the providers' rate-limit reset headers, body text
 * such as "try again in 17.2s", and x-should-retry.
 *
 * Invariants: every parser reads only the bytes it is given, never the clock (the wall
 * time is a parameter), never allocates, and returns either -1 (no usable hint) or a
 * value in [0, AH_RETRY_AFTER_MAX_MS]. Arithmetic is integer nanoseconds with saturation,
 * so "17.2s" is exactly 17200 ms and no input overflows. Fractions round UP to the next
 * millisecond: retrying a little late is harmless, retrying early wastes the attempt.
 */
#include "error_internal.h"
#include "internal.h"

#include <cjson/cJSON.h>

#include <string.h>

#define NS_PER_MS  INT64_C(1000000)
#define NS_PER_S   INT64_C(1000000000)
#define MS_PER_DAY INT64_C(86400000)
#define NS_MAX     (AH_RETRY_AFTER_MAX_MS * NS_PER_MS)

/* ---- small character helpers ------------------------------------------------------- */

static int is_digit(int c)
{
    return c >= '0' && c <= '9';
}

static int is_alpha(int c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static int is_alnum(int c)
{
    return is_alpha(c) || is_digit(c);
}

static int lower(int c)
{
    return (c >= 'A' && c <= 'Z') ? c + ('a' - 'A') : c;
}

static int is_ows(int c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

/* Case-insensitive equality of a counted string and a lower-case NUL-terminated one. */
static int eq_ci(const char *s, size_t n, const char *lit)
{
    size_t i = 0;
    for (; i < n && lit[i]; i++)
        if (lower((unsigned char)s[i]) != lit[i])
            return 0;
    return i == n && lit[i] == '\0';
}

/* Trim OWS (and CR/LF a transport might leave) from both ends. */
static void trim(const char **s, size_t *n)
{
    while (*n > 0 && is_ows((unsigned char)(*s)[0])) {
        (*s)++;
        (*n)--;
    }
    while (*n > 0 && is_ows((unsigned char)(*s)[*n - 1]))
        (*n)--;
}

/* ---- decimal numbers in fixed point ------------------------------------------------ */

/* A non-negative decimal "123" or "1.25": digits first, and at least one digit after a
 * dot. No sign, no exponent. */
typedef struct decnum {
    uint64_t ip; /* integer part, saturated */
    int big;     /* integer part overflowed */
    const char *frac;
    size_t frac_len;
} decnum;

/* Parse a decimal at s[0..n); returns bytes consumed, 0 when there is none. */
static size_t parse_decnum(const char *s, size_t n, decnum *d)
{
    size_t i = 0;
    memset(d, 0, sizeof *d);
    while (i < n && is_digit((unsigned char)s[i])) {
        unsigned dig = (unsigned)(s[i] - '0');
        if (d->ip > (UINT64_MAX - dig) / 10)
            d->big = 1;
        else
            d->ip = d->ip * 10 + dig;
        i++;
    }
    if (i == 0)
        return 0;
    if (i + 1 < n && s[i] == '.' && is_digit((unsigned char)s[i + 1])) {
        d->frac = s + i + 1;
        i++;
        while (i < n && is_digit((unsigned char)s[i])) {
            d->frac_len++;
            i++;
        }
    }
    return i;
}

/* The number times unit_ns, in ns, saturated at NS_MAX. Fraction digits finer than 1 ns
 * are dropped. */
static int64_t decnum_ns(const decnum *d, int64_t unit_ns)
{
    if (d->big || d->ip > (uint64_t)(NS_MAX / unit_ns))
        return NS_MAX;
    int64_t ns = (int64_t)d->ip * unit_ns;
    int64_t scale = unit_ns;
    for (size_t k = 0; k < d->frac_len && scale > 0; k++) {
        scale /= 10;
        ns += (d->frac[k] - '0') * scale;
    }
    return ns > NS_MAX ? NS_MAX : ns;
}

static int64_t sat_add(int64_t a, int64_t b)
{
    return a > NS_MAX - b ? NS_MAX : a + b;
}

/* ns to ms, rounded up, clamped. */
static int64_t ns_to_ms(int64_t ns)
{
    int64_t ms = ns / NS_PER_MS + (ns % NS_PER_MS != 0);
    return ms > AH_RETRY_AFTER_MAX_MS ? AH_RETRY_AFTER_MAX_MS : ms;
}

/* A whole trimmed string that is exactly one decimal, scaled: ms, or -1. */
static int64_t parse_scaled(const char *s, size_t n, int64_t unit_ns)
{
    decnum d;
    trim(&s, &n);
    if (n == 0 || parse_decnum(s, n, &d) != n)
        return -1;
    return ns_to_ms(decnum_ns(&d, unit_ns));
}

/* ---- durations: Go style "1h2m3.5s", and words for body text ----------------------- */

typedef struct unit {
    const char *name;
    int64_t ns;
} unit;

/* Longest first within a shared prefix ("ms" before "m"). µ is U+00B5 or U+03BC. */
static const unit go_units[] = {
    {"ns", 1},         {"us", 1000},    {"\xc2\xb5s", 1000},  {"\xce\xbcs", 1000},
    {"ms", NS_PER_MS}, {"s", NS_PER_S}, {"m", 60 * NS_PER_S}, {"h", 3600 * NS_PER_S},
};

static const unit word_units[] = {
    {"milliseconds", NS_PER_MS}, {"millisecond", NS_PER_MS}, {"msec", NS_PER_MS},
    {"ms", NS_PER_MS},           {"seconds", NS_PER_S},      {"second", NS_PER_S},
    {"secs", NS_PER_S},          {"sec", NS_PER_S},          {"s", NS_PER_S},
    {"minutes", 60 * NS_PER_S},  {"minute", 60 * NS_PER_S},  {"mins", 60 * NS_PER_S},
    {"min", 60 * NS_PER_S},      {"m", 60 * NS_PER_S},       {"hours", 3600 * NS_PER_S},
    {"hour", 3600 * NS_PER_S},   {"hrs", 3600 * NS_PER_S},   {"hr", 3600 * NS_PER_S},
    {"h", 3600 * NS_PER_S},
};

/* Match a unit name at s[0..n) (case-insensitive for ASCII); returns its length. */
static size_t match_unit(const char *s, size_t n, const unit *units, size_t count,
                         int64_t *unit_ns)
{
    for (size_t k = 0; k < count; k++) {
        size_t len = strlen(units[k].name);
        if (len > n)
            continue;
        size_t i = 0;
        while (i < len && lower((unsigned char)s[i]) == units[k].name[i])
            i++;
        if (i == len) {
            *unit_ns = units[k].ns;
            return len;
        }
    }
    return 0;
}

/* A Go-style duration at the start of s[0..n): one or more <decimal><unit> components
 * with nothing between them. Returns bytes consumed (0 = none) and the sum in ns. */
static size_t parse_go_duration(const char *s, size_t n, int64_t *ns_out)
{
    size_t i = 0;
    int64_t total = 0;
    for (;;) {
        decnum d;
        int64_t unit_ns;
        size_t a = parse_decnum(s + i, n - i, &d);
        if (a == 0)
            break;
        size_t u = match_unit(s + i + a, n - i - a, go_units,
                              sizeof go_units / sizeof go_units[0], &unit_ns);
        if (u == 0)
            break;
        total = sat_add(total, decnum_ns(&d, unit_ns));
        i += a + u;
    }
    *ns_out = total;
    return i;
}

/* An OpenAI reset header: a whole Go duration, or a bare number of seconds (Azure
 * OpenAI sends "0" or "12"). ms or -1. */
static int64_t parse_reset_duration(const char *s, size_t n)
{
    int64_t ns;
    trim(&s, &n);
    if (n == 0)
        return -1;
    if (parse_go_duration(s, n, &ns) == n)
        return ns_to_ms(ns);
    return parse_scaled(s, n, NS_PER_S);
}

/* The hint right after a phrase in body text: a Go duration ending at neither a letter
 * nor a digit ("17.2s.", "1m30s", "20ms,") or a number, optional spaces and a word unit
 * ("20 seconds"). ms or -1. */
static int64_t parse_text_duration(const char *s, size_t n)
{
    int64_t ns;
    size_t i = parse_go_duration(s, n, &ns);
    if (i > 0 && (i == n || !is_alnum((unsigned char)s[i])))
        return ns_to_ms(ns);
    decnum d;
    size_t a = parse_decnum(s, n, &d);
    if (a == 0)
        return -1;
    while (a < n && (s[a] == ' ' || s[a] == '\t'))
        a++;
    int64_t unit_ns;
    size_t u = match_unit(s + a, n - a, word_units,
                          sizeof word_units / sizeof word_units[0], &unit_ns);
    if (u == 0 || (a + u < n && is_alnum((unsigned char)s[a + u])))
        return -1;
    return ns_to_ms(decnum_ns(&d, unit_ns));
}

int64_t ah__body_hint_parse(const char *text, size_t len)
{
    static const char *const phrases[] = {"try again in", "retry after", "retry in"};
    if (!text)
        return -1;
    for (size_t i = 0; i < len; i++) {
        for (size_t k = 0; k < sizeof phrases / sizeof phrases[0]; k++) {
            size_t pl = strlen(phrases[k]);
            if (pl > len - i || !eq_ci(text + i, pl, phrases[k]))
                continue;
            if (i > 0 && is_alpha((unsigned char)text[i - 1]))
                continue;
            size_t j = i + pl;
            if (j >= len || (text[j] != ' ' && text[j] != '\t'))
                continue;
            while (j < len && (text[j] == ' ' || text[j] == '\t'))
                j++;
            int64_t ms = parse_text_duration(text + j, len - j);
            if (ms >= 0)
                return ms;
        }
    }
    return -1;
}

int64_t ah__retry_info_ms(const cJSON *root)
{
    if (cJSON_IsArray(root))
        root = cJSON_GetArrayItem(root, 0);
    const cJSON *err = cJSON_GetObjectItemCaseSensitive(root, "error");
    const cJSON *d;
    cJSON_ArrayForEach(d, cJSON_GetObjectItemCaseSensitive(err, "details"))
    {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(d, "@type");
        const cJSON *delay = cJSON_GetObjectItemCaseSensitive(d, "retryDelay");
        size_t tl = cJSON_IsString(type) ? strlen(type->valuestring) : 0;
        if (tl < 20 || strcmp(type->valuestring + tl - 20, "google.rpc.RetryInfo") != 0 ||
            !cJSON_IsString(delay))
            continue;
        const char *s = delay->valuestring;
        size_t n = strlen(s);
        int64_t ns;
        trim(&s, &n);
        if (n && parse_go_duration(s, n, &ns) == n)
            return ns_to_ms(ns);
    }
    return -1;
}

/* ---- calendar ---------------------------------------------------------------------- */

/* Days since 1970-01-01 of a proleptic Gregorian date (the classic era-based formula:
 * 400-year eras of 146097 days, years starting in March so Feb 29 is the last day). */
static int64_t days_from_civil(int64_t y, int m, int d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

static int is_leap(int64_t y)
{
    return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

static int days_in_month(int64_t y, int m)
{
    static const int dim[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    return m == 2 && is_leap(y) ? 29 : dim[m - 1];
}

/* The Gregorian year containing a Unix-epoch millisecond. */
static int64_t year_of_ms(int64_t ms)
{
    int64_t days = ms / MS_PER_DAY - (ms % MS_PER_DAY < 0);
    int64_t y = 1970 + days * 400 / 146097; /* within a year of the answer */
    while (days_from_civil(y + 1, 1, 1) <= days)
        y++;
    while (days_from_civil(y, 1, 1) > days)
        y--;
    return y;
}

/* t - now, saturating, floored at 0 (a past date means "now"), clamped to the cap. */
static int64_t until(int64_t t_ms, int64_t now_ms)
{
    if (now_ms >= t_ms)
        return 0;
    if (now_ms < 0 && t_ms > INT64_MAX + now_ms)
        return AH_RETRY_AFTER_MAX_MS;
    int64_t d = t_ms - now_ms;
    return d > AH_RETRY_AFTER_MAX_MS ? AH_RETRY_AFTER_MAX_MS : d;
}

/* ---- a cursor for the date grammars ------------------------------------------------ */

typedef struct cur {
    const char *p, *end;
} cur;

static int cur_char(cur *c, char ch)
{
    if (c->p < c->end && *c->p == ch) {
        c->p++;
        return 1;
    }
    return 0;
}

static int cur_spaces(cur *c) /* one or more SP */
{
    const char *s = c->p;
    while (c->p < c->end && *c->p == ' ')
        c->p++;
    return c->p > s;
}

/* min..max digits; the value. */
static int cur_digits(cur *c, int min, int max, int *out)
{
    int n = 0, v = 0;
    while (n < max && c->p < c->end && is_digit((unsigned char)*c->p)) {
        v = v * 10 + (*c->p - '0');
        c->p++;
        n++;
    }
    if (n < min || (c->p < c->end && is_digit((unsigned char)*c->p)))
        return 0;
    *out = v;
    return 1;
}

/* A run of letters matched case-insensitively against a table; its index or -1. */
static int cur_word(cur *c, const char *const *table, int count)
{
    const char *s = c->p;
    while (c->p < c->end && is_alpha((unsigned char)*c->p))
        c->p++;
    for (int k = 0; k < count; k++)
        if (eq_ci(s, (size_t)(c->p - s), table[k]))
            return k;
    return -1;
}

static const char *const months[12] = {"jan", "feb", "mar", "apr", "may", "jun",
                                       "jul", "aug", "sep", "oct", "nov", "dec"};
static const char *const day_names[14] = {
    "mon",    "tue",     "wed",       "thu",      "fri",    "sat",      "sun",
    "monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"};

static int cur_time(cur *c, int *hh, int *mm, int *ss)
{
    return cur_digits(c, 2, 2, hh) && cur_char(c, ':') && cur_digits(c, 2, 2, mm) &&
           cur_char(c, ':') && cur_digits(c, 2, 2, ss) && *hh <= 23 && *mm <= 59 &&
           *ss <= 60;
}

static int cur_gmt(cur *c)
{
    static const char *const gmt[1] = {"gmt"};
    return cur_word(c, gmt, 1) == 0;
}

/* Validate and convert to Unix ms; 0 when the date does not exist. Second 60 (a leap
 * second) is accepted and counts as the next second. */
static int civil_ms(int64_t y, int mon, int d, int hh, int mm, int ss, int64_t *out)
{
    if (mon < 1 || mon > 12 || d < 1 || d > days_in_month(y, mon))
        return 0;
    *out = days_from_civil(y, mon, d) * MS_PER_DAY +
           ((int64_t)hh * 3600 + mm * 60 + ss) * 1000;
    return 1;
}

/* HTTP-date (RFC 9110 §5.6.7) to Unix ms in *out; 0 when malformed. */
static int parse_http_date(const char *s, size_t n, int64_t now_wall_ms, int64_t *out)
{
    cur c = {s, s + n};
    int d = 0, y = 0, hh = 0, mm = 0, ss = 0, mon;
    int64_t year;
    if (cur_word(&c, day_names, 14) < 0)
        return 0;
    if (cur_char(&c, ',')) {
        /* IMF-fixdate "Sun, 06 Nov 1994 08:49:37 GMT" or
         * rfc850 "Sunday, 06-Nov-94 08:49:37 GMT" */
        if (!cur_spaces(&c) || !cur_digits(&c, 1, 2, &d))
            return 0;
        if (cur_char(&c, '-')) {
            if ((mon = cur_word(&c, months, 12)) < 0 || !cur_char(&c, '-'))
                return 0;
            const char *ys = c.p;
            if (!cur_digits(&c, 2, 4, &y) || (c.p - ys != 2 && c.p - ys != 4))
                return 0;
            year = y;
            if (c.p - ys == 2) {
                /* RFC 9110: a two-digit year more than 50 years in the future is the
                 * most recent past year with those digits. */
                int64_t now_y = year_of_ms(now_wall_ms);
                year = now_y - now_y % 100 + y;
                if (year > now_y + 50)
                    year -= 100;
            }
        } else {
            if (!cur_spaces(&c) || (mon = cur_word(&c, months, 12)) < 0 ||
                !cur_spaces(&c) || !cur_digits(&c, 4, 4, &y))
                return 0;
            year = y;
        }
        if (!cur_spaces(&c) || !cur_time(&c, &hh, &mm, &ss) || !cur_spaces(&c) ||
            !cur_gmt(&c))
            return 0;
    } else {
        /* asctime "Sun Nov  6 08:49:37 1994" */
        if (!cur_spaces(&c) || (mon = cur_word(&c, months, 12)) < 0 || !cur_spaces(&c) ||
            !cur_digits(&c, 1, 2, &d) || !cur_spaces(&c) ||
            !cur_time(&c, &hh, &mm, &ss) || !cur_spaces(&c) || !cur_digits(&c, 4, 4, &y))
            return 0;
        year = y;
    }
    if (c.p != c.end)
        return 0;
    return civil_ms(year, mon + 1, d, hh, mm, ss, out);
}

/* RFC 3339 date-time "2025-10-25T12:00:00Z", "...:00.123+02:00" (T or t or one space;
 * Z or z or an offset) to Unix ms in *out (fraction rounded up); 0 when malformed. */
static int parse_rfc3339(const char *s, size_t n, int64_t *out)
{
    cur c;
    int y, mon, d, hh, mm, ss, oh = 0, om = 0, sign = 0;
    trim(&s, &n);
    c.p = s;
    c.end = s + n;
    if (!cur_digits(&c, 4, 4, &y) || !cur_char(&c, '-') || !cur_digits(&c, 2, 2, &mon) ||
        !cur_char(&c, '-') || !cur_digits(&c, 2, 2, &d))
        return 0;
    if (!cur_char(&c, 'T') && !cur_char(&c, 't') && !cur_char(&c, ' '))
        return 0;
    if (!cur_time(&c, &hh, &mm, &ss))
        return 0;
    int64_t frac_ns = 0;
    if (cur_char(&c, '.')) {
        decnum dn = {0};
        dn.frac = c.p;
        while (c.p < c.end && is_digit((unsigned char)*c.p)) {
            c.p++;
            dn.frac_len++;
        }
        if (dn.frac_len == 0)
            return 0;
        frac_ns = decnum_ns(&dn, NS_PER_S);
    }
    if (cur_char(&c, 'Z') || cur_char(&c, 'z')) {
        sign = 0;
    } else if (cur_char(&c, '+')) {
        sign = 1;
    } else if (cur_char(&c, '-')) {
        sign = -1;
    } else {
        return 0;
    }
    if (sign != 0 && (!cur_digits(&c, 2, 2, &oh) || !cur_char(&c, ':') ||
                      !cur_digits(&c, 2, 2, &om) || oh > 23 || om > 59))
        return 0;
    if (c.p != c.end)
        return 0;
    int64_t t;
    if (!civil_ms(y, mon, d, hh, mm, ss, &t))
        return 0;
    /* local = UTC + offset, so UTC = local - offset */
    *out = t - sign * ((int64_t)oh * 3600 + om * 60) * 1000 + ns_to_ms(frac_ns);
    return 1;
}

/* ---- the server's clock ------------------------------------------------------------ */

/* How far the local clock may be from a response's Date (which has whole seconds and
 * was stamped a moment before the head arrived) and still be trusted for an instant. */
enum { CLOCK_SLACK_MS = 2000 };

/* The "now" an instant in these headers (an HTTP-date Retry-After, an Anthropic reset)
 * is measured from: the local wall clock, unless the response's Date says it is off by
 * more than the slack; then the server's own time. A host whose clock is a day behind
 * would otherwise read a reset 60 s ahead as a day and 60 s. */
static int64_t server_now(const ah_header *h, size_t n, int64_t local_ms)
{
    for (size_t i = 0; i < n; i++) {
        if (!h[i].name || !h[i].value || !eq_ci(h[i].name, strlen(h[i].name), "date"))
            continue;
        const char *v = h[i].value;
        size_t len = strlen(v);
        int64_t date;
        trim(&v, &len);
        if (!parse_http_date(v, len, local_ms, &date))
            return local_ms;
        if (local_ms < date - CLOCK_SLACK_MS || local_ms > date + 1000 + CLOCK_SLACK_MS)
            return date;
        return local_ms;
    }
    return local_ms;
}

/* ---- Retry-After ------------------------------------------------------------------- */

/* Returns ms or -1, and whether the value was a date. */
static int64_t retry_after(const char *value, size_t n, int64_t now_wall_ms, int *is_date)
{
    *is_date = 0;
    trim(&value, &n);
    if (n == 0)
        return -1;
    if (is_digit((unsigned char)value[0]))
        return parse_scaled(value, n, NS_PER_S);
    int64_t t;
    if (!parse_http_date(value, n, now_wall_ms, &t))
        return -1;
    *is_date = 1;
    return until(t, now_wall_ms);
}

int64_t ah_retry_after_parse(const char *value, int64_t now_wall_ms)
{
    int is_date;
    if (!value)
        return -1;
    return retry_after(value, strlen(value), now_wall_ms, &is_date);
}

/* ---- headers ----------------------------------------------------------------------- */

enum reset_format { RESET_RFC3339, RESET_DURATION };

static const struct reset_header {
    const char *reset;
    const char *remaining;
    enum reset_format format;
} reset_headers[] = {
    {"anthropic-ratelimit-requests-reset", "anthropic-ratelimit-requests-remaining",
     RESET_RFC3339},
    {"anthropic-ratelimit-tokens-reset", "anthropic-ratelimit-tokens-remaining",
     RESET_RFC3339},
    {"anthropic-ratelimit-input-tokens-reset",
     "anthropic-ratelimit-input-tokens-remaining", RESET_RFC3339},
    {"anthropic-ratelimit-output-tokens-reset",
     "anthropic-ratelimit-output-tokens-remaining", RESET_RFC3339},
    {"x-ratelimit-reset-requests", "x-ratelimit-remaining-requests", RESET_DURATION},
    {"x-ratelimit-reset-tokens", "x-ratelimit-remaining-tokens", RESET_DURATION},
};
enum { N_RESET = sizeof reset_headers / sizeof reset_headers[0] };

static int name_is(const ah_header *h, const char *lit)
{
    return eq_ci(h->name, strlen(h->name), lit);
}

/* A *-remaining value: 1 = has capacity, 0 = exhausted, -1 = unknown. */
static int remaining_state(const char *v)
{
    decnum d;
    size_t n = strlen(v);
    trim(&v, &n);
    if (n == 0 || parse_decnum(v, n, &d) != n)
        return -1;
    return d.ip > 0 || d.big || d.frac_len > 0;
}

void ah__ratelimit_exhausted(const ah_header *h, size_t n, int64_t now_wall_ms,
                             int64_t *req_hold_ms, int64_t *tok_hold_ms)
{
    *req_hold_ms = *tok_hold_ms = -1;
    now_wall_ms = server_now(h, n, now_wall_ms);
    for (size_t k = 0; k < N_RESET; k++) {
        int64_t reset = -1;
        int rem = -1;
        for (size_t i = 0; i < n; i++) {
            const char *v = h[i].value;
            if (!h[i].name || !v)
                continue;
            if (reset < 0 && name_is(&h[i], reset_headers[k].reset)) {
                if (reset_headers[k].format == RESET_DURATION) {
                    reset = parse_reset_duration(v, strlen(v));
                } else {
                    int64_t t;
                    if (parse_rfc3339(v, strlen(v), &t))
                        reset = until(t, now_wall_ms);
                }
            } else if (rem < 0 && name_is(&h[i], reset_headers[k].remaining)) {
                rem = remaining_state(v);
            }
        }
        if (rem != 0 || reset < 0)
            continue;
        /* requests: the Anthropic and OpenAI request limits; the rest count tokens */
        int64_t *slot = strstr(reset_headers[k].reset, "requests") ? req_hold_ms : tok_hold_ms;
        if (reset > *slot)
            *slot = reset;
    }
}

void ah_error_apply_headers(ah_error *e, const ah_header *h, size_t n,
                            int64_t now_wall_ms)
{
    int64_t ms_hint = -1, ra_hint = -1;
    int ra_is_date = 0;
    int64_t reset_ms[N_RESET];
    int remaining[N_RESET];
    if (!e || (!h && n > 0))
        return;
    now_wall_ms = server_now(h, n, now_wall_ms);
    for (size_t k = 0; k < N_RESET; k++) {
        reset_ms[k] = -1;
        remaining[k] = -1;
    }
    for (size_t i = 0; i < n; i++) {
        const char *v = h[i].value;
        if (!h[i].name || !v)
            continue;
        if (name_is(&h[i], "retry-after-ms")) {
            if (ms_hint < 0)
                ms_hint = parse_scaled(v, strlen(v), NS_PER_MS);
        } else if (name_is(&h[i], "retry-after")) {
            if (ra_hint < 0)
                ra_hint = retry_after(v, strlen(v), now_wall_ms, &ra_is_date);
        } else if (name_is(&h[i], "x-should-retry")) {
            size_t len = strlen(v);
            trim(&v, &len);
            if (eq_ci(v, len, "true"))
                e->should_retry = 1;
            else if (eq_ci(v, len, "false"))
                e->should_retry = 0;
        } else {
            for (size_t k = 0; k < N_RESET; k++) {
                if (reset_ms[k] < 0 && name_is(&h[i], reset_headers[k].reset)) {
                    if (reset_headers[k].format == RESET_DURATION) {
                        reset_ms[k] = parse_reset_duration(v, strlen(v));
                    } else {
                        int64_t t;
                        if (parse_rfc3339(v, strlen(v), &t))
                            reset_ms[k] = until(t, now_wall_ms);
                    }
                } else if (remaining[k] < 0 &&
                           name_is(&h[i], reset_headers[k].remaining)) {
                    remaining[k] = remaining_state(v);
                }
            }
        }
    }

    if (ms_hint >= 0) {
        e->retry_after_ms = ms_hint;
        e->retry_after_source = AH_HINT_RETRY_AFTER_MS;
    } else if (ra_hint >= 0) {
        e->retry_after_ms = ra_hint;
        e->retry_after_source =
            ra_is_date ? AH_HINT_RETRY_AFTER_DATE : AH_HINT_RETRY_AFTER_SECONDS;
    } else if (e->status == 429) {
        /* Latest reset among the limits not known to have capacity; if every limit says
         * it has capacity, the blocking one is unknown: latest of all. */
        int64_t blocking = -1, any = -1;
        for (size_t k = 0; k < N_RESET; k++) {
            if (reset_ms[k] < 0)
                continue;
            if (reset_ms[k] > any)
                any = reset_ms[k];
            if (remaining[k] != 1 && reset_ms[k] > blocking)
                blocking = reset_ms[k];
        }
        int64_t best = blocking >= 0 ? blocking : any;
        if (best >= 0) {
            e->retry_after_ms = best;
            e->retry_after_source = AH_HINT_RATELIMIT_RESET;
        }
    }
}
