// reel view: the page's script (inlined into the HTML by reel_bindings.view).
// No network, no library: the list is in a <script type="application/json">
// element, parsed at load; the details follow this script in compressed
// blocks (100 interactions each: one JSON line per interaction, zlib, base64),
// a block inflated with the browser's DecompressionStream when one of its
// details is first needed (all of them for a search), and each detail parsed
// only when it is opened.  The list is drawn at once; what needs a detail
// waits for the file to be read and its block inflated (`need`).
"use strict";
(function () {
  const PAGE_SIZE = 100;
  const FRAMES_SHOWN = 500;
  const REDACTED = /\[REDACTED:[^\]]*\]/g;
  const data = JSON.parse(document.getElementById("reel-data").textContent);
  const rows = data.rows;
  const GROUP = 100;
  const BLOCKS = Math.ceil(rows.length / GROUP);
  const details = new Map();
  // Each block inflated so far: the JSON lines of its interactions' details.
  const loaded = new Map();
  const inflating = new Map();
  // The whole file is read (the blocks follow this script in it).
  const docRead = new Promise((resolve) => {
    if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", resolve, { once: true });
    else resolve();
  });
  const state = { page: 0, shown: rows.slice(), open: null };

  // -- small helpers -----------------------------------------------------------
  function esc(text) {
    return String(text).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
  }
  function escMarked(text) {
    // escape, with redaction placeholders highlighted
    let out = "";
    let last = 0;
    const s = String(text);
    s.replace(REDACTED, (m, at) => {
      out += esc(s.slice(last, at)) + '<mark class="redacted">' + esc(m) + "</mark>";
      last = at + m.length;
      return m;
    });
    return out + esc(s.slice(last));
  }
  function el(tag, attrs, html) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    if (html !== undefined) e.innerHTML = html;
    return e;
  }
  function ms(v) {
    if (v === null || v === undefined) return "-";
    return v < 10 ? v.toFixed(1) : Math.round(v).toLocaleString("en");
  }
  function num(v) { return v === null || v === undefined ? "-" : String(v); }
  function usd(v) {
    if (v === null || v === undefined) return "?";
    if (v >= 1) return "$" + v.toFixed(4);
    let t = v.toFixed(8).replace(/0+$/, "").replace(/\.$/, "");
    if (t === "0" && v !== 0) t = "0.00000001";
    return "$" + t;
  }
  function detail(i) {
    if (!details.has(i)) details.set(i, JSON.parse(lineOf(i)));
    return details.get(i);
  }
  function lineOf(i) { return loaded.get(Math.floor(i / GROUP))[i % GROUP]; }
  async function inflate(g) {
    const bin = atob(document.getElementById("reel-z-" + g).textContent);
    const bytes = new Uint8Array(bin.length);
    for (let k = 0; k < bin.length; k++) bytes[k] = bin.charCodeAt(k);
    const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("deflate"));
    loaded.set(g, (await new Response(stream).text()).split("\n"));
  }
  function block(g) {
    if (!inflating.has(g)) inflating.set(g, inflate(g));
    return inflating.get(g);
  }
  function failed(e) {
    const note = "This browser could not read the page's details (" + e + "): open it in a current Chromium, Firefox or Safari.";
    if (!document.getElementById("error")) document.querySelector("header").insertAdjacentHTML("beforeend", '<div class="warn" id="error">' + esc(note) + "</div>");
  }
  // Run fn once the details of the interactions `indices` can be read (at
  // once when they can already): their blocks are inflated when first needed.
  function need(indices, fn) {
    const groups = [...new Set(indices.map((i) => Math.floor(i / GROUP)))];
    if (groups.every((g) => loaded.has(g))) { fn(); return; }
    docRead.then(() => Promise.all(groups.map(block))).then(fn, failed);
  }
  function allIndices() { return rows.map((r) => r.i); }
  function haveAll() { return loaded.size === BLOCKS; }
  function endpoint(r) { return r.method + " " + r.path; }

  // -- JSON, pretty and marked ------------------------------------------------
  function pathKey(path, key) {
    if (typeof key === "number") return path + "[" + key + "]";
    if (/^[^.\[\]]+$/.test(key)) return path ? path + "." + key : key;
    return path + "[" + JSON.stringify(key) + "]";
  }
  // The value as indented JSON (HTML), strings with redaction markers
  // highlighted, values at the paths in `marks` outlined.
  function jsonHtml(value, marks) {
    const out = [];
    function walk(v, indent, path) {
      const marked = marks && marks.has(path);
      if (marked) out.push('<span class="marked" data-path="' + esc(path) + '">');
      if (v === null) out.push('<span class="j-z">null</span>');
      else if (typeof v === "string") out.push('<span class="j-s">' + escMarked(JSON.stringify(v)) + "</span>");
      else if (typeof v === "number") out.push('<span class="j-n">' + esc(JSON.stringify(v)) + "</span>");
      else if (typeof v === "boolean") out.push('<span class="j-b">' + v + "</span>");
      else if (Array.isArray(v)) {
        if (!v.length) out.push("[]");
        else {
          out.push("[\n");
          v.forEach((item, n) => {
            out.push(indent + "  ");
            walk(item, indent + "  ", pathKey(path, n));
            out.push(n < v.length - 1 ? ",\n" : "\n");
          });
          out.push(indent + "]");
        }
      } else {
        const keys = Object.keys(v);
        if (!keys.length) out.push("{}");
        else {
          out.push("{\n");
          keys.forEach((k, n) => {
            out.push(indent + '  <span class="j-k">' + escMarked(JSON.stringify(k)) + "</span>: ");
            walk(v[k], indent + "  ", pathKey(path, k));
            out.push(n < keys.length - 1 ? ",\n" : "\n");
          });
          out.push(indent + "}");
        }
      }
      if (marked) out.push("</span>");
    }
    walk(value, "", "");
    return out.join("");
  }
  function bodyHtml(body, marks) {
    if (body.empty) return '<pre class="body">(empty)</pre>';
    if ("json" in body) return '<pre class="body json">' + jsonHtml(body.json, marks) + "</pre>";
    if ("text" in body) return '<pre class="body text">' + escMarked(body.text) + "</pre>";
    return '<pre class="body binary">(' + body.binary + " bytes of binary data; the first " +
      "bytes as base64)\n" + esc(body.base64) + "</pre>";
  }

  // -- the timeline plot ---------------------------------------------------------
  // Frames against time from the request sent (0) through the response head
  // (TTFB) to the end or the cut; y is the bytes received so far.  One
  // circle.frame per frame.  `scaleMs` shares one time axis between plots.
  function timelineSvg(d, r, scaleMs) {
    const resp = d.response;
    const frames = resp.frames || [];
    const ttfb = r.ttfb_ms || 0;
    const last = frames.length ? frames[frames.length - 1][0] : 0;
    const stop = resp.cut ? resp.cut.at_ms : resp.end_ms;
    const span = Math.max(ttfb + Math.max(last, stop || 0), 1);
    const total = Math.max(scaleMs || 0, span);
    const W = 860, H = 190, L = 56, R = 16, T = 26, B = 30;
    const x = (t) => L + (t / total) * (W - L - R);
    const bytesAll = frames.reduce((s, f) => s + f[1], 0) || 1;
    const y = (b) => H - B - (b / bytesAll) * (H - T - B);
    const parts = [];
    parts.push('<svg class="timeline" viewBox="0 0 ' + W + " " + H + '" role="img" aria-label="stream timeline" data-frames="' + frames.length + '">');
    // grid and axis
    const step = niceStep(total / 6);
    for (let t = 0; t <= total + 1e-9; t += step) {
      parts.push('<line class="grid" x1="' + x(t) + '" x2="' + x(t) + '" y1="' + T + '" y2="' + (H - B) + '"/>');
      parts.push('<text x="' + x(t) + '" y="' + (H - B + 14) + '" text-anchor="middle">' + fmtAxis(t) + "</text>");
    }
    parts.push('<line class="axis" x1="' + L + '" x2="' + (W - R) + '" y1="' + (H - B) + '" y2="' + (H - B) + '"/>');
    parts.push('<line class="axis" x1="' + L + '" x2="' + L + '" y1="' + T + '" y2="' + (H - B) + '"/>');
    parts.push('<text x="' + (L - 4) + '" y="' + (T + 4) + '" text-anchor="end">' + bytesAll + " B</text>");
    parts.push('<text x="' + (L - 4) + '" y="' + (H - B) + '" text-anchor="end">0</text>');
    parts.push('<text x="' + (W - R) + '" y="' + (H - 4) + '" text-anchor="end">ms from the request sent</text>');
    // gaps: the long pauses between frames
    const gaps = [];
    for (let n = 1; n < frames.length; n++) gaps.push([frames[n][0] - frames[n - 1][0], n]);
    const sorted = gaps.map((g) => g[0]).sort((a, b) => a - b);
    const median = sorted.length ? sorted[Math.floor(sorted.length / 2)] : 0;
    const long = gaps.filter((g) => g[0] >= 50 && g[0] >= 4 * median).sort((a, b) => b[0] - a[0]).slice(0, 5);
    for (const [gap, n] of long) {
      const x0 = x(ttfb + frames[n - 1][0]), x1 = x(ttfb + frames[n][0]);
      parts.push('<rect class="gap" x="' + x0 + '" y="' + T + '" width="' + Math.max(x1 - x0, 1) + '" height="' + (H - T - B) + '"><title>gap of ' + ms(gap) + " ms before frame " + n + "</title></rect>");
      parts.push('<text x="' + (x0 + x1) / 2 + '" y="' + (T + 10) + '" text-anchor="middle">gap ' + ms(gap) + " ms</text>");
    }
    // TTFB
    if (r.ttfb_ms !== null && r.ttfb_ms !== undefined) {
      parts.push('<line class="ttfb" x1="' + x(ttfb) + '" x2="' + x(ttfb) + '" y1="' + (T - 10) + '" y2="' + (H - B) + '"/>');
      parts.push('<text x="' + (x(ttfb) + 3) + '" y="' + (T - 12) + '">TTFB ' + ms(ttfb) + " ms</text>");
    }
    // the curve and the frames
    let acc = 0;
    let path = "M" + x(ttfb) + " " + y(0);
    const dots = [];
    frames.forEach((f, n) => {
      const t = ttfb + f[0];
      path += " L" + x(t) + " " + y(acc);
      acc += f[1];
      path += " L" + x(t) + " " + y(acc);
      const gap = n ? f[0] - frames[n - 1][0] : f[0];
      const what = f[2] === "delta" ? JSON.stringify(f[4]) : f[4];
      dots.push('<circle class="frame' + (f[2] === "delta" ? "" : " event") + '" cx="' + x(t) + '" cy="' + y(acc) + '" r="2.6" data-n="' + n + '"><title>frame ' + n + " at " + ms(f[0]) + " ms (+" + ms(gap) + " ms), " + f[1] + " bytes: " + esc(String(what).slice(0, 120)) + "</title></circle>");
    });
    parts.push('<path class="curve" d="' + path + '"/>');
    parts.push(dots.join(""));
    // the end or the cut
    if (resp.cut) {
      const cx = x(ttfb + (resp.cut.at_ms || 0));
      parts.push('<line class="cutline" x1="' + cx + '" x2="' + cx + '" y1="' + T + '" y2="' + (H - B) + '"/>');
      parts.push('<text class="cutlabel" x="' + (cx - 3) + '" y="' + (T + 22) + '" text-anchor="end">cut: ' + esc(resp.cut.error) + "</text>");
    } else if (stop !== null && stop !== undefined) {
      const ex = x(ttfb + stop);
      parts.push('<line class="end" x1="' + ex + '" x2="' + ex + '" y1="' + T + '" y2="' + (H - B) + '"/>');
      parts.push('<text x="' + (ex - 3) + '" y="' + (T + 22) + '" text-anchor="end">end</text>');
    }
    parts.push("</svg>");
    return parts.join("");
  }
  // A WebSocket session: the messages against time since the upgrade, the
  // client's in one lane and the server's in the other (one circle.message
  // each, sized by its bytes), and the close.
  function wsTimelineSvg(ws, scaleMs) {
    const msgs = ws.messages;
    const last = msgs.length ? msgs[msgs.length - 1][1] : 0;
    const end = ws.close && ws.close.at_ms !== null ? ws.close.at_ms : last;
    const total = Math.max(scaleMs || 0, end, last, 1);
    const W = 860, H = 150, L = 64, R = 16, T = 22, B = 30;
    const x = (t) => L + (t / total) * (W - L - R);
    const lane = { client: T + 25, server: T + 70 };
    const biggest = Math.max(1, ...msgs.map((m) => m[2]));
    const parts = ['<svg class="timeline ws" viewBox="0 0 ' + W + " " + H + '" role="img" aria-label="WebSocket timeline" data-messages="' + msgs.length + '">'];
    const step = niceStep(total / 6);
    for (let t = 0; t <= total + 1e-9; t += step) {
      parts.push('<line class="grid" x1="' + x(t) + '" x2="' + x(t) + '" y1="' + T + '" y2="' + (H - B) + '"/>');
      parts.push('<text x="' + x(t) + '" y="' + (H - B + 14) + '" text-anchor="middle">' + fmtAxis(t) + "</text>");
    }
    parts.push('<line class="axis" x1="' + L + '" x2="' + (W - R) + '" y1="' + (H - B) + '" y2="' + (H - B) + '"/>');
    parts.push('<text x="' + (W - R) + '" y="' + (H - 4) + '" text-anchor="end">ms from the upgrade</text>');
    for (const who of ["client", "server"]) {
      parts.push('<line class="lane" x1="' + L + '" x2="' + (W - R) + '" y1="' + lane[who] + '" y2="' + lane[who] + '"/>');
      parts.push('<text x="' + (L - 6) + '" y="' + (lane[who] + 4) + '" text-anchor="end">' + who + "</text>");
    }
    msgs.forEach((m, n) => {
      const radius = 2.5 + 3.5 * Math.sqrt(m[2] / biggest);
      const what = "message " + n + " from the " + m[0] + " at " + ms(m[1]) + " ms, " + m[2] + " bytes" + (payloadType(m[3]) ? ": " + payloadType(m[3]) : "");
      parts.push('<circle class="message ' + esc(m[0]) + '" cx="' + x(m[1]) + '" cy="' + (lane[m[0]] || lane.server) + '" r="' + radius.toFixed(1) + '" data-n="' + n + '"><title>' + esc(what) + "</title></circle>");
    });
    if (ws.close) {
      const cx = x(ws.close.at_ms || 0);
      const bad = ws.close.code === null || (ws.close.code !== 1000 && ws.close.code !== 1001);
      parts.push('<line class="' + (bad ? "cutline" : "end") + '" x1="' + cx + '" x2="' + cx + '" y1="' + T + '" y2="' + (H - B) + '"/>');
      parts.push('<text class="' + (bad ? "cutlabel" : "") + '" x="' + (cx - 3) + '" y="' + (T - 6) + '" text-anchor="end">close ' + esc(ws.close.code === null ? "(no code)" : ws.close.code) + " by " + esc(ws.close.by) + "</text>");
    }
    parts.push("</svg>");
    return parts.join("");
  }
  // A message's JSON "type" (OpenAI Realtime) or first key (Gemini Live).
  function payloadType(p) {
    if (!("json" in p) || p.json === null || typeof p.json !== "object" || Array.isArray(p.json)) return "";
    if (typeof p.json.type === "string") return p.json.type;
    const keys = Object.keys(p.json);
    return keys.length ? keys[0] : "";
  }
  function payloadText(p) {
    if ("json" in p) return JSON.stringify(p.json);
    if ("text" in p) return p.text;
    if (p.empty) return "";
    return "(" + p.binary + " bytes of binary data) " + p.base64.slice(0, 80) + (p.base64.length > 80 ? "…" : "");
  }
  function messagesHtml(ws, all) {
    const msgs = ws.messages;
    const upto = all ? msgs.length : Math.min(FRAMES_SHOWN, msgs.length);
    const h = ['<table class="messages mono"><thead><tr><th class="n">#</th><th>from</th><th class="n">offset ms</th><th class="n">gap ms</th><th class="n">bytes</th><th>type</th><th>message</th></tr></thead><tbody>'];
    for (let n = 0; n < upto; n++) {
      const m = msgs[n];
      const gap = n ? m[1] - msgs[n - 1][1] : m[1];
      let text = payloadText(m[3]);
      if (text.length > 2000) text = text.slice(0, 2000) + "… (" + (text.length - 2000) + " more characters)";
      h.push('<tr class="from-' + esc(m[0]) + '"><td class="n">' + n + "</td><td>" + (m[0] === "client" ? "client ↑" : "server ↓") + '</td><td class="n">' + m[1].toFixed(1) + '</td><td class="n">+' + gap.toFixed(1) + '</td><td class="n">' + m[2] + "</td><td>" + esc(payloadType(m[3])) + '</td><td class="t">' + escMarked(text) + "</td></tr>");
    }
    const c = ws.close;
    if (c) h.push('<tr class="close' + (c.code === 1000 || c.code === 1001 ? "" : " cut") + '"><td></td><td>' + esc(c.by) + '</td><td class="n">' + (c.at_ms || 0).toFixed(1) + '</td><td></td><td></td><td>close</td><td class="t">' + esc((c.code === null ? "no close code" : "code " + c.code) + (c.reason ? ": " + c.reason : "")) + "</td></tr>");
    else h.push('<tr><td></td><td></td><td></td><td></td><td></td><td>close</td><td class="t">not recorded</td></tr>');
    h.push("</tbody></table>");
    if (upto < msgs.length) h.push('<button class="link all-messages">show all ' + msgs.length + " messages</button>");
    return h.join("");
  }
  function niceStep(raw) {
    const p = Math.pow(10, Math.floor(Math.log10(Math.max(raw, 1e-6))));
    for (const m of [1, 2, 5, 10]) if (raw <= m * p) return m * p;
    return 10 * p;
  }
  function fmtAxis(t) { return t >= 10000 ? (t / 1000).toFixed(0) + " s" : Math.round(t).toString(); }

  // -- one interaction in full -------------------------------------------------------
  function mediaHtml(items) {
    // the images and sounds the interaction carries (the server found them
    // and made raw PCM a WAV): shown and played from data: URLs
    if (!items || !items.length) return "";
    const h = ['<h3>Media</h3><div class="media">'];
    for (const m of items) {
      let shown = '<span class="more">(too large to show here)</span>';
      if (m.src && m.type.startsWith("image/")) shown = '<img src="' + esc(m.src) + '" alt="' + esc(m.where) + '">';
      else if (m.src) shown = '<audio controls preload="metadata" src="' + esc(m.src) + '"></audio>';
      const caption = esc(m.where) + " · " + esc(m.type) + " · " + m.bytes.toLocaleString("en") + " bytes";
      h.push("<figure>" + shown + '<figcaption class="mono">' + caption + "</figcaption></figure>");
    }
    h.push("</div>");
    return h.join("");
  }

  function detailHtml(i, opts) {
    const r = rows[i];
    const d = detail(i);
    if (d.call) return callDetailHtml(i, d);
    const u = d.usage;
    const req = d.request;
    const resp = d.response;
    const h = [];
    h.push('<div class="detail" data-i="' + i + '">');
    h.push("<h2>" + esc(d.endpoint) + ' <span class="tag">' + esc(d.id) + "</span></h2>");
    const cost = usd(u.cost_usd) + (u.cost_source ? " (" + u.cost_source + ")" : u.cost_unknown ? ": unknown, " + u.cost_unknown : "");
    const facts = [
      ["cassette", data.cassettes[r.cassette].name + ", line " + r.line],
      ["key", d.key],
      ["recorded", r.recorded || "-"],
      ["provider", r.provider],
      ["model", u.model || "?"],
      ["tokens", "in " + num(u.tokens_in) + ", out " + num(u.tokens_out) + ", cached " + num(u.tokens_cached)],
      ["cost", cost],
      ["timing", "TTFB " + ms(u.ttfb_ms) + " ms, first token " + ms(u.ttft_ms) + " ms, total " + ms(u.duration_ms) + " ms"],
    ];
    h.push('<dl class="facts">' + facts.map((f) => "<dt>" + f[0] + "</dt><dd>" + esc(f[1]) + "</dd>").join("") + "</dl>");
    h.push("<h3>Request</h3>");
    let target = req.method + " " + req.path;
    if (req.query.length) target += "?" + req.query.map((q) => encodeURIComponent(q[0]) + "=" + encodeURIComponent(q[1])).join("&");
    h.push('<div class="mono reqline">' + escMarked(target) + "</div>");
    const extra = ["content_type", "encoding", "encoding_error", "grpc_note"].filter((k) => req[k]);
    if (extra.length) h.push('<div class="mono">' + extra.map((k) => esc(k + ": " + req[k])).join("<br>") + "</div>");
    h.push(bodyHtml(req.body, opts && opts.marks));
    h.push("<h3>Response</h3>");
    const ws = resp.websocket;
    const kind = ws ? " (WebSocket session, " + ws.messages.length + " messages)" : resp.stream ? " (" + resp.stream + " stream, " + resp.frames.length + " frames)" : "";
    h.push('<div class="mono"><span class="s' + String(resp.status)[0] + '">' + resp.status + " " + esc(resp.reason) + "</span>" + esc(kind) + "</div>");
    const flag = ["encoding", "encoding_error", "grpc_note"].filter((k) => resp[k]);
    if (flag.length) h.push('<div class="mono">' + flag.map((k) => esc(k + ": " + resp[k])).join("<br>") + "</div>");
    if (resp.headers.length) {
      h.push('<table class="headers mono"><tbody>' + resp.headers.map((p) => "<tr><td>" + esc(p[0]) + "</td><td>" + escMarked(p[1]) + "</td></tr>").join("") + "</tbody></table>");
    }
    if (d.text !== null && d.text !== undefined) {
      h.push("<h3>Answer text</h3><pre class=\"answer\">" + (d.text ? escMarked(d.text) : "(no text)") + "</pre>");
      if (d.text_more) h.push('<p class="more">… and ' + d.text_more.toLocaleString("en") + " more characters: the whole answer is in the body below.</p>");
    }
    if (d.tool_calls.length) {
      h.push("<h3>Tool calls</h3>");
      for (const c of d.tool_calls) {
        let args = c.arguments;
        try { args = jsonHtml(JSON.parse(c.arguments)); } catch (e) { args = escMarked(c.arguments); }
        h.push('<div class="tool"><code class="tool-name">' + esc(c.name) + "</code><pre>" + args + "</pre></div>");
      }
    }
    if (ws) {
      h.push("<h3>Timeline</h3>");
      h.push(wsTimelineSvg(ws, opts && opts.scaleMs));
      h.push("<h3>Messages</h3>");
      h.push(messagesHtml(ws, ws.messages.length <= FRAMES_SHOWN));
    } else if (resp.stream) {
      h.push("<h3>Timeline</h3>");
      h.push(timelineSvg(d, r, opts && opts.scaleMs));
      h.push("<h3>Frames</h3>");
      h.push(framesHtml(resp, resp.frames.length <= FRAMES_SHOWN));
    } else {
      h.push("<h3>Body</h3>");
      h.push(bodyHtml(resp.body));
    }
    h.push(mediaHtml(d.media));
    h.push("</div>");
    return h.join("");
  }
  function framesHtml(resp, all) {
    const frames = resp.frames;
    const upto = all ? frames.length : Math.min(FRAMES_SHOWN, frames.length);
    const h = ['<table class="frames mono"><thead><tr><th class="n">#</th><th class="n">offset ms</th><th class="n">gap ms</th><th class="n">bytes</th><th>event</th><th>text</th></tr></thead><tbody>'];
    for (let n = 0; n < upto; n++) {
      const f = frames[n];
      const gap = n ? f[0] - frames[n - 1][0] : f[0];
      let text = f[2] === "delta" ? JSON.stringify(f[4]) : f[2] === "event" ? "[" + f[4] + "]" : f[4];
      h.push('<tr><td class="n">' + n + '</td><td class="n">' + f[0].toFixed(1) + '</td><td class="n">+' + gap.toFixed(1) + '</td><td class="n">' + f[1] + "</td><td>" + esc(f[3] || "") + '</td><td class="t">' + escMarked(text) + "</td></tr>");
    }
    if (resp.cut) h.push('<tr class="cut"><td></td><td class="n">' + (resp.cut.at_ms || 0).toFixed(1) + '</td><td></td><td></td><td>cut</td><td class="t">' + esc(resp.cut.error + " " + resp.cut.detail) + "</td></tr>");
    else if (resp.end_ms !== null) h.push('<tr><td></td><td class="n">' + resp.end_ms.toFixed(1) + "</td><td></td><td></td><td>end</td><td></td></tr>");
    h.push("</tbody></table>");
    if (upto < frames.length) h.push('<button class="link all-frames">show all ' + frames.length + " frames</button>");
    return h.join("");
  }
  function showDetail(i) {
    state.open = i;
    const box = document.getElementById("detail");
    if (!loaded.has(Math.floor(i / GROUP))) {
      box.innerHTML = '<div class="empty">Reading the page…</div>';
      need([i], () => { if (state.open === i) showDetail(i); });
      return;
    }
    box.innerHTML = detailHtml(i);
    wireFrames(box, i);
    for (const tr of document.querySelectorAll("table.list tbody tr")) tr.classList.toggle("open", Number(tr.dataset.i) === i);
    markBar(i);
    if (location.hash !== "#i=" + i) history.replaceState(null, "", "#i=" + i);
    box.scrollIntoView({ block: "start" });
  }
  function wireFrames(box, i) {
    const moreMessages = box.querySelector("button.all-messages");
    if (moreMessages) moreMessages.addEventListener("click", () => {
      const holder = document.createElement("div");
      holder.innerHTML = messagesHtml(detail(i).response.websocket, true);
      box.querySelector("table.messages").replaceWith(holder.firstChild);
      moreMessages.remove();
    });
    const more = box.querySelector("button.all-frames");
    if (more) more.addEventListener("click", () => {
      const table = box.querySelector("table.frames");
      const holder = document.createElement("div");
      holder.innerHTML = framesHtml(detail(i).response, true);
      table.replaceWith(holder.firstChild);
      more.remove();
    });
  }

  // -- the run's timeline ----------------------------------------------------------
  // Each cassette is one run: every line a bar on one time axis (ms from the
  // run's first start, as `reel export otel` times its spans), in three
  // tracks -- HTTP exchanges (LLM calls among them), WebSocket sessions and
  // tool calls -- a bar in the first lane of its track free when it began
  // (data.timeline: reel_bindings.view._run).  An HTTP bar's lighter first
  // part is its wait for the response head (TTFB).  A bar opens its detail.
  const TRACK_NAMES = { http: "HTTP / LLM", websocket: "WebSocket", call: "tool calls" };
  function runSvg(run) {
    const W = 1100, L = 96, R = 16, T = 6, B = 28, LANE = 14, GAP = 8;
    const total = Math.max(run.span_ms, 1);
    const x = (t) => L + (t / total) * (W - L - R);
    const tracks = ["http", "websocket", "call"].filter((k) => run.lanes[k] > 0);
    const top = {};
    let y = T;
    for (const k of tracks) { top[k] = y; y += run.lanes[k] * LANE + GAP; }
    const H = y + B;
    const parts = ['<svg class="run" viewBox="0 0 ' + W + " " + H + '" role="img" aria-label="run timeline" data-cassette="' + run.cassette + '" data-bars="' + run.bars.length + '">'];
    const step = niceStep(total / 8);
    for (let t = 0; t <= total + 1e-9; t += step) {
      parts.push('<line class="grid" x1="' + x(t) + '" x2="' + x(t) + '" y1="' + T + '" y2="' + (H - B) + '"/>');
      parts.push('<text x="' + x(t) + '" y="' + (H - B + 14) + '" text-anchor="middle">' + fmtAxis(t) + "</text>");
    }
    parts.push('<text x="' + (W - R) + '" y="' + (H - 2) + '" text-anchor="end">ms from the run\'s start</text>');
    for (const k of tracks) {
      parts.push('<text class="track" x="' + (L - 6) + '" y="' + (top[k] + 11) + '" text-anchor="end">' + TRACK_NAMES[k] + "</text>");
      parts.push('<line class="lane" x1="' + L + '" x2="' + (W - R) + '" y1="' + (top[k] + run.lanes[k] * LANE + GAP / 2) + '" y2="' + (top[k] + run.lanes[k] * LANE + GAP / 2) + '"/>');
    }
    for (const b of run.bars) {
      const y0 = top[b.track] + b.lane * LANE + 2;
      const x0 = x(b.start_ms);
      const x1 = Math.max(x(b.end_ms), x0 + 2);
      const what = b.label + ": from " + ms(b.start_ms) + " ms, " + ms(b.end_ms - b.start_ms) + " ms" +
        (b.ttfb_ms !== null ? " (TTFB " + ms(b.ttfb_ms) + " ms)" : "") + (b.error ? ", failed" : "") +
        (b.dated ? "" : "; no recorded time: placed after the line before it");
      const cls = "bar track-" + b.track + (b.error ? " error" : "") + (b.dated ? "" : " undated");
      parts.push('<g class="' + cls + '" data-i="' + b.i + '" tabindex="0"><title>' + esc(what) + "</title>");
      parts.push('<rect class="body" x="' + x0 + '" y="' + y0 + '" width="' + (x1 - x0) + '" height="' + (LANE - 4) + '"/>');
      if (b.ttfb_ms !== null && b.ttfb_ms > 0) {
        const xw = Math.min(x(b.start_ms + b.ttfb_ms), x1);
        parts.push('<rect class="wait" x="' + x0 + '" y="' + y0 + '" width="' + (xw - x0) + '" height="' + (LANE - 4) + '"/>');
      }
      parts.push("</g>");
    }
    parts.push("</svg>");
    return parts.join("");
  }
  function runHtml() {
    const runs = (data.timeline || []).filter((run) => run.bars.length);
    if (!runs.length) return "";
    const h = ['<section id="run"><h3 class="run-title">Timeline</h3>'];
    for (const run of runs) {
      if (data.cassettes.length > 1) h.push('<div class="run-name mono">' + esc(data.cassettes[run.cassette].name) + "</div>");
      h.push(runSvg(run));
      if (run.more) h.push('<div class="more">… and ' + run.more + " more lines, not drawn (the list has them all)</div>");
    }
    h.push("</section>");
    return h.join("");
  }
  function wireRun(box) {
    const open = (ev) => {
      const g = ev.target.closest("g.bar");
      if (g && (ev.type === "click" || ev.key === "Enter")) showDetail(Number(g.dataset.i));
    };
    box.addEventListener("click", open);
    box.addEventListener("keydown", open);
  }
  function markBar(i) {
    for (const g of document.querySelectorAll("svg.run g.bar")) g.classList.toggle("open", Number(g.dataset.i) === i);
  }
  // A call line's row: its kind and name, and whether it raised.
  function callRowHtml(r) {
    const multi = data.cassettes.length > 1 ? "<td>" + esc(data.cassettes[r.cassette].name) + "</td>" : "";
    const ended = r.call.raised ? '<span class="s5">raised ' + esc(r.call.raised) + "</span>" : '<span class="s2">returned</span>';
    return '<tr data-i="' + r.i + '" class="call">' + multi + '<td class="mono">' + esc(r.id) + "</td><td>" + esc(r.call.kind) + '</td><td>-</td><td class="mono">' + esc(r.call.name) + "</td><td>" + ended + '</td><td>-</td><td class="n">-</td><td class="n">-</td><td class="n">-</td><td class="n">-</td><td class="n">' + ms(r.duration_ms) + '</td><td class="mono">' + esc(r.recorded || "-") + "</td></tr>";
  }
  // A call line (a tool's): what was called, and how it ended.
  function callDetailHtml(i, d) {
    const r = rows[i];
    const c = d.call;
    const h = ['<div class="detail call" data-i="' + i + '">'];
    h.push("<h2>" + esc(c.kind + " " + c.name) + ' <span class="tag">' + esc(d.id) + "</span></h2>");
    const facts = [
      ["cassette", data.cassettes[r.cassette].name + ", line " + r.line],
      ["key", d.key],
      ["recorded", r.recorded || "-"],
      ["kind", c.kind],
      ["timing", "total " + ms(c.total_ms) + " ms"],
    ];
    h.push('<dl class="facts">' + facts.map((f) => "<dt>" + f[0] + "</dt><dd>" + esc(f[1]) + "</dd>").join("") + "</dl>");
    h.push("<h3>Arguments</h3>" + bodyHtml({ json: c.args }));
    if ("returned" in c) h.push("<h3>Returned</h3>" + bodyHtml({ json: c.returned }));
    if (c.yields) {
      h.push('<h3>Yielded</h3><table class="yields mono"><thead><tr><th class="n">#</th><th class="n">offset ms</th><th>value</th></tr></thead><tbody>');
      c.yields.forEach((y, n) => h.push('<tr><td class="n">' + n + '</td><td class="n">' + ms(y[0]) + '</td><td class="t">' + escMarked(JSON.stringify(y[1])) + "</td></tr>"));
      h.push('<tr><td></td><td class="n">' + ms(c.end_ms) + "</td><td>" + (c.raised ? "raised" : "end") + "</td></tr></tbody></table>");
    }
    if (c.raised) h.push('<h3>Raised</h3><div class="mono raised">' + escMarked((c.raised.module === "builtins" ? "" : c.raised.module + ".") + c.raised.type + ": " + c.raised.message) + "</div>");
    h.push("</div>");
    return h.join("");
  }

  // -- the list, filters and pages -------------------------------------------------
  function rowHtml(r) {
    if (r.call) return callRowHtml(r);
    const status = '<span class="s' + String(r.status)[0] + '">' + r.status + "</span>" + (r.cut ? ' <span class="cut" title="cut: ' + esc(r.cut) + '">cut</span>' : "");
    const stream = r.ws ? "websocket (" + r.ws.client + " ↑ " + r.ws.server + " ↓)" : r.stream ? r.stream + " (" + r.frames + ")" : "-";
    const multi = data.cassettes.length > 1 ? "<td>" + esc(data.cassettes[r.cassette].name) + "</td>" : "";
    return '<tr data-i="' + r.i + '">' + multi + '<td class="mono">' + esc(r.id) + "</td><td>" + esc(r.provider) + "</td><td>" + esc(r.model || "?") + '</td><td class="mono">' + esc(endpoint(r)) + "</td><td>" + status + "</td><td>" + stream + '</td><td class="n">' + num(r.tokens_in) + '</td><td class="n">' + num(r.tokens_out) + '</td><td class="n" title="' + esc(r.cost_unknown || "") + '">' + usd(r.cost_usd) + '</td><td class="n">' + ms(r.ttfb_ms) + '</td><td class="n">' + ms(r.duration_ms) + '</td><td class="mono">' + esc(r.recorded || "-") + "</td></tr>";
  }
  function renderList() {
    const pages = Math.max(1, Math.ceil(state.shown.length / PAGE_SIZE));
    state.page = Math.min(state.page, pages - 1);
    const start = state.page * PAGE_SIZE;
    const slice = state.shown.slice(start, start + PAGE_SIZE);
    document.querySelector("table.list tbody").innerHTML = slice.map(rowHtml).join("");
    document.getElementById("empty").hidden = state.shown.length > 0;
    document.getElementById("count").textContent = (state.shown.length === rows.length ? rows.length : state.shown.length + " of " + rows.length) + (rows.length === 1 ? " interaction" : " interactions");
    document.getElementById("pageinfo").textContent = state.shown.length ? "rows " + (start + 1) + "-" + (start + slice.length) + ", page " + (state.page + 1) + " of " + pages : "";
    document.getElementById("prev").disabled = state.page === 0;
    document.getElementById("next").disabled = state.page >= pages - 1;
    for (const tr of document.querySelectorAll("table.list tbody tr")) tr.classList.toggle("open", Number(tr.dataset.i) === state.open);
  }
  // Text in bodies is searched in the detail's JSON line, with the needle
  // escaped the same way (no detail is parsed for a search).
  function needleOf(q) {
    return JSON.stringify(q).slice(1, -1);
  }
  function applyFilters() {
    const q = document.getElementById("q").value;
    if (q && !haveAll()) {
      document.getElementById("count").textContent = "reading the page…";
      need(allIndices(), applyFilters);
      return;
    }
    const model = document.getElementById("f-model").value;
    const path = document.getElementById("f-path").value.trim().toLowerCase();
    const status = document.getElementById("f-status").value;
    const cas = document.getElementById("f-cassette");
    const cassette = cas ? cas.value : "";
    const fold = q === q.toLowerCase();
    const needle = q ? needleOf(q) : "";
    state.shown = rows.filter((r) => {
      if (model && (r.model || "?") !== model) return false;
      if (path && !endpoint(r).toLowerCase().includes(path)) return false;
      if (status && !(status.length === 3 && status.endsWith("xx") ? String(r.status)[0] === status[0] : String(r.status) === status)) return false;
      if (cassette && String(r.cassette) !== cassette) return false;
      if (needle) {
        const line = [r.id, r.provider, r.model || "", endpoint(r), r.status].join(" ");
        const text = lineOf(r.i);
        const has = (s) => (fold ? s.toLowerCase() : s).includes(needle);
        if (!has(line) && !has(text)) return false;
      }
      return true;
    });
    state.page = 0;
    renderList();
  }
  function debounce(fn, wait) {
    let timer = 0;
    return () => { clearTimeout(timer); timer = setTimeout(fn, wait); };
  }

  // -- a miss report beside its closest recording --------------------------------
  function parsePath(path) {
    const out = [];
    let s = path;
    const re = /^(?:\.?([^.\[\]]+)|\[(\d+)\]|\[("(?:[^"\\]|\\.)*")\])/;
    while (s.length) {
      const m = re.exec(s);
      if (!m) return null;
      out.push(m[1] !== undefined ? m[1] : m[2] !== undefined ? Number(m[2]) : JSON.parse(m[3]));
      s = s.slice(m[0].length);
    }
    return out;
  }
  function applyDiff(body, diffs) {
    // the recorded body with the report's differences applied: the request
    // that missed, as far as the report tells it
    const copy = JSON.parse(JSON.stringify(body));
    let value = copy;
    for (const d of diffs) {
      if (d.path === "method" || d.path === "path" || d.path === "body" || d.path.startsWith("query.")) continue;
      const segs = parsePath(d.path);
      // a path from a file never reaches an object's prototype
      if (!segs || !segs.length || segs.some((s) => s === "__proto__" || s === "constructor" || s === "prototype")) continue;
      let node = value;
      for (const s of segs.slice(0, -1)) { node = node === null || typeof node !== "object" ? undefined : node[s]; }
      if (node === null || typeof node !== "object") continue;
      const lastSeg = segs[segs.length - 1];
      if (d.kind === "removed") { if (Array.isArray(node)) node.splice(lastSeg, 1); else delete node[lastSeg]; }
      else node[lastSeg] = d.received;
    }
    return value;
  }
  function missHtml(miss) {
    const h = ['<section class="miss" id="miss"><h2>Miss: ' + esc(miss.reason || "no recording matches") + "</h2>"];
    h.push('<div class="mono">' + esc((miss.method || "") + " " + (miss.path || "")) + " · key " + esc(miss.key || "?") + " · cassette " + esc(miss.cassette || "?") + " · match " + esc(miss.match || "?") + "</div>");
    h.push("<p>" + esc(miss.message) + "</p>");
    if (!miss.closest) {
      h.push("<p>No closest recording: the cassette was empty.</p></section>");
      return h.join("");
    }
    const c = miss.closest;
    h.push("<p>Closest recording <b>" + esc(c.id) + "</b> " + esc((c.method || "") + " " + (c.path || "")) + " (similarity " + esc(c.similarity) + ")" + (miss.closest_row === null ? ': <span class="warn">not in the cassettes shown</span>' : "") + "</p>");
    h.push('<table class="missdiff mono"><thead><tr><th>field</th><th>kind</th><th>recorded (closest)</th><th>received (missed)</th></tr></thead><tbody>');
    for (const d of miss.diff) {
      const a = d.has_recorded ? escMarked(JSON.stringify(d.recorded)) : "";
      const b = d.has_received ? escMarked(JSON.stringify(d.received)) : "";
      h.push('<tr class="d-' + esc(d.kind) + '"><td>' + esc(d.path) + "</td><td>" + esc(d.kind) + '</td><td class="recorded">' + a + '</td><td class="received">' + b + "</td></tr>");
    }
    h.push("</tbody></table>");
    if (c.more_differences) h.push("<p>… and " + esc(c.more_differences) + " more differences.</p>");
    h.push('<div id="miss-side"></div></section>');
    return h.join("");
  }
  // The two requests side by side: drawn once the details are read.
  function missSide(miss) {
    const c = miss.closest;
    const d = detail(miss.closest_row);
    const marks = new Set(miss.diff.map((x) => x.path));
    const h = ['<div class="side"><div><h3>Recorded request (' + esc(c.id) + ")</h3>" + bodyHtml(d.request.body, marks) + "</div>"];
    let right = '<pre class="body">(not JSON: see the differences above)</pre>';
    if ("json" in d.request.body) right = bodyHtml({ json: applyDiff(d.request.body.json, miss.diff) }, marks);
    h.push("<div><h3>Request that missed (the recorded one with the differences applied)</h3>" + right + "</div></div>");
    h.push('<p><button class="link open-closest">open the closest recording</button></p>');
    return h.join("");
  }

  // -- two cassettes side by side (reel diff --html) -----------------------------------
  function diffHtml(diff) {
    const h = ['<table class="list difflist"><thead><tr><th>change</th><th>' + esc(data.cassettes[0].name) + "</th><th>" + esc(data.cassettes[1].name) + "</th><th>what differs</th></tr></thead><tbody>"];
    diff.entries.forEach((e, n) => {
      const side = (i) => (i === null ? "" : '<span class="mono">' + esc(rows[i].id) + "</span> " + esc(endpoint(rows[i])) + " (" + rows[i].status + ")");
      h.push('<tr class="d-' + e.kind + '" data-n="' + n + '"' + (e.kind === "same" ? " hidden" : "") + "><td>" + e.kind + "</td><td>" + side(e.a) + "</td><td>" + side(e.b) + '</td><td class="mono">' + e.notes.map(escMarked).join("<br>") + "</td></tr>");
    });
    h.push("</tbody></table>");
    return h.join("");
  }
  function showPair(e) {
    const box = document.getElementById("detail");
    const pair = [e.a, e.b].filter((i) => i !== null);
    if (!pair.every((i) => loaded.has(Math.floor(i / GROUP)))) {
      box.innerHTML = '<div class="empty">Reading the page…</div>';
      need(pair, () => showPair(e));
      return;
    }
    const spans = [e.a, e.b].filter((i) => i !== null).map((i) => {
      const d = detail(i), resp = d.response;
      const ws = resp.websocket;
      if (ws) return Math.max(ws.close ? ws.close.at_ms || 0 : 0, ...ws.messages.map((m) => m[1]));
      if (!resp.stream) return 0;
      const last = resp.frames.length ? resp.frames[resp.frames.length - 1][0] : 0;
      return (rows[i].ttfb_ms || 0) + Math.max(last, resp.cut ? resp.cut.at_ms : resp.end_ms || 0);
    });
    const scaleMs = Math.max(0, ...spans);
    const half = (i) => (i === null ? '<div class="empty">(not in this cassette)</div>' : detailHtml(i, { scaleMs }));
    box.innerHTML = '<div class="side"><div>' + half(e.a) + "</div><div>" + half(e.b) + "</div></div>";
    box.scrollIntoView({ block: "start" });
  }

  // -- the page ---------------------------------------------------------------------
  function build() {
    const app = document.getElementById("app");
    const n = rows.length;
    const total = rows.reduce((s, r) => s + (r.cost_usd || 0), 0);
    const unknown = rows.filter((r) => r.cost_usd === null).length;
    const names = data.cassettes.map((c) => c.name).join(", ");
    const skipped = data.cassettes.reduce((s, c) => s + c.skipped.length, 0);
    const head = el("header");
    head.innerHTML = "<h1>" + esc(data.title) + '</h1><div class="sub">' + esc(names) + " · " + n + (n === 1 ? " interaction" : " interactions") + " · " + usd(total) + (unknown ? " + " + unknown + " of unknown cost" : "") + "</div>" +
      (skipped ? '<div class="warn">' + data.cassettes.flatMap((c) => c.skipped.map((s) => esc(c.name + ":" + s.line + ": skipped: " + s.reason))).join("<br>") + "</div>" : "");
    if (data.error) head.insertAdjacentHTML("beforeend", '<div class="warn" id="error">' + esc(data.error) + "</div>");
    if (data.serve) head.insertAdjacentHTML("beforeend", '<div class="sub" id="live">live: this page reloads when a cassette changes</div>');
    app.appendChild(head);
    const main = el("main");
    app.appendChild(main);
    if (data.miss) main.insertAdjacentHTML("beforeend", missHtml(data.miss));
    if (data.diff) {
      const s = data.diff.summary;
      main.insertAdjacentHTML("beforeend", '<div class="filters"><b>' + s.added + " added, " + s.removed + " removed, " + s.changed + " changed, " + s.same + ' same</b><label><input type="checkbox" id="show-same"> show the same ones</label></div>' + diffHtml(data.diff) + '<div id="detail"></div>');
      document.getElementById("show-same").addEventListener("change", (ev) => {
        for (const tr of document.querySelectorAll("table.difflist tr.d-same")) tr.hidden = !ev.target.checked;
      });
      document.querySelector("table.difflist tbody").addEventListener("click", (ev) => {
        const tr = ev.target.closest("tr");
        if (tr) showPair(data.diff.entries[Number(tr.dataset.n)]);
      });
      return;
    }
    const models = [...new Set(rows.map((r) => r.model || "?"))].sort();
    const statuses = [...new Set(rows.map((r) => String(r.status)))].sort();
    const classes = [...new Set(statuses.map((s) => s[0] + "xx"))];
    let filters = '<div class="filters"><input type="search" id="q" placeholder="search: text in bodies, ids, paths" aria-label="search">' +
      '<select id="f-model" aria-label="model"><option value="">all models</option>' + models.map((m) => '<option value="' + esc(m) + '">' + esc(m) + "</option>").join("") + "</select>" +
      '<input type="text" id="f-path" placeholder="path contains" aria-label="path">' +
      '<select id="f-status" aria-label="status"><option value="">any status</option>' + classes.concat(statuses).map((s) => '<option value="' + s + '">' + s + "</option>").join("") + "</select>";
    if (data.cassettes.length > 1) filters += '<select id="f-cassette" aria-label="cassette"><option value="">all cassettes</option>' + data.cassettes.map((c, k) => '<option value="' + k + '">' + esc(c.name) + "</option>").join("") + "</select>";
    filters += '<span class="count" id="count"></span></div>';
    main.insertAdjacentHTML("beforeend", runHtml());
    const run = document.getElementById("run");
    if (run) wireRun(run);
    const multi = data.cassettes.length > 1 ? "<th>cassette</th>" : "";
    main.insertAdjacentHTML("beforeend", filters +
      '<table class="list"><thead><tr>' + multi + '<th>id</th><th>provider</th><th>model</th><th>endpoint</th><th>status</th><th>stream</th><th class="n">in</th><th class="n">out</th><th class="n">cost</th><th class="n">TTFB ms</th><th class="n">total ms</th><th>recorded</th></tr></thead><tbody></tbody></table>' +
      '<div class="empty" id="empty" hidden>No interaction matches.</div>' +
      '<div class="pager"><button id="prev">‹ previous</button><button id="next">next ›</button><span id="pageinfo"></span></div>' +
      '<div id="detail"></div>');
    const again = debounce(applyFilters, 150);
    document.getElementById("q").addEventListener("input", again);
    document.getElementById("f-path").addEventListener("input", again);
    for (const id of ["f-model", "f-status", "f-cassette"]) {
      const node = document.getElementById(id);
      if (node) node.addEventListener("change", applyFilters);
    }
    document.getElementById("prev").addEventListener("click", () => { state.page--; renderList(); });
    document.getElementById("next").addEventListener("click", () => { state.page++; renderList(); });
    document.querySelector("table.list tbody").addEventListener("click", (ev) => {
      const tr = ev.target.closest("tr");
      if (tr) showDetail(Number(tr.dataset.i));
    });
    renderList();
    const fromHash = () => {
      const m = /^#i=(\d+)$/.exec(location.hash);
      if (m && Number(m[1]) < rows.length) showDetail(Number(m[1]));
    };
    fromHash();
    window.addEventListener("hashchange", fromHash);
    if (data.miss && data.miss.closest_row !== null) need([data.miss.closest_row], () => {
      document.getElementById("miss-side").innerHTML = missSide(data.miss);
      const opener = document.querySelector("button.open-closest");
      if (opener) opener.addEventListener("click", () => showDetail(data.miss.closest_row));
    });
  }
  // -- reel view --serve: reload when the cassettes change, keeping the view ----------
  const KEPT = "reel-view-state";
  function saveState() {
    const value = (id) => { const n = document.getElementById(id); return n ? n.value : ""; };
    sessionStorage.setItem(KEPT, JSON.stringify({
      q: value("q"), model: value("f-model"), path: value("f-path"), status: value("f-status"),
      cassette: value("f-cassette"), page: state.page, open: state.open, y: window.scrollY,
    }));
  }
  function restoreState() {
    let kept = null;
    try { kept = JSON.parse(sessionStorage.getItem(KEPT) || "null"); } catch (e) { kept = null; }
    sessionStorage.removeItem(KEPT);
    if (!kept || !document.getElementById("q")) return;
    const set = (id, v) => { const n = document.getElementById(id); if (n && v) n.value = v; };
    set("q", kept.q); set("f-model", kept.model); set("f-path", kept.path);
    set("f-status", kept.status); set("f-cassette", kept.cassette);
    docRead.then(() => {
      applyFilters();
      state.page = kept.page || 0;
      renderList();
      if (kept.open !== null && kept.open < rows.length) showDetail(kept.open);
      window.scrollTo(0, kept.y || 0);
    });
  }
  function live(serve) {
    restoreState();
    let busy = false;
    setInterval(async () => {
      if (busy) return;
      busy = true;
      try {
        const answer = await fetch("/_reel/version", { cache: "no-store" });
        const now = (await answer.json()).version;
        if (now !== serve.version) { saveState(); location.reload(); }
      } catch (e) {
        // the server stopped: keep the page as it is
      } finally {
        busy = false;
      }
    }, serve.poll_ms);
  }

  build();
  if (data.serve) live(data.serve);
  document.body.dataset.ready = "1";
  document.body.dataset.loadMs = String(Math.round(performance.now()));
  docRead.then(() => {
    document.body.dataset.parsed = "1";
    document.body.dataset.parsedMs = String(Math.round(performance.now()));
  });
})();
