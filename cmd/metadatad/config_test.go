package main

import "testing"

func TestParseConfigControlPlaneTables(t *testing.T) {
	t.Setenv("METADATAD_DEVICE_STATE_TABLE", "DeviceStates")
	t.Setenv("METADATAD_VIDEO_TABLE", "FromEnv")
	for _, tc := range []struct {
		name                       string
		args                       []string
		video, device, acquisition string
	}{
		{"defaults and variables", nil, "FromEnv", "DeviceStates", "ImageAcquisitionInstance"},
		{"flags win", []string{"-video-table", "Videos", "-acquisition-instance-table", "Runs"}, "Videos", "DeviceStates", "Runs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := parseConfig(tc.args)
			if err != nil {
				t.Fatal(err)
			}
			if c.videoTable != tc.video || c.deviceStateTable != tc.device || c.acquisitionTable != tc.acquisition {
				t.Fatalf("tables %q, %q, %q; want %q, %q, %q",
					c.videoTable, c.deviceStateTable, c.acquisitionTable, tc.video, tc.device, tc.acquisition)
			}
		})
	}
}
