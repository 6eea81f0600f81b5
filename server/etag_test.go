package server_test

import (
	"fmt"
	"strings"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	metadatav1 "github.com/metadatad/metadatad/gen/metadata/v1"
)

// etagCall is one RPC that takes an etag: field is the request field
// holding it, etag the current one, resource the ErrorInfo metadata its
// refusals name.
type etagCall struct {
	name, field, etag string
	resource          map[string]string
	call              func(h *harness, etag string) error
}

// etagCalls creates a device state, a policy and a hold, and returns each
// RPC that takes an etag of one of them.
func etagCalls(t *testing.T, h *harness) []etagCall {
	ctx := t.Context()
	device := mustUpdateDevice(t, h, &metadatav1.UpdateDeviceStateRequest{DeviceState: fullState("cam-1"), AllowMissing: true})
	policy, err := h.retention.CreateRetentionPolicy(ctx, &metadatav1.CreateRetentionPolicyRequest{RetentionPolicy: &metadatav1.RetentionPolicy{
		Name: "retentionPolicies/cameras/cam-1", SingleRetentionDays: 365}})
	requireOK(t, err, "create policy")
	hold, err := h.retention.CreateLegalHold(ctx, &metadatav1.CreateLegalHoldRequest{LegalHold: &metadatav1.LegalHold{Name: "legalHolds/cam-1", Reason: "case 1"}})
	requireOK(t, err, "create hold")
	deviceETag, policyETag, holdETag := device.GetEtag(), policy.GetRetentionPolicy().GetEtag(), hold.GetLegalHold().GetEtag()
	deviceID := map[string]string{"device_id": "cam-1"}
	policyName := map[string]string{"name": "retentionPolicies/cameras/cam-1"}
	holdName := map[string]string{"name": "legalHolds/cam-1"}
	return []etagCall{
		{"UpdateDeviceState", "device_state.etag", deviceETag, deviceID, func(h *harness, etag string) error {
			_, err := h.devices.UpdateDeviceState(ctx, &metadatav1.UpdateDeviceStateRequest{
				DeviceState: &metadatav1.DeviceState{DeviceId: "cam-1", SingleModeStatus: "Lost", Etag: etag}})
			return err
		}},
		{"DeleteDeviceState", "etag", deviceETag, deviceID, func(h *harness, etag string) error {
			_, err := h.devices.DeleteDeviceState(ctx, &metadatav1.DeleteDeviceStateRequest{DeviceId: "cam-1", Etag: etag})
			return err
		}},
		{"UpdateRetentionPolicy", "retention_policy.etag", policyETag, policyName, func(h *harness, etag string) error {
			_, err := h.retention.UpdateRetentionPolicy(ctx, &metadatav1.UpdateRetentionPolicyRequest{RetentionPolicy: &metadatav1.RetentionPolicy{
				Name: "retentionPolicies/cameras/cam-1", SingleRetentionDays: 400, Etag: etag}})
			return err
		}},
		{"DeleteRetentionPolicy", "etag", policyETag, policyName, func(h *harness, etag string) error {
			_, err := h.retention.DeleteRetentionPolicy(ctx, &metadatav1.DeleteRetentionPolicyRequest{Name: "retentionPolicies/cameras/cam-1", Etag: etag})
			return err
		}},
		{"UpdateLegalHold", "legal_hold.etag", holdETag, holdName, func(h *harness, etag string) error {
			_, err := h.retention.UpdateLegalHold(ctx, &metadatav1.UpdateLegalHoldRequest{LegalHold: &metadatav1.LegalHold{
				Name: "legalHolds/cam-1", Reason: "case 2", Etag: etag}})
			return err
		}},
		{"DeleteLegalHold", "etag", holdETag, holdName, func(h *harness, etag string) error {
			_, err := h.retention.DeleteLegalHold(ctx, &metadatav1.DeleteLegalHoldRequest{Name: "legalHolds/cam-1", Etag: etag})
			return err
		}},
	}
}

// TestETagForms: an etag not as a reply gave it (stripped of its W/ or
// its quotes, cut short, empty between the quotes) is INVALID_ARGUMENT
// naming the field, not ABORTED, which a client would retry for ever; a
// well-formed etag that is not the stored one stays ABORTED, with a
// CONCURRENT_MODIFICATION ErrorInfo naming the resource. Nothing is
// written either way.
func TestETagForms(t *testing.T) {
	forEachServer(t, func(t *testing.T, h *harness) {
		calls := etagCalls(t, h)
		before := h.snapshot(t)
		for _, c := range calls {
			bare := strings.TrimSuffix(strings.TrimPrefix(c.etag, `W/"`), `"`)
			for _, malformed := range []string{bare, `"` + bare + `"`, `W/` + bare, `W/"` + bare, `W/""`, `W/"a"b"`, `w/"` + bare + `"`,
				`W/"` + strings.Repeat("a", 256) + `"`} {
				t.Run(fmt.Sprintf("%s %s", c.name, malformed), func(t *testing.T) {
					requireFieldViolation(t, c.call(h, malformed), c.field)
					h.requireUnchanged(t, before)
				})
			}
			t.Run(c.name+" stale", func(t *testing.T) {
				st := requireCode(t, c.call(h, `W/"0"`), codes.Aborted)
				requireErrorInfo(t, st, "CONCURRENT_MODIFICATION", c.resource)
				h.requireUnchanged(t, before)
			})
		}
	})
}

// TestErrorInfoNamesTheResource: NOT_FOUND and ALREADY_EXISTS carry a
// google.rpc.ErrorInfo of domain metadatad whose reason a client can
// branch on and whose metadata names what the call was about.
func TestErrorInfoNamesTheResource(t *testing.T) {
	forEachServer(t, func(t *testing.T, h *harness) {
		ctx := t.Context()
		_, err := h.devices.GetDeviceState(ctx, &metadatav1.GetDeviceStateRequest{DeviceId: "cam-9"})
		requireErrorInfo(t, requireCode(t, err, codes.NotFound), "NOT_FOUND", map[string]string{"device_id": "cam-9"})
		_, err = h.retention.GetRetentionPolicy(ctx, &metadatav1.GetRetentionPolicyRequest{Name: "retentionPolicies/cameras/cam-9"})
		requireErrorInfo(t, requireCode(t, err, codes.NotFound), "NOT_FOUND", map[string]string{"name": "retentionPolicies/cameras/cam-9"})
		_, err = h.single.GetLatestSingleImageMetadata(ctx, &metadatav1.GetLatestSingleImageMetadataRequest{CameraId: "cam-9"})
		requireErrorInfo(t, requireCode(t, err, codes.NotFound), "NOT_FOUND", map[string]string{"camera_id": "cam-9"})
		_, err = h.retention.GetPurge(ctx, &metadatav1.GetPurgeRequest{JobId: "job-9"})
		requireErrorInfo(t, requireCode(t, err, codes.NotFound), "NOT_FOUND", map[string]string{"job_id": "job-9"})
		hold := &metadatav1.CreateLegalHoldRequest{LegalHold: &metadatav1.LegalHold{Name: "legalHolds/cam-9"}}
		_, err = h.retention.CreateLegalHold(ctx, hold)
		requireOK(t, err, "create hold")
		_, err = h.retention.CreateLegalHold(ctx, hold)
		requireErrorInfo(t, requireCode(t, err, codes.AlreadyExists), "ALREADY_EXISTS", map[string]string{"name": "legalHolds/cam-9"})
	})
}

// requireErrorInfo fails unless st carries a google.rpc.ErrorInfo of
// reason, domain metadatad and metadata.
func requireErrorInfo(t *testing.T, st *status.Status, reason string, metadata map[string]string) {
	t.Helper()
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			if info.GetReason() != reason || info.GetDomain() != "metadata.v1" || fmt.Sprint(info.GetMetadata()) != fmt.Sprint(metadata) {
				t.Errorf("ErrorInfo %v, want reason %s, domain metadatad, metadata %v", info, reason, metadata)
			}
			return
		}
	}
	t.Errorf("%v %q carries no ErrorInfo; details %v", st.Code(), st.Message(), st.Details())
}
