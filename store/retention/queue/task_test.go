package queue

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/images"
)

// TestLargestTaskFitsOneEntity writes the largest task a plan makes, a
// group of long camera ids up to maxTaskIDBytes, counted and done, with
// characters of several UTF-8 lengths: its record must pass the limits
// Azure Table Storage holds an entity to (a string property of 64 KiB as
// UTF-16, 1 MiB an entity) and read back exactly.
func TestLargestTaskFitsOneEntity(t *testing.T) {
	for _, idLen := range []int{12, 200, 1000} {
		t.Run(fmt.Sprintf("ids of %d bytes", idLen), func(t *testing.T) {
			tk := &task{JobID: "job", Kind: images.Single, Seq: 7, Done: true}
			for bytes := 0; bytes < maxTaskIDBytes && len(tk.Devices) < 5000; {
				// é is two bytes, 漢 three, 𝄞 four (two UTF-16 units).
				id := fmt.Sprintf("%06d-", len(tk.Devices)) + strings.Repeat("é漢𝄞a", idLen/10)
				tk.Devices = append(tk.Devices, &taskDevice{ID: id, Rows: 1 << 40, Counted: true, State: deviceDone})
				bytes += len(id)
			}
			e, err := (&taskStore{}).entity(tk)
			if err != nil {
				t.Fatal(err)
			}
			if err := store.ValidateEntity(e); err != nil {
				t.Fatalf("a task of %d cameras: %v", len(tk.Devices), err)
			}
			if idLen == 1000 && len(e.Properties) < 3 {
				t.Errorf("%d cameras of long ids in %d properties; the test meant to cover several chunks", len(tk.Devices), len(e.Properties))
			}
			got, err := decodeTask(e)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tk) {
				t.Fatalf("task read back differs from the one written (%d cameras)", len(tk.Devices))
			}
		})
	}
}

// TestTaskOfOneChunkKeepsItsFormat: a small task is one Doc property, as
// tasks were written before documents were split, so either version of
// the daemon reads the other's small tasks.
func TestTaskOfOneChunkKeepsItsFormat(t *testing.T) {
	tk := &task{JobID: "job", Kind: images.Pano, Seq: 1, Devices: []*taskDevice{{ID: "cam-1"}}}
	e, err := (&taskStore{}).entity(tk)
	if err != nil {
		t.Fatal(err)
	}
	if len(e.Properties) != 1 || e.Properties[propDoc] == nil {
		t.Fatalf("properties %v, want one %s", e.Properties, propDoc)
	}
	got, err := decodeTask(e)
	if err != nil || !reflect.DeepEqual(got, tk) {
		t.Fatalf("decodeTask = %+v, %v", got, err)
	}
}
