// talkback (npm) as the benchmark runs it: one server, its tapes in a directory.
//
//   node bench/_talkback.js NODE_MODULES PORT UPSTREAM TAPES MODE
//
// MODE is talkback's record mode: OVERWRITE (record every request),
// NEW (record what no tape matches) or DISABLED (replay; a miss is a 404).
// Prints its URL once it listens; stops on SIGTERM (talkback's own handler).
"use strict";

const [modules, port, upstream, tapes, mode] = process.argv.slice(2);
const talkback = require(require.resolve("talkback", { paths: [modules] }));

const server = talkback({
  host: upstream,
  port: Number(port),
  path: tapes,
  record: mode,
  fallbackMode: "NOT_FOUND",
  silent: true,
  summary: false,
});
server.start(() => console.log(`http://127.0.0.1:${port}`));
