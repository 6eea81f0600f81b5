package main

import (
	"testing"
	"time"
)

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

func TestParseConfigEngineMemory(t *testing.T) {
	for _, tc := range []struct {
		name            string
		args            []string
		cache, memtable byteSize
		bad             bool
	}{
		{"defaults", nil, 256 << 20, 64 << 20, false},
		{"binary units", []string{"-cache-size", "1GiB", "-memtable-size", "16m"}, 1 << 30, 16 << 20, false},
		{"bare bytes", []string{"-cache-size", "1048576"}, 1 << 20, 64 << 20, false},
		{"zero refused", []string{"-memtable-size", "0"}, 0, 0, true},
		{"words refused", []string{"-cache-size", "lots"}, 0, 0, true},
		{"floor below a log file refused", []string{"-memtable-size", "1GiB", "-min-free-mib", "1126"}, 0, 0, true},
		{"floor above a log file", []string{"-memtable-size", "1GiB", "-min-free-mib", "1127"}, 256 << 20, 1 << 30, false},
		{"no floor, any memtable", []string{"-memtable-size", "1GiB", "-min-free-mib", "0"}, 256 << 20, 1 << 30, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := parseConfig(tc.args)
			if tc.bad {
				if err == nil {
					t.Fatalf("parseConfig(%q) accepted it", tc.args)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.cacheSize != tc.cache || c.memTableSize != tc.memtable {
				t.Fatalf("cache %d, memtable %d; want %d, %d", c.cacheSize, c.memTableSize, tc.cache, tc.memtable)
			}
		})
	}
}

func TestParseConfigPurgeControl(t *testing.T) {
	for _, tc := range []struct {
		name      string
		args      []string
		rate      float64
		retention time.Duration
		wantErr   bool
	}{
		{"defaults", nil, defaultPurgeRowsPerSecond, 30 * 24 * time.Hour, false},
		{"set", []string{"-purge-rows-per-second", "2500", "-purge-job-retention", "168h"}, 2500, 168 * time.Hour, false},
		{"no cap", []string{"-purge-rows-per-second", "0"}, 0, 30 * 24 * time.Hour, false},
		{"negative rate refused", []string{"-purge-rows-per-second", "-1"}, 0, 0, true},
		{"zero retention refused", []string{"-purge-job-retention", "0s"}, 0, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := parseConfig(tc.args)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("parseConfig(%q) accepted", tc.args)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.purgeRowsPerSec != tc.rate || c.purgeJobRetention != tc.retention {
				t.Errorf("rate %g, retention %s; want %g, %s", c.purgeRowsPerSec, c.purgeJobRetention, tc.rate, tc.retention)
			}
		})
	}
}

func TestParseConfigSchedule(t *testing.T) {
	for _, tc := range []struct {
		name     string
		args     []string
		days     int
		policies bool
		bad      bool
	}{
		{"off", nil, 0, false, false},
		{"days", []string{"-retention-days", "30", "-retention-interval", "1h"}, 30, false, false},
		{"policies", []string{"-purge-use-policies", "-retention-interval", "1h"}, 0, true, false},
		{"days and policies refused", []string{"-retention-days", "30", "-purge-use-policies", "-retention-interval", "1h"}, 0, false, true},
		{"policies without an interval refused", []string{"-purge-use-policies"}, 0, false, true},
		{"interval alone refused", []string{"-retention-interval", "1h"}, 0, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := parseConfig(tc.args)
			if tc.bad {
				if err == nil {
					t.Fatalf("parseConfig(%q) accepted it", tc.args)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.retentionDays != tc.days || c.usePolicies != tc.policies {
				t.Fatalf("days %d, policies %v; want %d, %v", c.retentionDays, c.usePolicies, tc.days, tc.policies)
			}
		})
	}
}
