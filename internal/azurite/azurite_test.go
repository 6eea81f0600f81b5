package azurite_test

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/metadatad/metadatad/internal/azurite"
)

func TestMain(m *testing.M) { os.Exit(azurite.Main(m)) }

// TestRequireGivesReachableEndpoints checks the emulator answers on both
// endpoints of the connection string.
func TestRequireGivesReachableEndpoints(t *testing.T) {
	conn := azurite.Require(t)
	for _, name := range []string{"TableEndpoint", "QueueEndpoint"} {
		m := regexp.MustCompile(name + `=([^;]+)`).FindStringSubmatch(conn)
		if m == nil {
			t.Fatalf("connection string %q has no %s", conn, name)
		}
		resp, err := http.Get(m[1])
		if err != nil {
			t.Fatalf("%s %s: %v", name, m[1], err)
		}
		resp.Body.Close()
	}
}

// childEnv makes TestChildProcessesShareTheEmulator the child.
const childEnv = "METADATAD_AZURITE_TEST_CHILD"

// TestChildProcessesShareTheEmulator checks that a process a test starts
// inherits the test's emulator instead of starting one of its own.
func TestChildProcessesShareTheEmulator(t *testing.T) {
	conn := azurite.Require(t)
	if os.Getenv(childEnv) == "1" {
		fmt.Printf("child connection string: %s\n", conn)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestChildProcessesShareTheEmulator$", "-test.v")
	cmd.Env = append(os.Environ(), childEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "child connection string: "+conn+"\n") {
		t.Errorf("the child used another emulator than the parent's %q:\n%s", conn, out)
	}
}
