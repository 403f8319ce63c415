/* agenthost/export.h - AH_EXPORT, the mark of a function the shared library exports.
 *
 * The library is compiled with -fvisibility=hidden: a function is visible outside
 * libagenthost.so only when its declaration in a public header carries AH_EXPORT (as
 * libuv's UV_EXTERN). The version script (cmake/libagenthost.map) is a second guard: it
 * keeps the library's internal ah__ functions local even if one were marked. */
#ifndef AGENTHOST_EXPORT_H
#define AGENTHOST_EXPORT_H

#if defined(__GNUC__) || defined(__clang__)
#define AH_EXPORT __attribute__((visibility("default")))
#else
#define AH_EXPORT
#endif

#endif
