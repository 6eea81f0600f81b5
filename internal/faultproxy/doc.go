// Package faultproxy is an HTTP proxy for tests that stands in front of a
// service and fails some of its requests the ways a cloud storage service
// and the network to it fail: throttled (503 Server Busy), timed out (500
// Operation Timeout), the connection dropped before the request reached the
// service, or dropped after the service applied the request but before its
// answer came back. The last is the case a client cannot tell from the
// others, and the one whose retry finds its own write already done: it is
// what a test of retries and idempotency needs most, and what a fake
// transport cannot produce, since the write must really happen.
//
// Which requests fail is decided by a seeded policy (every Nth request, or a
// seeded probability), so a run is repeatable up to the order in which
// concurrent requests arrive. Counters tell a test that each fault really
// happened, so that it does not pass by having tested nothing.
//
// The proxy listens on a loopback port only, serves a bounded number of
// connections at once, and stops with Close.
package faultproxy
