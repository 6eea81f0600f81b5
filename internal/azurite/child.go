package azurite

import (
	"os/exec"
	"runtime"
)

// child is the emulator process this test process started.
type child struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed once cmd has exited and been waited for
}

// launch starts cmd so that it dies with this process (see dieWithParent),
// from a goroutine locked to its thread that stays until cmd exits. The
// kernel sends the parent-death signal when the thread that forked the
// child ends, not the process (https://go.dev/issue/27505), and the
// runtime ends a thread whose locked goroutine returns: started from a
// test's goroutine, the emulator could die while the tests still use it.
func launch(cmd *exec.Cmd) (*child, error) {
	cmd.SysProcAttr = dieWithParent()
	c := &child{cmd: cmd, exited: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the child
		defer close(c.exited)
		err := cmd.Start()
		started <- err
		if err == nil {
			_ = cmd.Wait()
		}
	}()
	return c, <-started
}

// stop kills the emulator and waits for it to exit.
func (c *child) stop() {
	_ = c.cmd.Process.Kill()
	<-c.exited
}
