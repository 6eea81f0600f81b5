//go:build !linux

package azurite

import "syscall"

// dieWithParent is Linux's parent-death signal; other systems have none.
// The emulator stays in the test's process group, so a terminal's Ctrl-C
// reaches it as it reaches the tests, but a test process killed otherwise
// leaves it running. A process group of its own would shield it from that
// Ctrl-C and kill it no more surely.
func dieWithParent() *syscall.SysProcAttr {
	return nil
}
