// Package queue is a durable work queue on a store table, with the
// semantics of Azure Queue Storage: at-least-once delivery, a visibility
// timeout that hides a received message until it is deleted or the timeout
// passes, a dequeue count, and a dead-letter partition for poison messages.
//
// The embedded backend uses it so that purge work survives a crash in the
// same store as the data; consumers must be idempotent, as with any
// at-least-once queue.
package queue
