/* error_internal.h - helpers shared by error.c and error_hints.c, never installed. */
#ifndef AH_ERROR_INTERNAL_H
#define AH_ERROR_INTERNAL_H

#include "agenthost/error.h"

#include <stddef.h>
#include <stdint.h>

/* A retry hint in free text ("Please try again in 17.2s.", "retry after 20 seconds"):
 * milliseconds (rounded up, clamped to AH_RETRY_AFTER_MAX_MS) or -1 when the text holds
 * none. text need not be NUL-terminated; only len bytes are read. */
int64_t ah__body_hint_parse(const char *text, size_t len);

/* An error kept out of its owner's struct (a call's, a run's): most owners end without
 * one, and 664 bytes inline kept them past glibc's 1 KiB per-thread cache. e is NULL
 * until the first need; lost: an error was not kept for want of memory. A zeroed slot
 * holds none. */
typedef struct ah__error_slot {
    ah_error *e;
    int lost;
} ah__error_slot;

/* The slot's error: its own, else "out of memory" when one was lost, else an empty one
 * (AH_EK_NONE). Never NULL. */
const ah_error *ah__eslot_get(const ah__error_slot *s);
/* The slot's error to write, allocated and cleared at the first need; NULL when out of
 * memory (then get() answers out of memory). */
ah_error *ah__eslot_own(ah__error_slot *s);
/* The slot's error becomes a copy of *e (e may be the slot's own). */
void ah__eslot_set(ah__error_slot *s, const ah_error *e);
/* Back to none, the error freed. */
void ah__eslot_free(ah__error_slot *s);

#endif
