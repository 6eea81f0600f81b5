// Command metadata-load drives a running metadatad with the traffic of a
// simulated camera fleet and reports what it measured.
//
// Every camera captures one single, one pano and one pre-stitch image per
// simulated minute; the tool writes them (Create), and reads them back as
// frontends do (GetLatest, BatchGetLatest of a few hundred cameras, List over
// a time range), at a fixed rate or a fixed concurrency. Latencies go into
// HDR histograms; the end of every run prints a JSON report (throughput,
// p50/p90/p99/max per RPC, errors by gRPC code, and the CPU time the tool
// and, when it runs on this machine, the server spent per call). Beside the
// server on a small machine the tool's own cost is taken from the server's,
// so its workers reuse their messages and send creates pre-encoded.
//
// Modes:
//
//	run, bench     the mixed workload; with -ceiling, first the same
//	               concurrency of grpc.health.v1.Health/Check, and ratios
//	seed           fill -days of history per camera, fast (for purges)
//	history        seed history in steps (-history-days 1,7,30) and measure
//	               the reads after each step
//	purge-during   the workload with a purge started halfway: each RPC's
//	               latency during the purge against before it, and the
//	               p99 and p99.9 of the calls started in a window from the
//	               purge's start (at least -min-span) against as long a
//	               window just before it; -purge-cameras puts the purged
//	               history in a fleet of its own
//	soak           the workload for a bounded time; any error fails the run
//	               (exit 1); the server's RSS is sampled over time
//	ceiling        health checks alone: the framework's own ceiling
//
// The server is reached in plaintext by default, over TLS with -tls-ca (and
// mTLS with -tls-cert/-tls-key), with a bearer token from -token or
// -token-file sent as "authorization: Bearer ..." metadata.
package main
