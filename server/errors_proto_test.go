package server

import (
	"fmt"
	"os"
	"regexp"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// TestErrorDetailsShipWithTheAPI: proto/google/rpc/error_details.proto,
// which a client of another language generates its detail types from,
// declares every message of the Go package the server builds its details
// with (BadRequest, ErrorInfo, PreconditionFailure, ...), each field
// under its name and number, so that what the client decodes is what the
// server sent.
func TestErrorDetailsShipWithTheAPI(t *testing.T) {
	raw, err := os.ReadFile("../proto/google/rpc/error_details.proto")
	if err != nil {
		t.Fatal(err)
	}
	file := errdetails.File_google_rpc_error_details_proto
	if !regexp.MustCompile(`(?m)^package ` + regexp.QuoteMeta(string(file.Package())) + `;$`).Match(raw) {
		t.Errorf("error_details.proto is not of package %s", file.Package())
	}
	var check func(messages protoreflect.MessageDescriptors)
	check = func(messages protoreflect.MessageDescriptors) {
		for i := range messages.Len() {
			m := messages.Get(i)
			if m.IsMapEntry() {
				continue // a map<K, V> field's, written as the field
			}
			if !regexp.MustCompile(`(?m)^\s*message ` + string(m.Name()) + ` \{$`).Match(raw) {
				t.Errorf("error_details.proto declares no message %s", m.FullName())
			}
			for j := range m.Fields().Len() {
				f := m.Fields().Get(j)
				if !regexp.MustCompile(fmt.Sprintf(`(?m)^\s*[^/]*\b%s = %d;`, f.Name(), f.Number())).Match(raw) {
					t.Errorf("error_details.proto has no field %s = %d (of %s)", f.Name(), f.Number(), m.FullName())
				}
			}
			check(m.Messages())
		}
	}
	check(file.Messages())
}
