package azurite

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// parentEnv makes TestEmulatorDiesWithParent the parent process.
const parentEnv = "METADATAD_AZURITE_TEST_PARENT"

func init() {
	if os.Getenv(parentEnv) == "1" {
		// The runtime never ends the main thread, even for a locked
		// goroutine that returns: main keeps it, so the thread beParent
		// ends is another one.
		runtime.LockOSThread()
	}
}

// TestEmulatorDiesWithParent runs this test binary again as a parent that
// starts an emulator, kills that parent with SIGKILL, as the go command's
// -timeout or an OOM kill would, and checks the emulator dies too. The
// parent asks for the emulator from a goroutine whose thread then ends, so
// the emulator must also outlive the thread that asked for it.
func TestEmulatorDiesWithParent(t *testing.T) {
	if os.Getenv(parentEnv) == "1" {
		beParent()
	}
	if _, err := os.Stat(binPath()); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("Azurite is required under CI=true: tools/azurite/node_modules is not installed")
		}
		t.Skip("needs Azurite: run `npm ci --prefix tools/azurite` once")
	}
	parent := exec.Command(os.Args[0], "-test.run=^TestEmulatorDiesWithParent$")
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, EnvConnectionString+"=") {
			parent.Env = append(parent.Env, kv)
		}
	}
	parent.Env = append(parent.Env, parentEnv+"=1")
	parent.Stderr = os.Stderr
	stdout, err := parent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = parent.Process.Kill()
		_ = parent.Wait()
	}()
	line := make(chan string, 1)
	go func() {
		s := bufio.NewScanner(stdout)
		s.Scan()
		line <- s.Text()
	}()
	var pid int
	select {
	case l := <-line:
		if pid, err = strconv.Atoi(l); err != nil {
			t.Fatalf("the parent said %q, not the emulator's pid", l)
		}
	case <-time.After(startTimeout + 30*time.Second):
		t.Fatal("the parent started no emulator")
	}
	defer func() {
		if running(pid) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}()
	if !running(pid) {
		t.Fatal("the emulator died with the thread that asked for it, while its parent lived")
	}

	if err := parent.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = parent.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for running(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("the emulator (pid %d) still runs 10s after its parent was killed", pid)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// beParent starts an emulator from a goroutine whose locked thread ends as
// it returns, prints the emulator's pid and waits to be killed.
func beParent() {
	done := make(chan struct{})
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
		once.Do(start)
		close(done)
	}()
	<-done
	if started == nil {
		fmt.Println("no emulator:", why)
		os.Exit(1)
	}
	// Had the thread that ended forked the emulator, its death signal
	// would have been sent by now.
	time.Sleep(500 * time.Millisecond)
	fmt.Println(started.cmd.Process.Pid)
	time.Sleep(time.Hour)
	os.Exit(1)
}

// running reports whether pid is a live process: neither gone nor a
// zombie, which its new parent may never reap in a container.
func running(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the command's name, in parentheses.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 || i+2 >= len(stat) {
		return false
	}
	state := stat[i+2]
	return state != 'Z' && state != 'X'
}
