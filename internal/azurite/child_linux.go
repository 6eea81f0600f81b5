package azurite

import "syscall"

// dieWithParent has the kernel kill the emulator when this process dies,
// however it dies: a SIGKILL, or the go command's -timeout, which no
// deferred cleanup or TestMain survives.
func dieWithParent() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
