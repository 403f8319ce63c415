/* overlap.h - drop a continuation's restatement of text already committed (internal).
 *
 * Asked to continue a cut reply, real models often begin by repeating what they already
 * said: the whole committed text, or its last sentence or line. An ah__overlap watches
 * the first text block of a continuation, byte by byte, against the committed text C:
 *
 *   - a CANDIDATE is C itself or a tail of C that starts at a sentence boundary (after
 *     '.', '!' or '?' followed by whitespace, after a newline, after a CJK 。！？) and
 *     holds at least AH__OVERLAP_MIN_TAIL bytes;
 *   - the continuation MATCHES a candidate when it begins with it, compared ignoring
 *     whitespace differences: leading and trailing whitespace do not count and any run of
 *     whitespace matches any other run (never the absence of whitespace); every other
 *     byte must be equal, so a multi-byte UTF-8 character matches only whole;
 *   - a match that ends in an ASCII letter, digit or '_' counts only when the next byte
 *     of the continuation is not one of those (or the block ends): "I said 4" is not a
 *     restatement at the start of "I said 42";
 *   - while some candidate may still match, the bytes are HELD (not emitted); at most
 *     len(C) + AH__OVERLAP_WS_SLACK bytes (the slack is for extra whitespace such as a
 *     leading space or CRLF line ends). The longest candidate that matched is dropped;
 *     when none did (a false start) the held bytes flow out unchanged, in order, before
 *     anything that follows them.
 *
 * No I/O, no clock, no allocation after ah__overlap_new except the output buffer growing
 * to the size of one feed. Not thread-safe; one block per instance.
 */
#ifndef AH_OVERLAP_H
#define AH_OVERLAP_H

#include "agenthost/status.h"

#include <stddef.h>

enum { AH__OVERLAP_MIN_TAIL = 8, AH__OVERLAP_WS_SLACK = 16 };

typedef struct ah__overlap ah__overlap;

/* A trimmer for a continuation of `committed` (copied; may be empty, then every byte
 * flows through). NULL on allocation failure. */
ah__overlap *ah__overlap_new(const char *committed, size_t len);
/* The same for text cut where the stream stopped (the proxy forwards text up to any
 * byte): a match of the whole committed text counts whatever byte follows it, so a
 * restatement that completes the cut word ("Retri" + "Retries are") is dropped up to
 * where the cut was. */
ah__overlap *ah__overlap_new_cut(const char *committed, size_t len);
void ah__overlap_free(ah__overlap *o);

/* The next bytes of the block (any split, even inside a UTF-8 sequence). *out / *out_len
 * receive what to emit now, possibly nothing; borrowed until the next call. */
ah_status ah__overlap_feed(ah__overlap *o, const char *in, size_t n, const char **out,
                           size_t *out_len);
/* The block ended (closed, or the response completed): decide on what is held and
 * release it. Idempotent; feeding after it passes bytes through. */
ah_status ah__overlap_finish(ah__overlap *o, const char **out, size_t *out_len);

int ah__overlap_decided(const ah__overlap *o);
/* Bytes dropped from the block's start (0 until decided, and for a false start). */
size_t ah__overlap_trimmed(const ah__overlap *o);
/* Bytes held right now (0 once decided), and the most ever held at once. */
size_t ah__overlap_held(const ah__overlap *o);
size_t ah__overlap_max_held(const ah__overlap *o);

#endif
