/* loop_curl.h - the private seam between the loop (loop.c) and the libcurl transport
 * (transport_curl.c): the loop owns the CURLM handle and routes each finished transfer
 * back to the transport through the link stored as the easy handle's CURLOPT_PRIVATE. */
#ifndef AH_LOOP_CURL_H
#define AH_LOOP_CURL_H

#include "agenthost/loop.h"

#include <curl/curl.h>

/* Called on the loop thread once the transfer finished; the easy handle has already been
 * removed from the multi handle, so the callee may clean it up. */
typedef void (*ah__easy_done_fn)(void *ud, CURLcode result);

typedef struct ah__easy_link {
    ah__easy_done_fn done;
    void *ud;
    int shard; /* set by ah__loop_add_easy: the multi handle it is in */
} ah__easy_link;

/* Attach an easy handle (sets its CURLOPT_PRIVATE to link, which must outlive the
 * transfer). Returns AH_OK or AH_ERR_TRANSPORT. */
ah_status ah__loop_add_easy(ah_loop *loop, CURL *easy, ah__easy_link *link);
/* Abandon an unfinished transfer: its link is disarmed at once (no done callback), the
 * handle leaves the multi handle and then release(ud) runs. When called from inside a
 * curl callback (where curl forbids removal), both are deferred to the end of the current
 * curl_multi_perform(); otherwise they happen before this returns. */
void ah__loop_discard_easy(ah_loop *loop, CURL *easy, ah__easy_link *link,
                           void (*release)(void *ud), void *ud);

/* Transfers per CURLM handle (the loop makes more multi handles as more are in flight:
 * libcurl's search for a reusable connection walks every connection of the multi
 * handle to the same host). The setter is for tests (0 = the default); the count says
 * how many multi handles the loop has made. */
enum { AH__SHARD_MAX = 256 };
void ah__loop_set_shard_max(ah_loop *loop, size_t n);
size_t ah__loop_shard_count(const ah_loop *loop);

/* Easy handles are reused from transfer to transfer on a loop (creating one costs ~20 k
 * instructions and several allocations): take() gives a pooled handle or a new one (NULL
 * when out of memory); give() hands back one that is in no multi handle, or cleans it
 * up when AH__EASY_POOL_MAX are already idle. give() resets the handle to libcurl's
 * defaults unless keep is nonzero (1..255): then it keeps its last owner's options, and
 * take() gives keep back in *kept (a new or reset handle: 0), the owner's note of what
 * they are. Only the one transport that owns the handles' options may keep them
 * (transport_curl.c: the options a plain request sets, every one of them set again or
 * the same). made() counts the handles take() ever created (for tests). */
enum { AH__EASY_POOL_MAX = 32 };
CURL *ah__loop_easy_take(ah_loop *loop, int *kept);
void ah__loop_easy_give(ah_loop *loop, CURL *easy, int keep);
size_t ah__loop_easy_made(const ah_loop *loop);

/* The socket of a running transfer's connection, found by its local port among the
 * sockets curl has the loop watch (libcurl does not tell a transfer its socket while it
 * runs), or CURL_SOCKET_BAD. */
curl_socket_t ah__loop_sock_by_port(ah_loop *loop, int port);

#endif
