#!/usr/bin/env node
// A Gatehouse webhook receiver for Node.js, no dependencies.
//
// Run:  WEBHOOK_SECRET=whsec_... PORT=9000 node receiver.js
//
// Checks `X-Gatehouse-Signature: t=<unix>,v1=<hex>` over the raw request bytes
// (never re-serialised JSON), refuses a `t` more than 300 s from now, and
// handles each `X-Gatehouse-Delivery` id once (deliveries are at-least-once).
'use strict';

const crypto = require('node:crypto');
const http = require('node:http');

const TOLERANCE_SECONDS = 300;

/** True if `header` signs `body` (a Buffer) with `secret` within the tolerance. */
function verify(secret, header, body, now = Date.now() / 1000, tolerance = TOLERANCE_SECONDS) {
  const parts = {};
  for (const item of String(header || '').split(',')) {
    const i = item.indexOf('=');
    if (i < 0) return false;
    const key = item.slice(0, i).trim();
    if (key in parts) return false; // exactly one t and one v1
    parts[key] = item.slice(i + 1);
  }
  const t = Number.parseInt(parts.t, 10);
  if (!Number.isFinite(t) || typeof parts.v1 !== 'string') return false;
  if (Math.abs(now - t) > tolerance) return false;
  // The key is the whole secret, `whsec_` included; the signed bytes are `<t>.<raw body>`.
  const expected = crypto
    .createHmac('sha256', secret)
    .update(Buffer.concat([Buffer.from(`${t}.`), body]))
    .digest('hex');
  const a = Buffer.from(expected);
  const b = Buffer.from(parts.v1);
  return a.length === b.length && crypto.timingSafeEqual(a, b);
}

/** The last `capacity` delivery ids (a database table in production). */
class SeenDeliveries {
  constructor(capacity = 10000) {
    this.ids = new Set();
    this.capacity = capacity;
  }
  firstTime(id) {
    if (this.ids.has(id)) return false;
    this.ids.add(id);
    if (this.ids.size > this.capacity) this.ids.delete(this.ids.values().next().value);
    return true;
  }
}

function serve(secret, port) {
  const seen = new SeenDeliveries();
  const server = http.createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const answer = (status, text) => res.writeHead(status, { 'Content-Type': 'text/plain' }).end(text);
      if (!verify(secret, req.headers['x-gatehouse-signature'], body)) return answer(401, 'bad signature');
      const delivery = String(req.headers['x-gatehouse-delivery'] || '');
      if (!seen.firstTime(delivery)) return answer(200, 'duplicate, already handled');
      const event = JSON.parse(body.toString('utf8'));
      console.log(`${event.type} ${event.id} (delivery ${delivery}): ${JSON.stringify(event.data)}`);
      answer(200, 'ok');
    });
  });
  server.listen(port, '127.0.0.1', () => console.log(`listening on http://127.0.0.1:${port}/`));
  return server;
}

module.exports = { verify, SeenDeliveries, serve };

if (require.main === module) {
  const secret = process.env.WEBHOOK_SECRET || '';
  if (!secret.startsWith('whsec_')) {
    console.error("set WEBHOOK_SECRET to the endpoint's whsec_... secret");
    process.exit(1);
  }
  serve(secret, Number(process.env.PORT || 9000));
}
