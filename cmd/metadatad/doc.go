// Command metadatad serves camera image metadata, video metadata, device
// orchestration state and acquisition run history over gRPC, and retires
// expired image metadata on a retention schedule.
//
// It runs on an embedded Pebble store by default (`go run ./cmd/metadatad`,
// data in ./data) or on Azure Table and Queue Storage (-store azure) for many
// replicas. main only wires: flags -> options -> store -> engine -> server ->
// run -> stop.
//
// Its commands (commands.go) share one command line (cli.go): each flag
// has a METADATAD_ variable, a command's own flags and its connection's
// named so that one command's variables never change another; help and
// version exit 0, a usage error exits 2 with the closest match, any other
// failure 1. The daemon refuses what it cannot serve safely (refusals.go)
// before it creates anything.
package main
