// Package observed wraps a store.Backend so that every table operation
// is measured: its latency and its failures, by backend and operation, in
// Prometheus series, and an OpenTelemetry span, a child of the caller's. The wrapper keeps the contract of what it wraps,
// including the optional fast paths callers find by type assertion, so the
// domain packages above it run unchanged and unaware of it.
package observed
