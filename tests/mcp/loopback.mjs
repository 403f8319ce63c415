// loopback.mjs - preloaded (node --import) into MCP servers the tests start over HTTP:
// a server that listens on every interface (server-everything's streamableHttp does)
// listens on 127.0.0.1 instead. The port comes from PORT as the server reads it.
import net from "node:net";
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  if (typeof args[0] === "number" || (typeof args[0] === "string" && /^\d+$/.test(args[0]))) {
    const port = Number(args[0]);
    const cb = args.find((a) => typeof a === "function");
    return listen.call(this, port, "127.0.0.1", cb);
  }
  if (args[0] && typeof args[0] === "object" && !args[0].host && !args[0].path)
    args[0] = { ...args[0], host: "127.0.0.1" };
  return listen.apply(this, args);
};
