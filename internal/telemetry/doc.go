// Package telemetry is what operators see of metadatad from outside: the
// Prometheus registry and /metrics endpoint, with the gRPC, store, Pebble,
// Azure clock, purge, certificate, Go runtime and process series. The
// domain packages know nothing of it: it reads the counts and states they
// expose.
package telemetry
