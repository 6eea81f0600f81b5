// Package azurite gives tests an Azure Storage emulator (Azurite) for the
// Azure backends.
//
// A test calls Require. It uses the emulator named by
// METADATAD_AZURITE_CONNECTION_STRING when set (one .ci/run or a developer
// started), else starts one per test process from tools/azurite (after
// `npm ci --prefix tools/azurite`), on free loopback ports, in memory, and
// names it in that variable, so that the processes the tests start share it.
// Without either, the test is skipped with a message saying how to run it,
// except under CI=true, where it fails: CI never skips these suites.
//
// An emulator it starts dies with the test process. Main stops it after
// the tests; on Linux a parent-death signal also kills it when the test
// process dies without cleaning up (the go command's -timeout, SIGKILL),
// where it would otherwise live on under init. Other systems have no such
// signal: there only Main, or a Ctrl-C reaching the test's process group,
// stops it.
package azurite
