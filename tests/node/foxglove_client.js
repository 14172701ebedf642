// Foxglove's own client library (@foxglove/ws-protocol) against rtctl's live server: connect, subscribe to
// every channel, decode each message -- the protobuf ones with the .proto definitions generated from
// @foxglove/schemas (Foxglove's published schema definitions, not the schema the server advertised) -- and
// print one JSON line per channel advertised and per message decoded. Usage: node foxglove_client.js URL SECONDS
"use strict";
const { FoxgloveClient } = require("@foxglove/ws-protocol");
const { foxgloveMessageSchemas, generateProto } = require("@foxglove/schemas/internal");
const protobuf = require("protobufjs");
const WebSocket = require("ws");

const [url, seconds] = [process.argv[2], Number(process.argv[3] || 3)];

function publishedRoot() {
  const root = new protobuf.Root();
  root.addJSON(protobuf.common.get("google/protobuf/timestamp.proto").nested);
  root.addJSON(protobuf.common.get("google/protobuf/duration.proto").nested);
  for (const schema of Object.values(foxgloveMessageSchemas)) {
    const enums = schema.fields.filter((f) => f.type.type === "enum").map((f) => f.type.enum);
    protobuf.parse(generateProto(schema, enums), root, { keepCase: true });
  }
  root.resolveAll();
  return root;
}

const root = publishedRoot();
const client = new FoxgloveClient({ ws: new WebSocket(url, [FoxgloveClient.SUPPORTED_SUBPROTOCOL]) });
const channels = new Map();
const out = (obj) => process.stdout.write(JSON.stringify(obj) + "\n");

client.on("serverInfo", (info) => out({ kind: "serverInfo", name: info.name, capabilities: info.capabilities }));
client.on("advertise", (advertised) => {
  for (const channel of advertised) {
    const decode = channel.encoding === "protobuf"
      ? ((type) => (bytes) => type.toObject(type.decode(bytes), { longs: Number, defaults: true }))(
          root.lookupType(channel.schemaName))
      : (bytes) => JSON.parse(new TextDecoder().decode(bytes));
    const id = client.subscribe(channel.id);
    channels.set(id, { topic: channel.topic, decode });
    out({ kind: "advertise", topic: channel.topic, encoding: channel.encoding, schemaName: channel.schemaName,
          schemaEncoding: channel.schemaEncoding });
  }
});
client.on("message", ({ subscriptionId, timestamp, data }) => {
  const channel = channels.get(subscriptionId);
  const bytes = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  let message, error;
  try { message = channel.decode(bytes); } catch (e) { error = String(e); }
  out({ kind: "message", topic: channel.topic, logTime: timestamp.toString(), message, error });
});
client.on("error", (e) => { out({ kind: "error", error: String(e) }); process.exitCode = 1; });
setTimeout(() => { client.close(); process.exit(); }, seconds * 1000);
