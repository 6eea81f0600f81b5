#!/usr/bin/env node
// fleet.mjs: the camera fleet as a whole, from Node.js, with the stubs
// @grpc/proto-loader builds from the repository's proto/ at run time.
//
//   node fleet.mjs [address]        (default localhost:50051)
//
// It lists the cameras of an image type with their first and latest
// capture, the cameras silent for SILENT_MINUTES (10), the images the whole
// fleet captured in the last WINDOW_MINUTES (5), and the coverage of the
// first camera over the last hour: FleetService's four calls, each paged as
// every List call of the API is.
//
// Environment: IMAGE_TYPE (IMAGE_TYPE_SINGLE, _PANO or _PRE_STITCH);
// METADATAD_TOKEN, a bearer token for a secured server (with the
// scope metadata.read); METADATAD_TLS=1 for TLS with the system's roots.
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import grpc from '@grpc/grpc-js';
import protoLoader from '@grpc/proto-loader';

const address = process.argv[2] ?? 'localhost:50051';
const imageType = process.env.IMAGE_TYPE ?? 'IMAGE_TYPE_SINGLE';
const silentMinutes = Number(process.env.SILENT_MINUTES ?? 10);
const windowMinutes = Number(process.env.WINDOW_MINUTES ?? 5);

const protoDir = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', '..', 'proto');
const definition = protoLoader.loadSync('metadata/v1/fleet.proto', {
  includeDirs: [protoDir],
  longs: String, // int64 as strings: a JavaScript number loses precision past 2^53
  enums: String,
  defaults: true,
  oneofs: true,
});
const { FleetService } = grpc.loadPackageDefinition(definition).metadata.v1;
const credentials = process.env.METADATAD_TLS === '1' ? grpc.credentials.createSsl() : grpc.credentials.createInsecure();
const fleet = new FleetService(address, credentials);

const metadata = new grpc.Metadata();
if (process.env.METADATAD_TOKEN) {
  metadata.set('authorization', `Bearer ${process.env.METADATAD_TOKEN}`);
}

// call makes one unary call with a 10 s deadline.
function call(method, request) {
  return new Promise((resolve, reject) => {
    fleet[method](request, metadata, { deadline: Date.now() + 10_000 }, (err, response) =>
      err ? reject(err) : resolve(response));
  });
}

// pages yields every page of a List call, following next_page_token.
async function* pages(method, request) {
  let pageToken = '';
  do {
    const page = await call(method, { ...request, pageToken });
    yield page;
    pageToken = page.nextPageToken;
  } while (pageToken);
}

const timestamp = (ms) => ({ seconds: String(Math.floor(ms / 1000)), nanos: (ms % 1000) * 1e6 });
const duration = (minutes) => ({ seconds: String(minutes * 60), nanos: 0 });
const iso = (ts) => (ts ? new Date(Number(ts.seconds) * 1000 + ts.nanos / 1e6).toISOString() : '-');
const wholeMinute = (ms) => ms - (ms % 60_000);

async function main() {
  const cameras = [];
  for await (const page of pages('ListCameras', { imageType, pageSize: 1000 })) {
    cameras.push(...page.cameras);
  }
  console.log(`cameras of ${imageType}: ${cameras.length}`);
  for (const c of cameras) {
    console.log(`  ${c.cameraId}  first ${iso(c.firstCapturedAt)}  latest ${iso(c.latestCapturedAt)}`);
  }

  const silent = [];
  for await (const page of pages('ListSilentCameras', { imageType, silentFor: duration(silentMinutes), pageSize: 1000 })) {
    silent.push(...page.cameras);
  }
  console.log(`silent for ${silentMinutes} minutes or more: ${silent.length}`);
  for (const c of silent) {
    console.log(`  ${c.cameraId}  latest ${iso(c.latestCapturedAt)}`);
  }

  const now = Date.now();
  const images = [];
  const window = { imageType, startTime: timestamp(now - windowMinutes * 60_000), endTime: timestamp(now), pageSize: 1000 };
  for await (const page of pages('ListFleetImages', window)) {
    // Each FleetImage holds its type's message in the oneof `image`.
    images.push(...page.images.map((i) => i[i.image]));
  }
  console.log(`images of the fleet in the last ${windowMinutes} minutes: ${images.length}`);
  for (const img of images) {
    console.log(`  ${iso(img.capturedAt)}  ${img.cameraId}  ${img.blobUri}`);
  }

  if (cameras.length > 0) {
    const end = wholeMinute(now) + 60_000;
    const coverage = await call('GetCoverage', {
      imageType, cameraId: cameras[0].cameraId, startTime: timestamp(end - 60 * 60_000), endTime: timestamp(end),
    });
    console.log(`coverage of ${cameras[0].cameraId} over the last hour: ${(coverage.coveredFraction * 100).toFixed(1)}% covered, ` +
      `${coverage.images} images, ${coverage.gaps.length} gaps`);
  }
}

main().then(() => fleet.close(), (err) => {
  // A refusal names its gRPC code; INVALID_ARGUMENT's details name the field.
  console.error(`${grpc.status[err.code] ?? 'error'}: ${err.details ?? err.message}`);
  fleet.close();
  process.exitCode = 1;
});
