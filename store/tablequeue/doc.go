// Package tablequeue is a durable work queue on a store table, with the
// semantics of Azure Queue Storage: at-least-once delivery, a visibility
// timeout that hides a received message until it is deleted or the timeout
// passes, a dequeue count, and a dead-letter partition for poison messages.
//
// It is the purge engine's queue on a backend that is not a store.Purger
// and has no queue of its own: the queue design the engine runs on Azure
// (store/azqueue there) is tested on it over Pebble, without Azurite. The
// embedded store itself purges by range, without a queue. Consumers must
// be idempotent, as with any at-least-once queue.
package tablequeue
