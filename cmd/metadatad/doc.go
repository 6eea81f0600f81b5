// Command metadatad serves camera image metadata, video metadata, device
// orchestration state and acquisition run history over gRPC, and retires
// expired image metadata on a retention schedule.
//
// It runs on an embedded Pebble store by default (`go run ./cmd/metadatad`,
// data in ./data) or on Azure Table and Queue Storage (-store azure) for many
// replicas. main only wires: flags -> options -> store -> engine -> server ->
// run -> stop.
package main
