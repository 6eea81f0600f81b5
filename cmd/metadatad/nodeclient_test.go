package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	metadatav1 "github.com/metadatad/metadatad/gen/metadata/v1"
)

// TestNodeClientExample runs examples/node/fleet.mjs, the README's Node.js
// client, against a daemon holding three cameras' images, one of them
// silent: the example is the API as a Node program meets it (stubs built
// from proto/ at run time, timestamps, paging, the oneof of FleetImage), so
// a change that breaks it fails here. go run ./tools/test installs its
// packages.
func TestNodeClientExample(t *testing.T) {
	dir := filepath.Join("..", "..", "examples", "node")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@grpc", "grpc-js", "package.json")); err != nil {
		if os.Getenv("CI") == "" {
			t.Skipf("the Node example's packages are not installed (go run ./tools/test installs them): %v", err)
		}
		t.Fatalf("the Node example's packages are not installed: %v", err)
	}
	d := startDaemon(t, t.TempDir())
	client := d.client(t)
	now := time.Now().UTC()
	for _, img := range []struct {
		camera string
		ago    time.Duration
	}{{"cam-a", time.Minute}, {"cam-a", 2 * time.Minute}, {"cam-b", 3 * time.Minute}, {"cam-c", 30 * time.Minute}} {
		if _, err := client.CreateSingleImageMetadata(t.Context(), &metadatav1.CreateSingleImageMetadataRequest{
			Metadata: &metadatav1.SingleImageMetadata{CameraId: img.camera, CapturedAt: timestamppb.New(now.Add(-img.ago)),
				BlobUri: "https://blobs.example/" + img.camera + "/" + img.ago.String() + ".jpg"}}); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.CommandContext(t.Context(), "node", filepath.Join(dir, "fleet.mjs"), d.addr)
	out, err := cmd.CombinedOutput()
	t.Logf("node fleet.mjs %s:\n%s", d.addr, out)
	if err != nil {
		t.Fatalf("node fleet.mjs: %v\n%s", err, out)
	}
	for _, want := range []string{
		"cameras of IMAGE_TYPE_SINGLE: 3\n",
		"silent for 10 minutes or more: 1\n  cam-c  latest ",
		"images of the fleet in the last 5 minutes: 3\n",
		"  cam-b  https://blobs.example/cam-b/3m0s.jpg\n",
		"coverage of cam-a over the last hour: ",
		", 2 images, ",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the example's output lacks %q:\n%s", want, out)
		}
	}
}
