#!/usr/bin/env node
// A tiny CRI client for the engine tests (crictl is not packaged in Debian 12).
// Usage: node cri.js SOCKET METHOD [JSON-REQUEST]
// Calls runtime.v1.RuntimeService/METHOD on the unix socket with the request given as JSON
// (proto field names, snake_case) and prints the reply as one JSON line (bytes fields
// base64-encoded). Exits 1 with the gRPC error on stderr when the call fails.
'use strict';
const path = require('path');
const grpc = require('@grpc/grpc-js');
const loader = require('@grpc/proto-loader');

const [sock, method, reqJson] = process.argv.slice(2);
if (!sock || !method) {
  process.stderr.write('usage: cri.js SOCKET METHOD [JSON]\n');
  process.exit(2);
}
const def = loader.loadSync(path.join(__dirname, 'cri_min.proto'), {
  keepCase: true, longs: Number, enums: String, defaults: true, bytes: String,
});
const proto = grpc.loadPackageDefinition(def).runtime.v1;
const client = new proto.RuntimeService('unix://' + sock, grpc.credentials.createInsecure());
if (typeof client[method] !== 'function') {
  process.stderr.write(`unknown method ${method}\n`);
  process.exit(2);
}
const deadline = new Date(Date.now() + 150 * 1000); // hang guard only
client[method](JSON.parse(reqJson || '{}'), { deadline }, (err, reply) => {
  if (err) {
    process.stderr.write(`${method}: ${err.code} ${err.details || err.message}\n`);
    process.exit(1);
  }
  process.stdout.write(JSON.stringify(reply) + '\n');
  client.close();
});
