#!/usr/bin/env python3
"""tests/bench/pace_proxy.py UPSTREAM_URL BYTES_PER_SECOND - a TCP proxy on 127.0.0.1
that passes requests to UPSTREAM_URL (http://127.0.0.1:PORT) at once and the answers back
at BYTES_PER_SECOND per connection, in 10 ms slices: a stream from the mock (which sends
a whole answer at once) then arrives at the pace of a model generating it. A cut or a
close upstream is passed on once the bytes before it are delivered. Prints its URL on the
first line; serves until killed."""
import asyncio
import sys
import urllib.parse

TICK = 0.01


async def pump_up(reader, writer):
    try:
        while True:
            data = await reader.read(65536)
            if not data:
                break
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        try:
            writer.write_eof()
        except (OSError, RuntimeError):
            pass


async def pump_down(reader, writer, rate):
    per_tick = max(1, int(rate * TICK))
    loop = asyncio.get_running_loop()
    try:
        while True:
            data = await reader.read(65536)
            if not data:
                break
            start = loop.time()
            for i in range(0, len(data), per_tick):
                writer.write(data[i:i + per_tick])
                await writer.drain()
                start += TICK
                delay = start - loop.time()
                if delay > 0:
                    await asyncio.sleep(delay)
    except (ConnectionError, OSError):
        pass
    finally:
        writer.close()


async def main():
    up = urllib.parse.urlparse(sys.argv[1])
    rate = float(sys.argv[2])

    async def handle(creader, cwriter):
        try:
            ureader, uwriter = await asyncio.open_connection(up.hostname, up.port)
        except OSError:
            cwriter.close()
            return
        await asyncio.gather(pump_up(creader, uwriter), pump_down(ureader, cwriter, rate))
        uwriter.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    print("http://127.0.0.1:%d" % port, flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        pass
