package azurite_test

import (
	"net/http"
	"os"
	"regexp"
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
