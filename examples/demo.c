/* demo.c - placeholder for the README's main job until the Lua host and the mock provider
 * land (then `./run demo` runs examples/demo.lua against the built-in mock instead). */
#include "agenthost.h"

#include <stdio.h>

int main(void)
{
    printf("agenthost %s: the demo agent arrives with the mock provider and the Lua host.\n",
           ah_version());
    return 0;
}
