// Command test runs every test suite of this repository as CI does, on a
// machine with Go and Node and nothing installed yet:
//
//	go run ./tools/test
//
// It installs Azurite, the Azure Storage emulator, under tools/azurite, and
// the Node client example's gRPC packages under examples/node, when they
// are missing or not the pinned versions, sets CI=true so that no suite
// skips for want of them, runs `go test` over every package with the race
// detector, then runs each fuzz target for a bounded time. `.ci/run` calls
// exactly this command. On a machine with Go alone, plain `go test ./...`
// runs the same suites and skips the Azure ones, saying why.
package main
