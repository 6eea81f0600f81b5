package server

import (
	"testing"

	"github.com/metadatad/metadatad/store"
)

// FuzzPageToken: a page token of any text, forged or damaged, never panics
// and never resumes a camera's list on another camera's rows: it is
// refused, or it resumes within the camera the request names. A token the
// server issued resumes where it said.
func FuzzPageToken(f *testing.F) {
	issued := encodePageToken(queryFingerprint("List", "cam-1", "", "", ""), &store.Cursor{PartitionKey: "cam-1", RowKey: "2516925183999999999"})
	forged := encodePageToken(queryFingerprint("List", "cam-1", "", "", ""), &store.Cursor{PartitionKey: "cam-2", RowKey: ""})
	f.Add("cam-1", issued)
	f.Add("cam-1", forged)
	f.Add("cam-2", issued)
	f.Add("cam-1", "garbage")
	f.Add("cam-1", "e30")
	f.Add("", "")
	f.Fuzz(func(t *testing.T, camera, token string) {
		req := listRequest{method: "List", cameraID: camera, pageToken: token}
		page, err := checkCameraPage(req)
		if err != nil {
			return
		}
		if page.resume != nil && page.resume.PartitionKey != camera {
			t.Fatalf("token %q resumes a list of %q on partition %q", token, camera, page.resume.PartitionKey)
		}
		if token == issued && camera == "cam-1" && (page.resume == nil || page.resume.RowKey != "2516925183999999999") {
			t.Fatalf("the issued token resumes at %+v", page.resume)
		}
	})
}
