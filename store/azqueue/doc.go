// Package azqueue is the purge work queue on Azure Queue Storage, for
// deployments where several metadatad replicas share one storage account
// and each takes a share of a purge's per-camera tasks.
//
// It has the semantics of the table-backed queue in store/queue: at-least-
// once delivery with a visibility timeout, a dequeue count, deletion by the
// receiver that holds the latest pop receipt, and a poison queue
// (<name>-poison) for messages that keep failing.
package azqueue
